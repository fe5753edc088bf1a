"""Op-support coverage of a graph on several targets: per target, per op type, and by FLOPs.

:func:`coverage` partitions the graph for each target (:func:`~explorer.targets.partition.partition`)
and sums it up: supported and total nodes, coverage by node count and by the cost
model's estimated FLOPs (a model whose convolutions all run on the NPU is mostly on the
NPU even when many small shape ops fall back), partitions, and the ops that fall back
with their reasons. :meth:`CoverageReport.op_table` is the table across targets (rows:
op types, columns: targets). For ONNX Runtime targets whose provider is installed, the
runtime's real assignment can be recorded beside the prediction.

Examples
--------
>>> from explorer import load
>>> report = coverage(load("zoo:mlp", input_shapes={"input": [1, 1, 28, 28]}), ["ort-cpu", "nnapi"])
>>> [(t.target, t.coverage) for t in report.targets]
[('ort-cpu', 1.0), ('nnapi', 1.0)]
>>> report.op_table().loc["Gemm", "nnapi"]
'3/3'
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from explorer.core.tensors import dtype_bytes
from explorer.targets.assignment import compare_assignment, real_assignment
from explorer.targets.partition import Partitioning, partition
from explorer.targets.registry import TARGET_NAMES, get_target, require_available
from explorer.targets.support import node_facts

if TYPE_CHECKING:
    import pandas as pd

    from explorer.core.graph import ModelGraph
    from explorer.targets.target import Target

__all__ = ["TargetCoverage", "CoverageReport", "coverage"]


@dataclass(frozen=True)
class TargetCoverage:
    """One target's coverage of one graph.

    Attributes
    ----------
    target : str
        The target's name.
    supported_nodes, total_nodes : int
        Operators the target takes, and all operators.
    coverage : float
        ``supported_nodes / total_nodes``.
    flops_coverage : float or None
        The supported share of the estimated FLOPs (None when no FLOPs are known).
    partitions : int
        Partitions the runtime would create.
    fallback_ops : dict
        Op -> ``{"count", "reasons"}`` of the nodes that fall back.
    verdict : str
        The outcome in one sentence.
    source : str
        Where the target's knowledge comes from.
    agrees_with_runtime : bool or None
        Whether the runtime's own assignment matched the prediction (None: not asked).
    """

    target: str
    supported_nodes: int
    total_nodes: int
    coverage: float
    flops_coverage: float | None
    partitions: int
    fallback_ops: dict[str, dict[str, Any]]
    verdict: str
    source: str
    agrees_with_runtime: bool | None = None

    def to_frame(self) -> pd.DataFrame:
        """The ops that fall back: one row per op with its count and reasons.

        Examples
        --------
        >>> from explorer import load
        >>> frame = coverage(load("zoo:resnet18"), ["coreml-mlprogram"]).get("coreml-mlprogram").to_frame()
        >>> int(frame.loc["BatchNormalization", "count"])
        20
        """
        import pandas as pd

        rows = [
            {"op": op, "count": entry["count"], "reasons": "; ".join(entry["reasons"])}
            for op, entry in self.fallback_ops.items()
        ]
        return pd.DataFrame(rows, columns=["op", "count", "reasons"]).set_index("op")

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``onnx-explorer coverage``: target, counts, coverage, partitions, fallback ops."""
        return {
            "target": self.target,
            "supported_nodes": self.supported_nodes,
            "total_nodes": self.total_nodes,
            "coverage": round(self.coverage, 4),
            "flops_coverage": None if self.flops_coverage is None else round(self.flops_coverage, 4),
            "partitions": self.partitions,
            "fallback_ops": self.fallback_ops,
            "verdict": self.verdict,
            "source": self.source,
            "agrees_with_runtime": self.agrees_with_runtime,
        }


@dataclass(frozen=True)
class CoverageReport:
    """Coverage of one graph on several targets.

    Attributes
    ----------
    source : str
        The model.
    targets : tuple of TargetCoverage
        One per target, in the order asked.
    partitionings : dict
        Target name -> :class:`~explorer.targets.partition.Partitioning`.
    """

    source: str
    targets: tuple[TargetCoverage, ...]
    partitionings: dict[str, Partitioning] = field(repr=False)

    def get(self, target: str) -> TargetCoverage:
        """One target's coverage (``KeyError`` naming the targets present when absent)."""
        for t in self.targets:
            if t.target == target:
                return t
        raise KeyError(
            f"no target {target!r} in this report; it has {', '.join(t.target for t in self.targets)}"
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per target: counts, coverage by nodes and FLOPs, partitions, verdict."""
        import pandas as pd

        rows = [{k: v for k, v in t.to_dict().items() if k != "fallback_ops"} for t in self.targets]
        return pd.DataFrame(rows).set_index("target")

    def op_table(self) -> pd.DataFrame:
        """Rows: op types; columns: targets; cells: ``"supported/total"`` nodes of that op.

        Examples
        --------
        >>> from explorer import load
        >>> coverage(load("zoo:resnet18"), ["ort-cpu"]).op_table().loc["Conv", "ort-cpu"]
        '20/20'
        """
        import pandas as pd

        columns: dict[str, dict[str, str]] = {}
        for name, p in self.partitionings.items():
            counts: dict[str, list[int]] = {}
            for s in p.support.values():
                entry = counts.setdefault(s.op, [0, 0])
                entry[0] += s.supported
                entry[1] += 1
            columns[name] = {op: f"{ok}/{n}" for op, (ok, n) in counts.items()}
        frame = pd.DataFrame(columns)
        frame.index.name = "op"
        return frame.sort_index()

    def op_fractions(self) -> pd.DataFrame:
        """:meth:`op_table` as numbers (supported share of each op's nodes), for heatmaps."""
        return self.op_table().map(lambda cell: _fraction(cell))

    def to_dict(self) -> dict[str, Any]:
        """``{"source", "targets": [TargetCoverage.to_dict(), ...]}``."""
        return {"source": self.source, "targets": [t.to_dict() for t in self.targets]}


def _fraction(cell: Any) -> float:
    if not isinstance(cell, str) or "/" not in cell:
        return float("nan")
    ok, total = cell.split("/")
    return int(ok) / int(total) if int(total) else float("nan")


def _tensor_bytes(graph: ModelGraph, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, int]:
    """Bytes of each tensor the cost model bound to a concrete shape (the benchmark's input sizes)."""
    out = {}
    for _, _, tensor, data in graph.nx.edges(keys=True, data=True):
        size = dtype_bytes(data.get("dtype"))
        if tensor in shapes and size:
            out[tensor] = math.prod(shapes[tensor]) * size
    return out


def _flops_share(p: Partitioning, flops: Mapping[str, float | None]) -> float | None:
    total = sum(f for f in flops.values() if f)
    if not total:
        return None
    return sum(flops.get(n) or 0.0 for n, s in p.support.items() if s.supported) / total


def coverage(
    graph: ModelGraph,
    targets: Sequence[str | Target] | None = None,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    with_assignment: bool = False,
) -> CoverageReport:
    """Coverage of ``graph`` on each target.

    Parameters
    ----------
    graph : ModelGraph
        An ONNX graph (load it with ``input_shapes`` to judge it with fixed shapes).
    targets : sequence, optional
        Target names or targets (default: every one of :data:`~explorer.targets.TARGET_NAMES` that is
        available here: a compiler not installed, IREE's, is left out).
    input_shapes : mapping, optional
        Shapes for the FLOPs estimate (default: the benchmark's, 1 for batch-like dims).
    with_assignment : bool
        Also ask ONNX Runtime where it places the nodes, for targets whose provider is
        installed (the CPU, and CUDA on a GPU build), and record whether it agrees.

    Returns
    -------
    CoverageReport

    Raises
    ------
    UsageError
        A target asked for is unavailable here (its compiler is not installed), before any work.

    Examples
    --------
    >>> from explorer import load
    >>> r = coverage(load("zoo:resnet18"), ["qnn-htp"])
    >>> r.get("qnn-htp").coverage  # the batch dimension is dynamic: nothing is static on the HTP
    0.0
    """
    from explorer.onnx_adapter.ort_registry import installed_providers
    from explorer.runtimes.cost_model import node_costs

    if targets:
        chosen = [get_target(t) if isinstance(t, str) else t for t in targets]
        require_available(chosen)
    else:
        chosen = [t for t in map(get_target, TARGET_NAMES) if t.unavailable is None]
    facts = node_facts(graph)
    costs = node_costs(graph, input_shapes)
    flops = {c.node: c.flops for c in costs.costs}
    tensor_bytes = _tensor_bytes(graph, costs.tensor_shapes)
    rows, partitionings = [], {}
    for target in chosen:
        p = partition(graph, target, facts=facts, tensor_bytes=tensor_bytes)
        agrees = None
        if with_assignment and target.provider and target.provider in installed_providers():
            providers = [target.provider] + (["CPUExecutionProvider"] if target.fallback else [])
            assignment = real_assignment(graph, providers)
            p = dataclasses.replace(p, assignment=assignment)
            agrees = compare_assignment(p, assignment, target.provider)["agree"]
        partitionings[target.name] = p
        rows.append(
            TargetCoverage(
                target=target.name,
                supported_nodes=p.supported_nodes,
                total_nodes=p.total_nodes,
                coverage=p.coverage,
                flops_coverage=_flops_share(p, flops),
                partitions=p.partition_count,
                fallback_ops=p.fallback_ops(),
                verdict=p.verdict,
                source=target.source.describe(),
                agrees_with_runtime=agrees,
            )
        )
    return CoverageReport(graph.source, tuple(rows), partitionings)

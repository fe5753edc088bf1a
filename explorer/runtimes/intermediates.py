"""Where ONNX Runtime and TVM first disagree: every node's output compared, in graph order.

Two runtimes whose final outputs differ are compared tensor by tensor. ONNX Runtime runs the
model with every node's output made a graph output (its optimisations off, so each tensor
exists); TVM runs the imported Relax module rewritten to return, for every ONNX node the
import traced (``origin``), the bindings made from it
(:func:`explorer.lower.tvm.relax_intermediates.run_relax_intermediates`): the last of the
node's output shape is its output. Each pair is compared
with the dtype-dependent tolerances of :func:`explorer.core.compare.agreement`; the first
node in graph order that fails is where to look.

Examples
--------
>>> from explorer import load
>>> result = compare_intermediates(load("zoo:mlp"))
>>> result.first_disagreement is None, len(result.tensors) >= 5
(True, True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from explorer.core.compare import agreement
from explorer.isolation import worker
from explorer.onnx_adapter.adapter import onnx_model
from explorer.onnx_adapter.inputs import concrete_input_shapes, random_feeds
from explorer.onnx_adapter.model_files import stage_variant, worker_source
from explorer.onnx_adapter.ort_run import run_onnxruntime
from explorer.onnx_adapter.weights import external_tensors
from explorer.runtimes.tvm_runtime import TvmRuntime

if TYPE_CHECKING:
    import pandas as pd

    from explorer.core.graph import ModelGraph

__all__ = ["TensorAgreement", "IntermediateComparison", "compare_intermediates"]


@dataclass(frozen=True)
class TensorAgreement:
    """One node's output on both runtimes.

    Attributes
    ----------
    node, op_type, tensor : str
        The ONNX node, its op, and its (first) output.
    shape : tuple of int
        The output's shape.
    max_abs_err, max_rel_err : float
        TVM against ONNX Runtime.
    agrees : bool
        Within the dtype's tolerances.
    """

    node: str
    op_type: str
    tensor: str
    shape: tuple[int, ...]
    max_abs_err: float
    max_rel_err: float
    agrees: bool

    def to_dict(self) -> dict[str, Any]:
        """The fields.

        Examples
        --------
        >>> TensorAgreement("n", "Relu", "t", (2,), 0.0, 0.0, True).to_dict()["agrees"]
        True
        """
        return asdict(self)


@dataclass(frozen=True)
class IntermediateComparison:
    """Every compared node output, in graph order, and the nodes that could not be compared.

    Examples
    --------
    >>> rows = (TensorAgreement("a", "Conv", "x", (1,), 0.0, 0.0, True),
    ...         TensorAgreement("b", "Resize", "y", (1,), 0.5, 0.5, False))
    >>> IntermediateComparison("ORT", "TVM", rows, ()).first_disagreement.node
    'b'
    """

    reference: str
    other: str
    tensors: tuple[TensorAgreement, ...]
    not_compared: tuple[tuple[str, str], ...]
    """``(node, why)``: not traced into Relax, or the shapes differ."""

    @property
    def first_disagreement(self) -> TensorAgreement | None:
        """The first node in graph order whose output does not agree (None: all agree).

        Examples
        --------
        >>> IntermediateComparison("a", "b", (), ()).first_disagreement is None
        True
        """
        return next((t for t in self.tensors if not t.agrees), None)

    def to_frame(self) -> pd.DataFrame:
        """One row per compared node, in graph order.

        Examples
        --------
        >>> IntermediateComparison("a", "b", (), ()).to_frame().columns[0]
        'node'
        """
        import pandas as pd

        columns = list(TensorAgreement.__dataclass_fields__)
        return pd.DataFrame([t.to_dict() for t in self.tensors], columns=columns)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: who, the first disagreement, every row and what was not compared.

        Examples
        --------
        >>> IntermediateComparison("a", "b", (), ()).to_dict()["first_disagreement"] is None
        True
        """
        first = self.first_disagreement
        return {
            "reference": self.reference,
            "other": self.other,
            "first_disagreement": first.to_dict() if first else None,
            "tensors": [t.to_dict() for t in self.tensors],
            "not_compared": [list(pair) for pair in self.not_compared],
        }


def _ort_values(graph: ModelGraph, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every node output of the top-level graph on ONNX Runtime, optimisations off."""
    model = onnx.ModelProto()
    model.CopyFrom(graph.model)  # never the graph's own model
    declared = [o.name for o in model.graph.output]
    extra = [o for n in model.graph.node for o in n.output if o and o not in declared]
    model.graph.output.extend(onnx.ValueInfoProto(name=name) for name in extra)
    # its weights may stay in files (external data, or the model file itself): staged beside them
    in_files = graph.weights_dir is not None and bool(external_tensors(model))
    source = stage_variant(graph, model) if in_files else model
    values = run_onnxruntime(source, feeds, optimization="disabled")
    return dict(zip(declared + extra, values, strict=True))


def compare_intermediates(
    graph: ModelGraph,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    feeds: Mapping[str, np.ndarray] | None = None,
    seed: int = 0,
) -> IntermediateComparison:
    """Compare every node's output between ONNX Runtime (reference) and TVM Relax (llvm, untuned).

    Parameters
    ----------
    graph : ModelGraph
        A top-level ONNX graph that TVM's importer takes (see :func:`explorer.lower.tvm.relax_import`).
    input_shapes : mapping, optional
        Shapes for dynamic inputs (the benchmark's default otherwise).
    feeds : mapping, optional
        The inputs; by default generated with ``seed``.
    seed : int
        Seed of the generated inputs.

    Returns
    -------
    IntermediateComparison

    Raises
    ------
    RelaxImportFailed
        The importer could not take the graph.

    Examples
    --------
    Builds the model with TVM (seconds; the module's example runs it):

    >>> from explorer import load
    >>> result = compare_intermediates(load("zoo:mlp"), seed=1)  # doctest: +SKIP
    >>> [(t.node, t.agrees) for t in result.tensors][:2]  # doctest: +SKIP
    [('/Flatten', True), ('/fc1/Gemm', True)]
    """
    from explorer.lower.rewrites import shape_dict
    from explorer.lower.tvm.relax_import import failed_import
    from explorer.lower.tvm.relax_intermediates import run_relax_intermediates
    from explorer.lower.tvm.relax_pipeline import RelaxImportFailed

    onnx_model(graph, "comparing intermediates")
    shapes = shape_dict(concrete_input_shapes(graph.model, input_shapes))
    feeds = dict(feeds) if feeds is not None else random_feeds(graph.model, shapes, seed)
    reference = _ort_values(graph, feeds)
    out = worker.run_on_model(
        run_relax_intermediates, worker_source(graph), shapes, feeds, step="TVM intermediates"
    )
    if not out.get("ok", True):
        raise RelaxImportFailed(failed_import(out, graph, shapes))
    relax_values: dict[str, Any] = out["values"]
    rows, skipped = [], []
    for node in graph.op_nodes():
        data = graph.nx.nodes[node]
        name = data["name"] or node
        tensor = next((o for o in data["outputs"] if o), None)
        candidates = relax_values.get(name, relax_values.get(node))
        if tensor is None or tensor not in reference:
            continue
        if not candidates:
            skipped.append((node, "not traced into Relax"))
            continue
        ours = np.asarray(reference[tensor])
        same = [np.asarray(c) for c in candidates if np.shape(c) == ours.shape]
        if not same:
            shapes = ", ".join(str(np.shape(c)) for c in candidates)
            skipped.append((node, f"no Relax binding of its shape {ours.shape} (made: {shapes})"))
            continue
        theirs = same[-1]
        found = agreement([ours], [theirs])
        rows.append(
            TensorAgreement(
                node,
                data["op_type"],
                tensor,
                tuple(ours.shape),
                found.max_abs_err,
                found.max_rel_err,
                found.ok,
            )
        )
    return IntermediateComparison(
        "ONNX Runtime CPU (disable)", TvmRuntime(schedules="naive").label, tuple(rows), tuple(skipped)
    )

"""Watch a model lower through TVM Relax: one snapshot after each module-level pass, as a Timeline.

:func:`relax_pipeline` imports the ONNX graph into Relax and runs Relax passes one at a
time in the worker (by default the ``zero`` pipeline: LegalizeOps, AnnotateTIROpPattern,
FoldConstant, FuseOps, FuseTIR), capturing the module after each. The passes each step
runs inside (FoldConstant compiles small TIR modules, dozens of TIR passes each) are
counted on that step, not shown as steps. Each snapshot is the Relax ``main`` function as
a graph: after FuseOps a fused function is a group of its members (scope = the function),
after FuseTIR one kernel. The same stepper that steps ONNX passes steps this.

Examples
--------
>>> from explorer import load
>>> timeline = relax_pipeline(load("zoo:mlp"), {"input": [1, 1, 28, 28]})
>>> [s.name for s in timeline.snapshots]
['relax import', 'LegalizeOps', 'AnnotateTIROpPattern', 'FoldConstant', 'FuseOps', 'FuseTIR']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import worker
from ..errors import ExplorerError
from ..graph import ModelGraph
from ..model_files import worker_source
from ..timeline import Snapshot
from .relax_import import RelaxImport, failed_import, relax_graph, shape_dict
from .relax_steps import ZERO_PIPELINE, lower_relax
from .tir import LoweringTimeline

__all__ = ["ZERO_PIPELINE", "RelaxImportFailed", "relax_pipeline", "lowering_counts", "PASS_NOTES"]

PASS_NOTES = {
    "LegalizeOps": "Replaces each high-level Relax operator by a call_tir of a TIR PrimFunc computing it.",
    "AnnotateTIROpPattern": "Marks every PrimFunc with its pattern (elementwise, broadcast, injective, "
    "reduction, out-elementwise-fusable such as conv2d): what FuseOps may fuse.",
    "FoldConstant": "Evaluates, at compile time, bindings whose inputs are all constants.",
    "FuseOps": "Groups operators that can run as one kernel into fused Relax functions (a conv2d and the "
    "elementwise ops after it, for instance): fewer kernel launches and intermediate tensors.",
    "FuseTIR": "Merges each fused group's PrimFuncs into a single PrimFunc: one kernel per group.",
}
"""What each module-level pass does, for learners (passes not listed get a generic line)."""


class RelaxImportFailed(ExplorerError):
    """The ONNX graph did not import into Relax; ``result`` says which nodes and why (and the fix)."""

    def __init__(self, result: RelaxImport) -> None:
        lines = "; ".join(f"{f.node or '?'} [{f.op_type}]: {f.reason}" for f in result.failures[:5])
        fix = f" ({result.fix}: RelaxImport.retry())" if result.fix else ""
        super().__init__(f"{result.source.source}: the model does not import into TVM Relax: {lines}{fix}")
        self.result = result


@dataclass(frozen=True)
class _Step:
    name: str
    family: str = "relax"
    description: str = ""


_IMPORT_STEP = _Step(
    "relax import",
    description="TVM's ONNX importer (tvm.relax.frontend.onnx.from_onnx): one Relax binding per "
    "operator it converts.",
)


#: Bindings that only take tuples apart or put them together: no kernel runs for them.
_NOT_KERNELS = frozenset({"relax.TupleGetItem", "relax.Tuple"})


def lowering_counts(graph: ModelGraph) -> dict[str, int]:
    """Kernels (operator nodes outside fused groups, plus one per fused group; tuple bindings
    are none) and intermediate tensors (edges between operators) of a Relax graph: what fusion
    is for, counted.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.lower import relax_import
    >>> lowering_counts(relax_import(load("zoo:mlp"), {"input": [1, 1, 28, 28]}).graph)["kernels"]
    12
    """
    nodes = graph.nx.nodes
    ops = [n for n, d in nodes(data=True) if d["kind"] == "op" and d["op"] not in _NOT_KERNELS]
    groups = {nodes[n]["scope"][0] for n in ops if nodes[n]["scope"]}
    kernels = sum(1 for n in ops if not nodes[n]["scope"]) + len(groups)
    intermediates = sum(
        1 for u, v in graph.nx.edges() if nodes[u]["kind"] == "op" and nodes[v]["kind"] == "op"
    )
    return {"kernels": kernels, "intermediates": intermediates}


def relax_pipeline(
    graph: ModelGraph,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    passes: Sequence[str] = ZERO_PIPELINE,
    *,
    timeout: float | None = None,
) -> LoweringTimeline:
    """Import ``graph`` into Relax and run ``passes`` one by one, a snapshot after each.

    Parameters
    ----------
    graph : ModelGraph
        A top-level ONNX graph.
    input_shapes : mapping, optional
        Static input shapes for the importer.
    passes : sequence of str
        Module-level passes of ``tvm.relax.transform`` by name; by default :data:`ZERO_PIPELINE`.
    timeout : float, optional
        Seconds the worker may take.

    Returns
    -------
    LoweringTimeline
        Snapshot 0 is the imported module; each later one the module after a pass, with its
        time, whether it changed the module, its nested passes, and the counts of bindings,
        PrimFuncs, fused functions, kernels and intermediate tensors in its log and
        ``metrics``; ``tir[i]`` holds every PrimFunc's TVMScript after step ``i``.

    Raises
    ------
    RelaxImportFailed
        When the import fails (``err.result`` is the :class:`RelaxImport`, ``retry()`` the fix).

    Examples
    --------
    >>> from explorer import load
    >>> t = relax_pipeline(load("zoo:mlp"), {"input": [1, 1, 28, 28]}, passes=["LegalizeOps"])
    >>> t[1].changed, t[1].graph.ir
    (True, 'relax')
    """
    if graph.model is None:
        raise ValueError("relax_pipeline needs a top-level ONNX graph (one with a ModelProto)")
    shapes = shape_dict(input_shapes)
    out: dict[str, Any] = worker.run_on_model(
        lower_relax, worker_source(graph), shapes, list(passes), step="Relax lowering", timeout=timeout
    )
    if not out["ok"]:
        raise RelaxImportFailed(failed_import(out, graph, shapes))
    source = f"relax:{graph.source}"
    current = relax_graph(out["graph"], source=source)
    counts = {**out["counts"], **lowering_counts(current)}
    snapshots = [
        Snapshot.after(
            0,
            _IMPORT_STEP,
            current,
            changed=False,
            elapsed=out["elapsed"],
            log=(_counts_line(counts),),
            metrics=counts,
        )
    ]
    tir: list[dict[str, str]] = [{}]
    for index, step in enumerate(out["steps"], start=1):
        tir.append(step["tir"] if step["changed"] else tir[-1])
        if step["changed"]:
            current = relax_graph(_inherit_origins(current, step["graph"]), source=source)
        new_counts = {**step["counts"], **lowering_counts(current)}
        log = [_counts_line(new_counts, counts)]
        if step["nested"]:
            log.append(f"{step['nested']} passes inside it ({', '.join(step['nested_kinds'])})")
        counts = new_counts
        description = PASS_NOTES.get(step["name"], f"The Relax pass relax.transform.{step['name']}.")
        snapshots.append(
            Snapshot.after(
                index,
                _Step(step["name"], description=description),
                current,
                changed=step["changed"],
                elapsed=step["elapsed"],
                log=tuple(log),
                metrics=new_counts,
            )
        )
    return LoweringTimeline(tuple(snapshots), source, tir=tuple(tir))


def _inherit_origins(previous: ModelGraph, data: dict[str, Any]) -> dict[str, Any]:
    """Give nodes the worker could not trace the origin of what they were made from a step before.

    A fused function's member (``fused_batch_norm_relu/lv2``) was the binding of that name
    with that op; a fused kernel (FuseTIR's ``fused_batch_norm_relu``) was the group of that
    name, and comes from all its members' ONNX nodes.
    """
    by_name: dict[tuple[str, str], tuple[str, ...]] = {}
    by_group: dict[str, set[str]] = {}
    for node, d in previous.nx.nodes(data=True):
        if d["kind"] != "op" or not d["origin"]:
            continue
        by_name.setdefault((node.rsplit("/", 1)[-1], d["op_type"]), d["origin"])
        if d["scope"]:
            by_group.setdefault(d["scope"][0], set()).update(d["origin"])
    for node, d in data["nodes"]:
        if d["kind"] != "op" or d["origin"]:
            continue
        found = by_name.get((node.rsplit("/", 1)[-1], d["op_type"]))
        if found is None and d["op_type"] in by_group:
            found = tuple(sorted(by_group[d["op_type"]]))
        if found:
            d["origin"] = found
    return data


_COUNT_NAMES = (
    ("bindings", "bindings"),
    ("prim_funcs", "PrimFuncs"),
    ("fused", "fused functions"),
    ("kernels", "kernels"),
    ("intermediates", "intermediate tensors"),
)


def _counts_line(counts: Mapping[str, int], before: Mapping[str, int] | None = None) -> str:
    parts = []
    for key, label in _COUNT_NAMES:
        if before is not None and before.get(key) != counts[key]:
            parts.append(f"{label} {before.get(key)} -> {counts[key]}")
        else:
            parts.append(f"{label} {counts[key]}")
    return ", ".join(parts)

"""Watch a model lower through TVM Relax: one snapshot after each module-level pass, as a Timeline.

:func:`relax_pipeline` imports the ONNX graph into Relax and runs Relax passes one at a
time in the worker, capturing the module after each. By default that is the target's
default pipeline (``relax.get_default_pipeline``, what the build here compiles with):
library dispatch, then LegalizeOps, AnnotateTIROpPattern, FoldConstant,
FuseOps and FuseTIR (the ``zero`` pipeline), then the dataflow lowering (CallTIRRewrite makes
every kernel write into an explicitly allocated tensor) and memory planning
(StaticPlanBlockMemory places those tensors in a few reused storages) and the VM
finalization. The passes each step runs inside (FoldConstant compiles small TIR modules,
dozens of TIR passes each) are counted on that step, not shown as steps. Each snapshot is
the Relax ``main`` function as a graph: after FuseOps a fused function is a group of its
members (scope = the function), after FuseTIR one kernel. The same stepper that steps ONNX
passes steps this.

Examples
--------
>>> from explorer import load
>>> timeline = relax_pipeline(load("zoo:mlp"), {"input": [1, 1, 28, 28]}, "zero")
>>> [s.name for s in timeline.snapshots]
['relax import', 'LegalizeOps', 'AnnotateTIROpPattern', 'FoldConstant', 'FuseOps', 'FuseTIR']
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from explorer.core.errors import ExplorerError, LoweringError, UsageError
from explorer.core.graph import ModelGraph
from explorer.core.tensors import format_bytes
from explorer.core.timeline import Snapshot, SnapshotAnnotator, StepObserver, StepObservers
from explorer.isolation import worker
from explorer.isolation.worker import ProgressEvent
from explorer.lower.pass_failures import located
from explorer.lower.rewrites import shape_dict
from explorer.lower.tvm.relax_adapter import relax_graph
from explorer.lower.tvm.relax_graph_data import ALLOC_TENSOR
from explorer.lower.tvm.relax_import import RelaxImport, failed_import
from explorer.lower.tvm.relax_passes import (
    PIPELINES,
    ZERO_PIPELINE,
    lower_relax,
    read_pass_started,
    relax_pass_names,
)
from explorer.lower.tvm.tir import TirTimeline
from explorer.onnx_adapter.adapter import onnx_model
from explorer.onnx_adapter.model_files import worker_source

__all__ = [
    "ZERO_PIPELINE",
    "PIPELINES",
    "RelaxImportFailed",
    "relax_pipeline",
    "check_passes",
    "known_passes",
    "lowering_counts",
    "is_kernel",
    "PASS_NOTES",
]

PASS_NOTES = {
    "LegalizeOps": "Replaces each high-level Relax operator by a call_tir of a TIR PrimFunc computing it.",
    "AnnotateTIROpPattern": "Marks every PrimFunc with its pattern (elementwise, broadcast, injective, "
    "reduction, out-elementwise-fusable such as conv2d): what FuseOps may fuse.",
    "FoldConstant": "Evaluates, at compile time, bindings whose inputs are all constants.",
    "FuseOps": "Groups operators that can run as one kernel into fused Relax functions (a conv2d and the "
    "elementwise ops after it, for instance): fewer kernel launches and intermediate tensors.",
    "FuseTIR": "Merges each fused group's PrimFuncs into a single PrimFunc: one kernel per group.",
    "DispatchSampling": "Replaces sampling operators (multinomial sampling) by the target's kernels; most "
    "vision and encoder models have none.",
    "DispatchSortScan": "Replaces sort, argsort, top-k and cumulative sums by the target's library kernels "
    "(or TIR written for it).",
    "RewriteDataflowReshape": "Turns reshape kernels back into relax.reshape: a reshape needs no copy, the "
    "runtime makes a view of the same memory.",
    "ToNonDataflow": "Ends the dataflow blocks (side-effect-free regions): what follows may allocate and "
    "free memory.",
    "RemovePurityChecking": "Marks the functions as no longer checked for purity (the next passes add "
    "allocations, which have effects).",
    "CallTIRRewrite": "Destination-passing style: each call_tir becomes an allocation of its output tensor "
    "and a call of the PrimFunc that writes into it; memory is now explicit in the graph.",
    "StaticPlanBlockMemory": "Plans memory at compile time: tensors whose lifetimes do not overlap share a "
    "storage, so a few storages hold every intermediate tensor.",
    "LowerAllocTensor": "Writes the remaining tensor allocations (the outputs) as a storage plus a tensor "
    "in it.",
    "KillAfterLastUse": "Frees each tensor and storage right after its last use (kill_tensor, kill_storage).",
    "LowerRuntimeBuiltin": "Replaces the memory operators and builtins by calls of the Relax virtual "
    "machine's runtime functions (vm.alloc_storage, vm.builtin.reshape, ...).",
    "ComputePrimValue": "Computes scalar (PrimValue) expressions with small PrimFuncs; static models "
    "have none.",
    "VMShapeLower": "Lowers shape handling to the VM: input shapes and types are checked "
    "(check_tensor_info, match_shape) before the kernels run.",
    "AttachGlobalSymbol": "Gives every function the symbol name the compiled library exports it under.",
}
"""What each module-level pass does, for learners (passes not listed get a generic line)."""


class RelaxImportFailed(ExplorerError):
    """The ONNX graph did not import into Relax; ``result`` says which nodes and why (and the fix)."""

    def __init__(self, result: RelaxImport) -> None:
        lines = "; ".join(f"{f.node or '?'} [{f.op_type}]: {f.reason}" for f in result.failures[:5])
        fix = f"; fix: {result.fix}" if result.fix else "; no fix is known"
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


#: Bindings no kernel runs for: tuples taken apart or put together, aliases, views (reshape
#: needs no copy), memory allocation and freeing, the VM's shape checks.
_NOT_KERNELS = frozenset(
    {"relax.TupleGetItem", "relax.Tuple", "relax.alias", "relax.reshape", "relax.null_value"}
)
_NOT_KERNEL_PREFIXES = ("relax.memory.", "relax.vm.", "relax.builtin.", "relax.extern.vm.builtin.")


def is_kernel(data: Mapping[str, Any]) -> bool:
    """Whether a Relax graph node runs a kernel (an operator, a PrimFunc call, a library call),
    not bookkeeping (tuples, aliases, reshape views, memory, shape checks).

    Examples
    --------
    >>> is_kernel({"kind": "op", "op": "relax.call_tir"}), is_kernel({"kind": "op", "op": "relax.alias"})
    (True, False)
    """
    op = str(data.get("op") or "")
    return data.get("kind") == "op" and op not in _NOT_KERNELS and not op.startswith(_NOT_KERNEL_PREFIXES)


def lowering_counts(graph: ModelGraph) -> dict[str, int]:
    """Kernels and intermediate tensors of a Relax graph: what fusion is for, counted.

    Kernels are the nodes that run one (:func:`is_kernel`), a fused group counting once.
    An intermediate tensor is one a kernel writes and another reads: before CallTIRRewrite a
    kernel whose result another kernel reads (through bookkeeping such as tuples), after it
    a tensor allocation that its writer and a reader both use.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.lower import relax_import
    >>> lowering_counts(relax_import(load("zoo:mlp"), {"input": [1, 1, 28, 28]}).graph)
    {'kernels': 11, 'intermediates': 10}
    """
    nx_graph = graph.nx
    nodes = nx_graph.nodes
    kernels = {n for n, d in nodes(data=True) if is_kernel(d)}
    groups = {nodes[n]["scope"][0] for n in kernels if nodes[n]["scope"]}
    count = sum(1 for n in kernels if not nodes[n]["scope"]) + len(groups)

    def kernels_reached(start: str) -> set[str]:
        found: set[str] = set()
        stack, seen = list(nx_graph.successors(start)), {start}
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            if node in kernels:
                found.add(node)
            elif nodes[node]["kind"] == "op":  # bookkeeping passes the tensor on
                stack.extend(nx_graph.successors(node))
        return found

    intermediates = sum(1 for n in kernels if kernels_reached(n) - {n})
    intermediates += sum(
        1
        for n, d in nodes(data=True)
        if d["kind"] == "op" and d["op"] in ALLOC_TENSOR and len(kernels_reached(n)) >= 2
    )
    return {"kernels": count, "intermediates": intermediates}


def relax_pipeline(
    graph: ModelGraph,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    pipeline: str | Sequence[str] = "default",
    *,
    target: str = "llvm",
    timeout: float | None = None,
    progress: Callable[[ProgressEvent], object] | None = None,
    observers: Sequence[StepObserver] = (),
    annotators: Sequence[SnapshotAnnotator] = (),
) -> TirTimeline:
    """Import ``graph`` into Relax and run a pipeline's passes one by one, a snapshot after each.

    Parameters
    ----------
    graph : ModelGraph
        A top-level ONNX graph.
    input_shapes : mapping, optional
        Static input shapes for the importer.
    pipeline : {"default", "zero"} or sequence of str
        ``"default"``: the target's default pipeline, pass by pass (library
        dispatch, legalization and fusion, dataflow lowering, memory planning, VM
        finalization); ``"zero"``: :data:`ZERO_PIPELINE`; or module-level passes of
        ``tvm.relax.transform`` by name.
    target : str
        The target the passes run for (``"llvm"``, the CPU).
    timeout : float, optional
        Seconds the worker may take.
    progress : callable, optional
        Called with each :class:`~explorer.isolation.worker.ProgressEvent` the worker sends (one as each
        pass starts); an exception it raises stops the lowering (the worker is killed).
    observers : sequence of StepObserver
        Watch the steps (:class:`~explorer.core.timeline.StepObserver`, as for the ONNX
        passes' :func:`~explorer.passes.pipeline.run_pipeline`): ``before_step`` as each pass
        starts in the worker, ``after_step`` with each snapshot (the import's included) once
        the worker has sent the module after every pass.
    annotators : sequence of SnapshotAnnotator
        Add to each snapshot before the observers see it
        (:class:`~explorer.core.timeline.SnapshotAnnotator`).

    Returns
    -------
    TirTimeline
        Snapshot 0 is the imported module; each later one the module after a pass, with its
        time, whether it changed the module, its nested passes, and the counts of bindings,
        PrimFuncs, fused functions, kernels, intermediate tensors, tensor allocations,
        storages and their bytes in its log and ``metrics``; ``tir[i]`` holds every
        PrimFunc's TVMScript after step ``i``.

    Raises
    ------
    RelaxImportFailed
        When the import fails (``err.result`` is the :class:`RelaxImport`, ``retry()`` the fix).
    LoweringError
        When a pass fails on the model: the pass, the binding, its ONNX nodes and the fix.
    UsageError
        A pipeline or pass name that does not exist (:func:`check_passes`).

    Examples
    --------
    >>> from explorer import load
    >>> t = relax_pipeline(load("zoo:mlp"), {"input": [1, 1, 28, 28]}, ["LegalizeOps"])
    >>> t[1].changed, t[1].graph.ir
    (True, 'relax')
    >>> planned = relax_pipeline(load("zoo:mlp"), {"input": [1, 1, 28, 28]})
    >>> step = planned[planned.index("StaticPlanBlockMemory")]
    >>> step.metrics["storages"] < step.metrics["tensor_allocations"]
    True
    """
    onnx_model(graph, "relax_pipeline")
    shapes = shape_dict(input_shapes)
    passes = check_passes(pipeline)
    watch = StepObservers(tuple(observers), tuple(annotators))
    try:
        out: dict[str, Any] = worker.run_on_model(
            lower_relax,
            worker_source(graph),
            shapes,
            passes,
            target,
            step="Relax lowering",
            timeout=timeout,
            progress=_relay(progress, watch),
        )
    except LoweringError as err:  # a pass failed on the model: name the model too
        raise located(err, graph.source) from None
    if not out["ok"]:
        raise RelaxImportFailed(failed_import(out, graph, shapes))
    source = f"relax:{graph.source}"
    current = relax_graph(out["graph"], source=source)
    counts = {**out["counts"], **lowering_counts(current)}
    snapshots = [
        watch.after_step(
            Snapshot.after(
                0,
                _IMPORT_STEP,
                current,
                changed=False,
                elapsed=out["elapsed"],
                log=(_counts_line(counts),),
                metrics=counts,
            )
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
            watch.after_step(
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
        )
    return TirTimeline(tuple(snapshots), source, tir=tuple(tir))


def _relay(
    progress: Callable[[ProgressEvent], object] | None, watch: StepObservers
) -> Callable[[ProgressEvent], object] | None:
    """The worker's progress events to the caller's callback, and each pass start to the observers."""
    if progress is None and not watch.observers:
        return None

    def relay(event: ProgressEvent) -> None:
        if progress is not None:
            progress(event)
        started = read_pass_started(event.message)
        if started is not None:
            watch.before_step(*started)

    return relay


@functools.cache
def known_passes() -> tuple[str, ...]:
    """The Relax passes :func:`relax_pipeline` runs by name (asked of the worker once, where TVM is).

    Examples
    --------
    >>> "FuseTIR" in known_passes()
    True
    """
    return tuple(worker.run(relax_pass_names, step="Relax pass names"))


def check_passes(pipeline: str | Sequence[str]) -> str | list[str]:
    """A pipeline's name (:data:`PIPELINES`), or its passes as a list, checked before anything runs.

    A string that is not a pipeline is comma-separated pass names.

    Raises
    ------
    UsageError
        Some name is neither a pipeline nor a pass the runner knows (:func:`known_passes`); the
        message lists the pipelines and the passes.

    Examples
    --------
    >>> check_passes("zero"), check_passes("LegalizeOps, FuseOps")
    ('zero', ['LegalizeOps', 'FuseOps'])
    >>> try:
    ...     check_passes(["NoSuchPass"])
    ... except UsageError as err:
    ...     print(str(err).split(";")[0])
    no pipeline or Relax pass 'NoSuchPass': the pipelines are default, zero
    """
    if isinstance(pipeline, str):
        if pipeline in PIPELINES:
            return pipeline
        names = [name.strip() for name in pipeline.split(",") if name.strip()]
    else:
        names = [str(name).strip() for name in pipeline]
    known = known_passes()
    unknown = [name for name in names if name not in known] if names else [str(pipeline)]
    if unknown:
        raise UsageError(
            f"no pipeline or Relax pass {', '.join(map(repr, unknown))}: the pipelines are "
            f"{', '.join(PIPELINES)}; the passes are {', '.join(sorted(known))}"
        )
    return names


def _inherit_origins(previous: ModelGraph, data: dict[str, Any]) -> dict[str, Any]:
    """Give nodes the worker could not trace the origin of what they were made from a step before.

    A fused function's member (``fused_batch_norm_relu/lv2``) was the binding of that name
    with that op; a fused kernel (FuseTIR's ``fused_batch_norm_relu``) was the group of that
    name, and comes from all its members' ONNX nodes. A binding a pass only renamed the
    callee of (AttachAttrLayoutFreeBuffers: ``fused_dense1`` -> ``fused_dense11``) keeps the
    origin of the binding of that name and op.
    """
    by_name: dict[tuple[str, str], tuple[str, ...]] = {}
    by_binding: dict[tuple[str, str], tuple[str, ...]] = {}
    by_group: dict[str, set[str]] = {}
    for node, d in previous.nx.nodes(data=True):
        if d["kind"] != "op" or not d["origin"]:
            continue
        by_name.setdefault((node.rsplit("/", 1)[-1], d["op_type"]), d["origin"])
        by_binding.setdefault((node, d["op"]), d["origin"])
        if d["scope"]:
            by_group.setdefault(d["scope"][0], set()).update(d["origin"])
    for node, d in data["nodes"]:
        if d["kind"] != "op" or d["origin"]:
            continue
        found = by_name.get((node.rsplit("/", 1)[-1], d["op_type"]))
        if found is None and d["op_type"] in by_group:
            found = tuple(sorted(by_group[d["op_type"]]))
        if found is None:
            found = by_binding.get((node, d["op"]))
        if found:
            d["origin"] = found
    return data


_COUNT_NAMES = (
    ("bindings", "bindings"),
    ("prim_funcs", "PrimFuncs"),
    ("fused", "fused functions"),
    ("kernels", "kernels"),
    ("intermediates", "intermediate tensors"),
    ("tensor_allocations", "tensor allocations"),
    ("tensor_bytes", "tensor bytes"),
    ("storages", "storages"),
    ("storage_bytes", "storage bytes"),
)


_MEMORY_COUNTS = frozenset({"tensor_allocations", "tensor_bytes", "storages", "storage_bytes"})
"""Counts shown only once memory is explicit (from CallTIRRewrite on)."""


def _counts_line(counts: Mapping[str, int], before: Mapping[str, int] | None = None) -> str:
    def spell(key: str, value: int | None) -> str:
        return format_bytes(value) if key.endswith("_bytes") and value is not None else str(value)

    parts = []
    for key, label in _COUNT_NAMES:
        if key in _MEMORY_COUNTS and not counts.get(key) and not (before or {}).get(key):
            continue
        if before is not None and before.get(key) != counts[key]:
            parts.append(f"{label} {spell(key, before.get(key))} -> {spell(key, counts[key])}")
        else:
            parts.append(f"{label} {spell(key, counts[key])}")
    return ", ".join(parts)

"""Watch a model lower through IREE's MLIR dialects: a snapshot after each compilation phase, as a Timeline.

:func:`iree_pipeline` imports the ONNX graph with IREE's importer (the torch dialect: one
``torch.operator "onnx.Conv"`` per node) and compiles it for a target, keeping the module after
each phase of ``iree-compile`` (or, with ``detail="passes"``, after every module-level pass that
changed it). Each snapshot is the module's main function as a graph (ops as nodes, coloured by
dialect; SSA values as edges; dispatch regions as groups; ``origin`` back to the ONNX nodes
through MLIR locations), the module's text (weights elided) split by symbol, and its ops per
dialect: a learner watches torch ops become linalg, linalg ops gather into dispatch regions
(flow), dispatches get scheduled (stream), and the host side become device calls (hal) and
bytecode (vm), while the kernels inside the executables become vector and then llvm code.

Examples
--------
>>> from explorer import load
>>> timeline = iree_pipeline(load("zoo:mlp"))
>>> [s.name for s in timeline.snapshots][:4]
['torch import', 'input', 'abi', 'preprocessing']
>>> timeline.dialects[0]["torch"] > 0, "linalg" in timeline.dialects[1]
(True, True)
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from explorer.core.errors import LoweringError, UsageError
from explorer.core.graph import ModelGraph
from explorer.core.timeline import Snapshot, SnapshotAnnotator, StepObserver, StepObservers
from explorer.isolation import worker
from explorer.isolation.worker import ProgressEvent
from explorer.lower.iree.iree_compile import CPU_FLAGS, TARGETS, lower_iree
from explorer.lower.iree.mlir_adapter import mlir_graph
from explorer.lower.iree.mlir_graph_data import dialects_in_text
from explorer.lower.pass_failures import located
from explorer.lower.rewrites import shape_dict
from explorer.lower.timeline import LoweringTimeline
from explorer.onnx_adapter.adapter import onnx_model
from explorer.onnx_adapter.model_files import worker_source

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "PHASE_NOTES",
    "DETAILS",
    "FLAG_SETS",
    "MlirTimeline",
    "iree_pipeline",
    "dispatch_count",
    "iree_available",
]

FLAG_SETS: dict[str, tuple[str, ...]] = {"default": (), "fast": CPU_FLAGS}
"""The flags :func:`iree_pipeline` compiles with, by name: iree-compile's defaults, or the runtime's."""

DETAILS = ("phases", "passes")
"""What one step of :func:`iree_pipeline` is: a compilation phase, or a module-level pass."""

PHASE_NOTES = {
    "torch import": "IREE's ONNX importer (iree.compiler.extras.onnx_importer): one torch.operator per ONNX "
    "node in the torch dialect, located by the node's name; weights become dense resources.",
    "input": "Input conversion: the torch ops are lowered to linalg (structured ops: named convolutions and "
    "matmuls, linalg.generic for elementwise work), tensor and arith; the model's function gets IREE's ABI "
    "wrapper.",
    "abi": "ABI: the public function takes and returns HAL buffer views (and fences for the async form).",
    "preprocessing": "Preprocessing: optional rewrites before global optimisation (none by default).",
    "global-optimization": "Global optimisation: whole-program rewrites on linalg (constants hoisted into "
    "globals, transposes and pads propagated, elementwise ops folded into producers).",
    "dispatch-creation": "Dispatch creation: linalg ops are fused and grouped into dispatch regions; each "
    "region becomes one kernel (a group in the graph).",
    "flow": "Flow: each dispatch region is outlined into an executable and called with flow.dispatch; the "
    "host program is now a sequence of dispatches over tensors.",
    "stream": "Stream: tensors become resources with explicit sizes and lifetimes; dispatches are scheduled "
    "into execution regions (concurrent where independent), with memory allocated for them.",
    "executable-sources": "Executable sources: each dispatch's kernel is materialised for the target device "
    "(hal.executable with its interface bindings).",
    "executable-configurations": "Executable configurations: the CPU backend picks a lowering strategy for "
    "every kernel (tile sizes, vector sizes, workgroup counts).",
    "executable-targets": "Executable targets: the kernels are tiled, vectorised and lowered through vector "
    "and llvm dialects into machine code for this CPU.",
    "hal": "HAL: the host side becomes device calls: command buffers recorded with dispatches, fills and "
    "barriers, and buffers allocated on the device's queue.",
    "vm": "VM: the host program is lowered to IREE's virtual-machine dialect (calls of hal module "
    "functions), what the runtime interprets.",
}
"""What each compilation phase does, for learners (passes get a generic line)."""


def iree_available() -> bool:
    """Whether IREE's compiler package is installed (the ``iree`` extra).

    Examples
    --------
    >>> isinstance(iree_available(), bool)
    True
    """
    import importlib.util

    try:
        return importlib.util.find_spec("iree.compiler") is not None
    except (ImportError, ValueError):  # no iree package at all (or a broken one)
        return False


_DISPATCH_OPS = frozenset(
    {"flow.dispatch", "stream.cmd.dispatch", "stream.async.dispatch", "hal.command_buffer.dispatch"}
)


def dispatch_count(graph: ModelGraph) -> int:
    """The kernels a graph launches: dispatch regions (before flow), dispatch ops after.

    Examples
    --------
    >>> from explorer.core.graph_schema import node_data
    >>> from explorer.lower.iree.mlir_adapter import mlir_graph
    >>> g = mlir_graph({"name": "f", "edges": [], "nodes": [
    ...     ("%0", node_data("op", "flow.dispatch", "d0", op="flow.dispatch", domain="flow"))]})
    >>> dispatch_count(g)
    1
    """
    nodes = graph.nx.nodes(data=True)
    regions = {d["scope"][0] for _, d in nodes if d["scope"] and d["scope"][0].startswith("dispatch_")}
    ops = sum(
        1
        for _, d in nodes
        if d["op"] in _DISPATCH_OPS or (d["op"].startswith("vm.call") and d["op_type"].endswith(".dispatch"))
    )
    return len(regions) + ops


@dataclass(frozen=True)
class MlirTimeline(LoweringTimeline):
    """A Timeline of an MLIR lowering: per snapshot, the module by symbol and its ops per dialect.

    ``tir[i]`` holds the module of snapshot ``i`` split by top-level symbol (the main function,
    each executable), so the stepper's code panel shows and diffs one at a time.

    Attributes
    ----------
    dialects : tuple of dict
        Per snapshot, dialect -> ops in the whole module (None where the dump did not parse).

    Examples
    --------
    >>> t = MlirTimeline((), "none", tir=({"func.func @f": "x"},), dialects=({"func": 2},))
    >>> t.code_label, t.mlir_text(0)
    ('MLIR symbol', 'x')
    """

    dialects: tuple[Mapping[str, int] | None, ...] = field(default=(), compare=False)

    code_label: ClassVar[str] = "MLIR symbol"

    def code_summary(self, index: int, name: str) -> str:
        """Ops per dialect in symbol ``name`` of snapshot ``index`` (counted in its text).

        Examples
        --------
        >>> t = MlirTimeline((), "none", tir=({"f": "%0 = arith.addi %a, %b : i32\\nreturn"},))
        >>> t.code_summary(0, "f")
        'arith 1'
        """
        counts = dialects_in_text(self.tir[index].get(name, ""))
        return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))

    def mlir_text(self, index: int) -> str:
        """The module of snapshot ``index`` as one text (its symbols in order, weights elided).

        Examples
        --------
        >>> MlirTimeline((), "none", tir=({"a": "x", "b": "y"},)).mlir_text(0)
        'x\\n\\ny'
        """
        return "\n\n".join(self.tir[index].values())

    def mlir_diff(self, index: int, other: int | None = None, context: int = 2) -> str:
        """A unified diff of the module between snapshot ``other`` (default: the one before) and ``index``.

        Examples
        --------
        >>> t = MlirTimeline((), "none", tir=({"f": "a\\n"}, {"f": "b\\n"}))
        >>> t.mlir_diff(1).splitlines()[-2:]
        ['-a', '+b']
        """
        before = self.mlir_text(index - 1 if other is None else other) if index > 0 or other else ""
        lines = difflib.unified_diff(
            before.splitlines(),
            self.mlir_text(index).splitlines(),
            fromfile=self.snapshots[index - 1].name if self.snapshots and index > 0 else "before",
            tofile=self.snapshots[index].name if self.snapshots else "after",
            n=context,
            lineterm="",
        )
        return "\n".join(lines)

    def dialect_frame(self) -> pd.DataFrame:
        """Ops per dialect after each step: one row per snapshot, one column per dialect.

        Examples
        --------
        >>> t = MlirTimeline((), "none", dialects=({"torch": 3}, {"linalg": 2, "arith": 1}))
        >>> t.dialect_frame().to_dict("records")
        [{'torch': 3, 'linalg': 0, 'arith': 0}, {'torch': 0, 'linalg': 2, 'arith': 1}]
        """
        import pandas as pd

        names = [s.name for s in self.snapshots] or [str(i) for i in range(len(self.dialects))]
        frame = pd.DataFrame([dict(d or {}) for d in self.dialects], index=names[: len(self.dialects)])
        frame = frame.fillna(0).astype(int)
        frame.index.name = "step"
        return frame


def _check(target: str, detail: str) -> None:
    if target not in TARGETS:
        raise UsageError(f"no IREE target {target!r}: the targets are {', '.join(TARGETS)}")
    if detail not in DETAILS:
        raise UsageError(f"detail must be one of {', '.join(DETAILS)}, not {detail!r}")
    if not iree_available():
        raise UsageError(
            "the MLIR path needs IREE's compiler, which is not installed: "
            "pip install 'onnx-graph-explorer[iree]'"
        )


@dataclass(frozen=True)
class _Step:
    name: str
    family: str = "iree"
    description: str = ""


def _dialect_line(counts: Mapping[str, int] | None, before: Mapping[str, int] | None = None) -> str:
    """``ops per dialect: linalg 40 (+40), torch 0 (-69), ...``, biggest first."""
    if counts is None:
        return "ops per dialect: (the dump does not parse)"
    before = before or {}
    parts = []
    for name in sorted(set(counts) | set(before), key=lambda n: -counts.get(n, 0)):
        now, was = counts.get(name, 0), before.get(name, 0)
        delta = f" ({now - was:+d})" if before and now != was else ""
        if now or delta:
            parts.append(f"{name} {now}{delta}")
    return "ops per dialect: " + ", ".join(parts)


def iree_pipeline(
    graph: ModelGraph,
    target: str = "llvm-cpu",
    detail: str = "phases",
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    flags: str = "default",
    timeout: float | None = None,
    progress: Callable[[ProgressEvent], object] | None = None,
    observers: Sequence[StepObserver] = (),
    annotators: Sequence[SnapshotAnnotator] = (),
) -> MlirTimeline:
    """Import ``graph`` with IREE and compile it for ``target``, a snapshot after each phase (or pass).

    Parameters
    ----------
    graph : ModelGraph
        A top-level ONNX graph.
    target : str
        An IREE target (``"llvm-cpu"``: this CPU).
    detail : {"phases", "passes"}
        A snapshot after each compilation phase (a dozen), or after each module-level pass
        that changed the module (about a hundred: for small models).
    input_shapes : mapping, optional
        Fixed input shapes (dynamic dimensions default as everywhere else).
    flags : {"default", "fast"}
        ``iree-compile``'s defaults, or those plus :data:`~explorer.lower.iree.iree_compile.CPU_FLAGS`
        (data tiling, convolutions as im2col + matmul): what ``bench --runtime iree`` compiles.
    timeout : float, optional
        Seconds the worker may take.
    progress : callable, optional
        Called with each :class:`~explorer.isolation.worker.ProgressEvent` (one as each phase ends).
    observers : sequence of StepObserver
        Watch the steps, as for the other producers; ``after_step`` gets each snapshot.
    annotators : sequence of SnapshotAnnotator
        Add to each snapshot before the observers see it.

    Returns
    -------
    MlirTimeline
        Snapshot 0 is the torch-dialect import; each later one the module after a phase or pass:
        its graph, ``metrics`` (``ops``, ``dispatches``, ``executables``), ops per dialect
        (``dialects``), its text by symbol (``tir``, :meth:`MlirTimeline.mlir_diff`).

    Raises
    ------
    LoweringError
        The import or a phase failed: the phase and pass, the op and its ONNX node, IREE's words.
    UsageError
        An unknown target or detail, or IREE not installed.

    Examples
    --------
    >>> from explorer import load
    >>> t = iree_pipeline(load("zoo:mlp"))
    >>> t[t.index("flow")].metrics["dispatches"] > 0, t[0].graph.ir
    (True, 'mlir')
    """
    onnx_model(graph, "iree_pipeline")
    _check(target, detail)
    if flags not in FLAG_SETS:
        raise UsageError(f"flags must be one of {', '.join(FLAG_SETS)}, not {flags!r}")
    watch = StepObservers(tuple(observers), tuple(annotators))
    onnx_nodes = [n for n, d in graph.nx.nodes(data=True) if d["kind"] == "op"]
    try:
        out: dict[str, Any] = worker.run_on_model(
            lower_iree,
            worker_source(graph),
            shape_dict(input_shapes),
            onnx_nodes,
            target=target,
            detail=detail,
            extra_flags=FLAG_SETS[flags],
            step="IREE lowering",
            timeout=timeout,
            progress=progress,
        )
    except LoweringError as err:  # located, with the rewrite that removes its ONNX nodes when one does
        from explorer.lower.import_fix import lowering_rewrite

        rewrite = lowering_rewrite(graph, err)
        fixed = err.replace(fix=f"{rewrite[0]}: onnx-explorer lower --fix") if rewrite is not None else err
        raise located(fixed, graph.source) from None
    source = f"mlir:{graph.source}"
    first = out["import"]
    current = mlir_graph(first["graph"], source=source)
    counts = _metrics(current, first)
    snapshots = [
        watch.after_step(
            Snapshot.after(
                0,
                _Step("torch import", description=PHASE_NOTES["torch import"]),
                current,
                changed=False,
                elapsed=first["seconds"],
                log=(_dialect_line(first["dialects"]), f"IREE {out['version']}"),
                metrics=counts,
            )
        )
    ]
    sections: list[Mapping[str, str]] = [first["sections"]]
    dialects: list[Mapping[str, int] | None] = [first["dialects"]]
    for index, step in enumerate(out["steps"], start=1):
        changed = step["sections"] != sections[-1]
        if step["graph"] is not None:
            current = mlir_graph(step["graph"], source=source)
        new_counts = _metrics(current, step, counts)
        log = [_dialect_line(step["dialects"], dialects[-1])]
        if step["error"]:
            log.append(f"the graph is the previous step's: {step['error']}")
        if step["nested"]:
            log.append(f"{step['nested']} nested passes changed ops inside it")
        if index == len(out["steps"]):
            log.append(
                f"VM module: {out['vmfb_bytes'] / 2**20:.1f} MiB; compiled in {out['compile_seconds']:.1f} s"
            )
        name = step["name"]
        description = (
            PHASE_NOTES.get(name) or f"The IREE pass {name} (a module-level pass that changed the module)."
        )
        snapshots.append(
            watch.after_step(
                Snapshot.after(
                    index,
                    _Step(name, description=description),
                    current,
                    changed=changed,
                    elapsed=step["elapsed"],
                    log=tuple(log),
                    metrics=new_counts,
                )
            )
        )
        sections.append(step["sections"])
        dialects.append(step["dialects"] or dialects[-1])
        counts = new_counts
    return MlirTimeline(tuple(snapshots), source, tir=tuple(sections), dialects=tuple(dialects))


def _metrics(
    graph: ModelGraph, step: Mapping[str, Any], before: Mapping[str, int] | None = None
) -> dict[str, int]:
    dialects = step.get("dialects")
    executables = sum(1 for name in step["sections"] if "executable" in name.split(" ", 1)[0])
    if dialects is None and before is not None:
        return dict(before)
    return {
        "ops": sum((dialects or {}).values()),
        "dispatches": dispatch_count(graph),
        "executables": executables,
    }

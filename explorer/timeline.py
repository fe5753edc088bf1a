"""Timeline: run a pipeline of passes and keep a snapshot of the graph after each step.

One type serves ONNX-level passes now and TVM / IREE lowering later, so one
stepper widget can walk any of them. Snapshot 0 is the model as loaded; each
later snapshot holds the graph after one pass, whether it changed anything, how
long it took, and (when verification is on) the largest output difference from
the original model on random inputs in ONNX Runtime. Steps that changed nothing
re-use the previous snapshot's graph, so they cost nothing to keep.

Examples
--------
>>> from explorer.timeline import run_pipeline
>>> t = run_pipeline("zoo:resnet18", "eliminate_identity,fuse_bn_into_conv", verify=False)
>>> [(s.name, s.changed) for s in t.snapshots]
[('original', False), ('eliminate_identity', False), ('fuse_bn_into_conv', True)]
>>> t.diff(2).op_deltas
{'BatchNormalization': -20}
"""

from __future__ import annotations

import dataclasses
import math
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from .diff import GraphDiff, diff
from .errors import ExplorerError, WorkerCancelled
from .graph import ModelGraph
from .load import load
from .model_files import own_folder
from .op_deltas import format_op_deltas
from .passes.base import FunctionPass, Pass, PassResult
from .passes.registry import PipelineItem, parse_pipeline
from .verification import OutputCheck

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Snapshot", "Timeline", "run_pipeline", "StepProgress"]

StepProgress = Callable[[int, int, str], object]
"""Progress callback: ``(step number from 1, number of steps, pass name)``, called before each step."""


@dataclass(frozen=True)
class Snapshot:
    """The model after one step.

    Attributes
    ----------
    index : int
        Position in the timeline (0 = as loaded).
    name : str
        The pass (``"original"`` for snapshot 0).
    family : str
        The pass family (``""`` for snapshot 0).
    description : str
        The pass's explanation for learners.
    graph : ModelGraph
        The graph after this step (the previous one, re-used, when nothing changed).
    changed : bool
        Whether the pass changed the model.
    elapsed : float
        Seconds the pass took.
    nodes, params : int
        Node-list length and parameter count after the step.
    log : tuple of str
        Messages from the pass.
    max_abs_diff : float or None
        Largest output difference from the original on random inputs (ONNX
        Runtime); ``None`` when not verified, ``inf`` when outputs differ in
        shape or the model no longer runs.
    error : str or None
        Why the pass failed (the graph is then the previous one).
    metrics : dict
        Numbers the producer measured after the step (a lowering reports bindings,
        PrimFuncs, fused functions, kernels, intermediate tensors); empty by default.
    """

    index: int
    name: str
    family: str
    description: str
    graph: ModelGraph = field(repr=False)
    changed: bool
    elapsed: float
    nodes: int
    params: int
    log: tuple[str, ...] = ()
    max_abs_diff: float | None = None
    error: str | None = None
    metrics: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def original(
        cls, graph: ModelGraph, *, max_abs_diff: float | None = None, log: tuple[str, ...] = ()
    ) -> Snapshot:
        """Snapshot 0: the graph as loaded.

        Examples
        --------
        >>> from explorer import load
        >>> Snapshot.original(load("zoo:mlp")).name
        'original'
        """
        summary = graph.summary()
        return cls(
            index=0,
            name="original",
            family="",
            description="The model as loaded.",
            graph=graph,
            changed=False,
            elapsed=0.0,
            nodes=summary.nodes,
            params=summary.params,
            log=log,
            max_abs_diff=max_abs_diff,
        )

    @classmethod
    def after(
        cls,
        index: int,
        step: Any,
        graph: ModelGraph,
        *,
        changed: bool,
        elapsed: float,
        log: tuple[str, ...] = (),
        max_abs_diff: float | None = None,
        metrics: Mapping[str, int] | None = None,
    ) -> Snapshot:
        """The graph after step ``index``, done by ``step`` (with ``name``, ``family``, ``description``).

        Examples
        --------
        >>> from explorer import load
        >>> from explorer.passes import get_pass
        >>> step = get_pass("eliminate_identity")
        >>> Snapshot.after(1, step, load("zoo:mlp"), changed=False, elapsed=0.0).family
        'onnxoptimizer'
        """
        summary = graph.summary()
        return cls(
            index=index,
            **_step_fields(step),
            graph=graph,
            changed=changed,
            elapsed=elapsed,
            nodes=summary.nodes,
            params=summary.params,
            log=log,
            max_abs_diff=max_abs_diff,
            metrics=dict(metrics or {}),
        )

    @classmethod
    def unchanged(
        cls,
        index: int,
        step: Any,
        graph: ModelGraph,
        last: Snapshot,
        log: tuple[str, ...],
        max_abs_diff: float | None,
        error: str,
    ) -> Snapshot:
        """The snapshot of a step that failed: the previous graph (``last``'s counts), and why."""
        return dataclasses.replace(
            last,
            index=index,
            **_step_fields(step),
            graph=graph,
            changed=False,
            elapsed=0.0,
            log=log,
            max_abs_diff=max_abs_diff,
            error=error,
            metrics=dict(last.metrics),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready facts of the step (without the graph).

        Examples
        --------
        >>> from explorer.timeline import run_pipeline
        >>> run_pipeline("zoo:mlp", [], verify=False).snapshots[0].to_dict()["pass"]
        'original'
        """
        return {
            "index": self.index,
            "pass": self.name,
            "family": self.family,
            "changed": self.changed,
            "elapsed_ms": round(self.elapsed * 1000, 3),
            "nodes": self.nodes,
            "params": self.params,
            "log": list(self.log),
            "max_abs_diff": _json_float(self.max_abs_diff),
            "error": self.error,
            "metrics": dict(self.metrics),
        }


def _step_fields(step: Any) -> dict[str, str]:
    """What a snapshot says of the step that made it (a Pass, or any producer's step object)."""
    return {"name": step.name, "family": step.family, "description": step.description}


def _json_float(value: float | None) -> float | str | None:
    if value is None:
        return None
    return "inf" if math.isinf(value) else value


@dataclass(frozen=True)
class Timeline:
    """The snapshots of a pipeline run, with the diff between consecutive ones.

    Attributes
    ----------
    snapshots : tuple of Snapshot
        Snapshot 0 is the model as loaded; one more per pass.
    source : str
        Where the model came from.
    """

    snapshots: tuple[Snapshot, ...]
    source: str
    _diffs: dict[tuple[int, int], GraphDiff] = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.snapshots)

    def __getitem__(self, index: int) -> Snapshot:
        return self.snapshots[index]

    def index(self, name: str) -> int:
        """The index of the first snapshot named ``name`` (a pass), so notebooks need not count steps.

        Raises
        ------
        KeyError
            No snapshot has that name (the message lists the names).

        Examples
        --------
        >>> from explorer.timeline import run_pipeline
        >>> timeline = run_pipeline("zoo:mlp", "eliminate_identity,eliminate_deadend", verify=False)
        >>> timeline.index("eliminate_deadend")
        2
        """
        for snapshot in self.snapshots:
            if snapshot.name == name:
                return snapshot.index
        names = ", ".join(s.name for s in self.snapshots)
        raise KeyError(f"no step named {name!r}; the steps are: {names}")

    def steps(self, hide_unchanged: bool = False) -> list[int]:
        """Indices of the steps to show; with ``hide_unchanged``, steps that changed nothing are left out.

        Examples
        --------
        >>> from explorer.timeline import run_pipeline
        >>> run_pipeline("zoo:mlp", "eliminate_identity", verify=False).steps(hide_unchanged=True)
        [0]
        """
        return [s.index for s in self.snapshots if s.index == 0 or s.changed or not hide_unchanged]

    def diff(self, index: int, against: int | None = None) -> GraphDiff:
        """The diff from snapshot ``against`` (default: the one before) to snapshot ``index``; cached.

        Examples
        --------
        >>> from explorer.timeline import run_pipeline
        >>> run_pipeline("zoo:mlp", "eliminate_identity", verify=False).diff(1).is_empty
        True
        """
        if not 0 < index < len(self.snapshots) and not (index == 0 and against is not None):
            raise IndexError(
                f"snapshot {index} has no previous step (the timeline has {len(self)} snapshots)"
            )
        base = index - 1 if against is None else against
        key = (base, index)
        if key not in self._diffs:
            self._diffs[key] = diff(self.snapshots[base].graph, self.snapshots[index].graph)
        return self._diffs[key]

    def step_row(self, index: int) -> dict[str, Any]:
        """The facts of step ``index`` (>= 1) as ``onnx-explorer passes --json`` prints them.

        Examples
        --------
        >>> from explorer.timeline import run_pipeline
        >>> sorted(run_pipeline("zoo:mlp", "eliminate_identity", verify=False).step_row(1))[:4]
        ['added', 'changed', 'elapsed_ms', 'error']
        """
        snap, before = self.snapshots[index], self.snapshots[index - 1]
        counts = self.diff(index).counts()
        return {
            "pass": snap.name,
            "family": snap.family,
            "changed": snap.changed,
            "elapsed_ms": round(snap.elapsed * 1000, 3),
            "nodes_before": before.nodes,
            "nodes_after": snap.nodes,
            "op_deltas": dict(self.diff(index).op_deltas),
            "added": counts["added"],
            "removed": counts["removed"],
            "modified": counts["modified"],
            "fusions": counts["fusions"],
            "max_abs_diff": _json_float(snap.max_abs_diff),
            "error": snap.error,
            "log": list(snap.log),
            "metrics": dict(snap.metrics),
        }

    def to_dict(self) -> dict[str, Any]:
        """``{"source", "original", "steps": [...]}``, the ``onnx-explorer passes --json`` object.

        Examples
        --------
        >>> from explorer.timeline import run_pipeline
        >>> run_pipeline("zoo:mlp", [], verify=False).to_dict()["steps"]
        []
        """
        return {
            "source": self.source,
            "original": self.snapshots[0].to_dict(),
            "steps": [self.step_row(i) for i in range(1, len(self.snapshots))],
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per step: pass, changed, time, nodes before/after, op deltas, diff counts, max_abs_diff.

        Examples
        --------
        >>> from explorer.timeline import run_pipeline
        >>> run_pipeline("zoo:mlp", "eliminate_identity", verify=False).to_frame()["pass"].tolist()
        ['eliminate_identity']
        """
        import pandas as pd

        rows = []
        for i in range(1, len(self.snapshots)):
            row = self.step_row(i)
            row["op_deltas"] = format_op_deltas(row["op_deltas"])
            rows.append(row)
        columns = [
            "pass",
            "family",
            "changed",
            "elapsed_ms",
            "nodes_before",
            "nodes_after",
            "op_deltas",
            "added",
            "removed",
            "modified",
            "fusions",
            "max_abs_diff",
            "error",
        ]
        return pd.DataFrame(rows, columns=columns)


def run_pipeline(
    source: Any,
    pipeline: str | Iterable[PipelineItem | Pass],
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    verify: bool | OutputCheck = True,
    seed: int = 0,
    progress: StepProgress | None = None,
    stop_on_error: bool = False,
) -> Timeline:
    """Run passes one after another and keep a snapshot after each.

    Parameters
    ----------
    source : ModelGraph or anything :func:`explorer.load` accepts
        The model to start from (never modified).
    pipeline : str or iterable
        ``"onnxsim,fuse_bn_into_conv,ort:extended"``, or a list of names,
        ``(name, parameters)`` pairs or :class:`~explorer.passes.base.Pass` objects.
    input_shapes : mapping, optional
        Fixed input shapes: used when loading, given to passes that take them
        (onnxsim) and to the random inputs of the verification.
    verify : bool or OutputCheck
        Run the original and every changed snapshot on the same random inputs
        and record the largest output difference: ``True`` in ONNX Runtime (in
        the worker), or on the runtime of the :class:`~explorer.verification.OutputCheck`
        given.
    seed : int
        Seed of the random inputs (with ``verify=True``).
    progress : callable, optional
        Called as ``progress(step, total, name)`` before each step.
    stop_on_error : bool
        Raise the first pass error instead of recording it and going on.

    Returns
    -------
    Timeline
        Each changed snapshot's graph is the pass's output reloaded, called
        ``"<source> after <pass>"`` in titles (its file is the graph's ``model_path``).

    Examples
    --------
    >>> t = run_pipeline("zoo:mlp", "fuse_matmul_add_bias_into_gemm", verify=True)
    >>> t[1].max_abs_diff
    0.0
    >>> run_pipeline("zoo:resnet18", "fuse_bn_into_conv", verify=False)[1].graph.source
    'zoo:resnet18 after fuse_bn_into_conv'
    """
    graph = source if isinstance(source, ModelGraph) else load(source, input_shapes=input_shapes)
    if graph.model is None:
        raise ValueError("run_pipeline needs a top-level graph (one with a ModelProto), not a subgraph")
    passes = _passes(pipeline, input_shapes)
    check = verify if isinstance(verify, OutputCheck) else None
    if check is None and verify:
        check = OutputCheck(seed=seed, input_shapes=input_shapes)
    drift, note = check.start(graph) if check is not None else (None, None)
    snapshots = [Snapshot.original(graph, max_abs_diff=drift, log=() if note is None else (note,))]
    current = graph
    diffs: dict[tuple[int, int], GraphDiff] = {}
    for step, pass_ in enumerate(passes, start=1):
        if progress is not None:
            progress(step, len(passes), pass_.name)
        outcome = _run_step(pass_, current, stop_on_error, f"{graph.source} after {pass_.name}")
        if isinstance(outcome, _Failed):  # the pass failed, or its model does not load
            last, why = snapshots[-1], outcome.error
            snapshots.append(Snapshot.unchanged(step, pass_, current, last, outcome.log, drift, why))
            continue
        result, candidate = outcome
        log, changed = result.log, candidate is not None
        if candidate is not None:
            step_diff = diff(current, candidate)
            if _same_graph(step_diff) and _io_types(current) == _io_types(candidate):
                changed = False  # only serialization details (names / order of initializers ...)
                log = (*log, "the graph is the same; only serialization details changed")
            else:
                diffs[step - 1, step] = step_diff
            if result.path is not None:
                own_folder(candidate, result.path.parent)
            current = candidate
            if changed:
                drift = check.drift(current) if check is not None else None
        snapshots.append(
            Snapshot.after(
                step, pass_, current, changed=changed, elapsed=result.elapsed, log=log, max_abs_diff=drift
            )
        )
    return Timeline(tuple(snapshots), graph.source, diffs)


def _passes(pipeline: str | Iterable[PipelineItem | Pass], input_shapes: Any) -> list[Pass]:
    shared = {"input_shapes": dict(input_shapes)} if input_shapes else {}
    if isinstance(pipeline, str):
        return list(parse_pipeline(pipeline, **shared))
    return [item if isinstance(item, Pass) else parse_pipeline([item], **shared)[0] for item in pipeline]


class _Failed(NamedTuple):
    error: str
    log: tuple[str, ...] = ()


def _run_step(
    pass_: Pass, current: ModelGraph, stop_on_error: bool, name: str
) -> tuple[PassResult, ModelGraph | None] | _Failed:
    """Run one pass on ``current``: its result and the reloaded graph (None: unchanged), or why it failed.

    The reloaded graph is called ``name`` (``"resnet18 after onnxsim"``) in titles and
    messages; the pass's output file, which workers read, is its ``model_path``.
    """
    try:
        if isinstance(pass_, FunctionPass):  # it reads the current model's file, when there is one
            result = pass_.run(current.model, model_path=current.model_path)
        else:
            result = pass_.run(current.model)
    except WorkerCancelled:  # a stop asked by the user ends the pipeline, like KeyboardInterrupt
        raise
    except Exception as err:  # any pass failure is recorded on its step (KeyboardInterrupt is not caught)
        if stop_on_error:
            raise
        text = str(err).strip()
        return _Failed(f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"[:500])
    if not result.modified:
        _discard(result)
        return result, None
    try:
        return result, load(result.model, input_shapes=None, model_path=result.path, name=name)
    except ExplorerError as err:
        _discard(result)
        if stop_on_error:
            raise
        return _Failed(f"the pass produced a model that does not load: {err}", result.log)


def _same_graph(step_diff: GraphDiff) -> bool:
    weights_moved = step_diff.weight_bytes_changed or step_diff.param_delta
    return step_diff.is_empty and not step_diff.op_deltas and not weights_moved


def _io_types(graph: ModelGraph) -> tuple:
    """The declared types of the graph inputs and outputs (a pass fixing input shapes changes only these)."""
    from .tensors import shape_from_type

    main = graph.model.graph
    return tuple((v.name, shape_from_type(v.type)) for v in (*main.input, *main.output))


def _discard(result: PassResult) -> None:
    """Remove the folder of a pass output that no snapshot keeps."""
    if result.path is not None:
        shutil.rmtree(result.path.parent, ignore_errors=True)

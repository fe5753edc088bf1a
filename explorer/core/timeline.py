"""Timeline: the graph after each step of a pipeline, as Snapshots any producer builds.

One type serves every producer: the ONNX passes (:func:`explorer.passes.pipeline.run_pipeline`),
TVM Relax lowering (:func:`explorer.lower.tvm.relax_pipeline`) alike, so one
stepper widget walks any of them. Each snapshot holds the graph after one step,
whether it changed anything, how long it took and, when checked, the largest output
difference from the original; diffs between snapshots are computed when asked and cached.

Examples
--------
>>> from explorer import load
>>> g = load("zoo:mlp")
>>> from types import SimpleNamespace
>>> step = SimpleNamespace(name="noop", family="example", description="Changes nothing.")
>>> t = Timeline((Snapshot.original(g), Snapshot.after(1, step, g, changed=False, elapsed=0.0)), "zoo:mlp")
>>> [(s.name, s.changed) for s in t.snapshots]
[('original', False), ('noop', False)]
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from explorer.core.diff import GraphDiff, diff
from explorer.core.errors import UsageError
from explorer.core.graph import ModelGraph
from explorer.core.op_deltas import format_op_deltas

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Snapshot",
    "Timeline",
    "StepProgress",
    "StepObserver",
    "SnapshotAnnotator",
    "StepObservers",
    "ProgressObserver",
]

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
    traceback : str or None
        A failed step's traceback (``passes --debug`` prints it); not in :meth:`to_dict`.
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
    traceback: str | None = field(default=None, repr=False, compare=False)

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
        traceback: str | None = None,
    ) -> Snapshot:
        """A failed step's snapshot: the previous graph (``last``'s counts), why, and its traceback."""
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
            traceback=traceback,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready facts of the step (without the graph).

        Examples
        --------
        >>> from explorer.passes.pipeline import run_pipeline
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
        >>> from explorer.passes.pipeline import run_pipeline
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
        >>> from explorer.passes.pipeline import run_pipeline
        >>> run_pipeline("zoo:mlp", "eliminate_identity", verify=False).steps(hide_unchanged=True)
        [0]
        """
        return [s.index for s in self.snapshots if s.index == 0 or s.changed or not hide_unchanged]

    def diff(self, index: int, against: int | None = None) -> GraphDiff:
        """The diff from snapshot ``against`` (default: the one before) to snapshot ``index``; cached.

        Examples
        --------
        >>> from explorer.passes.pipeline import run_pipeline
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
        >>> from explorer.passes.pipeline import run_pipeline
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
        >>> from explorer.passes.pipeline import run_pipeline
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
        >>> from explorer.passes.pipeline import run_pipeline
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


@runtime_checkable
class StepObserver(Protocol):
    """Watches a producer's steps without running them or changing what they made (TVM's ``PassInstrument``).

    A producer (:func:`explorer.passes.pipeline.run_pipeline`, the compilers' pipelines) calls
    :meth:`before_step` before it runs step ``index`` (from 1) of ``total``, and
    :meth:`after_step` with each snapshot it made, snapshot 0 (the model as loaded) included,
    as the :class:`SnapshotAnnotator` s left it. Progress reports and recorders are
    observers; what adds to a snapshot is an annotator.
    """

    def before_step(self, index: int, total: int, name: str) -> None:
        """Step ``index`` (from 1) of ``total``, named ``name``, is about to run."""
        ...

    def after_step(self, snapshot: Snapshot) -> None:
        """The producer made ``snapshot`` (observed, never replaced: return nothing)."""
        ...


@runtime_checkable
class SnapshotAnnotator(Protocol):
    """Adds what it measures to each snapshot a producer makes, before the observers see it.

    The output check (:class:`explorer.passes.verification.OutputCheckAnnotator`) is one: it
    runs each changed graph and returns the snapshot with its ``max_abs_diff``.
    """

    def annotate(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with what this annotator measured on it."""
        ...


@dataclass(frozen=True)
class ProgressObserver:
    """Calls a :data:`StepProgress` callback ``(step, total, name)`` before each step.

    Examples
    --------
    >>> ProgressObserver(print).before_step(1, 2, "onnxsim")
    1 2 onnxsim
    """

    progress: StepProgress

    def before_step(self, index: int, total: int, name: str) -> None:
        """Report that step ``index`` of ``total`` starts."""
        self.progress(index, total, name)

    def after_step(self, snapshot: Snapshot) -> None:
        """Nothing to do once a step is made."""


@dataclass(frozen=True)
class StepObservers:
    """What a producer calls at each step: the annotators in order, then every observer.

    Examples
    --------
    >>> from explorer import load
    >>> seen = []
    >>> observers = StepObservers((ProgressObserver(lambda *step: seen.append(step)),))
    >>> observers.before_step(1, 1, "noop")
    >>> observers.after_step(Snapshot.original(load("zoo:mlp"))).name, seen
    ('original', [(1, 1, 'noop')])
    """

    observers: tuple[StepObserver, ...] = ()
    annotators: tuple[SnapshotAnnotator, ...] = ()

    def before_step(self, index: int, total: int, name: str) -> None:
        """Tell every observer that step ``index`` of ``total`` starts."""
        for observer in self.observers:
            observer.before_step(index, total, name)

    def after_step(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` as the annotators, in turn, left it; every observer is shown that one.

        Raises
        ------
        UsageError
            An observer returned a snapshot: observers only observe (an annotator adds).
        """
        for annotator in self.annotators:
            snapshot = annotator.annotate(snapshot)
        for observer in self.observers:
            if observer.after_step(snapshot) is not None:
                raise UsageError(
                    f"{type(observer).__name__}.after_step returned a snapshot: observers only observe; "
                    "to add to a snapshot, give annotate(snapshot) -> Snapshot and pass it in annotators="
                )
        return snapshot

"""Does each step still compute what the original did? Outputs on fixed random inputs, on a given runtime.

:class:`OutputCheck` runs the original graph once on random inputs (the project's one
generator, :mod:`explorer.onnx_adapter.inputs`) and then each changed snapshot on the same
inputs, and reports the largest output difference. The runtime is a parameter (a
``runner(graph, feeds) -> outputs``): ONNX Runtime by default, without its own graph
optimisations so that it checks the pass and not itself; a lowering timeline can check
against its compiled module instead.

Examples
--------
>>> from explorer import load
>>> check = OutputCheck()
>>> graph = load("zoo:mlp")
>>> check.start(graph), check.drift(graph)
((0.0, None), 0.0)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from explorer.onnx_adapter.model_files import worker_source

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph
    from explorer.core.timeline import Snapshot

__all__ = ["Runner", "ort_runner", "OutputCheck", "OutputCheckAnnotator", "OutputCheckObserver"]

Runner = Callable[["ModelGraph", Mapping[str, np.ndarray]], Sequence[np.ndarray]]
"""``runner(graph, feeds) -> outputs``: runs a graph on named inputs, raises when it cannot."""


def ort_runner(graph: ModelGraph, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Run a graph's model in ONNX Runtime (in the worker), with ONNX Runtime's own optimisations off.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.onnx_adapter.inputs import random_feeds
    >>> g = load("zoo:mlp")
    >>> [o.shape for o in ort_runner(g, random_feeds(g.model))]
    [(1, 10)]
    """
    from explorer.onnx_adapter.ort_run import run_onnxruntime

    return run_onnxruntime(worker_source(graph), feeds, optimization="disabled")


class OutputCheck:
    """The original's outputs on fixed random inputs, and each later graph's largest difference from them.

    Parameters
    ----------
    runner : callable
        The runtime (:data:`Runner`); :func:`ort_runner` by default.
    runtime : str
        Its name, for the note when the original does not run.
    seed : int
        Seed of the random inputs.
    input_shapes : mapping, optional
        Sizes of the inputs' dynamic dimensions.

    Examples
    --------
    >>> from explorer import load
    >>> check = OutputCheck(seed=1)
    >>> check.start(load("zoo:resnet18"))[0]
    0.0
    """

    def __init__(
        self,
        runner: Runner = ort_runner,
        *,
        runtime: str = "ONNX Runtime",
        seed: int = 0,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        self.runner = runner
        self.runtime = runtime
        self.seed = seed
        self.input_shapes = dict(input_shapes) if input_shapes else None
        self.feeds: dict[str, np.ndarray] = {}
        self.reference: list[np.ndarray] | None = None

    def start(self, graph: ModelGraph) -> tuple[float | None, str | None]:
        """Make the inputs and run the original: ``(0.0, None)``, or ``(None, why)`` if it does not run."""
        from explorer.onnx_adapter.inputs import random_feeds

        self.feeds = random_feeds(graph.model, self.input_shapes, self.seed)
        try:
            self.reference = list(self.runner(graph, self.feeds))
        except Exception as err:
            self.reference = None
            shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in self.feeds.items())
            reason = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
            return None, (
                f"outputs not compared: the original model does not run in {self.runtime} on random "
                f"inputs ({shapes}): {reason}; give the inputs' sizes with --input-shape"
            )
        return 0.0, None

    def drift(self, graph: ModelGraph) -> float | None:
        """Largest output difference of ``graph`` from the original; ``inf`` if it no longer runs alike.

        ``None`` when the original did not run. Inputs are matched by position: passes such
        as ``rename_input_output`` rename them.
        """
        from explorer.core.compare import max_abs_diff

        if self.reference is None:
            return None
        values = list(self.feeds.values())
        names = _graph_inputs(graph.model)
        if len(names) != len(values):
            return float("inf")
        try:
            outputs = self.runner(graph, dict(zip(names, values, strict=True)))
        except Exception:
            return float("inf")
        return max_abs_diff(self.reference, outputs)


class OutputCheckAnnotator:
    """A :class:`~explorer.core.timeline.SnapshotAnnotator` that adds each snapshot's ``max_abs_diff``.

    Snapshot 0 starts the :class:`OutputCheck` (its note, when the original does not
    run, goes to the snapshot's log); each changed snapshot is checked; a snapshot that
    changed nothing (or whose step failed) keeps the last difference measured.

    Parameters
    ----------
    check : OutputCheck
        The inputs, the runtime and the original's outputs.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.core.timeline import Snapshot
    >>> annotator = OutputCheckAnnotator(OutputCheck())
    >>> annotator.annotate(Snapshot.original(load("zoo:mlp"))).max_abs_diff
    0.0
    """

    def __init__(self, check: OutputCheck) -> None:
        self.check = check
        self.drift: float | None = None

    def annotate(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with its largest output difference from the original."""
        if snapshot.index == 0:
            self.drift, note = self.check.start(snapshot.graph)
            log = snapshot.log if note is None else (*snapshot.log, note)
            return dataclasses.replace(snapshot, max_abs_diff=self.drift, log=log)
        if snapshot.changed:
            self.drift = self.check.drift(snapshot.graph)
        return dataclasses.replace(snapshot, max_abs_diff=self.drift)


OutputCheckObserver = OutputCheckAnnotator
"""The name :class:`OutputCheckAnnotator` had while observers could rewrite snapshots.

Examples
--------
>>> OutputCheckObserver is OutputCheckAnnotator
True
"""


def _graph_inputs(model: Any) -> list[str]:
    initializers = {t.name for t in model.graph.initializer}
    return [v.name for v in model.graph.input if v.name not in initializers]

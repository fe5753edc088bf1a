"""run_pipeline: the ONNX passes' producer of a Timeline (run a pass, reload its output, diff, check).

Snapshot 0 is the model as loaded; each later snapshot holds the graph after one
pass, whether it changed anything, how long it took, and (when verification is on)
the largest output difference from the original model on random inputs in ONNX
Runtime. Steps that changed nothing re-use the previous snapshot's graph, so they
cost nothing to keep. The loop runs, reloads and diffs; the progress report is a
:class:`~explorer.core.timeline.StepObserver` beside it, the output check a
:class:`~explorer.core.timeline.SnapshotAnnotator` (it adds to each snapshot), and callers
may add their own of either.

Examples
--------
>>> t = run_pipeline("zoo:resnet18", "eliminate_identity,fuse_bn_into_conv", verify=False)
>>> [(s.name, s.changed) for s in t.snapshots]
[('original', False), ('eliminate_identity', False), ('fuse_bn_into_conv', True)]
>>> t.diff(2).op_deltas
{'BatchNormalization': -20}
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from explorer.core.diff import GraphDiff, diff
from explorer.core.errors import ExplorerError, WorkerCancelled
from explorer.core.graph import ModelGraph
from explorer.core.timeline import (
    ProgressObserver,
    Snapshot,
    SnapshotAnnotator,
    StepObserver,
    StepObservers,
    StepProgress,
    Timeline,
)
from explorer.onnx_adapter.adapter import onnx_model
from explorer.onnx_adapter.load import load
from explorer.onnx_adapter.model_files import own_folder
from explorer.passes.base import FunctionPass, Pass, PassResult
from explorer.passes.registry import PipelineItem, parse_pipeline
from explorer.passes.step_failures import StepCrashed, crash_site, step_traceback
from explorer.passes.verification import OutputCheck, OutputCheckAnnotator

__all__ = ["run_pipeline"]


def run_pipeline(
    source: Any,
    pipeline: str | Iterable[PipelineItem | Pass],
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    verify: bool | OutputCheck = True,
    seed: int = 0,
    progress: StepProgress | None = None,
    stop_on_error: bool = False,
    observers: Sequence[StepObserver] = (),
    annotators: Sequence[SnapshotAnnotator] = (),
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
        the worker), or on the runtime of the :class:`~explorer.passes.verification.OutputCheck`
        given.
    seed : int
        Seed of the random inputs (with ``verify=True``).
    progress : callable, optional
        Called as ``progress(step, total, name)`` before each step.
    stop_on_error : bool
        Raise the first pass error instead of recording it and going on.
    observers : sequence of StepObserver
        More :class:`~explorer.core.timeline.StepObserver` s, called after the progress
        report; they see each snapshot as the annotators left it.
    annotators : sequence of SnapshotAnnotator
        More :class:`~explorer.core.timeline.SnapshotAnnotator` s, after the verification's
        (which adds ``max_abs_diff``).

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
    onnx_model(graph, "run_pipeline")  # a UsageError for a subgraph or another IR's graph
    passes = _passes(pipeline, input_shapes)
    watch = _observers(verify, seed, input_shapes, progress, observers, annotators)
    snapshots = [watch.after_step(Snapshot.original(graph))]
    current = graph
    diffs: dict[tuple[int, int], GraphDiff] = {}
    for step, pass_ in enumerate(passes, start=1):
        watch.before_step(step, len(passes), pass_.name)
        outcome = _run_step(pass_, current, stop_on_error, f"{graph.source} after {pass_.name}")
        if isinstance(outcome, _Failed):  # the pass failed, or its model does not load
            last, why = snapshots[-1], outcome.error
            failed = Snapshot.unchanged(
                step, pass_, current, last, outcome.log, last.max_abs_diff, why, traceback=outcome.traceback
            )
            snapshots.append(watch.after_step(failed))
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
        after = Snapshot.after(step, pass_, current, changed=changed, elapsed=result.elapsed, log=log)
        snapshots.append(watch.after_step(after))
    return Timeline(tuple(snapshots), graph.source, diffs)


def _observers(
    verify: bool | OutputCheck,
    seed: int,
    input_shapes: Mapping[str, Sequence[int]] | None,
    progress: StepProgress | None,
    more: Sequence[StepObserver],
    more_annotators: Sequence[SnapshotAnnotator] = (),
) -> StepObservers:
    """The observers of a run (the progress report, then the caller's) and its annotators (the
    output check, then the caller's)."""
    check = verify if isinstance(verify, OutputCheck) else None
    if check is None and verify:
        check = OutputCheck(seed=seed, input_shapes=input_shapes)
    observers: list[StepObserver] = [] if progress is None else [ProgressObserver(progress)]
    annotators: list[SnapshotAnnotator] = [] if check is None else [OutputCheckAnnotator(check)]
    return StepObservers((*observers, *more), (*annotators, *more_annotators))


def _passes(pipeline: str | Iterable[PipelineItem | Pass], input_shapes: Any) -> list[Pass]:
    shared = {"input_shapes": dict(input_shapes)} if input_shapes else {}
    if isinstance(pipeline, str):
        return list(parse_pipeline(pipeline, **shared))
    return [item if isinstance(item, Pass) else parse_pipeline([item], **shared)[0] for item in pipeline]


class _Failed(NamedTuple):
    error: str
    log: tuple[str, ...] = ()
    traceback: str | None = None


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
        return _Failed(_failure_words(err), traceback=step_traceback(err))
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


def _failure_words(err: Exception) -> str:
    """A step's failure on one line: a crash the step worded itself (:class:`StepCrashed`) as it is; else
    the exception, and where in a library it was raised (the innermost frame in an installed package)."""
    if isinstance(err, StepCrashed):
        return " ".join(str(err).split())[:1500]
    text = str(err).strip()
    words = f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"[:500]
    site = None if isinstance(err, ExplorerError) else crash_site(step_traceback(err))
    return f"{words} (raised in {site.library}: {site.words()})" if site is not None else words


def _same_graph(step_diff: GraphDiff) -> bool:
    weights_moved = step_diff.weight_bytes_changed or step_diff.param_delta
    return step_diff.is_empty and not step_diff.op_deltas and not weights_moved


def _io_types(graph: ModelGraph) -> tuple:
    """The declared types of the graph inputs and outputs (a pass fixing input shapes changes only these)."""
    from explorer.onnx_adapter.tensor_protos import shape_from_type

    main = graph.model.graph
    return tuple((v.name, shape_from_type(v.type)) for v in (*main.input, *main.output))


def _discard(result: PassResult) -> None:
    """Remove the folder of a pass output that no snapshot keeps."""
    if result.path is not None:
        shutil.rmtree(result.path.parent, ignore_errors=True)

"""Make a model NPU-ready, step by step: the pipeline, and the coverage and accuracy after each step.

For Qualcomm's HTP the fix is a pipeline, not a guess: fix the input shapes (the HTP
compiles static graphs), run onnxsim (shape computations become constants), ONNX
Runtime's QNN preprocessing (fusions the HTP runs as one op), then QDQ quantisation with
the QNN provider's configuration (8- or 16-bit activations, calibrated on the user's
inputs or generated ones). :func:`prepare_for_target` runs it as a
:class:`~explorer.core.timeline.Timeline` (so the stepper shows each step), and after each
step records the target's coverage and partitions (also in each snapshot's ``metrics``)
and the accuracy it cost: the largest output difference from the float model, both run
on ONNX Runtime's CPU provider on the same inputs. NNAPI and CoreML get the first two
steps (their providers take float models).

Examples
--------
>>> prepared = prepare_for_target("zoo:mlp", "nnapi")
>>> [(s.pass_name, s.coverage) for s in prepared.steps]
[('original', 0.0), ('ort-quant:fix_shapes', 1.0), ('onnxsim', 1.0)]
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from explorer.onnx_adapter.adapter import onnx_model
from explorer.targets.partition import partition
from explorer.targets.registry import get_target

if TYPE_CHECKING:
    import pandas as pd

    from explorer.core.graph import ModelGraph
    from explorer.core.timeline import Timeline
    from explorer.passes.base import Pass

__all__ = [
    "PREPARE_PIPELINES",
    "PrepareStep",
    "PreparedModel",
    "prepare_pipeline",
    "prepare_for_target",
    "judge_pipeline",
]

PREPARE_PIPELINES: Mapping[str, tuple[str, ...]] = {
    "qnn-htp": ("ort-quant:fix_shapes", "onnxsim", "ort-quant:qnn_preprocess", "ort-quant:qnn_qdq"),
    "nnapi": ("ort-quant:fix_shapes", "onnxsim"),
    "coreml-mlprogram": ("ort-quant:fix_shapes", "onnxsim"),
    "coreml-nn": ("ort-quant:fix_shapes", "onnxsim"),
}
"""The passes that make a model ready for each NPU target, in order."""


@dataclass(frozen=True)
class PrepareStep:
    """The model after one step of the pipeline, on the target.

    Attributes
    ----------
    index : int
        The step (0: the model as given).
    pass_name : str
        The pass (``"original"`` for step 0).
    changed : bool
        Whether the pass changed the model.
    supported_nodes, total_nodes, partitions : int
        The target's view of the model after the step.
    coverage : float
        ``supported_nodes / total_nodes``.
    max_abs_diff : float or None
        The largest output difference from the float model (ONNX Runtime CPU).
    relative_diff : float or None
        ``max_abs_diff`` over the float model's largest output magnitude.
    verdict : str
        The partitioning in one sentence.
    error : str or None
        Why the pass failed, when it did.
    """

    index: int
    pass_name: str
    changed: bool
    supported_nodes: int
    total_nodes: int
    partitions: int
    coverage: float
    max_abs_diff: float | None
    relative_diff: float | None
    verdict: str
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``onnx-explorer prepare``: pass, coverage, partitions, max_abs_diff, and more."""
        return {
            "pass": self.pass_name,
            "coverage": round(self.coverage, 4),
            "partitions": self.partitions,
            "max_abs_diff": _finite(self.max_abs_diff),
            "relative_diff": _finite(self.relative_diff),
            "supported_nodes": self.supported_nodes,
            "total_nodes": self.total_nodes,
            "changed": self.changed,
            "verdict": self.verdict,
            "error": self.error,
        }


def _finite(value: float | None) -> float | str | None:
    if value is None:
        return None
    return value if math.isfinite(value) else "inf"


@dataclass(frozen=True)
class PreparedModel:
    """What the pipeline made of a model for one target.

    Attributes
    ----------
    target : str
        The target's name.
    timeline : Timeline
        A snapshot per step; each snapshot's ``metrics`` hold the target's counts.
    steps : tuple of PrepareStep
        Coverage, partitions and accuracy after each step.
    input_shapes : dict
        The fixed input shapes used.
    """

    target: str
    timeline: Timeline = field(repr=False)
    steps: tuple[PrepareStep, ...]
    input_shapes: dict[str, list[int]]

    @property
    def graph(self) -> ModelGraph:
        """The model after the last step."""
        return self.timeline[len(self.timeline) - 1].graph

    def to_frame(self) -> pd.DataFrame:
        """One row per step."""
        import pandas as pd

        return pd.DataFrame([s.to_dict() for s in self.steps]).set_index("pass")

    def to_dict(self) -> dict[str, Any]:
        """``{"target", "input_shapes", "steps": [PrepareStep.to_dict(), ...]}``."""
        return {
            "target": self.target,
            "input_shapes": self.input_shapes,
            "steps": [s.to_dict() for s in self.steps],
        }


def prepare_pipeline(
    target: str,
    input_shapes: Mapping[str, Sequence[int]],
    *,
    activation_type: str = "uint8",
    weight_type: str = "uint8",
    calibration: Sequence[Mapping[str, Any]] | None = None,
    samples: int | None = None,
    seed: int = 0,
) -> list[tuple[str, dict[str, Any]]]:
    """The pipeline items for ``target``, with their parameters.

    Examples
    --------
    >>> [name for name, _ in prepare_pipeline("qnn-htp", {"x": [1, 4]})]
    ['ort-quant:fix_shapes', 'onnxsim', 'ort-quant:qnn_preprocess', 'ort-quant:qnn_qdq']
    >>> prepare_pipeline("qnn-htp", {"x": [1, 4]}, weight_type="uint16")[-1][1]["weight_type"]
    'uint16'
    """
    if target not in PREPARE_PIPELINES:
        raise KeyError(
            f"no NPU-ready pipeline for {target!r}; there is one for {', '.join(PREPARE_PIPELINES)}"
        )
    shapes = {k: [int(d) for d in v] for k, v in input_shapes.items()}
    items = []
    for name in PREPARE_PIPELINES[target]:
        params: dict[str, Any] = {}
        if name in ("ort-quant:fix_shapes", "onnxsim"):
            params["input_shapes"] = shapes
        if name == "ort-quant:qnn_qdq":
            params.update(
                input_shapes=shapes, activation_type=activation_type, weight_type=weight_type, seed=seed
            )
            if calibration is not None:
                params["calibration"] = [dict(sample) for sample in calibration]
            if samples is not None:
                params["samples"] = int(samples)
        items.append((name, params))
    return items


def _refuse_string_inputs(graph: ModelGraph, target: str) -> None:
    """A string input cannot be fed to an NPU, generated for calibration or quantised: say which."""
    from onnx import TensorProto

    from explorer.core.errors import UsageError
    from explorer.onnx_adapter.protos import string_inputs
    from explorer.onnx_adapter.tensor_protos import dtype_name

    strings = string_inputs(graph.model)
    if strings:
        names = ", ".join(repr(n) for n in strings)
        raise UsageError(
            f"{graph.source}: input {names} is a {dtype_name(TensorProto.STRING)} tensor; {target} cannot "
            "take string tensors (NPUs and the QDQ quantiser take numeric tensors only, and calibration "
            "cannot generate text): prepare the numeric part of the model, with the string processing "
            "left on the CPU"
        )


def prepare_for_target(
    source: Any,
    target: str = "qnn-htp",
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    activation_type: str = "uint8",
    weight_type: str = "uint8",
    calibration: Sequence[Mapping[str, Any]] | None = None,
    samples: int | None = None,
    seed: int = 0,
    progress: Callable[[int, int, str], object] | None = None,
) -> PreparedModel:
    """Run the NPU-ready pipeline for ``target`` and judge the model on it after each step.

    Parameters
    ----------
    source : ModelGraph or anything :func:`explorer.load` accepts
        The float model (never modified).
    target : str
        A target of :data:`PREPARE_PIPELINES`.
    input_shapes : mapping, optional
        The static shapes (default: every dynamic dimension by the benchmark's rule: 1 for
        batch-like names, 32 else; give real ones for images).
    activation_type : {"uint8", "uint16"}
        The QDQ activations (``qnn-htp``).
    weight_type : {"uint8", "int8", "uint16", "int16"}
        The QDQ weights (``qnn-htp``; the QNN configuration's default is uint8).
    calibration : sequence of mapping, optional
        Calibration inputs (name -> array); default: ``samples`` generated inputs.
    samples : int, optional
        How many inputs to generate for calibration (default 8).
    seed : int
        Seed of the generated inputs (calibration and the accuracy check).
    progress : callable, optional
        ``progress(step, total, name)`` before each step.

    Returns
    -------
    PreparedModel

    Examples
    --------
    >>> p = prepare_for_target("zoo:mlp", "qnn-htp", samples=2)
    >>> p.steps[0].coverage, p.steps[-1].coverage, p.graph.op_counts["QuantizeLinear"] > 0
    (0.0, 1.0, True)
    """
    from explorer.core.graph import ModelGraph
    from explorer.onnx_adapter.inputs import concrete_input_shapes
    from explorer.onnx_adapter.load import load

    graph = source if isinstance(source, ModelGraph) else load(source)
    onnx_model(graph, "prepare_for_target")
    get_target(target)
    _refuse_string_inputs(graph, target)
    shapes = concrete_input_shapes(graph.model, input_shapes)
    pipeline = prepare_pipeline(
        target,
        shapes,
        activation_type=activation_type,
        weight_type=weight_type,
        calibration=calibration,
        samples=samples,
        seed=seed,
    )
    return judge_pipeline(graph, target, shapes, pipeline, seed=seed, progress=progress)


def judge_pipeline(
    graph: ModelGraph,
    target: str,
    input_shapes: Mapping[str, Sequence[int]],
    pipeline: Sequence[tuple[str, Mapping[str, Any]] | Pass],
    *,
    seed: int = 0,
    progress: Callable[[int, int, str], object] | None = None,
) -> PreparedModel:
    """Run ``pipeline`` on ``graph`` and judge each step on ``target``: coverage, partitions, drift.

    The drift is the largest output difference from ``graph`` itself, both run on ONNX
    Runtime's CPU provider on the same generated inputs (``seed``, at ``input_shapes``):
    :func:`prepare_for_target` and the decoder flow
    (:func:`explorer.targets.decoder_prepare.prepare_decoder`) share it.

    Parameters
    ----------
    graph : ModelGraph
        The float model (never modified).
    target : str
        A target name (:func:`~explorer.targets.registry.get_target`).
    input_shapes : mapping
        Every input's concrete shape: the inputs of the drift check.
    pipeline : sequence of (str, mapping) or Pass
        Pass names with their parameters (:func:`prepare_pipeline` makes them), or passes.
    seed : int
        Seed of the drift check's inputs.
    progress : callable, optional
        ``progress(step, total, name)`` before each step.

    Returns
    -------
    PreparedModel

    Examples
    --------
    >>> from explorer import load
    >>> p = judge_pipeline(load("zoo:mlp"), "nnapi", {"input": [1, 1, 28, 28]}, [("onnxsim", {})])
    >>> [(s.pass_name, s.max_abs_diff) for s in p.steps]
    [('original', 0.0), ('onnxsim', 0.0)]
    """
    from explorer.passes.pipeline import run_pipeline
    from explorer.passes.verification import OutputCheck

    chosen = get_target(target)
    shapes = {k: [int(d) for d in v] for k, v in input_shapes.items()}
    check = OutputCheck(seed=seed, input_shapes=shapes)
    items = [(item[0], dict(item[1])) if isinstance(item, tuple) else item for item in pipeline]
    timeline = run_pipeline(graph, items, input_shapes=shapes, verify=check, progress=progress)
    numeric = (r for r in check.reference or () if r.size and r.dtype.kind in "biuf")  # not strings
    scale = max((float(abs(r).max()) for r in numeric), default=0.0)
    steps, snapshots = [], []
    for snapshot in timeline.snapshots:
        p = partition(snapshot.graph, chosen)
        diff = snapshot.max_abs_diff
        steps.append(
            PrepareStep(
                index=snapshot.index,
                pass_name=snapshot.name,
                changed=snapshot.changed,
                supported_nodes=p.supported_nodes,
                total_nodes=p.total_nodes,
                partitions=p.partition_count,
                coverage=p.coverage,
                max_abs_diff=diff,
                relative_diff=None if diff is None or not scale else diff / scale,
                verdict=p.verdict,
                error=snapshot.error,
            )
        )
        metrics = {
            **snapshot.metrics,
            f"{target} nodes": p.supported_nodes,
            "CPU fallback nodes": len(p.fallback_nodes),
            "partitions": p.partition_count,
        }
        snapshots.append(dataclasses.replace(snapshot, metrics=metrics))
    judged = dataclasses.replace(timeline, snapshots=tuple(snapshots))  # the diffs between steps are kept
    return PreparedModel(target, judged, tuple(steps), shapes)

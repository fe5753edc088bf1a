"""Verification takes its runtime as a parameter: ONNX Runtime by default, any runner in its place."""

from __future__ import annotations

import math

import numpy as np

from explorer import load
from explorer.core.timeline import Snapshot, Timeline
from explorer.passes.pipeline import run_pipeline
from explorer.passes.verification import OutputCheck, ort_runner


def test_a_runner_given_as_the_runtime_is_the_one_that_checks_every_changed_step() -> None:
    calls: list[int] = []

    def noisy(graph, feeds):  # ONNX Runtime, with a known error on every step after the first
        calls.append(len(graph.nx))
        outputs = ort_runner(graph, feeds)
        return outputs if len(calls) == 1 else [o + 0.5 for o in outputs]

    check = OutputCheck(noisy, runtime="a noisy runtime", seed=2)
    timeline = run_pipeline("zoo:resnet18", "eliminate_identity,fuse_bn_into_conv", verify=check)
    assert timeline[0].max_abs_diff == 0.0
    assert timeline[1].max_abs_diff == 0.0  # unchanged: not run again, the last value stands
    assert math.isclose(timeline[2].max_abs_diff, 0.5, abs_tol=1e-3)  # 0.5 on top of the fusion's own
    assert len(calls) == 2  # the original, then the one step that changed the graph


def test_a_runtime_that_cannot_run_the_model_is_a_note_and_a_step_it_fails_is_inf() -> None:
    def broken(graph, feeds):
        raise RuntimeError("no kernel")

    check = OutputCheck(broken, runtime="a broken runtime")
    graph = load("zoo:mlp")
    drift, note = check.start(graph)
    assert drift is None and note.startswith(
        "outputs not compared: the original model does not run in a broken runtime"
    )
    assert "input [1, 1, 28, 28]" in note and note.endswith("give the inputs' sizes with --input-shape")
    assert check.drift(graph) is None
    check.runner = ort_runner
    assert check.start(graph) == (0.0, None)
    check.runner = broken
    assert check.drift(graph) == float("inf")


def test_any_producer_builds_a_timeline_from_snapshots() -> None:
    graph = load("zoo:resnet18")
    fused = run_pipeline(graph, "fuse_bn_into_conv", verify=False)[1].graph

    class Step:  # not an ONNX pass: a lowering step would be one of these
        name, family, description = "lower", "example", "An example step."

    snapshots = (
        Snapshot.original(graph),
        Snapshot.after(1, Step(), fused, changed=True, elapsed=0.25, log=("made by hand",)),
    )
    timeline = Timeline(snapshots, graph.source)
    assert timeline.diff(1).op_deltas == {"BatchNormalization": -20}
    assert timeline.step_row(1)["pass"] == "lower" and timeline.to_dict()["steps"][0]["family"] == "example"
    assert np.isfinite(timeline[1].elapsed)

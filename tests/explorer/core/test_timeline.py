"""Timeline: snapshots, hiding unchanged steps, re-use of unchanged graphs, verification, progress."""

from __future__ import annotations

import json

import pytest

from explorer import load
from explorer.passes.pipeline import run_pipeline


def test_snapshots_and_hidden_unchanged_steps() -> None:
    timeline = run_pipeline(
        "zoo:resnet18", "eliminate_identity,fuse_bn_into_conv,eliminate_nop_pad", verify=False
    )
    assert [s.name for s in timeline.snapshots] == [
        "original",
        "eliminate_identity",
        "fuse_bn_into_conv",
        "eliminate_nop_pad",
    ]
    assert timeline.steps(hide_unchanged=True) == [0, 2]
    # unchanged steps re-use the previous graph: snapshots are cheap
    assert timeline[1].graph is timeline[0].graph
    assert timeline[3].graph is timeline[2].graph
    assert timeline[2].nodes == timeline[0].nodes - 20


def test_snapshot_graphs_read_as_the_original_after_a_pass_not_as_a_temporary_file() -> None:
    from explorer import zoo
    from explorer.onnx_adapter.model_files import worker_source

    timeline = run_pipeline(load(zoo.build("resnet18")), "eliminate_identity,fuse_bn_into_conv", verify=False)
    assert timeline.source == timeline[0].graph.source == timeline[1].graph.source == "resnet18"
    after = timeline[2].graph
    assert after.source == "resnet18 after fuse_bn_into_conv"
    # the pass's output file is still what workers read
    assert after.model_path is not None and after.model_path.is_file()
    assert worker_source(after) == str(after.model_path)


def test_progress_is_reported_per_step() -> None:
    seen = []
    run_pipeline(
        "zoo:mlp", "eliminate_identity,eliminate_deadend", verify=False, progress=lambda *a: seen.append(a)
    )
    assert seen == [(1, 2, "eliminate_identity"), (2, 2, "eliminate_deadend")]


def test_verification_reports_max_abs_diff_per_step() -> None:
    timeline = run_pipeline("zoo:resnet18", "fuse_bn_into_conv")
    assert timeline[0].max_abs_diff == 0.0
    assert 0.0 <= timeline[1].max_abs_diff < 1e-3


def test_to_dict_matches_the_cli_contract() -> None:
    timeline = run_pipeline(load("zoo:mlp"), "eliminate_identity", verify=False)
    data = json.loads(json.dumps(timeline.to_dict()))
    step = data["steps"][0]
    assert set(step) >= {
        "pass",
        "changed",
        "elapsed_ms",
        "nodes_before",
        "nodes_after",
        "op_deltas",
        "added",
        "removed",
        "modified",
        "max_abs_diff",
    }
    assert timeline.to_frame().shape[0] == 1


def test_pass_objects_and_parameters_in_pipelines() -> None:
    from explorer.passes import get_pass

    timeline = run_pipeline("zoo:mlp", [get_pass("eliminate_identity"), ("version_converter", {"opset": 18})])
    assert timeline[2].graph.summary().opsets["ai.onnx"] == 18


def test_observers_see_every_step_as_the_annotators_left_it() -> None:
    import dataclasses

    from explorer.core.timeline import Snapshot, SnapshotAnnotator, StepObserver

    class Recorder:
        def __init__(self) -> None:
            self.events: list[tuple] = []

        def before_step(self, index: int, total: int, name: str) -> None:
            self.events.append(("before", index, total, name))

        def after_step(self, snapshot: Snapshot) -> None:
            self.events.append(("after", snapshot.index, snapshot.max_abs_diff))
            assert snapshot.metrics == {"seen": 1}  # the annotators ran first

    class Marker:
        def annotate(self, snapshot: Snapshot) -> Snapshot:
            return dataclasses.replace(snapshot, metrics={"seen": 1})

    recorder = Recorder()
    assert isinstance(recorder, StepObserver) and isinstance(Marker(), SnapshotAnnotator)
    timeline = run_pipeline(
        "zoo:mlp",
        "eliminate_identity,fuse_matmul_add_bias_into_gemm",
        verify=True,
        observers=[recorder],
        annotators=[Marker()],
    )
    # the observers come after the verification and the caller's annotators: they see the checked snapshot
    assert recorder.events == [
        ("after", 0, 0.0),
        ("before", 1, 2, "eliminate_identity"),
        ("after", 1, 0.0),
        ("before", 2, 2, "fuse_matmul_add_bias_into_gemm"),
        ("after", 2, 0.0),
    ]
    assert [dict(s.metrics) for s in timeline.snapshots] == [{"seen": 1}] * 3


def test_an_observer_that_returns_a_snapshot_is_told_to_be_an_annotator() -> None:
    from explorer.core.errors import UsageError
    from explorer.core.timeline import Snapshot

    class Rewriter:
        def before_step(self, index: int, total: int, name: str) -> None:
            pass

        def after_step(self, snapshot: Snapshot) -> Snapshot:
            return snapshot

    with pytest.raises(UsageError, match=r"observers only observe.*annotators="):
        run_pipeline("zoo:mlp", "eliminate_identity", verify=False, observers=[Rewriter()])

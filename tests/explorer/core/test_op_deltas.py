"""Op-count changes: one computation and one spelling for the diff, the pass logs, the CLI and the stepper."""

from __future__ import annotations

from collections import Counter

from explorer import load
from explorer.core.diff import diff
from explorer.core.op_deltas import format_op_deltas, op_deltas
from explorer.passes.pipeline import run_pipeline


def test_only_changed_ops_sorted_by_name() -> None:
    before = Counter({"Relu": 3, "Conv": 3, "Add": 1})
    after = Counter({"Conv": 3, "Add": 2, "Gelu": 1})
    assert op_deltas(before, after) == {"Add": 1, "Gelu": 1, "Relu": -3}
    assert op_deltas(after, after) == {}
    assert format_op_deltas({}) == "" and format_op_deltas({}, empty="none") == "none"


def test_the_diff_and_the_timeline_frame_spell_the_same_deltas() -> None:
    timeline = run_pipeline(load("zoo:mlp"), "ort:basic", verify=False)
    step = timeline.diff(1)
    assert step.op_deltas == diff(timeline[0].graph, timeline[1].graph).op_deltas
    assert timeline.to_frame()["op_deltas"].iloc[0] == format_op_deltas(step.op_deltas)

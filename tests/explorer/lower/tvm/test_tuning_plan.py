"""Where the tuning trials go: tasks ranked by what tuning may gain, as many as the budget serves."""

from __future__ import annotations

import pytest

from explorer.lower.tvm.tuning_plan import (
    MIN_TRIALS_PER_TASK,
    TUNED_GFLOPS_PER_CORE,
    TaskTime,
    expected_trials,
    plan_frame,
    plan_tasks,
)


def test_the_tasks_with_most_to_gain_are_tuned_first_and_the_rest_keep_their_default() -> None:
    times = [
        TaskTime("gelu_dense", calls=2, gflop=0.0168, current_ms=80.0),
        TaskTime("dense", calls=2, gflop=0.0168, current_ms=35.0),
        TaskTime("layer_norm", calls=6, gflop=0.0, current_ms=0.05),
        TaskTime("reshape", calls=2, gflop=0.0, current_ms=0.0),
    ]
    plans = plan_tasks(times, trials=240, cores=2)
    assert [p.name for p in plans] == ["gelu_dense", "dense", "layer_norm", "reshape"]
    assert [p.tuned for p in plans] == [True, True, False, False]  # 99.9% of the gain is in the first two
    floor = 2 * 0.0168 / (TUNED_GFLOPS_PER_CORE * 2) * 1e3  # both calls at the tuned rate on 2 cores
    assert plans[0].floor_ms == pytest.approx(floor, abs=1e-4)
    assert plans[0].gain_ms == pytest.approx(80.0 - floor, abs=1e-3)
    assert plan_frame(plans).set_index("name").loc["reshape", "gain_ms"] == 0.0


def test_the_budget_bounds_how_many_tasks_share_it() -> None:
    times = [TaskTime(f"conv{i}", 1, 0.0, 10.0 + i) for i in range(20)]
    assert sum(p.tuned for p in plan_tasks(times, trials=3 * MIN_TRIALS_PER_TASK, cores=2)) == 3
    assert sum(p.tuned for p in plan_tasks(times, trials=1, cores=2)) == 1  # at least one
    assert sum(p.tuned for p in plan_tasks(times, trials=10_000, cores=2)) == 20


def test_a_task_already_at_the_tuned_rate_gains_nothing() -> None:
    fast = TaskTime("matmul", 1, gflop=1.0, current_ms=1.0)  # 1000 GFLOP/s: nothing to win
    assert plan_tasks([fast], trials=64, cores=2)[0].tuned is False


def test_minutes_bound_the_trials_by_what_the_machine_builds() -> None:
    assert expected_trials(600, None, 2) == 600
    assert expected_trials(600, 10, 2) == 240 < expected_trials(600, 10, 4)


def test_a_wider_vector_unit_raises_what_tuned_code_reaches() -> None:
    # MobileNetV2 on AVX-512: a pointwise convolution at 27 GFLOP/s under its default schedule
    # and one at 59 GFLOP/s. With AVX2's rate the second has nothing left to gain; with 16 lanes
    # both do, the first most.
    times = [TaskTime("pointwise_7x7", 1, 0.030, 1.13), TaskTime("conv_14x14", 1, 0.067, 1.134)]
    narrow = {p.name: p for p in plan_tasks(times, trials=64, cores=2, lanes=8)}
    wide = {p.name: p for p in plan_tasks(times, trials=64, cores=2, lanes=16)}
    assert narrow["conv_14x14"].gain_ms == 0 and not narrow["conv_14x14"].tuned
    assert wide["pointwise_7x7"].gain_ms > wide["conv_14x14"].gain_ms > 0
    assert wide["pointwise_7x7"].tuned and wide["conv_14x14"].tuned


def test_every_task_tunes_each_task_without_a_record_and_weighs_the_rest_by_gain() -> None:
    times = [
        TaskTime("conv", 1, 0.1, 20.0, recorded=True),  # tuned before, still slow: tuned on
        TaskTime("dense", 1, 1.0, 1.0, recorded=True),  # tuned before, at the tuned rate: left
        TaskTime("add", 1, 0.0, 0.01),  # no record, little to gain: covered only with every_task
    ]
    gain_only = {p.name: p for p in plan_tasks(times, trials=640, cores=2)}
    covered = {p.name: p for p in plan_tasks(times, trials=640, cores=2, every_task=True)}
    assert gain_only["conv"].tuned and not gain_only["dense"].tuned and not gain_only["add"].tuned
    assert covered["conv"].tuned and not covered["dense"].tuned and covered["add"].tuned
    assert covered["conv"].recorded and not covered["add"].recorded


def test_covering_the_tasks_without_records_is_paid_before_the_gain_shares_the_rest() -> None:
    from explorer.lower.tvm.relax_tuning import TRIALS_PER_ITER
    from explorer.lower.tvm.tuning_plan import FIRST_ROUND_TRIALS

    assert FIRST_ROUND_TRIALS == TRIALS_PER_ITER  # the plan's first round is MetaSchedule's batch
    slow = [TaskTime(f"conv{i}", 1, 0.0, 10.0 + i, recorded=True) for i in range(10)]
    uncovered = [TaskTime(f"add{i}", 1, 0.0, 0.01) for i in range(10)]
    budget = 10 * FIRST_ROUND_TRIALS + 3 * MIN_TRIALS_PER_TASK
    plans = plan_tasks(slow + uncovered, trials=budget, cores=2, every_task=True)
    assert sum(p.tuned for p in plans if p.recorded) == 3 and all(p.tuned for p in plans if not p.recorded)

"""Per-task coverage of a TVM build (real TVM): records, default schedules, time shares and GFLOP/s."""

from __future__ import annotations

import json
from pathlib import Path

from explorer import load
from explorer.runtimes import TvmRuntime, random_feeds
from explorer.runtimes.profile import profile
from explorer.runtimes.task_coverage import task_coverage


def test_a_tuned_build_names_the_tasks_with_records_and_the_rest_default(tmp_path: Path) -> None:
    graph = load("zoo:mlp")
    shapes = {"input": [1, 1, 28, 28]}
    session = TvmRuntime(tune_trials=8, tuning_root=str(tmp_path)).prepare(graph, shapes)
    coverage = task_coverage(session, profile(session, random_feeds(graph.model, shapes), runs=3))
    schedules = {t.task: t.schedule for t in coverage.tasks}
    assert "record" in schedules.values(), schedules  # the plan tuned the heaviest task
    assert set(schedules.values()) <= {"record", "heuristic", "sampled"}
    assert abs(sum(coverage.share_by_schedule().values()) - 1.0) < 1e-6
    assert [t.ms for t in coverage.tasks] == sorted((t.ms for t in coverage.tasks), reverse=True)
    for task in coverage.tasks:
        if "matmul" in task.task:  # arithmetic: its GFLOP per inference and the rate it reached
            assert task.gflop > 0 and task.gflops is not None and task.gflops > 0
    frame = coverage.to_frame()
    assert list(frame.columns) == ["task", "schedule", "calls", "ms", "share", "gflop", "gflops"]
    assert "tuning record" in set(frame["schedule"])
    json.dumps(coverage.to_dict())  # JSON-ready

"""TVM tuned with MetaSchedule under a budget (real TVM): correct, database reused, a minute budget kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from explorer import load
from explorer.lower.relax_tuning import TUNING_RECORD
from explorer.runtimes import TvmRuntime, bench, random_feeds


def test_a_tuned_run_is_correct_and_a_second_run_reuses_the_database(tmp_path: Path) -> None:
    graph = load("zoo:mlp")
    tuned = TvmRuntime(tune_trials=8, tuning_root=str(tmp_path))
    first = tuned.prepare(graph)
    assert first.info["tune_s"] > 0 and first.info["tasks"] >= 3 and not first.info["errors"]
    folder = next(tmp_path.iterdir())  # one database per target, shared by models
    assert (folder / TUNING_RECORD).is_file() and (folder / "database_tuning_record.json").stat().st_size > 0
    feeds = random_feeds(graph.model)
    untuned = TvmRuntime().prepare(graph)
    np.testing.assert_allclose(first.run(feeds)[0], untuned.run(feeds)[0], rtol=1e-4, atol=1e-5)
    # a new runtime object, the session dropped: the database is applied, nothing is tuned again
    again = TvmRuntime(tune_trials=8, tuning_root=str(tmp_path), target="llvm")
    from explorer import worker

    worker.shutdown()
    second = again.prepare(graph)
    assert second.info["tuned_before"] and second.info["tune_s"] == 0
    assert second.prepare_s * 10 < first.prepare_s  # the database reused: more than 10x less
    report = bench(graph, ["ort", again], min_runs=3, min_seconds=0.0, warmup=1)
    assert report.results[1].tuned and report.results[1].agrees


def test_a_minute_budget_stops_tuning_and_keeps_what_it_found(tmp_path: Path) -> None:
    graph = load("zoo:mlp")  # a first batch alone takes longer than the budget
    runtime = TvmRuntime(tune_minutes=0.05, tuning_root=str(tmp_path))  # 3 seconds: stops after a batch
    session = runtime.prepare(graph)
    assert session.info["out_of_time"] and runtime.label == "TVM llvm tuned (0.05 min)"
    assert session.info["tune_s"] < 3 + 90  # every task stopped once the budget was spent
    records = next(tmp_path.iterdir()) / "database_tuning_record.json"
    assert records.is_file()  # what was measured before the budget ran out is kept
    out = session.run(random_feeds(graph.model))
    assert out[0].shape == (1, 10) and np.isfinite(out[0]).all()

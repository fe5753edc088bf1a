"""TVM tuned with MetaSchedule under a budget (real TVM): correct, database reused, a minute budget kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from explorer import load
from explorer.lower.tvm.tuning_log import TUNING_RECORD
from explorer.lower.tvm.tvm_records import export_records, records_key, seed_database
from explorer.runtimes import TvmRuntime, bench, random_feeds
from explorer.runtimes.profile import profile


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
    plan = {p["name"]: p for p in first.info["plan"]}  # every task timed untuned, the heaviest tuned
    assert len(plan) == first.info["tasks"] and max(plan.values(), key=lambda p: p["gain_ms"])["tuned"]
    kernels = profile(first, feeds, runs=2).kernels  # renamed, prepacked kernels are still mapped
    assert all(k.node for k in kernels if not k.name.startswith("vm.")), kernels
    # a new runtime object, the session dropped: the database is applied, nothing is tuned again
    again = TvmRuntime(tune_trials=8, tuning_root=str(tmp_path), target="llvm")
    from explorer.isolation import worker

    worker.shutdown()
    second = again.prepare(graph)
    assert second.info["tuned_before"] and second.info["tune_s"] == 0
    assert second.info["tasks_with_records"] == first.info["tasks_with_records"] >= 1
    report = bench(graph, ["ort", again], min_runs=3, min_seconds=0.0, warmup=1)
    assert report.results[1].tuned and report.results[1].agrees
    # tuning on from those records: each task is timed as the build stands (a record where it has one);
    # covering every task is test_records_export_the_best_per_task_..., which tunes a fresh database


def test_a_minute_budget_stops_tuning_and_keeps_what_it_found(tmp_path: Path) -> None:
    graph = load("zoo:mlp")  # 3 s: spent before the first batch is measured, on any machine
    runtime = TvmRuntime(tune_minutes=0.05, tuning_root=str(tmp_path))
    session = runtime.prepare(graph)
    assert session.info["out_of_time"] and runtime.label == "TVM llvm tuned (0.05 min)"
    assert session.info["tune_s"] < 3 + 60  # one batch is measured, then no task starts another
    records = next(tmp_path.iterdir()) / "database_tuning_record.json"
    assert records.read_text().count("\n") >= 1  # what was measured before the budget ran out is kept
    out = session.run(random_feeds(graph.model))
    assert out[0].shape == (1, 10) and np.isfinite(out[0]).all()


def test_records_export_the_best_per_task_and_seed_a_database_once(tmp_path: Path) -> None:
    graph = load("zoo:mlp")
    tasks = TvmRuntime().prepare(graph).info["tasks"]  # the untuned build's tasks (default schedules)
    # every task covered: a first round of 16 trials each, paid before any gain (what pretune_zoo ships)
    tuned = TvmRuntime(tune_trials=16 * tasks, tuning_root=str(tmp_path / "tuned"), tune_every_task=True)
    info = tuned.prepare(graph).info
    assert all(p["tuned"] for p in info["plan"]) and info["tasks_with_records"] == info["tasks"] == tasks
    shipped = tmp_path / "records" / records_key()
    count = export_records(tmp_path / "tuned" / "llvm", shipped, {"id": "test"})
    assert count == tasks and (shipped / "manifest.json").is_file()
    into = tmp_path / "fresh"
    first = seed_database(into, root=str(tmp_path / "records"))
    assert first is not None and first["added"] == count == first["records"]
    assert seed_database(into, root=str(tmp_path / "records"))["added"] == 0  # once per database


def test_the_shipped_records_make_tvm_tuned_without_tuning(tmp_path: Path) -> None:
    from explorer.lower.tvm.relax_import import relax_import
    from explorer.lower.tvm.tvm_records import shipped_records
    from explorer.onnx_adapter.inputs import concrete_input_shapes

    if shipped_records() is None:
        pytest.skip(f"no records are shipped for {records_key()}")
    graph = load("zoo:transformer")
    graph = relax_import(graph, concrete_input_shapes(graph.model)).fixed().source
    session = TvmRuntime(pretuned=True, tuning_root=str(tmp_path)).prepare(graph)
    assert session.info["shipped"]["added"] > 0 and session.info["tune_s"] == 0
    assert "transformer" in session.info["shipped"]["models"]  # the manifest says how they were made
    assert session.info["tasks_with_records"] >= 5  # its FFN, projections and attention matmuls
    assert session.info["records_rejected"] == {}  # each record checked against its plain loops
    report = bench(graph, ["ort", TvmRuntime(pretuned=True, tuning_root=str(tmp_path))], min_runs=3, warmup=1)
    assert report.results[1].agrees and report.results[1].tuned

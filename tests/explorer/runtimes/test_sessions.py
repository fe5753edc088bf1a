"""Prepared sessions in the worker (real ONNX Runtime and TVM): reused by key, timed there, lost and found."""

from __future__ import annotations

import numpy as np
import pytest

from explorer import load
from explorer.isolation import worker
from explorer.runtimes.ort_runtime import OrtRuntime
from explorer.runtimes.sessions import SessionGone, has_session, run_session
from explorer.runtimes.tvm_runtime import TvmRuntime

FEEDS = {"input": np.random.default_rng(0).standard_normal((1, 1, 28, 28)).astype(np.float32)}


def test_preparing_the_same_thing_again_reuses_the_session_in_the_worker() -> None:
    graph = load("zoo:mlp")
    first = OrtRuntime(threads=1).prepare(graph)
    again = OrtRuntime(threads=1).prepare(load("zoo:mlp"))  # another load of the same model
    assert first.key == again.key and not first.info["reused"] and again.info["reused"]
    assert again.prepare_s == first.prepare_s  # what it cost when it was made
    assert worker.run(has_session, first.key)
    other = OrtRuntime(threads=2).prepare(graph)  # other options: another session
    assert other.key != first.key and not other.info["reused"]
    assert first.info["threads"] == 1 and first.info["providers"] == ["CPUExecutionProvider"]


def test_timing_runs_in_the_worker_with_warmup_and_a_minimum_count() -> None:
    session = OrtRuntime().prepare(load("zoo:mlp"))
    timed = session.time(FEEDS, warmup=2, min_runs=7, min_seconds=0.0)
    assert len(timed["warmup_ms"]) == 2 and len(timed["times_ms"]) == 7
    assert all(t > 0 for t in timed["times_ms"])
    np.testing.assert_array_equal(timed["outputs"][0], session.run(FEEDS)[0])
    slow = session.time(FEEDS, warmup=0, min_runs=1_000_000, min_seconds=0.0, max_seconds=0.2)
    assert 3 <= len(slow["times_ms"]) < 1_000_000  # the maximum time stops it


def test_a_session_the_worker_lost_is_prepared_again_on_use() -> None:
    session = TvmRuntime().prepare(load("zoo:mlp"))
    want = session.run(FEEDS)[0]
    worker.shutdown()  # a new worker: no sessions
    with pytest.raises(SessionGone):
        worker.run(run_session, session.key, FEEDS)
    np.testing.assert_allclose(session.run(FEEDS)[0], want, rtol=1e-6)
    assert worker.run(has_session, session.key)

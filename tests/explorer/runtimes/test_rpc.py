"""Benchmarking through TVM's RPC tracker: a tracker and two servers on localhost, then a server gone."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import numpy as np
import pytest

from explorer import load
from explorer.isolation import worker
from explorer.lower.tvm.relax_target import remote_target
from explorer.lower.tvm.relax_tuning import tuning_dir
from explorer.lower.tvm.rpc_tracker import request_server
from explorer.runtimes import TvmRuntime, bench, random_feeds
from tests.explorer.rpc_servers import KEY, free_port, kill, rpc_tracker, server_address, servers_registered


@pytest.fixture(scope="module")
def tracker() -> Iterator[tuple[str, list[subprocess.Popen]]]:
    with rpc_tracker(servers=2) as running:
        yield running


def test_a_model_is_benchmarked_on_a_server_from_the_tracker(tracker: tuple[str, list]) -> None:
    address, _ = tracker
    graph = load("zoo:mlp")
    remote = TvmRuntime(rpc_tracker=address, rpc_key=KEY)
    report = bench(graph, ["tvm", remote], warmup=1, min_runs=5, min_seconds=0.0)
    local, there = report.results
    assert there.label == f"TVM llvm untuned (default schedules) on {KEY}@{address}"
    assert there.info["rpc"] == f"{KEY}@{address}"
    assert there.agrees and there.max_abs_err < 1e-5 and there.runs >= 5 and there.median_ms > 0
    feeds = random_feeds(graph.model)
    want = TvmRuntime().prepare(graph).run(feeds)[0]
    np.testing.assert_allclose(remote.prepare(graph).run(feeds)[0], want, rtol=1e-5)
    assert local.runtime == there.runtime == "tvm"


def test_tuning_measures_candidates_on_the_servers(tracker: tuple[str, list], tmp_path: object) -> None:
    address, _ = tracker
    graph = load("zoo:mlp")
    remote = TvmRuntime(tune_trials=16, tuning_root=str(tmp_path), rpc_tracker=address, rpc_key=KEY)
    session = remote.prepare(graph)
    assert session.info["tune_s"] > 0 and session.info["trials_run"] >= 16 and not session.info["errors"]
    assert session.info["tasks_with_records"] >= 1  # measured there, committed here
    feeds = random_feeds(graph.model)
    np.testing.assert_allclose(session.run(feeds)[0], TvmRuntime().prepare(graph).run(feeds)[0], rtol=1e-4)
    worker.shutdown()  # the sessions kept warm hold a server each: give them back to the tracker
    port = int(address.rsplit(":", 1)[1])
    deadline = time.monotonic() + 60
    while servers_registered(port) < 2 and time.monotonic() < deadline:
        time.sleep(1)
    _, asked = request_server(address, KEY, wait_s=30)
    server_cpu = remote_target(asked)  # the database is the servers' target's (their own CPU, asked)
    del asked
    assert server_cpu and "-mcpu=" in server_cpu and "-num-cores=" in server_cpu
    assert (
        session.info["tuning_dir"]
        == str(tuning_dir(server_cpu, str(tmp_path)))
        != str(tuning_dir("llvm", str(tmp_path)))
    )


def test_a_server_dying_while_tuning_costs_its_candidates_only(
    tracker: tuple[str, list], tmp_path: object
) -> None:
    """One of two servers is killed after the first batch: tuning goes on with the other, says
    which server died and what it cost, and the tuned model still agrees with ONNX Runtime."""
    address, procs = tracker
    worker.shutdown()  # sessions kept warm hold servers: every server free for tuning
    port = int(address.rsplit(":", 1)[1])
    deadline = time.monotonic() + 60
    while servers_registered(port) < 2 and time.monotonic() < deadline:
        time.sleep(1)
    killed: list[str] = []

    def progress(label: str, event: object) -> None:  # after the first batch: kill a server that measured
        message = str(getattr(event, "message", "") or "")
        if killed or "measured on " not in message:
            return
        measured = {part.split(" ×")[0] for part in message.split("measured on ", 1)[1].split(", ")}
        for proc in procs[1:]:
            if server_address(proc) in measured:
                killed.append(server_address(proc))
                kill(proc)
                return

    graph = load("zoo:mlp")
    remote = TvmRuntime(
        tune_trials=24, tuning_root=str(tmp_path), rpc_tracker=address, rpc_key=KEY, rpc_timeout=30
    )
    started = time.monotonic()
    session = remote.prepare(graph, progress=lambda event: progress("tvm", event))
    info = session.info
    assert killed, "no server was seen measuring"
    assert info["rpc_servers"][killed[0]]["gone"] and info["rpc_servers"][killed[0]]["measured"] >= 1
    alive = [s for s, counts in info["rpc_servers"].items() if not counts["gone"]]
    assert alive and all(info["rpc_servers"][s]["measured"] >= 1 for s in alive)
    assert any(killed[0] in note and "went on with 1 server" in note for note in info["rpc_notes"])
    assert info["trials_run"] >= 24 and info["tasks_with_records"] >= 1 and not info["errors"]
    feeds = random_feeds(graph.model)
    np.testing.assert_allclose(session.run(feeds)[0], TvmRuntime().prepare(graph).run(feeds)[0], rtol=1e-4)
    assert time.monotonic() - started < 300  # tuned, compiled, run: no hang on the dead server
    worker.shutdown()


def test_tuning_without_a_tracker_or_a_server_says_so_before_it_starts(
    tracker: tuple[str, list], tmp_path: object
) -> None:
    address, _ = tracker
    graph = load("zoo:mlp")
    started = time.monotonic()
    with pytest.raises(ConnectionError, match="no RPC server is registered under key 'nobody'"):
        TvmRuntime(tune_trials=8, tuning_root=str(tmp_path), rpc_tracker=address, rpc_key="nobody").prepare(
            graph
        )
    nobody = f"127.0.0.1:{free_port()}"
    with pytest.raises(ConnectionError, match="no RPC tracker answers"):
        TvmRuntime(tune_trials=8, tuning_root=str(tmp_path), rpc_tracker=nobody, rpc_key=KEY).prepare(graph)
    assert time.monotonic() - started < 60  # refused before the import, the plan and any candidate


def test_no_server_under_a_key_and_a_dead_server_give_clear_errors(tracker: tuple[str, list]) -> None:
    address, procs = tracker
    graph = load("zoo:mlp")
    with pytest.raises(ConnectionError, match="no RPC server is registered under key 'nobody'"):
        TvmRuntime(rpc_tracker=address, rpc_key="nobody").prepare(graph)
    session = TvmRuntime(rpc_tracker=address, rpc_key=KEY, rpc_timeout=8).prepare(graph)
    for proc in procs[1:]:  # both servers go away, with the sessions they forked
        kill(proc)
    started = time.monotonic()
    with pytest.raises(ConnectionError, match=f"RPC server for key '{KEY}'"):
        session.run(random_feeds(graph.model))
    assert time.monotonic() - started < 30  # an error, not a hang
    worker.shutdown()
    with pytest.raises(ConnectionError, match=KEY):
        TvmRuntime(rpc_tracker=address, rpc_key=KEY, rpc_timeout=8).prepare(graph)
    with pytest.raises(ConnectionError, match="no RPC tracker answers"):
        TvmRuntime(rpc_tracker=f"127.0.0.1:{free_port()}", rpc_key=KEY).prepare(graph)

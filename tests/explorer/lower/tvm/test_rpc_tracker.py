"""The tracker's protocol with time limits: a real tracker and one server on localhost."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from explorer.lower.tvm.rpc_tracker import registered_servers, request_server, servers_under, tracker_summary
from tests.explorer.rpc_servers import KEY, free_port, rpc_tracker


@pytest.fixture(scope="module")
def tracker() -> Iterator[tuple[str, list[subprocess.Popen]]]:
    with rpc_tracker(servers=1) as running:
        yield running


def test_the_summary_lists_the_server_under_its_key(tracker: tuple[str, list]) -> None:
    address, _ = tracker
    summary = tracker_summary(address)
    (server,) = servers_under(summary, KEY)
    assert server.startswith("127.0.0.1:")
    assert registered_servers(address, KEY) == [server]
    assert servers_under(summary, "nobody") == []


def test_a_key_without_servers_names_the_keys_there_and_the_command(tracker: tuple[str, list]) -> None:
    address, _ = tracker
    refused = f"no RPC server is registered under key 'nobody'.*{KEY}"
    with pytest.raises(ConnectionError, match=refused) as err:
        registered_servers(address, "nobody")
    assert "python -m tvm.exec.rpc_server" in str(err.value)


def test_a_session_from_the_tracker_runs_on_the_server(tracker: tuple[str, list]) -> None:
    address, _ = tracker
    server, session = request_server(address, KEY, wait_s=10)
    assert server in registered_servers(address, KEY)
    device = session.cpu()
    import tvm

    values = tvm.runtime.tensor(np.arange(4, dtype="float32"), device=device)
    np.testing.assert_array_equal(values.numpy(), np.arange(4, dtype="float32"))


def test_no_tracker_and_a_silent_peer_are_errors_within_the_wait(tracker: tuple[str, list]) -> None:
    started = time.monotonic()
    with pytest.raises(ConnectionError, match="no RPC tracker answers"):
        tracker_summary(f"127.0.0.1:{free_port()}", wait_s=2)
    with pytest.raises(ValueError, match="HOST:PORT"):
        tracker_summary("localhost", wait_s=2)
    with socket.socket() as silent:  # accepts connections, never answers: not a tracker
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        accepted: list[socket.socket] = []
        threading.Thread(target=lambda: accepted.append(silent.accept()[0]), daemon=True).start()
        with pytest.raises(ConnectionError, match="no RPC tracker answers"):
            request_server(f"127.0.0.1:{silent.getsockname()[1]}", KEY, wait_s=2)
        for conn in accepted:
            conn.close()
    assert time.monotonic() - started < 20

"""A TVM RPC tracker and servers on localhost, for the tests that benchmark and tune through them."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

__all__ = ["KEY", "free_port", "kill", "rpc_tracker", "server_address", "servers_registered"]

KEY = "explorer-test"


def free_port() -> int:
    """A TCP port on localhost that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def servers_registered(port: int) -> int:
    """How many servers are registered under :data:`KEY` at the tracker on ``port`` (0 when none answers)."""
    from tvm import rpc

    try:
        summary = rpc.connect_tracker("127.0.0.1", port).summary()
    except Exception:
        return 0
    return sum(1 for s in summary.get("server_info", []) if s.get("key", "").endswith(KEY))


def server_address(proc: subprocess.Popen) -> str:
    """``127.0.0.1:PORT`` of a server process, as the tracker lists it (its listening port)."""
    import psutil

    for found in [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]:
        for conn in found.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN:
                return f"127.0.0.1:{conn.laddr.port}"
    return ""


def kill(proc: subprocess.Popen) -> None:
    """Kill a server or tracker with the session processes it forked."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL) if proc.pid else None
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait(timeout=30)


@contextlib.contextmanager
def rpc_tracker(servers: int = 2) -> Iterator[tuple[str, list[subprocess.Popen]]]:
    """A TVM RPC tracker on localhost and ``servers`` servers registered under :data:`KEY`."""
    port = free_port()
    python = sys.executable
    procs = [
        subprocess.Popen(
            [
                python,
                "-m",
                "tvm.exec.rpc_tracker",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--port-end",
                str(port + 1),
                "--silent",
            ]
        )
    ]
    time.sleep(2)
    for _ in range(servers):
        start = free_port()
        procs.append(
            subprocess.Popen(
                [
                    python,
                    "-m",
                    "tvm.exec.rpc_server",
                    "--tracker",
                    f"127.0.0.1:{port}",
                    "--key",
                    KEY,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(start),
                    "--port-end",
                    str(start + 40),
                    "--silent",
                ],
                start_new_session=True,  # its forked session processes die with it (killpg)
            )
        )
    deadline = time.monotonic() + 120
    while servers_registered(port) < servers and time.monotonic() < deadline:
        time.sleep(1)
    assert servers_registered(port) == servers, f"the {servers} RPC server(s) did not register"
    try:
        yield f"127.0.0.1:{port}", procs
    finally:
        for proc in procs:
            kill(proc)

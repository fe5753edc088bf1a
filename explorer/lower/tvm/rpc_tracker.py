"""TVM's RPC tracker, asked directly: which servers are registered under a key, and a session on one.

One place speaks the tracker's protocol for both users: benchmarking on a remote server
(:mod:`explorer.runtimes.sessions`) and tuning with candidates measured on servers
(:mod:`explorer.lower.tvm.rpc_measure`). Every call has a time limit: TVM's own
``rpc.connect_tracker`` retries for a minute and ``TrackerSession.request`` waits without one,
so a missing tracker or a busy key would hang a notebook.

Examples
--------
>>> try:
...     registered_servers("127.0.0.1:1", "board")
... except ConnectionError as err:
...     print(str(err).split(":")[0])
no RPC tracker answers at 127.0.0.1
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Callable
from typing import Any

from explorer.core.errors import UsageError

__all__ = [
    "TRACKER_WAIT_S",
    "tracker_address",
    "tracker_summary",
    "servers_under",
    "registered_servers",
    "request_server",
    "call_within",
]

TRACKER_WAIT_S = 5.0
"""Seconds a tracker has to answer before it counts as gone."""


def tracker_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` -> ``(host, port)``: how every user of a tracker reads its address.

    Raises
    ------
    UsageError
        (a ValueError) Not ``HOST:PORT`` with a port from 1 to 65535; the message names the form
        and the address.

    Examples
    --------
    >>> tracker_address("127.0.0.1:9190")
    ('127.0.0.1', 9190)
    >>> tracker_address("localhost")
    Traceback (most recent call last):
    ...
    explorer.core.errors.UsageError: an RPC tracker is HOST:PORT (e.g. 127.0.0.1:9190), not 'localhost'
    """
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"an RPC tracker is HOST:PORT (e.g. 127.0.0.1:9190), not {address!r}")
    return host, int(port)


def _connect(address: str, wait_s: float) -> socket.socket:
    """A socket to the tracker, its magic number exchanged; reads on it time out after ``wait_s``."""
    from tvm.rpc import base

    host, port = tracker_address(address)
    try:
        sock = socket.create_connection((host, port), timeout=wait_s)
    except OSError as err:
        raise ConnectionError(f"no RPC tracker answers at {address}: {err}") from None
    try:
        sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
        if struct.unpack("<i", base.recvall(sock, 4))[0] != base.RPC_TRACKER_MAGIC:
            raise ConnectionError(f"what answers at {address} is not a TVM RPC tracker")
    except ConnectionError:
        sock.close()
        raise
    except (OSError, struct.error) as err:
        sock.close()
        raise ConnectionError(f"no RPC tracker answers at {address}: {err}") from None
    except BaseException:
        sock.close()
        raise
    return sock


def tracker_summary(address: str, wait_s: float = TRACKER_WAIT_S) -> dict[str, Any]:
    """The tracker's summary (its ``server_info`` and ``queue_info``), or a ``ConnectionError``
    within ``wait_s`` seconds.

    Examples
    --------
    >>> try:
    ...     tracker_summary("127.0.0.1:1", wait_s=1)
    ... except ConnectionError as err:
    ...     print(str(err).split(":")[0])
    no RPC tracker answers at 127.0.0.1
    """
    from tvm.rpc import base

    with _connect(address, wait_s) as sock:
        try:
            base.sendjson(sock, [base.TrackerCode.SUMMARY])
            code, summary = base.recvjson(sock)
        except (OSError, ValueError, json.JSONDecodeError) as err:
            raise ConnectionError(f"the RPC tracker at {address} gave no summary: {err}") from None
    if code != base.TrackerCode.SUCCESS:
        raise ConnectionError(f"the RPC tracker at {address} refused a summary: {summary}")
    return summary


def servers_under(summary: dict[str, Any], key: str) -> list[str]:
    """The servers (``host:port``) a tracker summary lists under ``key``.

    Examples
    --------
    >>> summary = {"server_info": [{"key": "server:board", "addr": ["10.0.0.2", 9091]},
    ...                            {"key": "server:phone", "addr": ["10.0.0.3", 9091]}]}
    >>> servers_under(summary, "board")
    ['10.0.0.2:9091']
    """
    return [
        ":".join(str(part) for part in s.get("addr", ()))
        for s in summary.get("server_info", [])
        if str(s.get("key", "")).split(":")[-1] == key
    ]


def registered_servers(address: str, key: str, wait_s: float = TRACKER_WAIT_S) -> list[str]:
    """The servers registered under ``key`` at the tracker, or a clear ``ConnectionError``: no
    tracker answers, or no server has that key (the keys there are listed, with the command
    that starts a server).

    Examples
    --------
    >>> try:
    ...     registered_servers("127.0.0.1:1", "board", wait_s=1)
    ... except ConnectionError as err:
    ...     print(str(err).split(":")[0])
    no RPC tracker answers at 127.0.0.1
    """
    summary = tracker_summary(address, wait_s)
    servers = servers_under(summary, key)
    if not servers:
        known = sorted({str(s.get("key", "")).split(":")[-1] for s in summary.get("server_info", [])})
        raise ConnectionError(
            f"no RPC server is registered under key {key!r} at tracker {address} "
            f"(keys there: {', '.join(known) or 'none'}); start one with python -m tvm.exec.rpc_server "
            f"--tracker {address} --key {key}"
        )
    return servers


def request_server(
    address: str, key: str, wait_s: float, *, priority: int = 1, session_timeout: float = 0
) -> tuple[str, Any]:
    """A session on a free server registered under ``key``, and that server's ``host:port``; a
    ``ConnectionError`` when none is free within ``wait_s`` seconds.

    ``session_timeout`` (seconds, 0 for none) is the server's limit on the session.

    Examples
    --------
    >>> try:
    ...     request_server("127.0.0.1:1", "board", wait_s=1)
    ... except ConnectionError as err:
    ...     print(str(err).split(":")[0])
    no RPC tracker answers at 127.0.0.1
    """
    from tvm import rpc
    from tvm.rpc import base

    with _connect(address, wait_s) as sock:
        try:
            base.sendjson(sock, [base.TrackerCode.REQUEST, key, "", priority])
            answer = base.recvjson(sock)
        except TimeoutError:
            why = f"none was free within {wait_s:.0f} s"
            raise ConnectionError(f"the tracker at {address} gave no server for key {key!r}: {why}") from None
        except (OSError, ValueError, json.JSONDecodeError) as err:
            raise ConnectionError(f"the tracker at {address} gave no server for key {key!r}: {err}") from None
    if answer[0] != base.TrackerCode.SUCCESS:
        raise ConnectionError(f"the tracker at {address} refused the request for key {key!r}: {answer}")
    url, port, match_key = answer[1]
    done, session = call_within(wait_s, rpc.connect, url, port, match_key, session_timeout=session_timeout)
    if not done:  # a server still listed but dead, or one that accepts and never answers
        why = session or f"no answer within {wait_s:.0f} s"
        raise ConnectionError(f"the RPC server {url}:{port} for key {key!r} gave no session: {why}")
    return f"{url}:{port}", session


def call_within(seconds: float, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[bool, Any]:
    """Call ``fn`` in a thread and wait at most ``seconds``: ``(True, value)``, or ``(False, the
    exception, or None while it still waits)``. A socket read cannot be interrupted, so the
    thread is left to finish, or to end with the process.

    Examples
    --------
    >>> call_within(1.0, max, 2, 3)
    (True, 3)
    >>> done, why = call_within(1.0, int, "x")
    >>> done, type(why).__name__
    (False, 'ValueError')
    """
    import threading

    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except Exception as err:  # handed back
            box["error"] = err

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    return ("value" in box), box.get("value", box.get("error"))

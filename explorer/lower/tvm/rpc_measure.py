"""Tuning candidates measured on RPC servers: which server measured what, and what a dead server cost.

MetaSchedule's ``RPCRunner`` measures each candidate in a session on a server that the
tracker hands out, but it does not say which server, waits without limit for a free one, and
reports a server that died as a traceback. :func:`server_runner` measures the same way
(TVM's own upload, argument allocation, evaluator and cleanup), in a pool with a time limit,
and records in a :class:`ServerLog` how many candidates each server measured and lost.
Between batches the tuner asks the log which servers are gone (:meth:`ServerLog.check`):
their lost candidates are a note, not an error, and tuning goes on with the rest; with no
server left it stops, keeping its records.

Runs where TVM is (the worker); :func:`measure_candidate` runs in MetaSchedule's pool processes.

Examples
--------
>>> log = ServerLog("127.0.0.1:1", "board")
>>> log.note("10.0.0.2:9091", None); log.note("10.0.0.2:9091", "ConnectionError: reset")
>>> log.servers()
{'10.0.0.2:9091': {'measured': 1, 'lost': 1, 'gone': False}}
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["ServerLog", "measure_candidate", "server_runner"]


class ServerLog:
    """How many candidates each server measured and lost, and the notes tuning reports.

    Parameters
    ----------
    tracker : str
        ``HOST:PORT`` of the tracker.
    key : str
        The servers' key.

    Examples
    --------
    >>> ServerLog("127.0.0.1:1", "board").registered() is None  # no tracker answers there
    True
    """

    def __init__(self, tracker: str, key: str) -> None:
        self.tracker, self.key = tracker, key
        self.notes: list[str] = []
        self._lock = threading.Lock()
        self._measured: dict[str, int] = {}
        self._lost: dict[str, int] = {}
        self._gone: set[str] = set()

    def note(self, server: str | None, error: str | None) -> None:
        """Count one candidate: measured by ``server``, or lost there (``error``)."""
        name = server or "no server"
        with self._lock:
            counts = self._lost if error else self._measured
            counts[name] = counts.get(name, 0) + 1

    def servers(self) -> dict[str, dict[str, Any]]:
        """Server -> ``{"measured", "lost", "gone"}``, in the order they were first seen.

        Examples
        --------
        >>> log = ServerLog("127.0.0.1:1", "board"); log.note("a:1", None)
        >>> log.servers()["a:1"]["measured"]
        1
        """
        with self._lock:
            names = list(dict.fromkeys([*self._measured, *self._lost]))
            return {
                n: {
                    "measured": self._measured.get(n, 0),
                    "lost": self._lost.get(n, 0),
                    "gone": n in self._gone,
                }
                for n in names
            }

    def measured_line(self) -> str:
        """``measured on A ×9, B ×6`` for the progress report ('' before any candidate).

        Examples
        --------
        >>> log = ServerLog("127.0.0.1:1", "board"); log.note("a:1", None); log.note("b:2", None)
        >>> log.measured_line()
        'measured on a:1 ×1, b:2 ×1'
        """
        counts = [(n, c["measured"]) for n, c in self.servers().items() if c["measured"]]
        return "measured on " + ", ".join(f"{n} ×{k}" for n, k in counts) if counts else ""

    def registered(self) -> set[str] | None:
        """The servers registered under the key now (``host:port``), or None when the tracker is gone."""
        from explorer.lower.tvm.rpc_tracker import servers_under, tracker_summary

        try:
            return set(servers_under(tracker_summary(self.tracker), self.key))
        except (ConnectionError, ValueError):
            return None

    def check(self) -> bool:
        """After a batch: mark the servers that measured here and left the tracker as gone, note
        what they cost; True while a server is left to measure on.

        Examples
        --------
        >>> ServerLog("127.0.0.1:1", "board").check()  # no tracker: nothing left to measure on
        False
        """
        registered = self.registered()
        if registered is None:
            note = f"the tracker at {self.tracker} stopped answering: tuning stopped, its records kept"
            if note not in self.notes:
                self.notes.append(note)
            return False
        for name, counts in self.servers().items():
            if name == "no server" or name in self._gone or name in registered:
                continue
            with self._lock:
                self._gone.add(name)
            went_on = f"went on with {len(registered)} server(s)" if registered else "stopped: no server left"
            self.notes.append(
                f"server {name} died after measuring {counts['measured']} candidate(s): {counts['lost']} "
                f"lost; tuning {went_on} under key {self.key!r}"
            )
        return bool(registered)

    def gone(self) -> set[str]:
        """The servers :meth:`check` found gone."""
        with self._lock:
            return set(self._gone)


def measure_candidate(
    config: Any, wait_s: float, evaluator: Any, artifact_path: str, device_type: str, args_info: Sequence[Any]
) -> tuple[str | None, list[float] | None, str | None]:
    """Measure one built candidate on a server from the tracker (in MetaSchedule's pool).

    Returns
    -------
    tuple
        ``(server, run seconds, None)``, or ``(server or None, None, the first error in one line)``.

    Examples
    --------
    >>> from tvm.s_tir import meta_schedule as ms
    >>> config = ms.runner.RPCConfig(tracker_host="127.0.0.1", tracker_port=1, tracker_key="board",
    ...                              session_timeout_sec=10)
    >>> server, costs, error = measure_candidate(config, 2.0, None, "/no/such.so", "cpu", ())
    >>> server, costs, error.split(":")[0]  # no tracker there: an error in words, not an exception
    (None, None, 'ConnectionError')
    """
    import contextlib
    import os.path

    from tvm.s_tir.meta_schedule.runner import rpc_runner

    from explorer.lower.tvm.rpc_tracker import request_server

    server, session, remote = None, None, None
    try:
        server, session = request_server(
            f"{config.tracker_host}:{config.tracker_port}",
            config.tracker_key,
            wait_s,
            priority=config.session_priority,
            session_timeout=config.session_timeout_sec,
        )
        device = session.device(device_type, 0)
        remote = os.path.basename(artifact_path)
        module = rpc_runner.default_upload_module(session, artifact_path, remote)
        args = rpc_runner.default_alloc_argument(session, device, args_info, 1)
        costs = rpc_runner.default_run_evaluator(session, module, device, evaluator, args)
        return server, [float(c) for c in costs], None
    except Exception as err:  # the first error, not cleanup's on a dead session
        first = (str(err).strip().splitlines() or [""])[0]
        return server, None, f"{type(err).__name__}: {first}"
    finally:
        with contextlib.suppress(Exception):
            rpc_runner.default_cleanup(session, remote)


def server_runner(config: Any, log: ServerLog, wait_s: float, servers: int) -> Any:
    """A MetaSchedule runner measuring on the tracker's servers (``servers`` candidates at once),
    each candidate given ``wait_s`` for a free server plus the session's own time limit.

    Examples
    --------
    >>> from tvm.s_tir import meta_schedule as ms
    >>> config = ms.runner.RPCConfig(tracker_host="127.0.0.1", tracker_port=1, tracker_key="board",
    ...                              session_timeout_sec=10)
    >>> runner = server_runner(config, ServerLog("127.0.0.1:1", "board"), wait_s=5, servers=2)
    >>> type(runner).__name__
    'ServerRunner'
    """
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.runner import EvaluatorConfig, PyRunner, PyRunnerFuture, RunnerResult
    from tvm.support.popen_pool import PopenPoolExecutor

    limit = wait_s + float(config.session_timeout_sec)

    @derived_object
    class ServerFuture(PyRunnerFuture):
        def __init__(self, future: Any) -> None:
            super().__init__()
            self.future, self.out = future, None

        def done(self) -> bool:
            return self.future.done()

        def result(self) -> Any:
            if self.out is None:
                try:
                    server, costs, error = self.future.result()
                except TimeoutError:
                    server, costs, error = None, None, f"no answer within {limit:.0f} s"
                except Exception as err:  # the pool's process died
                    server, costs, error = None, None, f"{type(err).__name__}: {err}"
                log.note(server, error)
                where = server or "no server"
                self.out = (
                    RunnerResult(costs, None)
                    if error is None
                    else RunnerResult(None, f"RPCRunner on {where}: {error}")
                )
            return self.out

    @derived_object
    class ServerRunner(PyRunner):
        def __init__(self) -> None:
            super().__init__()
            self.evaluator = EvaluatorConfig._normalized(None)
            self.pool = PopenPoolExecutor(max_workers=max(1, servers), timeout=limit)

        def run(self, runner_inputs: Any) -> list[Any]:
            return [
                ServerFuture(
                    self.pool.submit(
                        measure_candidate,
                        config,
                        wait_s,
                        self.evaluator,
                        str(given.artifact_path),
                        str(given.device_type),
                        tuple(arg.as_json() for arg in given.args_info),
                    )
                )
                for given in runner_inputs
            ]

    return ServerRunner()

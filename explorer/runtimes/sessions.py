"""The worker's store of prepared sessions (ONNX Runtime sessions, TVM virtual machines, IREE VM
modules), and running, timing and profiling them.

Everything here runs inside the worker process (:mod:`explorer.isolation.worker`). A session is
prepared once, by its runtime's own module (:mod:`~explorer.runtimes.ort_prepare`,
:mod:`~explorer.runtimes.tvm_prepare`, :mod:`~explorer.runtimes.iree_prepare`,
:mod:`~explorer.runtimes.torch_prepare`), under a key the parent computes (the model, the
runtime and its options) and kept in this process, so running or timing it again costs no
session creation or compile; preparing the same key again returns at once (``reused``).
The worker keeps the last :data:`MAX_SESSIONS`; after a crash the worker is new and the
parent prepares again.

Timing happens here, next to the session, so a run's time is the runtime's and not the
pipe's: warm-up runs first, then runs until both a minimum count and a minimum time are
reached (or a maximum time is, whichever first, with at least three runs), each timed with
``time.perf_counter_ns``. Inputs are bound to the runtime once (TVM tensors made before the
clock starts), as ``onnxruntime_perf_test`` and TVM's ``time_evaluator`` do.

Examples
--------
>>> import numpy as np
>>> from explorer.isolation import worker
>>> from explorer import zoo
>>> from explorer.runtimes.ort_prepare import prepare_ort
>>> path = str(zoo.save("mlp"))
>>> info = worker.run(prepare_ort, path, "doc-mlp", {"optimization": "all"})
>>> feeds = {"input": np.zeros((1, 1, 28, 28), np.float32)}
>>> timed = worker.run(time_session, "doc-mlp", feeds, warmup=1, min_runs=5, min_seconds=0.0)
>>> info["runtime"], len(timed["times_ms"]) >= 5, timed["outputs"][0].shape
('ort', True, (1, 10))
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from explorer.core.errors import UsageError
from explorer.isolation import worker

__all__ = [
    "MAX_SESSIONS",
    "SessionGone",
    "run_session",
    "time_session",
    "has_session",
    "profile_session",
    "SETTLE_S",
    "REPORT_EVERY_S",
]

MAX_SESSIONS = 8
"""Prepared sessions a worker keeps (least recently used dropped first)."""


class SessionGone(KeyError):
    """The worker holds no session under that key (it was dropped, or the worker is new)."""


@dataclass
class _Session:
    """A prepared session: how to bind inputs, run, and read outputs; and what was measured preparing it."""

    bind: Callable[[Mapping[str, np.ndarray]], Any]
    call: Callable[[Any], Any]
    outputs: Callable[[Any], list[np.ndarray]]
    info: dict[str, Any]
    timer: Callable[[Any], float] | None = None
    """``timer(bound inputs)`` -> milliseconds of one run measured where it ran (a remote device),
    instead of the clock here around :attr:`call`."""
    profile: Callable[[str, Any, int], list[dict[str, Any]]] | None = None
    """``profile(model path, bound inputs, runs)`` -> one record per kernel call: ``name``, ``op``,
    ``ms``, ``run`` (ONNX Runtime profiles a second session made from the file)."""


_SESSIONS: OrderedDict[str, _Session] = OrderedDict()


def _keep(key: str, session: _Session) -> dict[str, Any]:
    _SESSIONS[key] = session
    _SESSIONS.move_to_end(key)
    while len(_SESSIONS) > MAX_SESSIONS:
        _SESSIONS.popitem(last=False)
    return {**session.info, "reused": False}


def _get(key: str) -> _Session:
    session = _SESSIONS.get(key)
    if session is None:
        raise SessionGone(key)
    _SESSIONS.move_to_end(key)
    return session


def has_session(key: str) -> bool:
    """Whether this worker holds a prepared session under ``key``.

    Examples
    --------
    >>> has_session("nothing-prepared-under-this-key")
    False
    """
    return key in _SESSIONS


def run_session(key: str, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Run the session under ``key`` once on ``feeds``; its outputs as numpy arrays.

    Raises
    ------
    SessionGone
        No session under that key in this worker.

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> from explorer.runtimes.ort_prepare import prepare_ort
    >>> path = str(zoo.save("mlp"))
    >>> _ = worker.run(prepare_ort, path, "doc-run-session", {})
    >>> worker.run(run_session, "doc-run-session", {"input": np.ones((1, 1, 28, 28), np.float32)})[0].shape
    (1, 10)
    """
    session = _get(key)
    return session.outputs(session.call(session.bind(feeds)))


SETTLE_S = 0.2
"""Pause before timing a session: the threads of the runtime timed just before (ONNX Runtime's
and TVM's pools spin after their work) go idle instead of competing with this one's."""

REPORT_EVERY_S = 0.25
"""At most one progress message this often while timing: each wakes the parent process."""


def time_session(
    key: str,
    feeds: Mapping[str, np.ndarray],
    *,
    warmup: int = 3,
    min_runs: int = 10,
    min_seconds: float = 1.0,
    max_seconds: float = 30.0,
) -> dict[str, Any]:
    """Time the session under ``key``: ``warmup`` runs, then runs until ``min_runs`` and
    ``min_seconds`` are both reached, or ``max_seconds`` is (with at least three runs).

    Returns
    -------
    dict
        ``{"times_ms": [one per timed run], "warmup_ms": [...], "outputs": [arrays of the last run]}``.

    Raises
    ------
    SessionGone
        No session under that key in this worker.

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> from explorer.runtimes.ort_prepare import prepare_ort
    >>> path = str(zoo.save("mlp"))
    >>> _ = worker.run(prepare_ort, path, "doc-time-session", {})
    >>> feeds = {"input": np.ones((1, 1, 28, 28), np.float32)}
    >>> timed = worker.run(time_session, "doc-time-session", feeds, warmup=1, min_runs=3, min_seconds=0.0)
    >>> len(timed["warmup_ms"]), len(timed["times_ms"]), timed["outputs"][0].shape
    (1, 3, (1, 10))
    """
    session = _get(key)
    bound = session.bind(feeds)
    result: Any = None
    warm = []
    time.sleep(SETTLE_S)  # the runtime timed before this one parks its spinning threads
    shown = [0.0]

    def report(share: float | None, message: str) -> None:  # a message costs the parent CPU time:
        now = time.perf_counter()  # at most a few a second, not one a run
        if now - shown[0] >= REPORT_EVERY_S:
            shown[0] = now
            worker.report(share, message)

    def one_run() -> float:
        nonlocal result
        if session.timer is not None:  # measured where it ran (a remote device)
            return session.timer(bound)
        started = time.perf_counter_ns()
        result = session.call(bound)
        return (time.perf_counter_ns() - started) / 1e6

    for i in range(max(0, warmup)):
        warm.append(one_run())
        report(None, f"warm-up {i + 1}/{warmup}")
    times: list[float] = []
    begun = time.perf_counter()
    while True:
        elapsed = time.perf_counter() - begun
        enough = len(times) >= min_runs and elapsed >= min_seconds
        if enough or (elapsed >= max_seconds and len(times) >= 3):
            break
        times.append(one_run())
        share = min(1.0, max(len(times) / max(min_runs, 1), elapsed / max(min_seconds, 1e-9)))
        report(min(share, 1.0), f"{len(times)} runs, {elapsed:.1f} s")
    if result is None:
        result = session.call(bound)
    return {"times_ms": times, "warmup_ms": warm, "outputs": session.outputs(result)}


def profile_session(path: str, key: str, feeds: Mapping[str, np.ndarray], runs: int = 10) -> dict[str, Any]:
    """Per-kernel times of the session under ``key`` (prepared from the model at ``path``) over
    ``runs`` runs (after one warm-up).

    Returns
    -------
    dict
        ``{"records": [{"name", "op", "ms", "run"}, ...], "runs", "run_ms": [total per run]}``:
        ONNX Runtime's node events (names of the graph it ran), or the Relax VM's calls
        (PrimFunc and runtime-function symbols).

    Raises
    ------
    SessionGone
        No session under that key in this worker.

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> from explorer.runtimes.ort_prepare import prepare_ort
    >>> path = str(zoo.save("mlp"))
    >>> _ = worker.run(prepare_ort, path, "doc-profile-session", {"optimization": "basic"})
    >>> feeds = {"input": np.ones((1, 1, 28, 28), np.float32)}
    >>> prof = worker.run(profile_session, path, "doc-profile-session", feeds, runs=2)
    >>> prof["runs"], sorted({r["op"] for r in prof["records"]})
    (2, ['Flatten', 'Gemm', 'Relu'])
    """
    session = _get(key)
    if session.profile is None:
        raise UsageError(
            f"session {key!r} cannot be profiled: it keeps no kernel profile (a TVM session on an RPC "
            "server); profile a session prepared on this machine (without rpc_tracker)"
        )
    bound = session.bind(feeds)
    records = session.profile(path, bound, max(1, int(runs)))
    totals: dict[int, float] = {}
    for record in records:
        totals[record["run"]] = totals.get(record["run"], 0.0) + record["ms"]
    return {"records": records, "runs": len(totals), "run_ms": [totals[k] for k in sorted(totals)]}

"""ONNX Runtime's worker-side preparation: a session per provider, level and threads, kept warm.

Runs in the worker (:mod:`explorer.isolation.worker`); the session goes to the store of
:mod:`explorer.runtimes.sessions`, which runs, times and profiles it. A model ONNX Runtime
refuses becomes the typed refusal :mod:`explorer.runtimes.ort_refusals` reads from its message.

Examples
--------
>>> from explorer.isolation import worker
>>> from explorer import zoo
>>> info = worker.run(prepare_ort, str(zoo.save("mlp")), "doc-ort-prepare", {"optimization": "basic"})
>>> info["runtime"], info["reused"]
('ort', False)
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from explorer.isolation.cpu_cores import physical_cores
from explorer.runtimes.ort_refusals import _refusal, ort_bad_tensor, ort_refusal
from explorer.runtimes.sessions import _get, _keep, _Session, has_session

__all__ = ["prepare_ort"]


def prepare_ort(path: str, key: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Create (or find) an ONNX Runtime session for ``path`` under ``key``.

    ``options``: ``provider`` (default ``CPUExecutionProvider``), ``optimization`` (a level
    of :data:`explorer.onnx_adapter.ort_run.ORT_LEVELS`, default ``all``), ``threads`` (intra-op, 0 =
    ONNX Runtime's default), ``strict_placement`` (``session.disable_cpu_ep_fallback`` for a
    provider other than the CPU's).

    Returns
    -------
    dict
        ``{"runtime": "ort", "prepare_s", "providers", "threads", "version", "reused"}``, or
        ONNX Runtime's refusal of the model (``{"ok": False, "runtime": "ort", "version",
        "provider", ...}`` with what :func:`ort_refusal` read from its message), or of a tensor
        whose stored values disagree with its shape (``{"ok": False, "runtime": "ort", "version",
        "bad_tensor"}``, :func:`ort_bad_tensor`).

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> path = str(zoo.save("mlp"))
    >>> first = worker.run(prepare_ort, path, "doc-prepare-ort", {"optimization": "basic", "threads": 1})
    >>> again = worker.run(prepare_ort, path, "doc-prepare-ort", {"optimization": "basic", "threads": 1})
    >>> first["runtime"], first["threads"], first["reused"], again["reused"]
    ('ort', 1, False, True)
    """
    if has_session(key):
        return {**_get(key).info, "reused": True}
    import onnxruntime as ort

    from explorer.onnx_adapter.ort_run import ort_session

    provider = str(options.get("provider", "CPUExecutionProvider"))
    threads = int(options.get("threads", 0) or 0)
    started = time.perf_counter()
    strict = bool(options.get("strict_placement")) and provider != "CPUExecutionProvider"
    config = {"session.disable_cpu_ep_fallback": "1"} if strict else None  # the CPU's own: a conflict
    try:
        session = ort_session(
            path, [provider], str(options.get("optimization", "all")), threads=threads, config=config
        )
    except Exception as err:  # the model's fault (no kernel, unknown op, a type) comes back as data
        bad_tensor = ort_bad_tensor(str(err))
        if bad_tensor is not None:  # a corrupt model file: the caller raises InvalidModelError (exit 2)
            return {"ok": False, "runtime": "ort", "version": ort.__version__, "bad_tensor": bad_tensor}
        refusal = ort_refusal(str(err), provider)
        if strict and "fallback to CPU EP has been explicitly disabled" in str(err):
            reason = f"some nodes would fall back to the CPU provider, and {provider} was asked for strictly "
            refusal = _refusal(None, None, None, "", reason + "(session.disable_cpu_ep_fallback=1)")
        if refusal is None:
            raise  # anything else is not the model's: it stays what it is
        return {"ok": False, "runtime": "ort", "version": ort.__version__, "provider": provider, **refusal}
    prepare_s = time.perf_counter() - started
    names = [o.name for o in session.get_outputs()]

    def profile(model_path: str, feeds: Any, runs: int) -> list[dict[str, Any]]:
        return _ort_profile(
            model_path, provider, str(options.get("optimization", "all")), threads, feeds, runs
        )

    info = {
        "runtime": "ort",
        "prepare_s": prepare_s,
        "providers": session.get_providers(),
        "threads": threads or physical_cores(),  # ONNX Runtime's default: one per physical core
        "version": ort.__version__,
    }
    return _keep(
        key,
        _Session(
            bind=dict,
            call=lambda feeds: session.run(names, feeds),
            outputs=lambda result: [np.asarray(r) for r in result],
            info=info,
            profile=profile,
        ),
    )


def _ort_profile(
    path: str, provider: str, optimization: str, threads: int, feeds: Any, runs: int
) -> list[dict[str, Any]]:
    """Per-node times from ONNX Runtime's profiler: a second session like the prepared one, with
    ``enable_profiling`` (the model file is read again: profiling is a session option)."""
    import json
    import tempfile

    from explorer.onnx_adapter.ort_run import ort_session

    with tempfile.TemporaryDirectory(prefix="ort-profile-") as folder:
        session = ort_session(
            path, [provider], optimization, threads=threads, profile_prefix=os.path.join(folder, "profile")
        )
        session.run(None, feeds)  # warm-up, discarded below
        for _ in range(runs):
            session.run(None, feeds)
        with open(session.end_profiling(), encoding="utf-8") as trace:
            events = json.load(trace)
    records = []
    run = -1  # each run's SequentialExecutor::Execute event starts before its node events
    for event in sorted(events, key=lambda e: (int(e.get("ts", 0)), e.get("cat") != "Session")):
        if event.get("cat") == "Session" and str(event.get("name", "")).endswith("Executor::Execute"):
            run += 1
        if event.get("cat") != "Node" or not str(event.get("name", "")).endswith("_kernel_time"):
            continue
        args = event.get("args", {})
        records.append(
            {
                "name": event["name"].removesuffix("_kernel_time"),
                "op": args.get("op_name", ""),
                "ms": float(event.get("dur", 0)) / 1000.0,
                "run": run,
                "provider": args.get("provider", ""),
                "output_bytes": int(args["output_size"]) if "output_size" in args else None,
            }
        )
    return [{**r, "run": r["run"] - 1} for r in records if r["run"] >= 1]  # run 0 was the warm-up

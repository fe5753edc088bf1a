"""TVM's worker-side preparation: import, (tuned) build and the Relax VM, here or on an RPC server.

Examples
--------
>>> RPC_REQUEST_TIMEOUT_S > 0, "tasks" in COMPILE_INFO
(True, True)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from explorer.core.errors import UsageError
from explorer.isolation.cpu_cores import tvm_threads
from explorer.runtimes.sessions import _get, _keep, _Session, has_session

__all__ = ["prepare_tvm", "COMPILE_INFO", "RPC_REQUEST_TIMEOUT_S"]


def prepare_tvm(
    path: str, key: str, input_shapes: Mapping[str, Sequence[int]] | None, options: Mapping[str, Any]
) -> dict[str, Any]:
    """Import, compile (tuned, or not) and load into a Relax VM the model at ``path`` under ``key``.

    ``options``: ``target`` (default ``llvm``: this CPU, or with ``rpc_tracker`` the server's
    own CPU when it can say, :func:`explorer.lower.tvm.relax_target.remote_target`); ``tune_trials``
    and ``tune_minutes`` (the budget; none: untuned), ``tune_every_task`` (every task without a
    record tuned too), ``schedules`` (untuned: ``"default"``, a
    default schedule per kernel, or ``"naive"``, the plain loops), ``tuning_root`` (where the
    tuning databases live; the database is the target's:
    :func:`explorer.lower.tvm.relax_tuning.tuning_dir`) and ``tuning_key`` (model, shapes and
    target: what ``tuned.json`` records), see :func:`explorer.lower.tvm.relax_tuning.compile_tuned`.

    Returns
    -------
    dict
        ``{"runtime": "tvm", "prepare_s", "compile_s", "tune_s", "trials", "tuned_before",
        "target", "threads", "version", "reused"}``, or the import's failure
        (``{"ok": False, ...}``, see :func:`explorer.lower.tvm.relax_frontend.import_relax`).

    Examples
    --------
    Compiling with TVM takes seconds, so it is not run here:

    >>> import numpy as np
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> path = str(zoo.save("mlp"))
    >>> shapes = {"input": [1, 1, 28, 28]}
    >>> info = worker.run(prepare_tvm, path, "doc-prepare-tvm", shapes, {})  # doctest: +SKIP
    >>> info["runtime"], info["reused"]  # doctest: +SKIP
    ('tvm', False)
    """
    if has_session(key):
        return {**_get(key).info, "reused": True}
    # TVM's own import (seconds) is the process's cost, not the model's: before the clock starts
    import tvm.relax.frontend.onnx

    from explorer.lower.tvm.relax_compile import compile_relax, relax_outputs

    started = time.perf_counter()
    target, servers = str(options.get("target", "llvm")), []
    if options.get("rpc_tracker"):  # before anything compiles: no tracker or no server is a clear error
        from explorer.lower.tvm.rpc_tracker import registered_servers

        servers = registered_servers(str(options["rpc_tracker"]), str(options["rpc_key"]))
        target = _server_target(options) if target == "llvm" else target
    elif target != "llvm":  # a named CPU runs here: refuse one this CPU cannot run before it stops the worker
        from explorer.lower.tvm.relax_target import cpu_target, runs_here

        why = runs_here(cpu_target(target))
        if why is not None:  # the user's choice of target: a UsageError (a ValueError), exit 2 in the CLI
            raise UsageError(
                f"TVM target {target!r} cannot run on this machine: {why}; run it on a server that can "
                "(rpc_tracker / --rpc-tracker) or name a CPU this one runs"
            )
    trials, minutes = int(options.get("tune_trials") or 0), options.get("tune_minutes")
    if trials > 0 or minutes or options.get("pretuned"):
        from explorer.lower.tvm.relax_tuning import compile_tuned, tuning_dir

        rpc = {**options, "rpc_servers": len(servers)} if servers else None
        compiled = compile_tuned(
            path,
            input_shapes,
            target,
            trials=trials or int(float(minutes or 0) * 60),  # the minutes stop it first
            minutes=float(minutes) if minutes else None,
            work_dir=str(tuning_dir(target, options.get("tuning_root"))),  # one database per target
            key=str(options["tuning_key"]),
            pretuned=bool(options.get("pretuned")),
            rpc=rpc,
            every_task=bool(options.get("tune_every_task")),
        )
    elif options.get("schedules", "default") == "default":  # untuned: a default schedule per kernel
        from explorer.lower.tvm.relax_tuning import compile_tuned

        compiled = compile_tuned(
            path,
            input_shapes,
            target,
            trials=0,
            minutes=None,
            work_dir=None,  # no database: every task its default schedule
            key="untuned",
            fast_math=False,  # untuned keeps the exact functions; only the schedules differ
        )
    else:  # the plain loops of TVM's default pipeline
        compiled = compile_relax(path, input_shapes, target)
    if not compiled["ok"]:
        return compiled
    import tvm
    from tvm import relax

    if options.get("rpc_tracker"):
        return _keep(key, _remote_session(compiled, options, started))
    machine = relax.VirtualMachine(compiled["executable"], tvm.cpu())
    main = machine["main"]

    def profile(model_path: str, args: Any, runs: int) -> list[dict[str, Any]]:
        from explorer.lower.tvm.vm_instrument import vm_call_times  # TVM's instrument, only in a TVM worker

        return vm_call_times(machine, args, runs)

    info = {
        "runtime": "tvm",
        "ok": True,
        "prepare_s": time.perf_counter() - started,
        "compile_s": compiled["compile_s"],
        **{k: compiled[k] for k in COMPILE_INFO if k in compiled},
        "target": compiled["target"],
        "threads": tvm_threads(),
        "version": compiled["tvm"],
    }
    return _keep(
        key,
        _Session(
            bind=lambda feeds: [tvm.runtime.tensor(np.ascontiguousarray(v)) for v in feeds.values()],
            call=lambda args: main(*args),
            outputs=relax_outputs,
            info=info,
            profile=profile,
        ),
    )


COMPILE_INFO = (
    "tune_s",
    "trials",
    "trials_run",
    "tuned_before",
    "out_of_time",
    "tasks",
    "tasks_with_records",
    "task_schedules",
    "task_gflop",
    "passes",
    "defaults_failed",
    "defaults_rejected",
    "records_rejected",
    "rpc_servers",
    "rpc_notes",
    "errors",
    "plan",
    "shipped",
    "tuning_dir",
)
"""What a TVM session's info reports of its compile and tuning (from ``compile_tuned``)."""

RPC_REQUEST_TIMEOUT_S = 60.0
"""Seconds to wait for the tracker to hand out a server before giving up with a clear error."""


def _server_target(options: Mapping[str, Any]) -> str:
    """The target of the servers under the key: one server asked for its CPU (triple, CPU,
    threads); ``llvm`` (this CPU) when it has TVM's runtime only and cannot say."""
    from explorer.lower.tvm.relax_target import remote_target
    from explorer.lower.tvm.rpc_tracker import request_server

    tracker, key = str(options["rpc_tracker"]), str(options["rpc_key"])
    _, session = request_server(tracker, key, float(options.get("rpc_timeout", RPC_REQUEST_TIMEOUT_S)))
    try:
        return remote_target(session) or "llvm"
    finally:
        del session  # the server is free for the candidates again


def _remote_session(compiled: Mapping[str, Any], options: Mapping[str, Any], started: float) -> _Session:
    """Upload the compiled library to a server from the tracker, and run and time it there."""
    import tempfile

    import tvm
    from tvm import relax

    from explorer.lower.tvm.relax_compile import relax_outputs
    from explorer.lower.tvm.rpc_tracker import call_within, request_server

    tracker, key = str(options["rpc_tracker"]), str(options["rpc_key"])  # prepare_tvm checked both
    _, remote = request_server(tracker, key, float(options.get("rpc_timeout", RPC_REQUEST_TIMEOUT_S)))
    folder = tempfile.mkdtemp(prefix="explorer-rpc-")
    library = os.path.join(folder, "model.so")
    compiled["executable"].export_library(library)
    remote.upload(library)
    device = remote.cpu()
    machine = relax.VirtualMachine(remote.load_module("model.so"), device)
    evaluator = machine.time_evaluator("main", device, number=1, repeat=1)

    limit = float(options.get("rpc_timeout", RPC_REQUEST_TIMEOUT_S))

    def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` with a time limit: a server that died may leave a call waiting on its socket."""

        def call(*args: Any) -> Any:
            done, value = call_within(limit, fn, *args)
            if done:
                return value
            why = value or f"no answer within {limit:.0f} s"
            raise ConnectionError(f"the RPC server for key {key!r} (tracker {tracker}) failed: {why}")

        return call

    info = {
        "runtime": "tvm",
        "ok": True,
        "prepare_s": time.perf_counter() - started,
        **{k: compiled[k] for k in ("compile_s", *COMPILE_INFO) if k in compiled},
        "target": compiled["target"],
        "threads": 0,
        "version": compiled["tvm"],
        "rpc": f"{key}@{tracker}",
    }
    main = machine["main"]
    return _Session(
        bind=guarded(
            lambda feeds: [tvm.runtime.tensor(np.ascontiguousarray(v), device=device) for v in feeds.values()]
        ),
        call=guarded(lambda args: main(*args)),
        outputs=guarded(relax_outputs),
        info=info,
        timer=guarded(lambda args: float(evaluator(*args).mean) * 1e3),
    )

"""Tune a Relax module with MetaSchedule under a budget, and compile it with what the database holds.

Runs where TVM is (the worker). The tuning database is a MetaSchedule JSON database in a
folder per target (:func:`tuning_dir`), shared by every model: a task (a fused PrimFunc)
that two models share, on the same target, is the same task, and its schedule is found in
the database without tuning it again. A record of which model and shapes were tuned with
how many trials (``tuned.json`` beside the database) lets a second run of the same model
skip tuning and only apply the database. The budget is a number of trials and/or minutes;
tuning reports its progress (trials done, best time per task) and stops at the minute
budget, keeping every record committed so far; so does a tuning interrupted from the
parent (the worker is stopped, the database stays).

Examples
--------
>>> tuning_dir("llvm -mcpu=znver3").name
'llvm-mcpu-znver3'
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import worker

__all__ = [
    "tuning_dir",
    "compile_tuned",
    "build_candidate",
    "register_cpu_intrinsics",
    "TUNING_RECORD",
    "tuned_trials",
    "BUILD_TIMEOUT_S",
]

BUILD_TIMEOUT_S = 120.0
"""Seconds MetaSchedule's local builder and runner give one candidate."""

TUNING_RECORD = "tuned.json"
"""Beside the database: model-and-shapes key -> trials it was tuned with."""


def tuning_dir(target: str, root: str | os.PathLike[str] | None = None) -> Path:
    """The folder of the tuning database for ``target`` (made on first use by the tuner).

    ``root`` defaults to ``$ONNX_EXPLORER_CACHE/tvm-tuning``, else
    ``~/.cache/onnx-graph-explorer/tvm-tuning``.

    Examples
    --------
    >>> tuning_dir("llvm", "/tmp/t").as_posix()
    '/tmp/t/llvm'
    """
    if root is None:
        base = os.environ.get("ONNX_EXPLORER_CACHE") or os.path.join(
            os.path.expanduser("~"), ".cache", "onnx-graph-explorer"
        )
        root = os.path.join(base, "tvm-tuning")
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", target).strip("-") or "target"
    return Path(root) / slug


def tuned_trials(work_dir: str | os.PathLike[str], key: str) -> int:
    """Trials ``key`` (a model, its shapes and the target) was tuned with in ``work_dir`` (0: never).

    Examples
    --------
    >>> tuned_trials("/nonexistent", "k")
    0
    """
    path = Path(work_dir) / TUNING_RECORD
    try:
        return int(json.loads(path.read_text()).get(key, 0))
    except (OSError, ValueError):
        return 0


def _record(work_dir: Path, key: str, trials: int) -> None:
    from ..io import write_bytes_atomic

    path = work_dir / TUNING_RECORD
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    known[key] = max(int(known.get(key, 0)), trials)
    write_bytes_atomic(json.dumps(known, indent=1, sort_keys=True).encode(), path)


def register_cpu_intrinsics() -> None:
    """Register only this CPU's tensor intrinsics (x86 or Arm), not every platform's.

    ``import tvm.s_tir.tensor_intrin`` registers CUDA, ROCm, Hexagon, Metal, RISC-V, Arm and
    x86 intrinsics: 35-55 s on this machine (CUDA's alone 31 s). MetaSchedule imports it in
    every tuning process (``TuneContext``) and in every builder process, and the builder's
    pool restarts for every batch: a trial cost 20 s instead of about 1. Installing the
    package as a bare namespace first and importing this CPU's module alone takes 0.3 s;
    the later ``import tvm.s_tir.tensor_intrin`` then finds it.

    Examples
    --------
    >>> register_cpu_intrinsics()
    >>> import sys; "tvm.s_tir.tensor_intrin" in sys.modules
    True
    """
    import importlib
    import importlib.util
    import platform
    import sys
    import types

    name = "tvm.s_tir.tensor_intrin"
    if name not in sys.modules:
        import tvm.s_tir  # noqa: F401  (the parent package, loaded as usual)

        spec = importlib.util.find_spec(name)
        package = types.ModuleType(name)
        package.__path__ = list(spec.submodule_search_locations or []) if spec else []
        package.__package__ = name
        sys.modules[name] = package
    machine = platform.machine().lower()
    importlib.import_module(f"{name}.{'arm_cpu' if machine in ('aarch64', 'arm64') else 'x86'}")


def build_candidate(mod: Any, target: Any, _params: Any = None) -> Any:
    """MetaSchedule's default candidate build, with only this CPU's tensor intrinsics registered
    (:func:`register_cpu_intrinsics`; the default registers every platform's, per batch).

    Examples
    --------
    >>> build_candidate.__name__
    'build_candidate'
    """
    register_cpu_intrinsics()
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def _progress_callback(total: int, minutes: float | None) -> Any:
    """A MetaSchedule measure callback: progress to the parent, and a stop at the minute budget."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    @derived_object
    class Progress(PyMeasureCallback):
        def __init__(self) -> None:
            super().__init__()
            self.started = time.perf_counter()
            self.trials = 0
            self.best: dict[int, float] = {}
            self.out_of_time = False
            self.errors: list[str] = []

        def apply(self, task_scheduler: Any, task_id: int, candidates: Any, builds: Any, runs: Any) -> None:
            self.trials += len(candidates)
            errors = [b.error_msg for b in builds if b.error_msg] + [r.error_msg for r in runs if r.error_msg]
            if errors:
                self.errors.append(errors[0])
            for result in runs:
                secs = [float(s) for s in (result.run_secs or [])]
                if secs and result.error_msg is None:
                    self.best[task_id] = min(self.best.get(task_id, float("inf")), sum(secs) / len(secs))
            best = self.best.get(task_id)
            shown = f", best {best * 1e3:.3f} ms" if best is not None else ""
            worker.report(
                min(1.0, self.trials / max(total, 1)),
                f"task {task_id}: {self.trials}/{total} trials{shown}, {len(self.best)} tasks measured",
            )
            if (
                minutes is not None
                and not self.out_of_time
                and time.perf_counter() - self.started > minutes * 60
            ):
                self.out_of_time = True  # stop every other task (the current one cannot be, mid-batch;
                for task in range(len(task_scheduler.tasks_)):  # its per-task cap ends it soon)
                    if task != task_id:
                        with contextlib.suppress(Exception):  # one already finished
                            task_scheduler.terminate_task(task)
                worker.report(1.0, f"tuning budget of {minutes:g} min spent: {self.trials} trials")

    return Progress()


def compile_tuned(
    path: str,
    input_shapes: Mapping[str, Sequence[int]] | None,
    target: str,
    *,
    trials: int,
    minutes: float | None,
    work_dir: str,
    key: str,
    per_task: int | None = None,
) -> dict[str, Any]:
    """Import ``path``, tune it (unless ``key`` was tuned with at least ``trials`` before), apply the
    database and compile.

    Returns
    -------
    dict
        ``{"ok": True, "executable", "compile_s", "tune_s", "trials", "tuned_before",
        "out_of_time", "tasks", "tvm", "target"}``, or the import's failure.

    Examples
    --------
    >>> compile_tuned.__name__
    'compile_tuned'
    """
    from .relax_steps import _import_module, _target

    imported = _import_module(path, input_shapes)
    if not imported["ok"]:
        return imported
    import tvm
    from tvm import relax
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.measure_callback import MeasureCallback

    built_for = _target(target)
    register_cpu_intrinsics()  # before MetaSchedule imports every platform's (about a minute here)
    folder = Path(work_dir)
    folder.mkdir(parents=True, exist_ok=True)
    with built_for:
        mod = tvm.transform.Sequential(
            [
                relax.transform.DecomposeOpsForInference(),
                relax.transform.CanonicalizeBindings(),
                relax.pipeline.zero_pipeline(),
            ]
        )(imported["module"])
    tasks = ms.relax_integration.extract_tasks(mod, built_for)
    before = tuned_trials(folder, key)
    tune_s, out_of_time = 0.0, False
    if trials > 0 and before < trials:
        callback = _progress_callback(trials, minutes)
        started = time.perf_counter()
        ms.relax_integration.tune_relax(
            mod,
            {},
            built_for,
            str(folder),
            max_trials_global=trials,
            # with a minute budget, a cap per task bounds what the task running at the deadline adds
            max_trials_per_task=per_task
            or (max(8, 2 * -(-trials // max(len(tasks), 1))) if minutes else None),
            num_trials_per_iter=min(64, max(4, trials // max(len(tasks), 1))),
            measure_callbacks=[*MeasureCallback.create("default"), callback],
            # 30 s (the default) is too little for a build on 2 busy cores
            builder=ms.builder.LocalBuilder(timeout_sec=BUILD_TIMEOUT_S, f_build=build_candidate),
            runner=ms.runner.LocalRunner(timeout_sec=BUILD_TIMEOUT_S),
        )
        out_of_time = callback.out_of_time  # the records committed so far are in the database
        tune_s = time.perf_counter() - started
        _record(folder, key, trials)
    started = time.perf_counter()
    with built_for:
        mod = relax.transform.MetaScheduleApplyDatabase(str(folder))(mod)
    executable = tvm.compile(mod, target=built_for)
    return {
        "ok": True,
        "executable": executable,
        "compile_s": time.perf_counter() - started,
        "tune_s": tune_s,
        "trials": trials,
        "tuned_before": before >= trials > 0,
        "out_of_time": out_of_time,
        "errors": list(callback.errors[:3]) if trials > 0 and before < trials else [],
        "tasks": len(tasks),
        "tvm": tvm.__version__,
        "target": str(built_for),
    }

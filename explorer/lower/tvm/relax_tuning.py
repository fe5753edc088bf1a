"""Tune a Relax module with MetaSchedule under a budget, and compile it with what the database holds.

Runs where TVM is (the worker). The tuning database is a MetaSchedule JSON database in a
folder per target (:func:`tuning_dir`), shared by every model: a task (a fused PrimFunc)
that two models share, on the same target, is the same task, and its schedule is found in
the database without tuning it again. A record of which model and shapes were tuned with how
many trials (``tuned.json`` beside the database: :mod:`explorer.lower.tvm.tuning_log`) lets a
second run of the same model skip tuning and only apply the database. The budget is a number
of trials and/or minutes; tuning reports its progress (trials done, best time per task) and
stops at the minute budget, keeping every record committed so far; so does a tuning
interrupted from the parent (the worker is stopped, the database stays).

Examples
--------
>>> tuning_dir("llvm -mcpu=znver3").name
'llvm-mcpu-znver3'
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from explorer.core.errors import UsageError
from explorer.isolation import worker
from explorer.isolation.io import cache_folder
from explorer.lower.pass_failures import PassWatch
from explorer.lower.tvm.default_schedules import default_database, with_defaults
from explorer.lower.tvm.relax_exprs import tensor_dims, tensor_dtype
from explorer.lower.tvm.relax_frontend import import_origins, run_importer
from explorer.lower.tvm.relax_passes import ZERO_PIPELINE, relax_pass
from explorer.lower.tvm.relax_target import cpu_target, float32_lanes, register_cpu_intrinsics, runs_here
from explorer.lower.tvm.rpc_measure import ServerLog, server_runner
from explorer.lower.tvm.rpc_tracker import tracker_address
from explorer.lower.tvm.schedule_check import CHECKS_FOLDER, checked_records
from explorer.lower.tvm.tuning_log import record_trials, tuned_trials
from explorer.lower.tvm.tuning_plan import (
    FIRST_ROUND_TRIALS,
    TUNED_GFLOPS_PER_CORE,
    TaskTime,
    expected_trials,
    plan_tasks,
)
from explorer.lower.tvm.tvm_records import seed_database
from explorer.lower.tvm.vm_instrument import time_per_symbol, vm_call_times

__all__ = [
    "tuning_dir",
    "compile_tuned",
    "tuning_module",
    "TUNING_PASSES",
    "FAST_MATH_PASSES",
    "tuning_passes",
    "PREPACKED_SUFFIX",
    "finish_tuned",
    "measure_tasks",
    "flop_times",
    "POPULATION",
    "TRIALS_PER_ITER",
    "build_candidate",
    "BUILD_TIMEOUT_S",
]

BUILD_TIMEOUT_S = 120.0
"""Seconds MetaSchedule's local builder and runner give one candidate."""


def tuning_dir(target: str, root: str | os.PathLike[str] | None = None) -> Path:
    """The folder of the tuning database for ``target`` (made on first use by the tuner).

    ``root`` defaults to ``$ONNX_EXPLORER_CACHE/tvm-tuning``, else
    ``~/.cache/onnx-graph-explorer/tvm-tuning``, made and checked writable
    (:func:`explorer.isolation.io.cache_folder`: a variable naming a file, or a folder that cannot be
    written, is a :class:`~explorer.core.errors.UsageError` naming it).

    Examples
    --------
    >>> tuning_dir("llvm", "/tmp/t").as_posix()
    '/tmp/t/llvm'
    """
    if root is None:
        root = cache_folder("tvm-tuning")
    from explorer.lower.tvm.relax_target import parse_target, target_text

    with contextlib.suppress(ValueError):  # one folder per target, however its flags are ordered
        target = target_text(parse_target(target))  # (one this project cannot build is named as given)
    slug = re.sub(r"[^A-Za-z0-9.+]+", "-", target).strip("-") or "target"  # keeps -mattr=+avx2 apart
    return Path(root) / slug


def build_candidate(mod: Any, target: Any, _params: Any = None) -> Any:
    """MetaSchedule's default candidate build, with only this CPU's tensor intrinsics registered
    (:func:`explorer.lower.tvm.relax_target.register_cpu_intrinsics`; the default registers every
    platform's, per batch).

    Examples
    --------
    >>> from tvm.s_tir import meta_schedule as ms
    >>> from explorer import zoo
    >>> from explorer.lower.tvm.relax_frontend import run_importer
    >>> from explorer.lower.tvm.relax_target import (
    ...     cpu_target, float32_lanes, register_cpu_intrinsics, runs_here)
    >>> target = cpu_target()
    >>> module = tuning_module(run_importer(zoo.build("mlp"), {"input": [1, 1, 28, 28]})["module"], target)
    >>> task = ms.relax_integration.extract_tasks(module, target)[0]
    >>> build_candidate(task.dispatched[0], target).kind
    'llvm'
    """
    register_cpu_intrinsics()
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def _progress_callback(
    total: int,
    minutes: float | None,
    ends: float | None,
    names: Sequence[str],
    servers: ServerLog | None = None,
    stop: threading.Event | None = None,
) -> Any:
    """A MetaSchedule measure callback: progress to the parent (trials, or time when the minutes
    end first; the best time per task; with RPC, which server measured how many). The minute
    budget (``ends``, epoch seconds) is kept by the search strategy (:func:`_deadline_search`);
    with RPC, a server gone costs its candidates (a note, not an error), and ``stop`` is set
    when none is left."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    started = time.time()

    @derived_object
    class Progress(PyMeasureCallback):
        def __init__(self) -> None:
            super().__init__()
            self.trials = 0
            self.best: dict[int, float] = {}
            self.out_of_time = False
            self.errors: list[str] = []
            self.servers = servers  # with RPC: who measured what, and the notes

        def apply(self, task_scheduler: Any, task_id: int, candidates: Any, builds: Any, runs: Any) -> None:
            self.out_of_time = ends is not None and time.time() > ends
            self.trials += len(candidates)
            run_errors = [r.error_msg for r in runs if r.error_msg]
            if servers is not None:
                if not servers.check() and stop is not None:  # no server left: tuning ends here
                    stop.set()
                gone = servers.gone()  # their candidates are a note (ServerLog.notes), not an error
                run_errors = [e for e in run_errors if not any(f" on {g}:" in e for g in gone)]
            errors = [b.error_msg for b in builds if b.error_msg] + run_errors
            if errors and not self.out_of_time:
                self.errors.append(errors[0])
            for result in runs:
                secs = [float(s) for s in (result.run_secs or [])]
                if secs and result.error_msg is None:
                    self.best[task_id] = min(self.best.get(task_id, float("inf")), sum(secs) / len(secs))
            best = self.best.get(task_id)
            shown = f", best {best * 1e3:.3f} ms" if best is not None else ""
            done = self.trials / max(total, 1)
            if ends is not None:
                done = max(done, (time.time() - started) / max(ends - started, 1e-9))
            name = names[task_id] if task_id < len(names) else str(task_id)
            where = f"; {servers.measured_line()}" if servers is not None and servers.measured_line() else ""
            if self.out_of_time:
                worker.report(1.0, f"tuning budget of {minutes:g} min spent: {self.trials} trials")
            else:
                worker.report(
                    min(1.0, done),
                    f"{name} ({task_id + 1}/{len(names)}): {self.trials} trials{shown}{where}",
                )

    return Progress()


POPULATION = 256
"""Evolutionary search population per task (the default, 512, costs seconds a batch on 2 cores)."""

TRIALS_PER_ITER = FIRST_ROUND_TRIALS
"""Candidates per batch (16): the cost model learns after each, and a batch is the most the deadline
overshoots; the plan counts one as what covering a task costs."""


TUNING_PASSES = (
    "DecomposeOpsForInference",
    "CanonicalizeBindings",
    "FastGelu",
    "FastMathTransform",
    *ZERO_PIPELINE,
    "AttachAttrLayoutFreeBuffers",
)
"""The passes before tuning (:func:`tuning_module`), by their ``relax.transform`` names."""

FAST_MATH_PASSES = ("FastGelu", "FastMathTransform")
"""The passes of :data:`TUNING_PASSES` that trade exactness for speed (left out with ``fast_math=False``)."""


def tuning_module(module: Any, target: Any, fast_math: bool = True) -> Any:
    """The module MetaSchedule tunes (:data:`TUNING_PASSES`): inference ops decomposed, GELU,
    erf, exp, tanh and softmax in TVM's vectorisable approximations (:mod:`explorer.lower.tvm.fast_math`;
    ``erf`` is otherwise a scalar C library call per element), fused (the zero pipeline), and
    the weights marked layout-free, so a tuned kernel may ask for its
    weights in another layout and the build packs them once (CPU weight prepacking:
    :func:`finish_tuned`). ``fast_math=False`` keeps the exact functions
    (:data:`FAST_MATH_PASSES` left out): the untuned build, which has no records to match.

    Examples
    --------
    >>> from explorer import zoo
    >>> from explorer.lower.tvm.relax_frontend import run_importer
    >>> from explorer.lower.tvm.relax_graph_data import module_counts
    >>> from explorer.lower.tvm.relax_target import (
    ...     cpu_target, float32_lanes, register_cpu_intrinsics, runs_here)
    >>> imported = run_importer(zoo.build("mlp"), {"input": [1, 1, 28, 28]})["module"]
    >>> counts = module_counts(tuning_module(imported, cpu_target()))
    >>> counts["fused"], counts["prim_funcs"]  # three Gemm (+ReLU) kernels fused, and the reshape
    (3, 4)
    """
    import tvm

    with target:
        return tvm.transform.Sequential([relax_pass(name) for name in tuning_passes(fast_math)])(module)


def tuning_passes(fast_math: bool = True) -> list[str]:
    """The passes :func:`tuning_module` runs: :data:`TUNING_PASSES`, without the fast-math ones
    when ``fast_math`` is False.

    Examples
    --------
    >>> "FastGelu" in tuning_passes(), "FastGelu" in tuning_passes(fast_math=False)
    (True, False)
    """
    return [name for name in TUNING_PASSES if fast_math or name not in FAST_MATH_PASSES]


PREPACKED_SUFFIX = "_prepacked"
"""What :func:`finish_tuned` appends to a kernel whose weights it repacked."""


def finish_tuned(module: Any, target: Any, work_dir: str) -> Any:
    """Apply the database, then split each kernel's weight-layout rewrite out and fold it on the
    constant weights: the weights are repacked once, at build time, not at every call, one weight at
    a time (:func:`~explorer.lower.tvm.weight_prepack.fold_weight_prepacks`), then the rest folded.

    Examples
    --------
    >>> import tempfile
    >>> from explorer import zoo
    >>> from explorer.lower.tvm.relax_frontend import run_importer
    >>> from explorer.lower.tvm.relax_target import (
    ...     cpu_target, float32_lanes, register_cpu_intrinsics, runs_here)
    >>> target = cpu_target()
    >>> module = tuning_module(run_importer(zoo.build("mlp"), {"input": [1, 1, 28, 28]})["module"], target)
    >>> finished = finish_tuned(module, target, tempfile.mkdtemp())  # an empty database: nothing tuned
    >>> [gv.name_hint for gv in finished.functions if gv.name_hint.endswith(PREPACKED_SUFFIX)]
    []
    """
    import tvm
    from tvm import relax

    from explorer.lower.tvm.weight_prepack import fold_weight_prepacks

    with target:
        split = tvm.transform.Sequential(
            [relax.transform.MetaScheduleApplyDatabase(work_dir), relax.transform.SplitLayoutRewritePreproc()]
        )(module)
        return relax.transform.FoldConstant()(fold_weight_prepacks(split, target))


def measure_tasks(
    module: Any, tasks: Sequence[Any], target: Any, defaults: Any = None, records: Any = None
) -> list[Any]:
    """Compile ``module`` as it stands and time each task's calls in one inference on generated inputs.

    With ``defaults`` (a :class:`~explorer.lower.tvm.default_schedules.DefaultDatabase`) each task
    runs its default schedule, the kernel a build without a record would have: the plan then
    spends trials where tuning can gain over that, not over plain loops.
    With ``records`` (a MetaSchedule database: tuning on from records) a task that has one runs
    its record instead, and is marked ``recorded``: the plan then spends trials on the tasks that
    are still slow.

    Returns
    -------
    list of TaskTime
        One per task, in ``tasks``' order.

    Examples
    --------
    >>> from tvm.s_tir import meta_schedule as ms
    >>> from explorer import zoo
    >>> from explorer.lower.tvm.relax_frontend import run_importer
    >>> from explorer.lower.tvm.relax_target import (
    ...     cpu_target, float32_lanes, register_cpu_intrinsics, runs_here)
    >>> target = cpu_target()
    >>> module = tuning_module(run_importer(zoo.build("mlp"), {"input": [1, 1, 28, 28]})["module"], target)
    >>> times = measure_tasks(module, ms.relax_integration.extract_tasks(module, target), target)
    >>> [(t.name, t.calls) for t in times][-1], all(t.current_ms >= 0 for t in times)
    (('reshape1', 1), True)
    """
    import numpy as np
    import tvm
    from tvm import relax

    from explorer.onnx_adapter.inputs import random_array

    recorded = tasks_with_records(records, tasks, target)
    if defaults is None and records is None:
        executable = tvm.compile(module, target=target)
    else:
        if records is None or defaults is None:
            database = records if defaults is None else defaults.database
        else:  # records first, a default schedule for the rest
            database = with_defaults(records, defaults)
        with database:  # the current database: MetaScheduleApplyDatabase reads no folder
            executable = tvm.compile(finish_tuned(module, target, ""), target=target)
    machine = relax.VirtualMachine(executable, tvm.cpu())
    rng = np.random.default_rng(0)
    args = [
        tvm.runtime.tensor(random_array([int(d) for d in tensor_dims(p.ty)], tensor_dtype(p.ty), rng))
        for p in module["main"].params
    ]
    # one untimed run first: the first kernel's first call would carry the thread pool's start-up
    # (44 ms on MobileNetV2's first convolution, more than the rest of the model)
    per_symbol = {
        symbol.removesuffix(PREPACKED_SUFFIX): found  # a kernel whose weights the build repacked
        for symbol, found in time_per_symbol(vm_call_times(machine, args, runs=1)).items()
    }
    times = []
    for task in tasks:
        calls, ms = per_symbol.get(task.task_name, (int(task.weight), 0.0))
        times.append(
            TaskTime(task.task_name, int(calls), _task_gflop(task), float(ms), task.task_name in recorded)
        )
    return times


def tasks_with_records(database: Any, tasks: Sequence[Any], target: Any) -> set[str]:
    """The names of the tasks ``database`` (a MetaSchedule database, or None) holds a record for.

    Examples
    --------
    >>> tasks_with_records(None, [], "llvm")
    set()
    """
    if database is None:
        return set()
    return {
        t.task_name
        for t in tasks
        if database.has_workload(t.dispatched[0])
        and database.query_tuning_record(t.dispatched[0], target, t.task_name) is not None
    }


def flop_times(tasks: Sequence[Any], cores: int, recorded: Collection[str] = ()) -> list[Any]:
    """Each task's time estimated from its FLOPs (at a quarter of the tuned rate), where its code
    cannot run here to be timed (a server's CPU): the plan then ranks tasks by their work.
    ``recorded`` names the tasks the database has a record for.

    Examples
    --------
    >>> flop_times([], cores=2)
    []
    """

    rate = TUNED_GFLOPS_PER_CORE * max(cores, 1) / 4  # GFLOP/s: ms = GFLOP / rate * 1e3
    times = []
    for task in tasks:
        calls, gflop = int(task.weight), _task_gflop(task)
        estimate = calls * gflop / rate * 1e3
        times.append(TaskTime(task.task_name, calls, gflop, estimate, task.task_name in recorded))
    return times


def _task_gflop(task: Any) -> float:
    """A task's GFLOP per call, as TVM estimates it from its TIR (0 for a kernel it cannot read)."""
    from tvm.s_tir.analysis import estimate_tir_flops

    try:
        return float(estimate_tir_flops(task.dispatched[0])) / 1e9
    except Exception:  # a kernel the estimate cannot read counts as memory-bound
        return 0.0


def _runner(rpc: Mapping[str, Any] | None, servers: ServerLog | None = None) -> Any:
    """MetaSchedule's local runner, or a runner measuring on the servers a tracker hands out
    (:func:`explorer.lower.tvm.rpc_measure.server_runner`: one candidate in flight per server, a
    time limit on each, every candidate counted in ``servers``)."""
    from tvm.s_tir import meta_schedule as ms

    if not rpc or not rpc.get("rpc_tracker") or servers is None:
        return ms.runner.LocalRunner(timeout_sec=BUILD_TIMEOUT_S)
    host, port = tracker_address(str(rpc["rpc_tracker"]))
    wait = float(rpc.get("rpc_timeout") or BUILD_TIMEOUT_S)
    config = ms.runner.RPCConfig(
        tracker_host=host,
        tracker_port=port,
        tracker_key=str(rpc["rpc_key"]),
        session_timeout_sec=int(max(BUILD_TIMEOUT_S, wait)),
    )
    return server_runner(config, servers, wait, int(rpc.get("rpc_servers") or 1))


def _deadline_search(ends: float | None, stop: threading.Event | None = None) -> Any:
    """MetaSchedule's evolutionary search (:data:`POPULATION`), which proposes nothing once the
    minute budget is spent (``ends``, epoch seconds): the task scheduler then ends each task as
    it comes up, with no search or build, and the batch in flight is the most it overshoots.
    One batch is always proposed, so a budget spent before the first (timing the tasks
    untuned, starting the builder) still leaves a measured schedule to keep."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.search_strategy import EvolutionarySearch, PySearchStrategy

    proposed = threading.Event()  # shared by every task's clone: one batch in the whole run

    @derived_object
    class DeadlineSearch(PySearchStrategy):
        def __init__(self) -> None:
            self.inner = EvolutionarySearch(population_size=POPULATION)

        def _initialize_with_tune_context(self, context: Any) -> None:
            self.inner._initialize_with_tune_context(context)

        def pre_tuning(self, *args: Any) -> None:
            self.inner.pre_tuning(*args)

        def post_tuning(self) -> None:
            self.inner.post_tuning()

        def generate_measure_candidates(self) -> Any:
            if stop is not None and stop.is_set():  # no server left to measure on
                return None
            if ends is not None and time.time() > ends and proposed.is_set():
                return None
            candidates = self.inner.generate_measure_candidates()
            if candidates:
                proposed.set()
            return candidates

        def notify_runner_results(self, candidates: Any, results: Any) -> None:
            self.inner.notify_runner_results(candidates, results)

        def clone(self) -> Any:
            return DeadlineSearch()

    return DeadlineSearch()


def _tune(
    tasks: Sequence[Any],
    plans: Sequence[Any],
    folder: Path,
    trials: int,
    minutes: float | None,
    ends: float | None,
    rpc: Mapping[str, Any] | None = None,
) -> Any:
    """Tune the planned tasks (weighted by gain) into ``folder``'s database, measuring here or on
    servers from an RPC tracker (``rpc``: ``rpc_tracker``, ``rpc_key``, ``rpc_timeout``); the
    progress callback."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.measure_callback import MeasureCallback

    chosen = {p.name: p for p in plans if p.tuned}
    remote = bool(rpc and rpc.get("rpc_tracker"))
    servers = ServerLog(str(rpc["rpc_tracker"]), str(rpc["rpc_key"])) if rpc and remote else None
    stop = threading.Event()
    contexts, weights = [], []
    # the tasks without a record first: MetaSchedule's first round goes in this order, and a
    # deadline that ends it early then leaves out tasks that have records, not uncovered ones
    ordered = sorted((t for t in tasks if t.task_name in chosen), key=lambda t: chosen[t.task_name].recorded)
    for seed, task in enumerate(ordered):
        made, _ = ms.relax_integration.extracted_tasks_to_tune_contexts(
            [task],
            str(folder),
            strategy=_deadline_search(ends, stop),
            seed=seed,
        )
        contexts += made
        weights.append(max(chosen[task.task_name].gain_ms, 1e-6))  # a task to cover: its first round
    callback = _progress_callback(trials, minutes, ends, [c.task_name for c in contexts], servers, stop)
    ms.tune_tasks(
        tasks=contexts,
        task_weights=weights,
        work_dir=str(folder),
        max_trials_global=trials,
        num_trials_per_iter=TRIALS_PER_ITER,
        measure_callbacks=[*MeasureCallback.create("default"), callback],
        # 30 s (the default) is too little for a build on 2 busy cores
        builder=ms.builder.LocalBuilder(timeout_sec=BUILD_TIMEOUT_S, f_build=build_candidate),
        runner=_runner(rpc, servers),
    )
    return callback


@contextlib.contextmanager
def _lowering(watch: PassWatch) -> Iterator[None]:
    """Run passes watched: one that fails raises a LoweringError saying which, where and the fix."""
    try:
        with watch.watching():
            yield
    except MemoryError:
        raise
    except Exception as err:
        raise watch.error(err) from None


def compile_tuned(
    path: str,
    input_shapes: Mapping[str, Sequence[int]] | None,
    target: str,
    *,
    trials: int,
    minutes: float | None,
    work_dir: str | None,
    key: str,
    pretuned: bool = False,
    rpc: Mapping[str, Any] | None = None,
    fast_math: bool = True,
    every_task: bool = False,
) -> dict[str, Any]:
    """Import ``path``, tune it (unless ``key`` was tuned with at least ``trials`` before), apply the
    database and compile.

    Tuning measures every task untuned first and spends the trials where the time is
    (:func:`explorer.lower.tvm.tuning_plan.plan_tasks`); the build prepacks the weights of the
    tuned kernels (:func:`finish_tuned`). A task without a record gets a default schedule
    (MetaSchedule's rules applied once, unmeasured), not the plain loops. ``pretuned`` first
    adds the records shipped for this CPU (:func:`explorer.lower.tvm.tvm_records.seed_database`):
    with ``trials=0`` they are applied without tuning. With ``rpc`` (``rpc_tracker``,
    ``rpc_key``, ``rpc_timeout``) candidates are measured on servers from the tracker
    (MetaSchedule's RPC runner); the untuned timing that plans the trials stays here.
    ``fast_math=False`` compiles the exact functions (:func:`tuning_module`); records tuned
    with fast math then match no task. ``work_dir=None`` uses no database: every task gets its
    default schedule (the untuned build); it cannot tune or take the shipped records.
    Tuning on from records plans from each task's time as the build stands (its record where it
    has one); ``every_task`` also tunes every task without a record (records to ship).

    Returns
    -------
    dict
        ``{"ok": True, "executable", "compile_s", "tune_s", "trials", "trials_run", "tuned_before",
        "out_of_time", "tasks", "tasks_with_records", "task_schedules", "task_gflop", "passes",
        "defaults_failed", "defaults_rejected", "records_rejected", "rpc_servers", "rpc_notes", "plan",
        "shipped", "tuning_dir", "tvm", "target"}``, or
        the import's failure.
        ``task_schedules`` says, per task, where its schedule came from: ``"record"`` (the
        tuning database), else a default schedule (:mod:`explorer.lower.tvm.default_schedules`:
        ``"heuristic"`` or ``"sampled"``), or ``"naive"`` (the plain loops, where no default
        could be made); ``task_gflop`` is each task's GFLOP per call (TVM's estimate);
        ``passes`` the Relax passes the build ran before FuseTIR; ``defaults_failed`` is None,
        or why the build with default schedules failed and was made again without them;
        ``defaults_rejected`` names the tasks whose default schedule computed something else
        than their plain loops (:mod:`explorer.lower.tvm.schedule_check`), and why: they run the
        plain loops (``"naive"``); ``records_rejected`` the same for tuning records (checked
        once each, :func:`explorer.lower.tvm.schedule_check.checked_records`): those tasks take a
        default schedule. With
        ``rpc``: ``rpc_servers`` (server -> candidates measured, lost, and whether it died) and
        ``rpc_notes`` (a dead server's cost, in words).

    Raises
    ------
    UsageError
        Tuning (``trials`` > 0) or ``pretuned`` without a ``work_dir``.

    Examples
    --------
    >>> import tempfile
    >>> from explorer import zoo
    >>> out = compile_tuned(  # trials=0: apply what the (empty) database holds, no tuning
    ...     zoo.build("mlp"), {"input": [1, 1, 28, 28]}, "llvm", trials=0, minutes=None,
    ...     work_dir=tempfile.mkdtemp(), key="mlp",
    ... )
    >>> out["ok"], out["tasks"], out["tasks_with_records"], out["tune_s"]
    (True, 4, 0, 0.0)
    >>> sorted(set(out["task_schedules"].values()))  # no record: every task a default schedule
    ['heuristic']
    >>> compile_tuned(zoo.build("mlp"), None, "llvm", trials=0, minutes=None, work_dir=None,
    ...               key="mlp")["tasks_with_records"]  # no database at all
    0
    """
    if work_dir is None and (trials > 0 or pretuned):
        raise UsageError("tuning and the shipped records need a tuning database (work_dir)")
    imported = run_importer(path, input_shapes)
    if not imported["ok"]:
        return imported
    import tvm
    from tvm.s_tir import meta_schedule as ms

    built_for = cpu_target(target)
    register_cpu_intrinsics()  # before MetaSchedule imports every platform's (about a minute here)
    folder = Path(work_dir) if work_dir is not None else None
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    shipped = seed_database(folder, target) if pretuned and folder is not None else None
    watch = PassWatch(lambda: import_origins(imported["model"], imported["importer"], imported["module"]))
    with _lowering(watch):
        mod = tuning_module(imported["module"], built_for, fast_math)
        tasks = ms.relax_integration.extract_tasks(mod, built_for)
    before = tuned_trials(folder, key) if folder is not None else 0
    tuning = folder is not None and trials > 0 and before < trials
    # the tuning plan times every task's default schedule; a build alone needs them only where no record is
    checks = folder / CHECKS_FOLDER if folder is not None else None  # beside the database; else the cache's
    defaults = default_database(tasks, built_for, checks) if tuning else None
    tune_s, out_of_time, errors, plans, run = 0.0, False, [], [], 0
    rpc_servers: dict[str, Any] | None = None
    rpc_notes: list[str] = []
    if tuning:
        started, ends = time.perf_counter(), (time.time() + minutes * 60 if minutes else None)
        worker.report(0.0, f"timing the {len(tasks)} tasks as built now: trials go where they gain")
        cores = int(built_for.attrs.get("num-cores", 1))
        records = ms.database.JSONDatabase(work_dir=str(folder))
        if runs_here(built_for) is None:  # as the build stands: records where there are, else defaults
            measured = measure_tasks(mod, tasks, built_for, defaults, records)
        else:  # a server's CPU this one cannot run (it would stop on an illegal instruction): the FLOPs
            measured = flop_times(tasks, cores, tasks_with_records(records, tasks, built_for))
        budget = expected_trials(trials, minutes, cores)
        plans = plan_tasks(measured, budget, cores, float32_lanes(built_for), every_task=every_task)
        callback = _tune(tasks, plans, folder, trials, minutes, ends, rpc)
        out_of_time = ends is not None and time.time() > ends  # the budget, not the trials, ended it
        errors, run = list(callback.errors[:3]), callback.trials
        if callback.servers is not None:
            rpc_servers, rpc_notes = callback.servers.servers(), list(callback.servers.notes)
        tune_s = time.perf_counter() - started
        record_trials(folder, key, trials)
    started = time.perf_counter()
    database, records_rejected = None, {}
    if folder is not None:  # a record runs only once it computes what its plain loops do
        database, records_rejected = checked_records(
            ms.database.JSONDatabase(work_dir=str(folder)), tasks, built_for, checks
        )
    recorded = tasks_with_records(database, tasks, built_for)
    if defaults is None:  # (tuning made every task's)
        defaults = default_database([t for t in tasks if t.task_name not in recorded], built_for, checks)
    rejected = {name: why for name, why in defaults.rejected.items() if name not in recorded}
    schedules = {
        t.task_name: "record" if t.task_name in recorded else defaults.how[t.task_name] for t in tasks
    }

    def build(use_defaults: bool) -> Any:
        """The executable: records first, then (``use_defaults``) a default schedule for the rest."""
        if database is None and not use_defaults:
            return tvm.compile(mod, target=built_for)
        applied = with_defaults(database, defaults) if database is not None else defaults.database
        with applied if use_defaults else database:
            return tvm.compile(finish_tuned(mod, built_for, ""), target=built_for)

    try:
        executable = build(use_defaults=True)
        defaults_failed = None
    except MemoryError:
        raise
    except Exception as err:  # a default schedule TVM cannot build is ours to fix, not the model's:
        defaults_failed = (
            f"{type(err).__name__}: {str(err).strip().splitlines()[-1] if str(err).strip() else ''}"
        )
        schedules = {name: "record" if how == "record" else "naive" for name, how in schedules.items()}
        with _lowering(watch):  # build without them; a failure now is the model's (LoweringError)
            executable = build(use_defaults=False)
    return {
        "ok": True,
        "executable": executable,
        "compile_s": time.perf_counter() - started,
        "tune_s": tune_s,
        "trials": trials,
        "trials_run": run,
        "tuned_before": before >= trials > 0,
        "out_of_time": out_of_time,
        "errors": errors,
        "tasks": len(tasks),
        "tasks_with_records": len(recorded),
        "task_schedules": schedules,
        "task_gflop": {t.task_name: _task_gflop(t) for t in tasks},
        "passes": tuning_passes(fast_math),
        "defaults_failed": defaults_failed,
        "defaults_rejected": rejected,
        "records_rejected": records_rejected,
        "rpc_servers": rpc_servers,
        "rpc_notes": rpc_notes,
        "plan": [p.to_dict() for p in plans],
        "shipped": shipped,
        "tuning_dir": str(folder) if folder is not None else None,
        "tvm": tvm.__version__,
        "target": str(built_for),
    }

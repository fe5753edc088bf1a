"""Default CPU schedules: MetaSchedule's own rules applied once per task, without search or measurement.

TVM's default Relax pipeline for ``llvm`` lowers and fuses but schedules nothing: every
kernel is the plain loop nest TOPI wrote (one core, no vector instructions; 1-3 GFLOP/s on
a convolution). TVM 0.27 has no rule-based CPU schedules to fall back on (``s_tir.dlight``'s
CPU rules cover only matrix-vector products and row reductions, and slow a convolution
down). What it has is MetaSchedule's design space for ``llvm``: multi-level tiling, inlining,
then parallel loops, vectorisation and unrolling. This module takes one schedule from that
space per task, without measuring anything:

1. *heuristic*: the default design space with fixed decisions instead of random ones: the
   innermost spatial tile is the CPU's float32 vector width, the next axis gets a 4-row
   block, the innermost reduction is split by 8, the rest stays outermost (parallel), loops
   unrolled up to 64 steps;
2. *sampled*: where the heuristic cannot replay a space, one seeded random sample of it
   (deterministic for a seed);
3. *naive*: where neither gives a schedule (a dynamic loop, a kernel with no design space),
   the plain loops stay.

The records go into a database of their own (never into the tuning database: their
``run_secs`` is a placeholder, not a measurement). A tuned build asks the tuning database
first and this one for every task tuning left out (:func:`with_defaults`).

Runs where TVM is (the worker).

Examples
--------
>>> from tvm.s_tir import meta_schedule as ms
>>> from explorer import zoo
>>> from explorer.lower.tvm.relax_frontend import run_importer
>>> from explorer.lower.tvm.relax_target import cpu_target
>>> from explorer.lower.tvm.relax_tuning import tuning_module
>>> target = cpu_target()
>>> module = tuning_module(run_importer(zoo.build("mlp"), {"input": [1, 1, 28, 28]})["module"], target)
>>> defaults = default_database(ms.relax_integration.extract_tasks(module, target), target)
>>> sorted(set(defaults.how.values()))
['heuristic']
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from explorer.lower.tvm.relax_target import float32_lanes, register_cpu_intrinsics
from explorer.lower.tvm.schedule_check import check_schedules

__all__ = [
    "UNMEASURED",
    "DEFAULT_SCHEDULE_LABEL",
    "SCHEDULES_VERSION",
    "DefaultDatabase",
    "default_database",
    "default_schedule",
    "with_defaults",
]

UNMEASURED = (1.0,)
"""``run_secs`` of a default record: MetaSchedule never returns a record without one."""

DEFAULT_SCHEDULE_LABEL = "default schedules (MetaSchedule's rules, one unmeasured schedule per task)"
"""What TVM's untuned build is, in words: not naive loops, not tuned either."""

SCHEDULES_VERSION = "2"
"""The version of this module's decisions, part of each schedule check's cache key
(:func:`explorer.lower.tvm.schedule_check.check_key`): change it when a decision changes."""

_SEED = 0


def _context(func_mod: Any, target: Any, seed: int, rewrite_layout: bool = True) -> Any:
    from tvm.s_tir import meta_schedule as ms

    postprocs: Any = "from-target"  # the target's default postprocessors
    if not rewrite_layout:
        postprocs = [
            p for p in ms.postproc.Postproc.create("llvm") if not isinstance(p, ms.postproc.RewriteLayout)
        ]
    return ms.TuneContext(
        mod=func_mod,
        target=target,
        space_generator=ms.space_generator.PostOrderApply(postprocs=postprocs),  # the target's default rules
        search_strategy=ms.search_strategy.ReplayTrace(max_fail_count=10),
        task_name="default",
        rand_state=seed,
        num_threads=1,  # a fixed seed on one thread: the same sample in every process
    )


def _largest_divisor(extent: int, cap: int) -> int:
    return max(d for d in range(1, min(extent, cap) + 1) if extent % d == 0)


def _roles(samples: Sequence[Any]) -> list[str]:
    """What each sampling instruction decides: the innermost spatial tile, the one before it, ..."""
    roles: list[str] = []
    run: list[int] = []

    def flush() -> None:
        spatial = [k for k in run if int(samples[k].attrs[0]) >= 3]
        reduce = [k for k in run if int(samples[k].attrs[0]) == 2]
        for k in run:
            if k in spatial:
                last, previous = spatial[-1], spatial[-2] if len(spatial) > 1 else None
                roles.append("s_last" if k == last else "s_prev" if k == previous else "s")
            else:
                roles.append("r_last" if reduce and k == reduce[-1] else "r")
        run.clear()

    for k, inst in enumerate(samples):
        if inst.kind.name == "SamplePerfectTile":
            run.append(k)
        else:
            flush()
            roles.append("unroll" if inst.kind.name == "SampleCategorical" else "keep")
    flush()
    return roles


def _layouts_kept(schedule: Any) -> bool:
    """Whether every weight-layout rewrite of ``schedule`` keeps every element of its buffer.

    MetaSchedule's RewriteLayout postprocessor suggests the new layout from one load of the
    buffer; a buffer read by two loads (``te_gather_nd``'s index pairs, after the transpose
    before it is inlined) gets a layout from one of them that maps several elements to one
    place (BERT's 1x1x1x128x2 indices into a 2x64 buffer): the kernel then reads wrong indices.
    """
    root = schedule.get_sblock("root")
    for block_rv in schedule.get_child_blocks(root):
        block = schedule.get(block_rv)
        if "meta_schedule.layout_rewrite_preproc" not in block.annotations:
            continue
        source, rewritten = block.reads[0].source, block.writes[0].source
        if _elements(source.shape) != _elements(rewritten.shape):
            return False
    return True


def _elements(shape: Sequence[Any]) -> int:
    count = 1
    for dim in shape:
        count *= int(dim)
    return count


def _heuristic(func_mod: Any, target: Any, rewrite_layout: bool = True) -> Any:
    """The first default design space, replayed with CPU-minded tile sizes; None if it cannot be."""
    from tvm import s_tir

    lanes = float32_lanes(target)  # 16 on AVX-512, 8 on AVX2
    context = _context(func_mod, target, _SEED, rewrite_layout)
    try:
        spaces = context.generate_design_space()
    except Exception:  # TVM's own rules can fail on a task (ScheduleError in reverse-compute-at)
        return None
    if not spaces:
        return None
    space = spaces[0]
    samples = [inst for inst in space.trace.insts if inst.kind.name.startswith("Sample")]
    role_of = iter(_roles(samples))
    schedule = s_tir.Schedule(func_mod)

    def decide(inst: Any, inputs: Any, attrs: Any, decision: Any) -> Any:
        if not inst.kind.name.startswith("Sample"):
            return decision
        role = next(role_of)
        if inst.kind.name == "SamplePerfectTile":
            extent, parts = int(schedule.get(inputs[0]).extent), int(attrs[0])
            if role == "s_last":
                inner = _largest_divisor(extent, lanes)
                tiles = [extent // inner] + [1] * (parts - 2) + [inner]
            elif role == "s_prev":
                block = _largest_divisor(extent, 4)
                tiles = [extent // block] + [1] * (parts - 3) + [block, 1]
            elif role == "r_last":
                inner = _largest_divisor(extent, 8)
                tiles = [extent // inner, inner]
            else:
                tiles = [extent] + [1] * (parts - 1)
            return [int(t) for t in tiles]
        if role == "unroll" and len(attrs[0]) == 4:  # ParallelizeVectorizeUnroll's (0, 16, 64, 512)
            return 2
        return decision

    try:
        space.trace.apply_to_schedule(schedule, remove_postproc=True, decision_provider=decide)
        schedule.enter_postproc()
        if not all(postproc.apply(schedule) for postproc in context.space_generator.postprocs):
            return None
    except Exception:  # TVM raises TVMError for a trace these decisions cannot replay: sample instead
        return None
    return schedule


def _sampled(func_mod: Any, target: Any, seed: int, rewrite_layout: bool = True) -> Any:
    """One seeded random sample of the default design space, postprocessed; None if none is valid."""
    context = _context(func_mod, target, seed, rewrite_layout)
    try:
        context.pre_tuning(max_trials=1, num_trials_per_iter=1)
        candidates = context.generate_measure_candidates()
        context.post_tuning()
    except Exception:  # dynamic loops: the replay fails inside TVM (old_rv != nullptr)
        return None
    return candidates[0].sch if candidates else None


def default_schedule(func_mod: Any, target: Any, seed: int = _SEED) -> tuple[Any, str]:
    """One schedule for a task's PrimFunc, and how it was made: ``"heuristic"``, ``"sampled"`` or ``"naive"``.

    Parameters
    ----------
    func_mod : tvm.IRModule
        The task's module (``task.dispatched[0]``).
    target : tvm.target.Target
        The CPU target.
    seed : int
        The seed of the random sample, where the heuristic cannot be replayed.

    Returns
    -------
    tuple
        ``(schedule or None, how)``; ``None`` with ``"naive"`` leaves the plain loops.

    Examples
    --------
    >>> from tvm.s_tir import meta_schedule as ms
    >>> from explorer import zoo
    >>> from explorer.lower.tvm.relax_frontend import run_importer
    >>> from explorer.lower.tvm.relax_target import cpu_target
    >>> from explorer.lower.tvm.relax_target import register_cpu_intrinsics
    >>> from explorer.lower.tvm.relax_tuning import tuning_module
    >>> register_cpu_intrinsics()
    >>> target = cpu_target()
    >>> module = tuning_module(run_importer(zoo.build("mlp"), {"input": [1, 1, 28, 28]})["module"], target)
    >>> task = ms.relax_integration.extract_tasks(module, target)[0]
    >>> schedule, how = default_schedule(task.dispatched[0], target)
    >>> how, "parallel" in schedule.mod.script()
    ('heuristic', True)
    """
    makers = (
        ("heuristic", lambda rewrite_layout: _heuristic(func_mod, target, rewrite_layout)),
        ("sampled", lambda rewrite_layout: _sampled(func_mod, target, seed, rewrite_layout)),
    )
    for how, make in makers:
        schedule = make(True)
        if schedule is not None and not _layouts_kept(schedule):  # a layout TVM's RewriteLayout got wrong:
            schedule = make(False)  # the same decisions, the buffer left in its own layout
        if schedule is not None:
            return schedule, how
    return None, "naive"


@dataclass
class DefaultDatabase:
    """The default records of a module's tasks, and how each task's schedule was made.

    Attributes
    ----------
    database : tvm.s_tir.meta_schedule.database.MemoryDatabase
        One record per scheduled task (placeholder ``run_secs``: :data:`UNMEASURED`).
    how : dict
        Task name -> ``"heuristic"``, ``"sampled"`` or ``"naive"``.
    rejected : dict
        Task name -> why its default schedule is not used (it differs from the plain loops:
        :func:`explorer.lower.tvm.schedule_check.check_schedule`); those tasks are ``"naive"``.
    """

    database: Any
    how: dict[str, str] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)


def default_database(
    tasks: Sequence[Any], target: Any, checks: str | os.PathLike[str] | None = None
) -> DefaultDatabase:
    """Default records for ``tasks`` (:func:`default_schedule`), in a database of their own.

    Each schedule is first checked against the task's plain loops on random inputs, every
    task's check in one build (:func:`explorer.lower.tvm.schedule_check.check_schedules`, the
    verdicts kept in ``checks``, by default the target's tuning cache): one that differs (or
    does not build) gets no record, and the task keeps its plain loops (``how`` says
    ``"naive"``, ``rejected`` why).

    Examples
    --------
    >>> from tvm.s_tir import meta_schedule as ms
    >>> from explorer import zoo
    >>> from explorer.lower.tvm.relax_frontend import run_importer
    >>> from explorer.lower.tvm.relax_target import cpu_target
    >>> from explorer.lower.tvm.relax_tuning import tuning_module
    >>> target = cpu_target()
    >>> module = tuning_module(run_importer(zoo.build("mlp"), {"input": [1, 1, 28, 28]})["module"], target)
    >>> tasks = ms.relax_integration.extract_tasks(module, target)
    >>> len(default_database(tasks, target).how) == len(tasks)
    True
    """
    from tvm.s_tir import meta_schedule as ms

    register_cpu_intrinsics()  # TuneContext imports the tensor intrinsics: this CPU's only
    database = ms.database.MemoryDatabase()
    how: dict[str, str] = {}
    rejected: dict[str, str] = {}
    scheduled: list[tuple[Any, Any, Any]] = []  # (task, its plain loops, its schedule)
    for index, task in enumerate(tasks):
        func_mod = task.dispatched[0]
        schedule, how[task.task_name] = default_schedule(func_mod, target, _SEED + index)
        if schedule is not None:
            scheduled.append((task, func_mod, schedule))
    checks_found = check_schedules(  # every task's check built at once
        [(func_mod, schedule.mod) for _, func_mod, schedule in scheduled],
        target,
        code_version=SCHEDULES_VERSION,
        folder=checks,
    )
    for (task, func_mod, schedule), check in zip(scheduled, checks_found, strict=True):
        if not check.agrees:
            how[task.task_name], rejected[task.task_name] = "naive", check.reason()
            continue
        workload = database.commit_workload(func_mod)
        args = ms.arg_info.ArgInfo.from_prim_func(func_mod["main"])
        database.commit_tuning_record(
            ms.database.TuningRecord(schedule.trace, workload, list(UNMEASURED), target, args)
        )
    return DefaultDatabase(database, how, rejected)


def with_defaults(tuned: Any, defaults: DefaultDatabase) -> Any:
    """A database that answers from ``tuned`` first, and from the default records for the rest.

    Examples
    --------
    >>> import tempfile
    >>> from tvm.s_tir import meta_schedule as ms
    >>> both = with_defaults(ms.database.JSONDatabase(work_dir=tempfile.mkdtemp()),
    ...                      DefaultDatabase(ms.database.MemoryDatabase()))
    >>> type(both).__name__
    'OrderedUnionDatabase'
    """
    from tvm.s_tir import meta_schedule as ms

    return ms.database.OrderedUnionDatabase(tuned, defaults.database)

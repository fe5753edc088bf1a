"""Which MetaSchedule tasks get a tuning budget, and how much: trials go where the time is.

MetaSchedule's task scheduler weighs a task by how often the model calls it and gives every
task a first round of trials. On 2 cores a trial costs about 2.5 s (build and measure), so a
model of 20 tasks spends a 10-minute budget on that first round alone, most of it on tasks
that take microseconds. The plan instead measures each task's untuned time once, estimates
what tuning can gain from it (the untuned time less what its FLOPs would take at a rate
tuned code reaches here), and tunes only the tasks with the most to gain, as many as the
budget gives a useful number of trials, weighted by that gain. The rest keep their default
schedule: their whole untuned time is the most tuning could have saved. (Untuned here is
the task's default schedule, :mod:`explorer.lower.tvm.default_schedules`, the kernel a build
without a record runs, not TVM's plain loops.)

Tuning on from records (the shipped ones, or an earlier run's) times each task as the build
stands, its record where it has one: trials go to the kernels that are still slow, not again
to those already tuned. ``every_task`` (for records that are shipped) also gives every task
without a record its first round of trials, so that no kernel of the model is left untuned.

Examples
--------
>>> rows = [TaskTime("dense", 2, 0.5, 80.0), TaskTime("add", 4, 0.0, 0.05)]
>>> [(p.name, p.tuned) for p in plan_tasks(rows, trials=64, cores=2)]
[('dense', True), ('add', False)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "TaskTime",
    "TaskPlan",
    "plan_tasks",
    "plan_frame",
    "expected_trials",
    "TUNED_GFLOPS_PER_CORE",
    "MIN_TRIALS_PER_TASK",
    "FIRST_ROUND_TRIALS",
    "TRIALS_PER_CORE_MINUTE",
    "GAIN_SHARE",
]

TUNED_GFLOPS_PER_CORE = 20.0
"""GFLOP/s per core that MetaSchedule's tuned code reaches here in minutes with 8 float32 lanes
(AVX2): the estimate of a task's tuned time, for ranking only; scaled by the lanes the target
has (:func:`plan_tasks`' ``lanes``: 40 per core on AVX-512, where tuned convolutions reached
50-115 here)."""

MIN_TRIALS_PER_TASK = 32
"""Fewer trials than this rarely beat a task's first random samples: the budget is not spread thinner."""

FIRST_ROUND_TRIALS = 16
"""The trials of a task's first round (MetaSchedule measures a batch of every tuned task before it
weighs them: :data:`explorer.lower.tvm.relax_tuning.TRIALS_PER_ITER`): what covering a task costs."""

TRIALS_PER_CORE_MINUTE = 12.0
"""Candidates built and measured per core and minute on this kind of machine (25 a minute on 2 cores)."""

GAIN_SHARE = 0.999
"""Tasks are tuned, most gain first, until they hold this share of the estimated gain."""


@dataclass(frozen=True)
class TaskTime:
    """One task as measured untuned.

    Parameters
    ----------
    name : str
        The task (the fused PrimFunc's name).
    calls : int
        Calls per inference.
    gflop : float
        Estimated GFLOP of one call (``tvm.s_tir.analysis.estimate_tir_flops``).
    current_ms : float
        Time of all its calls in one inference as the build stands: its record's schedule where
        the database has one (``recorded``), else its default schedule.
    recorded : bool
        Whether the tuning database already holds a record for it.

    Examples
    --------
    >>> TaskTime("dense", 2, 0.5, 80.0).calls
    2
    """

    name: str
    calls: int
    gflop: float
    current_ms: float
    recorded: bool = False


@dataclass(frozen=True)
class TaskPlan:
    """A task, what tuning may gain from it, and whether it gets trials.

    Examples
    --------
    >>> plan = plan_tasks([TaskTime("dense", 2, 0.5, 80.0)], trials=64, cores=2)[0]
    >>> plan.gain_ms, plan.tuned
    (55.0, True)
    """

    name: str
    calls: int
    gflop: float
    current_ms: float
    floor_ms: float
    """What its FLOPs would take at :data:`TUNED_GFLOPS_PER_CORE` on every core."""
    gain_ms: float
    """``current_ms - floor_ms`` (at least 0): the weight of the task when tuned."""
    tuned: bool
    recorded: bool = False
    """Whether it had a record before this tuning."""

    def to_dict(self) -> dict[str, object]:
        """The plan's fields.

        Examples
        --------
        >>> plan_tasks([TaskTime("a", 1, 0.0, 1.0)], 32, 1)[0].to_dict()["name"]
        'a'
        """
        return asdict(self)


def expected_trials(trials: int, minutes: float | None, cores: int) -> int:
    """Trials the budget will run: ``trials``, or fewer when the minutes end first.

    Examples
    --------
    >>> expected_trials(1000, 10, 2), expected_trials(64, None, 2), expected_trials(64, 10, 2)
    (240, 64, 64)
    """
    if not minutes:
        return trials
    return min(trials, int(minutes * TRIALS_PER_CORE_MINUTE * max(cores, 1)))


def plan_tasks(
    times: Sequence[TaskTime], trials: int, cores: int, lanes: int = 8, every_task: bool = False
) -> list[TaskPlan]:
    """Rank the tasks by what tuning may gain and choose those the budget can tune.

    At most ``trials // MIN_TRIALS_PER_TASK`` tasks (at least one) are tuned, most gain
    first, until they hold :data:`GAIN_SHARE` of the gain; a task with nothing to gain is not.
    With ``every_task``, every task without a record is tuned as well (a first round of
    :data:`FIRST_ROUND_TRIALS` each, paid first; the gain weighs the rest of the budget).

    Parameters
    ----------
    times : sequence of TaskTime
        Every task, measured untuned.
    trials : int
        The trials the budget will run (:func:`expected_trials`).
    cores : int
        Cores the tuned code runs on.
    lanes : int
        float32 lanes of the target's vectors (8: AVX2; 16: AVX-512): a wider unit makes tuned
        code faster, so a task already at a few tens of GFLOP/s still has much to gain.
    every_task : bool
        Tune every task that has no record yet, whatever its gain (records to ship).

    Returns
    -------
    list of TaskPlan
        Most gain first.

    Examples
    --------
    >>> rows = [TaskTime(f"t{i}", 1, 0.0, float(i)) for i in range(1, 6)]
    >>> [p.name for p in plan_tasks(rows, trials=64, cores=2) if p.tuned]
    ['t5', 't4']
    >>> rows.append(TaskTime("copy", 1, 0.0, 0.01))
    >>> [p.name for p in plan_tasks(rows, trials=64, cores=2, every_task=True) if p.tuned]
    ['t5', 't4', 't3', 't2', 't1', 'copy']
    """
    rate = TUNED_GFLOPS_PER_CORE * max(cores, 1) * max(lanes, 1) / 8
    to_cover = sum(1 for t in times if not t.recorded) if every_task else 0
    plans = []
    for t in times:
        floor = t.calls * t.gflop / rate * 1e3
        plans.append((t, floor, max(0.0, t.current_ms - floor)))
    plans.sort(key=lambda p: -p[2])
    total = sum(gain for _, _, gain in plans)
    room = max(1, (trials - to_cover * FIRST_ROUND_TRIALS) // MIN_TRIALS_PER_TASK)  # after covering
    chosen, held = 0, 0.0
    out = []
    for t, floor, gain in plans:
        tuned = gain > 0 and chosen < room and held < GAIN_SHARE * total
        if tuned:
            chosen += 1
            held += gain
        tuned = tuned or (every_task and not t.recorded)
        floor, gain = round(floor, 4), round(gain, 4)
        out.append(TaskPlan(t.name, t.calls, t.gflop, t.current_ms, floor, gain, tuned, t.recorded))
    return out


def plan_frame(plans: Sequence[TaskPlan]) -> pd.DataFrame:
    """The plan as a table, one row per task.

    Examples
    --------
    >>> plan_frame(plan_tasks([TaskTime("a", 1, 0.0, 1.0)], 32, 1)).shape
    (1, 8)
    """
    import pandas as pd  # only where a plan is shown as a table

    return pd.DataFrame([p.to_dict() for p in plans])

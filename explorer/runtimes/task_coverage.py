"""Per task of a TVM build: where its schedule came from, its share of the time, the GFLOP/s it reached.

A TVM build is a set of *tasks* (one fused PrimFunc each, called once or more per inference).
Each task's schedule came from a tuning record, from a default schedule (MetaSchedule's rules
applied once, unmeasured: :mod:`explorer.lower.tvm.default_schedules`), or is TVM's plain loops.
Put beside the profile's time per kernel, that says which kernels hold a model back: a
convolution at 2 GFLOP/s taking half the time with no record is where tuning would pay.

Examples
--------
>>> from explorer import load
>>> from explorer.runtimes import TvmRuntime, random_feeds
>>> from explorer.runtimes.profile import profile
>>> graph = load("zoo:mlp")
>>> session = TvmRuntime().prepare(graph, {"input": [1, 1, 28, 28]})
>>> report = task_coverage(session, profile(session, random_feeds(graph.model), runs=2))
>>> sorted({t.schedule for t in report.tasks}), round(sum(t.share for t in report.tasks), 6)
(['heuristic'], 1.0)
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from explorer.runtimes.base import PreparedSession
    from explorer.runtimes.profile import Profile

__all__ = ["TaskTime", "TaskCoverage", "task_coverage", "SCHEDULE_WORDS"]

SCHEDULE_WORDS = {
    "record": "tuning record",
    "heuristic": "default schedule",
    "sampled": "default schedule (sampled)",
    "naive": "plain loops",
}
"""Where a task's schedule came from, in a learner's words."""


@dataclass(frozen=True)
class TaskTime:
    """One task of a TVM build in one profile.

    Attributes
    ----------
    task : str
        The PrimFunc (``fused_conv2d_add_relu``).
    schedule : str
        ``"record"``, ``"heuristic"``, ``"sampled"`` or ``"naive"`` (:data:`SCHEDULE_WORDS`).
    calls : int
        Calls per inference.
    ms : float
        Milliseconds per inference, all its calls.
    share : float
        Its share of the kernels' time.
    gflop : float
        GFLOP per inference (TVM's estimate from the TIR, times the calls).
    gflops : float or None
        GFLOP/s reached (None when it took no measurable time or does no arithmetic).
    """

    task: str
    schedule: str
    calls: int
    ms: float
    share: float
    gflop: float
    gflops: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields.

        Examples
        --------
        >>> TaskTime("k", "record", 1, 2.0, 1.0, 0.5, 250.0).to_dict()["gflops"]
        250.0
        """
        return asdict(self)


@dataclass(frozen=True)
class TaskCoverage:
    """Every task of a TVM build, slowest first, with where its schedule came from.

    Attributes
    ----------
    label : str
        The runtime (``TVM llvm pre-tuned``).
    tasks : tuple of TaskTime
        Slowest first.
    """

    label: str
    tasks: tuple[TaskTime, ...]

    def share_by_schedule(self) -> dict[str, float]:
        """Share of the kernels' time per schedule source.

        Examples
        --------
        >>> TaskCoverage("t", (TaskTime("a", "record", 1, 3.0, 0.75, 0, None),
        ...                    TaskTime("b", "naive", 1, 1.0, 0.25, 0, None))).share_by_schedule()
        {'record': 0.75, 'naive': 0.25}
        """
        shares: dict[str, float] = defaultdict(float)
        for task in self.tasks:
            shares[task.schedule] += task.share
        return {k: round(v, 6) for k, v in shares.items()}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the label, the share per schedule source and every task.

        Examples
        --------
        >>> TaskCoverage("t", ()).to_dict()["tasks"]
        []
        """
        return {
            "label": self.label,
            "share_by_schedule": self.share_by_schedule(),
            "tasks": [t.to_dict() for t in self.tasks],
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per task, slowest first; ``schedule`` in words (:data:`SCHEDULE_WORDS`).

        Examples
        --------
        >>> TaskCoverage("t", (TaskTime("a", "naive", 2, 1.0, 1.0, 0.004, 4.0),)).to_frame()["schedule"][0]
        'plain loops'
        """
        import pandas as pd

        columns = ["task", "schedule", "calls", "ms", "share", "gflop", "gflops"]
        frame = pd.DataFrame([t.to_dict() for t in self.tasks], columns=columns)
        frame["schedule"] = frame["schedule"].map(lambda s: SCHEDULE_WORDS.get(s, s))
        return frame


def task_coverage(session: PreparedSession, profile: Profile) -> TaskCoverage:
    """The tasks of a TVM session's build, timed by ``profile`` (of that session).

    A build without schedule information (TVM's plain loops: ``schedules="naive"``) reports
    every kernel as ``"naive"``, with the GFLOP it does unknown (0).

    Parameters
    ----------
    session : PreparedSession
        A TVM session (:class:`~explorer.runtimes.tvm_runtime.TvmRuntime`).
    profile : Profile
        Its profile (:func:`explorer.runtimes.profile.profile`).

    Returns
    -------
    TaskCoverage

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.runtimes import TvmRuntime, random_feeds
    >>> from explorer.runtimes.profile import profile
    >>> graph = load("zoo:mlp")
    >>> session = TvmRuntime(schedules="naive").prepare(graph)
    >>> report = task_coverage(session, profile(session, random_feeds(graph.model), runs=1))
    >>> {t.schedule for t in report.tasks}
    {'naive'}
    """
    schedules: dict[str, str] = dict(session.info.get("task_schedules") or {})
    gflop_per_call: dict[str, float] = dict(session.info.get("task_gflop") or {})
    ms: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    for kernel in profile.kernels:
        if kernel.op.startswith("vm."):  # the VM's own calls (allocations, tuples): no task
            continue
        ms[kernel.op] += kernel.ms
        calls[kernel.op] += 1
    total = sum(ms.values())
    tasks = []
    for name, spent in ms.items():
        gflop = gflop_per_call.get(name, 0.0) * calls[name]
        tasks.append(
            TaskTime(
                task=name,
                schedule=schedules.get(name, "naive"),
                calls=calls[name],
                ms=spent,
                share=spent / total if total else 0.0,
                gflop=gflop,
                gflops=gflop / (spent / 1e3) if spent > 0 and gflop > 0 else None,
            )
        )
    tasks.sort(key=lambda t: -t.ms)
    return TaskCoverage(session.runtime.label, tuple(tasks))

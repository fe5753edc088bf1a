"""TVM Relax as a :class:`~explorer.runtimes.base.Runtime`: import, compile for a target, run in the Relax VM.

Preparing imports the ONNX graph into Relax (with the input shapes: Relax plans memory and
fuses with static shapes), tunes it with MetaSchedule when given a budget (trials and/or
minutes; the database is shared by models, per target: :func:`explorer.lower.tvm.relax_tuning.tuning_dir`),
compiles it with ``tvm.compile`` and loads it into a ``relax.VirtualMachine`` kept in the
worker. A model the importer cannot take raises :class:`~explorer.lower.RelaxImportFailed`
with the failing nodes and the fix.

Untuned does not mean plain loops: every kernel without a tuning record gets a default
schedule (MetaSchedule's rules applied once, unmeasured: tiled, parallel, vectorised;
:mod:`explorer.lower.tvm.default_schedules`). ``schedules="naive"`` keeps the plain loop nests
TVM's default CPU pipeline writes (one core, no vector instructions), the baseline that
shows what scheduling is for.

Examples
--------
>>> TvmRuntime().name, TvmRuntime().label, TvmRuntime(tune_trials=64).label
('tvm', 'TVM llvm untuned (default schedules)', 'TVM llvm tuned (64 trials)')
>>> TvmRuntime(pretuned=True).label, TvmRuntime(schedules="naive").label
('TVM llvm pre-tuned', 'TVM llvm untuned (plain loops)')
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from explorer.core.errors import LoweringError, UsageError
from explorer.isolation import worker
from explorer.isolation.io import cache_folder
from explorer.isolation.worker import ProgressEvent
from explorer.onnx_adapter.adapter import onnx_model
from explorer.onnx_adapter.model_files import worker_source
from explorer.runtimes.base import PreparedSession, session_key
from explorer.runtimes.tvm_prepare import prepare_tvm

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = ["TvmRuntime", "SCHEDULES"]

SCHEDULES = ("default", "naive")
"""What an untuned TVM kernel can be: a default schedule, or the plain loops."""


@dataclass(frozen=True)
class TvmRuntime:
    """TVM Relax compiled for one target.

    Parameters
    ----------
    target : str
        ``llvm``: this CPU, or with ``rpc_tracker`` the servers' own CPU when they can say (a
        server with TVM's compiler; a runtime-only one is built for as this CPU). Or an llvm
        target named in full: ``llvm -mcpu=haswell -num-cores=2`` (AVX2 code, two threads),
        ``llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76 -num-cores=4`` for an Arm server
        (:func:`explorer.lower.tvm.relax_target.parse_target`). Each target has its own tuning
        database. ``-num-cores`` is the threads the kernels are scheduled and tuned for; TVM's
        pool here keeps one thread per physical core.
    tune_trials : int
        MetaSchedule trials in all (0: untuned, unless ``tune_minutes``).
    tune_minutes : float, optional
        Stop tuning after this many minutes, keeping what it found.
    tuning_root : str, optional
        Where the tuning databases live (default: see :func:`explorer.lower.tvm.relax_tuning.tuning_dir`).
    rpc_tracker : str, optional
        ``HOST:PORT`` of a TVM RPC tracker (``python -m tvm.exec.rpc_tracker``): the model is
        compiled here, uploaded to a server registered under ``rpc_key`` and timed there.
    rpc_key : str, optional
        The device key the servers registered with (``python -m tvm.exec.rpc_server --key``).
    rpc_timeout : float
        Seconds to wait for a free server, and for any one remote call, before a clear error.
    pretuned : bool
        Add the tuning records shipped for this CPU to the database first
        (:func:`explorer.lower.tvm.tvm_records.seed_database`): with no budget they are applied
        without tuning; with one, tuning starts from them.
    tune_every_task : bool
        Tuning also gives every task without a record its first round of trials, however little
        time it takes (records to ship: no kernel left untuned); the rest of the budget goes where
        the time is.
    schedules : {"default", "naive"}
        What an untuned kernel is: ``"default"``, a default schedule
        (:mod:`explorer.lower.tvm.default_schedules`), also for the kernels tuning left without a
        record; ``"naive"``, the plain loops of TVM's default pipeline (untuned only).

    Examples
    --------
    >>> TvmRuntime().available()
    True
    >>> TvmRuntime("llvm -mcpu=haswell -num-cores=2").label
    'TVM llvm -mcpu=haswell -num-cores=2 untuned (default schedules)'
    """

    family: ClassVar[str] = "tvm"
    """How its profile names kernels and what memory it needs (:class:`~explorer.runtimes.base.Runtime`)."""
    places_nodes: ClassVar[bool] = False
    """It compiles for one device: ONNX Runtime's ``--strict-placement`` does not apply."""
    keeps_tuning_records: ClassVar[bool] = True
    """It compiles per task and keeps tuning records (see :mod:`explorer.runtimes.task_coverage`)."""

    target: str = "llvm"
    tune_trials: int = 0
    tune_minutes: float | None = None
    tuning_root: str | None = None
    rpc_tracker: str | None = None
    rpc_key: str | None = None
    rpc_timeout: float = 120.0
    pretuned: bool = False
    schedules: str = "default"
    tune_every_task: bool = False

    def __post_init__(self) -> None:
        from explorer.lower.tvm.relax_target import parse_target

        parse_target(self.target)  # a malformed target is a UsageError now, not in the worker
        if self.rpc_tracker:
            from explorer.lower.tvm.rpc_tracker import tracker_address

            tracker_address(self.rpc_tracker)  # HOST:PORT, or a UsageError (a ValueError) naming the form
        if bool(self.rpc_tracker) != bool(self.rpc_key):
            raise UsageError("rpc_tracker and rpc_key go together: HOST:PORT and the servers' key")
        if self.schedules not in SCHEDULES:
            raise UsageError(f"schedules must be one of {', '.join(SCHEDULES)}, not {self.schedules!r}")
        if self.tune_every_task and not (self.tune_trials > 0 or self.tune_minutes):
            raise UsageError("tune_every_task spreads a tuning budget: give tune_trials or tune_minutes")
        if self.schedules == "naive" and self.tuned:
            raise UsageError("schedules='naive' is the untuned baseline: it takes no tuning or records")

    @property
    def name(self) -> str:
        """``tvm``, ``tvm-naive`` for the plain loops, or ``tvm-<target>`` for other targets."""
        base = "tvm" if self.target == "llvm" else f"tvm-{self.target}"
        return f"{base}-naive" if self.schedules == "naive" else base

    @property
    def label(self) -> str:
        """``TVM llvm untuned (default schedules)``, ``TVM llvm untuned (plain loops)``, ``TVM llvm
        tuned (64 trials)``, ``TVM llvm tuned (10 min)``, ``TVM llvm pre-tuned``, ``TVM llvm
        pre-tuned + tuned (10 min)``."""
        where = f" on {self.rpc_key}@{self.rpc_tracker}" if self.rpc_tracker else ""
        if not self.tuned:
            kernels = "plain loops" if self.schedules == "naive" else "default schedules"
            return f"TVM {self.target} untuned ({kernels}){where}"
        budget = [f"{self.tune_trials} trials"] if self.tune_trials else []
        budget += [f"{self.tune_minutes:g} min"] if self.tune_minutes else []
        if not budget:
            return f"TVM {self.target} pre-tuned{where}"
        start = "pre-tuned + " if self.pretuned else ""
        return f"TVM {self.target} {start}tuned ({', '.join(budget)}){where}"

    @property
    def tuned(self) -> bool:
        """Whether the compiled code is tuned (a budget was given, or the shipped records)."""
        return self.tune_trials > 0 or bool(self.tune_minutes) or self.pretuned

    @property
    def missing(self) -> str | None:
        """Why it cannot run here, in words; None when it can: apache-tvm is installed and the code
        runs on this CPU's architecture, or on an RPC server (a target for another architecture
        needs one).

        Examples
        --------
        >>> TvmRuntime().missing is None
        True
        >>> import platform
        >>> other = "aarch64" if platform.machine() != "aarch64" else "x86_64"
        >>> TvmRuntime(f"llvm -mtriple={other}-linux-gnu").missing.startswith(f"it is built for {other}")
        True
        """
        import platform

        from explorer.lower.tvm.relax_target import foreign_architecture, parse_target

        if importlib.util.find_spec("tvm") is None:
            return "apache-tvm is not installed (onnx-graph-explorer depends on it: reinstall it)"
        other = foreign_architecture(str(parse_target(self.target).get("mtriple", "")))
        if other is not None and not self.rpc_tracker:
            return (
                f"it is built for {other}, and this machine is {platform.machine()}: run it on a server "
                "of that architecture (rpc_tracker / --rpc-tracker)"
            )
        return None

    def available(self) -> bool:
        """Whether it can run here: :attr:`missing` is None."""
        return self.missing is None

    def check_target(self) -> None:
        """Refuse a ``-mcpu`` LLVM does not know for the target, before any runtime runs: a
        :class:`~explorer.core.errors.UsageError` listing the CPUs it knows
        (:func:`explorer.lower.tvm.relax_target.check_cpu`). LLVM's list needs TVM, whose import takes
        seconds: the check runs in the worker, which the build imports TVM in anyway. A target that
        names no CPU (or TVM not installed: the runtime is skipped) asks nothing.

        Examples
        --------
        >>> TvmRuntime("llvm -mcpu=haswell -num-cores=2").check_target()
        >>> TvmRuntime("llvm -mcpu=notacpu").check_target()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        explorer.core.errors.UsageError: -mcpu=notacpu in 'llvm -mcpu=notacpu' is no CPU LLVM knows for ...
        """
        from explorer.lower.tvm.relax_target import check_cpu, parse_target

        if "mcpu" not in parse_target(self.target) or importlib.util.find_spec("tvm") is None:
            return
        worker.run(check_cpu, self.target, step=f"{self.label}: check the target")

    def options(self) -> dict[str, Any]:
        """``{"target", "tune_trials", "tune_minutes"}``; ``pretuned``, ``tune_every_task``,
        ``schedules`` and ``tuning_root`` when set, and ``rpc_tracker`` / ``rpc_key`` when remote."""
        options: dict[str, Any] = {
            "target": self.target,
            "tune_trials": self.tune_trials,
            "tune_minutes": self.tune_minutes,
        }
        if self.pretuned:
            options["pretuned"] = True
        if self.tune_every_task:
            options["tune_every_task"] = True
        if self.schedules != "default":
            options["schedules"] = self.schedules
        if self.tuned and self.tuning_root:  # another database, another build (and session key)
            options["tuning_root"] = self.tuning_root
        if self.rpc_tracker:
            options.update(rpc_tracker=self.rpc_tracker, rpc_key=self.rpc_key, rpc_timeout=self.rpc_timeout)
        return options

    def prepare(
        self,
        graph: ModelGraph,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        *,
        progress: Callable[[ProgressEvent], object] | None = None,
    ) -> PreparedSession:
        """Import, compile and load the graph in the worker (or find it there).

        Raises
        ------
        RelaxImportFailed
            The importer could not take the graph (``err.result`` has the nodes and the fix).
        LoweringError
            A pass of the compile failed on what the importer made (the pass, the Relax binding,
            the ONNX node it came from; e.g. legalizing a ``PRelu`` whose slope does not fit the
            axis TVM's importer chose).

        Examples
        --------
        >>> from explorer import load
        >>> TvmRuntime().prepare(load("zoo:mlp"), {"input": [1, 1, 28, 28]}).info["compile_s"] > 0
        True
        """
        from explorer.lower.rewrites import shape_dict
        from explorer.lower.tvm.relax_import import failed_import
        from explorer.lower.tvm.relax_pipeline import RelaxImportFailed
        from explorer.onnx_adapter.inputs import concrete_input_shapes

        onnx_model(graph, "a runtime")
        shapes = shape_dict(concrete_input_shapes(graph.model, input_shapes))
        key = session_key(self, graph, shapes)
        if self.schedules == "default" and self.tuning_root is None:  # verdicts and records: in the cache
            cache_folder()  # one that cannot be written is refused here, before the worker starts
        options = self.options()
        if self.tuned:
            options["tuning_root"] = self.tuning_root  # the worker picks the target's database in it
            options["tuning_key"] = session_key(  # model (by content: tuned.json outlives the worker),
                TvmRuntime(self.target),
                graph,
                shapes,
                by_content=True,  # shapes and target
            )
        try:
            info = worker.run_on_model(
                prepare_tvm,
                worker_source(graph),
                key,
                shapes,
                options,
                step=f"{self.label}: import, {'tune, ' if self.tuned else ''}compile",
                progress=progress,
                timeout=0 if self.tuned else None,  # tuning stops at its own budget (or when interrupted)
            )
        except LoweringError as err:  # raised in the worker, which knew the model only as a file
            from explorer.lower.pass_failures import located

            raise located(err, graph.source) from None
        if not info.get("ok", True):
            raise RelaxImportFailed(failed_import(info, graph, shapes))
        return PreparedSession(self, key, info, graph, shapes)

"""Check a task's default schedule against its plain loops: both built, run on the same random inputs.

A default schedule (:mod:`explorer.lower.tvm.default_schedules`) is a program TVM transformed
without measuring it; a transformation TVM gets wrong (its RewriteLayout postprocessor once
folded BERT's ``te_gather_nd`` indices into half their buffer) gives a kernel that runs fast
and computes something else. Each task's scheduled PrimFunc and its plain loop nest are
built for the same target and run on the same random arguments
(:func:`explorer.onnx_adapter.inputs.random_array`; every buffer has room after it for an
index that reaches past a short axis), and every buffer is compared afterwards with float32's
tolerances (:func:`explorer.core.compare.agreement`).

A model's tasks are checked together (:func:`check_schedules`): every unchecked task's two
PrimFuncs go into one module, built once (LLVM and its JIT set up once, not twice per task);
a module that does not build is built again task by task, so the task that fails is the
only one without a schedule.

The verdict is kept on disk, one small JSON file per task, keyed by the task's structural
hash, the target, TVM's version and the version of the code that made the schedule
(:func:`check_key`), in the tuning cache's folder for the target (:func:`checks_dir`): a
second build of the same task reads it instead of building anything.

Runs where TVM is (the worker).

Examples
--------
>>> import tempfile
>>> import tvm
>>> from tvm.script import tirx as T
>>> from tvm import s_tir
>>> @T.prim_func(s_tir=True)
... def add_one(a: T.Buffer((64,), "float32"), b: T.Buffer((64,), "float32")):
...     for i in range(64):
...         with T.sblock("b"):
...             v = T.axis.spatial(64, i)
...             b[v] = a[v] + T.float32(1)
>>> plain = tvm.IRModule({"main": add_one})
>>> schedule = s_tir.Schedule(plain)
>>> _, inner = schedule.split(schedule.get_loops(schedule.get_sblock("b"))[0], [None, 8])
>>> schedule.vectorize(inner)
>>> check = check_schedule(plain, schedule.mod, "llvm", code_version="doc", folder=tempfile.mkdtemp())
>>> check.agrees, check.cached
(True, False)
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from explorer.core.compare import agreement
from explorer.isolation.io import write_bytes_atomic
from explorer.onnx_adapter.inputs import random_array

__all__ = [
    "RECORDS_VERSION",
    "checked_records",
    "CHECKS_FOLDER",
    "INDEX_REACH",
    "SYMBOLIC",
    "Build",
    "ScheduleCheck",
    "check_schedule",
    "check_schedules",
    "check_key",
    "checks_dir",
]

CHECKS_FOLDER = "schedule-checks"
"""The folder of verdicts, in the tuning folder (:func:`explorer.lower.tvm.relax_tuning.tuning_dir`)."""

INDEX_REACH = 8
"""Random integers are below this (:func:`explorer.onnx_adapter.inputs.random_array`): an index
into a shorter axis reads past it, so every buffer gets this much room after it."""

Build = Callable[[Any, Any], Any]
"""``build(module, target)`` -> a runtime module with every PrimFunc of ``module`` by name."""

SYMBOLIC = "a symbolic shape: the default schedule cannot be checked"
"""Why a task with a symbolic shape is not checked (it runs its plain loops)."""


@dataclass(frozen=True)
class ScheduleCheck:
    """How a default schedule compares with the plain loops of the same task.

    Attributes
    ----------
    agrees : bool
        Every buffer within float32's tolerances after both ran (False also when the task
        could not be checked: a symbolic shape).
    max_abs_err : float
        The largest absolute difference (``inf`` when it could not be checked).
    cached : bool
        The verdict was read from disk: nothing was built.
    why : str
        Empty when it agrees; else what differed, in words.
    """

    agrees: bool
    max_abs_err: float
    cached: bool = False
    why: str = ""

    def reason(self, schedule: str = "default schedule", instead: str = "plain loops used") -> str:
        """Why the schedule is not used, as the build reports it (empty when it agrees).

        Examples
        --------
        >>> ScheduleCheck(False, 0.5, why="").reason()
        'default schedule differs from the plain loops by max |diff| 0.5; plain loops used'
        >>> ScheduleCheck(False, 0.5).reason("tuned record", "its default schedule used")
        'tuned record differs from the plain loops by max |diff| 0.5; its default schedule used'
        >>> ScheduleCheck(True, 0.0).reason()
        ''
        """
        if self.agrees:
            return ""
        what = self.why or f"{schedule} differs from the plain loops by max |diff| {self.max_abs_err:.3g}"
        return f"{what}; {instead}"


def check_key(plain: Any, target: Any, code_version: str) -> str:
    """The cache key of a task's verdict: its structural hash, the target, TVM's and the schedule code's
    version.

    Examples
    --------
    >>> import tvm
    >>> from tvm.script import tirx as T
    >>> @T.prim_func(s_tir=True)
    ... def copy(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32")):
    ...     for i in range(4):
    ...         with T.sblock("b"):
    ...             v = T.axis.spatial(4, i)
    ...             b[v] = a[v]
    >>> module = tvm.IRModule({"main": copy})
    >>> check_key(module, "llvm", "1") == check_key(module, "llvm", "2"), len(check_key(module, "llvm", "1"))
    (False, 64)
    """
    import tvm
    import tvm_ffi

    text = "|".join((str(tvm_ffi.structural_hash(plain)), str(target), tvm.__version__, code_version))
    return hashlib.sha256(text.encode()).hexdigest()


def checks_dir(target: Any, root: str | os.PathLike[str] | None = None) -> Path:
    """Where the verdicts for ``target`` live: :data:`CHECKS_FOLDER` in its tuning folder.

    Examples
    --------
    >>> checks_dir("llvm", "/tmp/t").as_posix()
    '/tmp/t/llvm/schedule-checks'
    """
    from explorer.lower.tvm.relax_tuning import (
        tuning_dir,  # it imports the default schedules, which import this
    )

    return tuning_dir(str(target), root) / CHECKS_FOLDER


def check_schedule(
    plain: Any,
    scheduled: Any,
    target: Any,
    *,
    code_version: str,
    folder: str | os.PathLike[str] | None = None,
    seed: int = 0,
) -> ScheduleCheck:
    """Build ``plain`` and ``scheduled`` (one module), run both on the same random arguments, compare
    every buffer: :func:`check_schedules` for one task.

    Parameters
    ----------
    plain : tvm.IRModule
        The task's plain loops (``task.dispatched[0]``).
    scheduled : tvm.IRModule
        The same task scheduled (``schedule.mod``), weight-layout rewrites kept in it.
    target : tvm.target.Target or str
        The CPU both are built for.
    code_version : str
        The version of the code that made the schedule (part of the cache key).
    folder : path-like, optional
        Where verdicts are kept (default :func:`checks_dir`); one read there skips the build.
    seed : int
        The seed of the random arguments.

    Returns
    -------
    ScheduleCheck
        The verdict; a task with a symbolic shape cannot run here and does not agree.

    Examples
    --------
    >>> import tempfile
    >>> import tvm
    >>> from tvm.script import tirx as T
    >>> @T.prim_func(s_tir=True)
    ... def twice(a: T.Buffer((8,), "float32"), b: T.Buffer((8,), "float32")):
    ...     for i in range(8):
    ...         with T.sblock("b"):
    ...             v = T.axis.spatial(8, i)
    ...             b[v] = a[v] * T.float32(2)
    >>> @T.prim_func(s_tir=True)
    ... def wrong(a: T.Buffer((8,), "float32"), b: T.Buffer((8,), "float32")):
    ...     for i in range(8):
    ...         with T.sblock("b"):
    ...             v = T.axis.spatial(8, i)
    ...             b[v] = a[v] * T.float32(3)
    >>> folder = tempfile.mkdtemp()
    >>> found = check_schedule(tvm.IRModule({"main": twice}), tvm.IRModule({"main": wrong}), "llvm",
    ...                        code_version="doc", folder=folder)
    >>> found.agrees, found.reason().endswith("plain loops used")
    (False, True)
    >>> check_schedule(tvm.IRModule({"main": twice}), tvm.IRModule({"main": wrong}), "llvm",
    ...                code_version="doc", folder=folder).cached  # the verdict from disk
    True
    """
    return check_schedules([(plain, scheduled)], target, code_version=code_version, folder=folder, seed=seed)[
        0
    ]


def check_schedules(
    pairs: Sequence[tuple[Any, Any]],
    target: Any,
    *,
    code_version: str,
    folder: str | os.PathLike[str] | None = None,
    seed: int = 0,
    build: Build | None = None,
    versions: Sequence[str] | None = None,
) -> list[ScheduleCheck]:
    """Check many tasks' schedules with one build: every unchecked task's plain and scheduled
    PrimFunc in one module (``plain_<i>``, ``scheduled_<i>``), compiled once, each pair run on
    the same random arguments and every buffer compared.

    A verdict on disk is read instead (nothing of that task is built). When the module does
    not build, each task is built alone: the one that fails gets a verdict that says so (it
    does not agree), the others are checked as usual.

    Parameters
    ----------
    pairs : sequence of (tvm.IRModule, tvm.IRModule)
        Each task's plain loops (``task.dispatched[0]``) and its schedule (``schedule.mod``).
    target : tvm.target.Target or str
        The CPU both are built for.
    code_version : str
        The version of the code that made the schedules (part of the cache key).
    folder : path-like, optional
        Where verdicts are kept (default :func:`checks_dir`).
    seed : int
        The seed of each task's random arguments (each task's draw starts from it).
    build : callable, optional
        ``build(module, target)`` -> the runtime module (default :func:`tvm.compile`).
    versions : sequence of str, optional
        One cache version per pair instead of ``code_version`` (a tuned record's trace: two records
        of one task are two verdicts).

    Returns
    -------
    list of ScheduleCheck
        One verdict per pair, in order.

    Examples
    --------
    >>> import tempfile
    >>> import tvm
    >>> from tvm.script import tirx as T
    >>> @T.prim_func(s_tir=True)
    ... def add(a: T.Buffer((8,), "float32"), b: T.Buffer((8,), "float32")):
    ...     for i in range(8):
    ...         with T.sblock("b"):
    ...             v = T.axis.spatial(8, i)
    ...             b[v] = a[v] + T.float32(1)
    >>> @T.prim_func(s_tir=True)
    ... def sub(a: T.Buffer((8,), "float32"), b: T.Buffer((8,), "float32")):
    ...     for i in range(8):
    ...         with T.sblock("b"):
    ...             v = T.axis.spatial(8, i)
    ...             b[v] = a[v] - T.float32(1)
    >>> built = []
    >>> def counted(module, target):
    ...     built.append(sorted(g.name_hint for g in module.get_global_vars()))
    ...     return tvm.compile(module, target=target)
    >>> found = check_schedules([(tvm.IRModule({"main": add}), tvm.IRModule({"main": add})),
    ...                          (tvm.IRModule({"main": sub}), tvm.IRModule({"main": add}))],
    ...                         "llvm", code_version="doc", folder=tempfile.mkdtemp(), build=counted)
    >>> [f.agrees for f in found], built
    ([True, False], [['plain_0', 'plain_1', 'scheduled_0', 'scheduled_1']])
    """
    where = Path(folder if folder is not None else checks_dir(target))
    versions = list(versions) if versions is not None else [code_version] * len(pairs)
    paths = [
        where / f"{check_key(plain, target, version)}.json"
        for (plain, _), version in zip(pairs, versions, strict=True)
    ]
    found: list[ScheduleCheck | None] = [_read(path) for path in paths]
    unchecked: dict[int, list[tuple[list[int], str]]] = {}
    for index, (plain, _) in enumerate(pairs):
        if found[index] is not None:
            continue
        shapes = _shapes(plain)
        if shapes is None:
            found[index] = symbolic = ScheduleCheck(False, float("inf"), why=SYMBOLIC)
            _write(symbolic, paths[index])
        else:
            unchecked[index] = shapes
    for index, verdict in _checked(pairs, unchecked, target, seed, build or _build):
        found[index] = verdict
        _write(verdict, paths[index])
    return [verdict for verdict in found if verdict is not None]


RECORDS_VERSION = "record"
"""The cache version of a tuned record's verdict, followed by its trace's digest."""


def checked_records(
    database: Any, tasks: Sequence[Any], target: Any, folder: str | os.PathLike[str] | None = None
) -> tuple[Any, dict[str, str]]:
    """The tuned records of ``tasks`` that compute what their plain loops compute, in a database of
    their own, and why the others are not used.

    A tuned record goes through the same postprocessors as a default schedule (the layout rewrite
    that broke a BERT gather among them): each is checked once against its task's plain loops,
    all in one build (:func:`check_schedules`), the verdict cached by its trace. A task whose
    record differs gets a default schedule instead.

    Parameters
    ----------
    database : MetaSchedule database
        The tuning records (a ``JSONDatabase``).
    tasks : sequence of ExtractedTask
        The model's tasks.
    target : tvm.target.Target
        The CPU they are built for.
    folder : path-like, optional
        Where verdicts are kept (default :func:`checks_dir`).

    Returns
    -------
    (MemoryDatabase, dict)
        The records that agree; task name -> why its record is not used.

    Examples
    --------
    >>> import tempfile
    >>> from tvm.s_tir import meta_schedule as ms
    >>> records = ms.database.JSONDatabase(work_dir=tempfile.mkdtemp())
    >>> verified, rejected = checked_records(records, [], "llvm")
    >>> rejected, len(verified)
    ({}, 0)
    """
    from tvm.s_tir import meta_schedule as ms

    verified = ms.database.MemoryDatabase()
    found = []  # (task, record, schedule)
    for task in tasks:
        func_mod = task.dispatched[0]
        if not database.has_workload(func_mod):
            continue
        record = database.query_tuning_record(func_mod, target, task.task_name)
        schedule = database.query_schedule(func_mod, target, task.task_name) if record is not None else None
        if schedule is not None:
            found.append((task, record, schedule))
    verdicts = check_schedules(
        [(task.dispatched[0], schedule.mod) for task, _, schedule in found],
        target,
        code_version=RECORDS_VERSION,
        folder=folder,
        versions=[
            f"{RECORDS_VERSION} {hashlib.sha256(str(record.trace).encode()).hexdigest()}"
            for _, record, _ in found
        ],
    )
    rejected: dict[str, str] = {}
    for (task, record, _), verdict in zip(found, verdicts, strict=True):
        if not verdict.agrees:
            rejected[task.task_name] = verdict.reason("tuned record", "its default schedule used")
            continue
        workload = verified.commit_workload(task.dispatched[0])
        verified.commit_tuning_record(
            ms.database.TuningRecord(record.trace, workload, record.run_secs, record.target, record.args_info)
        )
    return verified, rejected


def _build(module: Any, target: Any) -> Any:
    """The default :data:`Build`: TVM's build for ``target`` (its LLVM options as the model's build)."""
    import tvm

    return tvm.compile(module, target=target)


def _read(path: Path) -> ScheduleCheck | None:
    """The verdict kept at ``path``; None when there is none (or it cannot be read)."""
    try:
        return ScheduleCheck(**{**json.loads(path.read_text()), "cached": True})
    except (OSError, ValueError, TypeError):
        return None


def _write(found: ScheduleCheck, path: Path) -> None:
    verdict = {k: v for k, v in asdict(found).items() if k != "cached"}
    write_bytes_atomic(json.dumps(verdict).encode(), path, fsync=False)


def _checked(
    pairs: Sequence[tuple[Any, Any]],
    unchecked: dict[int, list[tuple[list[int], str]]],
    target: Any,
    seed: int,
    build: Build,
) -> Iterator[tuple[int, ScheduleCheck]]:
    """The verdict of each unchecked task: all of them built at once; built one by one if that fails."""
    if not unchecked:
        return
    try:
        kernels = _kernels(pairs, list(unchecked), target, build)
    except MemoryError:
        raise
    except Exception as err:
        if len(unchecked) == 1:  # the task is known: no need to build it again
            (index,) = unchecked
            yield index, _unbuilt(err)
            return
        kernels = None
    for index, shapes in unchecked.items():
        mine = kernels
        if mine is None:
            try:
                mine = _kernels(pairs, [index], target, build)
            except MemoryError:
                raise
            except Exception as err:
                yield index, _unbuilt(err)
                continue
        yield index, _compare(mine[f"plain_{index}"], mine[f"scheduled_{index}"], shapes, seed)


def _kernels(
    pairs: Sequence[tuple[Any, Any]], indices: Sequence[int], target: Any, build: Build
) -> dict[str, Any]:
    """The tasks' PrimFuncs in one module (``plain_<i>``, ``scheduled_<i>``), built: each by name.

    Every function is looked up here: the LLVM JIT compiles the module on the first lookup,
    and a failure then is the build's, not one task's run.
    """
    import tvm

    functions = {}
    for index in indices:
        plain, scheduled = pairs[index]
        for name, func_mod in ((f"plain_{index}", plain), (f"scheduled_{index}", scheduled)):
            functions[name] = func_mod["main"].with_attr("global_symbol", name)
    library = build(tvm.IRModule(functions), target)
    return {name: library[name] for name in functions}


def _unbuilt(err: Exception) -> ScheduleCheck:
    """The verdict on a task that did not build: not used."""
    return ScheduleCheck(
        False, float("inf"), why=f"the default schedule could not be built to check it ({_said(err)})"
    )


def _said(err: Exception) -> str:
    """``err`` in one line: its type and the last line of its message (TVM's is a traceback)."""
    words = str(err).strip()
    return f"{type(err).__name__}: {words.splitlines()[-1] if words else ''}"


def _compare(plain: Any, scheduled: Any, shapes: Sequence[tuple[list[int], str]], seed: int) -> ScheduleCheck:
    """Both kernels run on the same random arguments (drawn twice from ``seed``); every buffer compared
    after, in place: a buffer both left alike (an input) costs no copy, one that differs (an output)
    is compared with the tolerances a chunk at a time, so a task with 1 GiB weights is checked in
    about twice its buffers' memory."""
    try:
        reference = _run(plain, shapes, seed)
        outputs = _run(scheduled, shapes, seed)
    except MemoryError:
        raise
    except Exception as err:  # one task's run, not the others'
        return ScheduleCheck(False, float("inf"), why=f"the check could not run the task ({_said(err)})")
    ok, worst = True, 0.0
    for ref_view, out_view in zip(reference, outputs, strict=True):
        ref, out = np.from_dlpack(ref_view).reshape(-1), np.from_dlpack(out_view).reshape(-1)
        for start in range(0, max(ref.size, 1), _COMPARE_CHUNK):
            a, b = ref[start : start + _COMPARE_CHUNK], out[start : start + _COMPARE_CHUNK]
            if np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
                continue
            compared = agreement([a], [b])
            ok, worst = ok and compared.ok, max(worst, float(compared.max_abs_err))
    return ScheduleCheck(ok, worst)


_COMPARE_CHUNK = 1 << 22
"""Elements compared at once (16 MiB of float32): the tolerance's float64 copies stay that size."""


def _shapes(func_mod: Any) -> list[tuple[list[int], str]] | None:
    """Each argument's shape and dtype; None when a shape is symbolic."""
    from tvm.s_tir import meta_schedule as ms

    found = []
    for info in ms.arg_info.ArgInfo.from_prim_func(func_mod["main"]):
        try:
            found.append(([int(d) for d in info.shape], str(info.dtype)))
        except TypeError:
            return None
    return found


def _room(shape: Sequence[int]) -> int:
    """Elements to allocate for ``shape``: its own, and as far as indices below :data:`INDEX_REACH`
    reach past its short axes (a 1x128 mask read at row 7 ends 7 rows further)."""
    size, stride, reach = 1, 1, 0
    for extent in reversed(shape):
        reach += max(0, INDEX_REACH - extent) * stride
        stride *= extent
        size *= extent
    return size + reach


def _run(kernel: Any, shapes: Sequence[tuple[list[int], str]], seed: int) -> list[Any]:
    """``kernel`` run on random arguments of ``shapes`` drawn from ``seed`` (each drawn, copied to TVM
    and released in turn): its buffers after, as TVM tensors."""
    import tvm

    rng = np.random.default_rng(seed)
    views = []
    for shape, dtype in shapes:
        pool = random_array([_room(shape)], dtype, rng)
        views.append(tvm.runtime.tensor(pool)._create_view(shape))
        del pool
    kernel(*views)
    return views

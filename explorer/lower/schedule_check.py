"""Check a task's default schedule against its plain loops: both built alone, run on the same random inputs.

A default schedule (:mod:`explorer.lower.default_schedules`) is a program TVM transformed
without measuring it; a transformation TVM gets wrong (its RewriteLayout postprocessor once
folded BERT's ``te_gather_nd`` indices into half their buffer) gives a kernel that runs fast
and computes something else. Each task's scheduled PrimFunc and its plain loop nest are
built on their own and run on the same random arguments (:func:`explorer.onnx_adapter.inputs.random_array`;
every buffer has room after it for an index that reaches past a short axis), and every
buffer is compared afterwards with float32's tolerances (:func:`explorer.runtimes.compare.agreement`).

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
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from explorer.isolation.io import write_bytes_atomic
from explorer.onnx_adapter.inputs import random_array
from explorer.runtimes.compare import agreement

__all__ = ["CHECKS_FOLDER", "INDEX_REACH", "ScheduleCheck", "check_schedule", "check_key", "checks_dir"]

CHECKS_FOLDER = "schedule-checks"
"""The folder of verdicts, in the target's tuning folder (:func:`explorer.lower.relax_tuning.tuning_dir`)."""

INDEX_REACH = 8
"""Random integers are below this (:func:`explorer.onnx_adapter.inputs.random_array`): an index
into a shorter axis reads past it, so every buffer gets this much room after it."""


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

    def reason(self) -> str:
        """Why the schedule is not used, as the build reports it (empty when it agrees).

        Examples
        --------
        >>> ScheduleCheck(False, 0.5, why="").reason()
        'default schedule differs from the plain loops by max |diff| 0.5; plain loops used'
        >>> ScheduleCheck(True, 0.0).reason()
        ''
        """
        if self.agrees:
            return ""
        what = (
            self.why or f"default schedule differs from the plain loops by max |diff| {self.max_abs_err:.3g}"
        )
        return f"{what}; plain loops used"


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
    from explorer.lower.relax_tuning import tuning_dir  # it imports the default schedules, which import this

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
    """Build ``scheduled`` and ``plain`` alone, run both on the same random arguments, compare every buffer.

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
    path = (
        Path(folder if folder is not None else checks_dir(target))
        / f"{check_key(plain, target, code_version)}.json"
    )
    try:
        return ScheduleCheck(**{**json.loads(path.read_text()), "cached": True})
    except (OSError, ValueError, TypeError):
        pass
    shapes = _shapes(plain)
    if shapes is None:
        found = ScheduleCheck(
            False, float("inf"), why="a symbolic shape: the default schedule cannot be checked"
        )
    else:
        rng = np.random.default_rng(seed)
        pools = [random_array([_room(shape)], dtype, rng) for shape, dtype in shapes]
        reference = _run(plain, target, pools, shapes)
        outputs = _run(scheduled, target, pools, shapes)
        compared = agreement(reference, outputs)
        found = ScheduleCheck(compared.ok, float(compared.max_abs_err))
    verdict = {k: v for k, v in asdict(found).items() if k != "cached"}
    write_bytes_atomic(json.dumps(verdict).encode(), path, fsync=False)
    return found


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


def _run(
    func_mod: Any, target: Any, pools: Sequence[np.ndarray], shapes: Sequence[tuple[list[int], str]]
) -> list[Any]:
    """Build ``func_mod`` alone, run it on copies of ``pools`` seen as ``shapes``: every buffer after."""
    import tvm

    kernel = tvm.compile(func_mod, target=target)
    views = [
        tvm.runtime.tensor(pool)._create_view(shape) for pool, (shape, _) in zip(pools, shapes, strict=True)
    ]
    kernel(*views)
    return [view.numpy() for view in views]

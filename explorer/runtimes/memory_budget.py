"""A memory budget per command: what a command needs for a model, checked before any work starts.

A command's peak memory grows with the model's weights (on disk, external data included:
:func:`~explorer.onnx_adapter.weights.model_bytes`). :data:`PEAK_PER_WEIGHT_BYTE` holds, per
command and runtime, the peak resident memory of the whole process tree over the weights'
size, as ``benchmarks/memory_benchmark.py`` measured it on a 3 GiB external-data model (see
``docs/performance.md``); :data:`BASE_BYTES` is what the processes take before the model (the
libraries). :func:`check_memory` compares that estimate with what this machine gives the
worker (its cap, :func:`explorer.isolation.worker.default_memory_mb`, and the memory available
now) and refuses up front, in well under a second, with the figures and what to do instead,
rather than letting the machine's out-of-memory killer end the run minutes later.

Some paths cannot take large weights at all: :data:`WEIGHT_LIMITS` (``prepare``'s quantisation
tools take the model as one protobuf message). They are refused on the weights' size alone,
wherever they run. IREE takes large weights as a parameter archive
(:mod:`explorer.lower.iree.iree_parameters`): its compiler never holds them, and its runtime maps them.

Examples
--------
>>> budget = memory_budget("bench", "tvm", weights_bytes=100 * 2**20, limit_bytes=16 * 2**30)
>>> budget.fits, round(budget.needed_bytes / 2**20)
(True, 652)
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from explorer.core.errors import MemoryBudgetError
from explorer.core.tensors import PROTOBUF_LIMIT, format_bytes

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "PEAK_PER_WEIGHT_BYTE",
    "BASE_BYTES",
    "WEIGHT_LIMITS",
    "MemoryBudget",
    "memory_budget",
    "memory_limit_bytes",
    "check_memory",
]

BASE_BYTES = 512 * 2**20
"""The processes' memory before the model: Python, ONNX Runtime, TVM (which imports torch), IREE."""

PEAK_PER_WEIGHT_BYTE: dict[tuple[str, str], float] = {
    ("info", ""): 0.1,
    ("passes", ""): 1.4,
    ("lower", "tvm"): 0.1,
    ("lower", "iree"): 0.1,
    ("bench", "ort"): 1.4,
    ("bench", "tvm"): 1.4,
    ("bench", "tvm-naive"): 1.4,
    ("bench", "iree"): 1.0,
    ("bench", "iree-default"): 1.0,
    ("bench", "torch-eager"): 2.0,
    ("bench", "onnx-reference"): 1.1,
    ("coverage", ""): 0.1,
    ("coverage", "iree-llvm-cpu"): 0.1,
    ("prepare", ""): 1.5,
}
"""(command, runtime) -> peak memory of the process tree per byte of weights, above what the same
command takes on a tiny model, measured by ``benchmarks/memory_benchmark.py`` (rounded up; the
``torch-eager``, ``tvm-naive`` and ``prepare`` entries are estimates). A runtime not listed takes its
command's ``""`` entry, or 2.0."""

WEIGHT_LIMITS: dict[tuple[str, str], tuple[int, str]] = {}
WEIGHT_LIMITS[("prepare", "")] = (
    PROTOBUF_LIMIT,
    "the NPU-ready pipeline's first step (ONNX Runtime's fix_shapes) and its QDQ steps hand the model to "
    "their library as one protobuf message, limited to 2 GiB",
)
"""(command, runtime) -> (the most weight bytes the path takes, why)."""

_ADVICE = {
    "bench": (
        "time it with ONNX Runtime (--runtime ort), which maps external weights; or make the weights "
        "smaller first (float16 or int8: onnx-explorer prepare, or passes)"
    ),
    "lower": "make the weights smaller first (float16 or int8), or lower a part of the model",
    "passes": "run ONNX Runtime's levels alone (ort:basic, ort:extended), which map external weights",
    "coverage": "check the op support with a target that does not compile (qnn-htp, coreml, nnapi)",
    "prepare": "make the weights smaller first (float16), or prepare on a machine with more memory",
}


@dataclass(frozen=True)
class MemoryBudget:
    """What one command needs for a model's weights, against what the machine gives it.

    Attributes
    ----------
    command, runtime : str
        The command and the runtime or compiler (``""`` where the command has none).
    weights_bytes : int
        The model's weights, external data included.
    needed_bytes : int
        The estimate: :data:`BASE_BYTES` plus the weights times the measured factor.
    limit_bytes : int or None
        What the machine gives (None: unknown, nothing refused on memory).
    weight_limit_bytes : int or None
        The most weights the path takes at all (:data:`WEIGHT_LIMITS`).
    reason : str
        Why it does not fit, in words ("" when it does).
    """

    command: str
    runtime: str
    weights_bytes: int
    needed_bytes: int
    limit_bytes: int | None
    weight_limit_bytes: int | None = None
    reason: str = ""

    @property
    def fits(self) -> bool:
        """Whether the command can go ahead."""
        return not self.reason

    def to_dict(self) -> dict[str, Any]:
        """The fields and ``fits``, JSON-ready.

        Examples
        --------
        >>> memory_budget("info", "", weights_bytes=0, limit_bytes=2**30).to_dict()["fits"]
        True
        """
        return {**asdict(self), "fits": self.fits}

    def to_frame(self) -> pd.DataFrame:
        """One row: :meth:`to_dict`.

        Examples
        --------
        >>> memory_budget("info", "", weights_bytes=0, limit_bytes=2**30).to_frame().shape[0]
        1
        """
        import pandas as pd

        return pd.DataFrame([self.to_dict()])


def _factor(command: str, runtime: str) -> float:
    family = runtime if (command, runtime) in PEAK_PER_WEIGHT_BYTE else ""
    return PEAK_PER_WEIGHT_BYTE.get((command, family), 2.0)


def memory_limit_bytes() -> int | None:
    """What this machine gives a command now: the worker's cap, or the memory available, the smaller.

    Examples
    --------
    >>> memory_limit_bytes() > 0
    True
    """
    from explorer.isolation.worker import defaults

    limits = []
    if defaults.memory_mb:
        limits.append(int(defaults.memory_mb) * 2**20)
    try:
        import psutil

        limits.append(int(psutil.virtual_memory().available))
    except (ImportError, OSError):
        pass
    return min(limits) if limits else None


def memory_budget(
    command: str, runtime: str, *, weights_bytes: int, limit_bytes: int | None = None
) -> MemoryBudget:
    """The budget of ``command`` on ``runtime`` for ``weights_bytes`` of weights.

    Parameters
    ----------
    command : str
        ``"info"``, ``"passes"``, ``"lower"``, ``"bench"``, ``"coverage"`` or ``"prepare"``.
    runtime : str
        The runtime (``bench``), compiler (``lower``), target (``coverage``), or ``""``.
    weights_bytes : int
        The model's weights.
    limit_bytes : int, optional
        What the machine gives (default :func:`memory_limit_bytes`).

    Examples
    --------
    >>> big = memory_budget("bench", "tvm", weights_bytes=3 * 2**30, limit_bytes=4 * 2**30)
    >>> big.fits, big.reason.split(";")[0]  # doctest: +ELLIPSIS
    (False, 'needs about 4.7 GiB (1.4 x its 3.0 GiB of weights, measured) and this machine gives 4.0 GiB')
    >>> memory_budget("prepare", "", weights_bytes=3 * 2**30, limit_bytes=2**40).reason[:38]
    "the NPU-ready pipeline's first step (O"
    """
    limit = memory_limit_bytes() if limit_bytes is None else limit_bytes
    factor = _factor(command, runtime)
    needed = BASE_BYTES + int(weights_bytes * factor)
    weight_limit, why = WEIGHT_LIMITS.get((command, runtime), (None, ""))
    reason = ""
    if weight_limit is not None and weights_bytes > weight_limit:
        reason = f"{why}; this model has {format_bytes(weights_bytes)} of weights"
    elif limit is not None and needed > limit:
        reason = (
            f"needs about {format_bytes(needed)} ({factor:g} x its {format_bytes(weights_bytes)} of "
            f"weights, measured) and this machine gives {format_bytes(limit)}"
        )
    if reason:
        reason = f"{reason}; {_ADVICE.get(command, 'use a machine with more memory')}"
    return MemoryBudget(command, runtime, int(weights_bytes), needed, limit, weight_limit, reason)


def check_memory(
    model: Any, command: str, runtimes: Iterable[str] = ("",), *, label: str | os.PathLike[str] | None = None
) -> list[MemoryBudget]:
    """Refuse ``command`` before any work when one of ``runtimes`` cannot take ``model`` here.

    Parameters
    ----------
    model : onnx.ModelProto
        The model (its weights may stay on disk: only their sizes are read).
    command : str
        See :func:`memory_budget`.
    runtimes : iterable of str
        The runtimes, compilers or targets the command will use.
    label : str, optional
        The model's source, for the message.

    Returns
    -------
    list of MemoryBudget
        One per runtime, every one fitting.

    Raises
    ------
    MemoryBudgetError
        The first runtime that does not fit, with the figures and what to do (CLI exit 3).

    Examples
    --------
    >>> from explorer import zoo
    >>> [b.fits for b in check_memory(zoo.build("mlp"), "bench", ["ort", "tvm"])]
    [True, True]
    """
    from explorer.onnx_adapter.weights import model_bytes

    weights = model_bytes(model)
    budgets = [memory_budget(command, runtime, weights_bytes=weights) for runtime in runtimes]
    for budget in budgets:
        if not budget.fits:
            where = f"{command} {budget.runtime}".strip()
            raise MemoryBudgetError(budget.reason, path=None if label is None else str(label), runtime=where)
    return budgets

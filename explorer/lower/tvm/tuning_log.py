"""Which models a tuning database was tuned for, and with how many trials (``tuned.json``, beside it).

The tuner (:func:`explorer.lower.tvm.relax_tuning.compile_tuned`) skips tuning a model, its
shapes and target it already tuned with at least the trials asked; the shipped records
(:func:`explorer.lower.tvm.tvm_records.seed_database`) are added to a database once. Both read
and write this log.

Examples
--------
>>> import tempfile
>>> folder = tempfile.mkdtemp()
>>> record_trials(folder, "mlp", 64)
>>> record_trials(folder, "mlp", 32)  # the most trials a key was tuned with stay
>>> tuned_trials(folder, "mlp"), tuned_trials(folder, "resnet18")
(64, 0)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from explorer.isolation.io import write_bytes_atomic

__all__ = ["TUNING_RECORD", "SHIPPED_PREFIX", "tuned_trials", "record_trials", "forget_models"]

TUNING_RECORD = "tuned.json"
"""Beside the database: model-and-shapes key -> trials it was tuned with."""

SHIPPED_PREFIX = "shipped:"
"""Keys of shipped record sets added to the database (``shipped:<manifest id>``), not models."""


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


def record_trials(work_dir: str | os.PathLike[str], key: str, trials: int) -> None:
    """Note in ``work_dir``'s log that ``key`` was tuned with ``trials`` (the most so far stays).

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> record_trials(folder, "shipped:llvm-x86_64-avx2", 1)
    >>> (Path(folder) / TUNING_RECORD).read_text()
    '{\\n "shipped:llvm-x86_64-avx2": 1\\n}'
    """
    path = Path(work_dir) / TUNING_RECORD
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    known[key] = max(int(known.get(key, 0)), trials)
    write_bytes_atomic(json.dumps(known, indent=1, sort_keys=True).encode(), path)


def forget_models(work_dir: str | os.PathLike[str]) -> list[str]:
    """Forget which models ``work_dir`` was tuned for (the shipped record sets it holds stay noted):
    the next tuning of each model runs, whatever budget it had before. For tuning on from the
    records on purpose (``benchmarks/pretune_zoo.py``), where a budget no larger than the last
    one would otherwise only apply the database.

    Returns
    -------
    list of str
        The keys forgotten.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> record_trials(folder, "tvm-mlp", 64)
    >>> record_trials(folder, SHIPPED_PREFIX + "avx2-1", 1)
    >>> forget_models(folder), tuned_trials(folder, "tvm-mlp"), tuned_trials(folder, "shipped:avx2-1")
    (['tvm-mlp'], 0, 1)
    """
    path = Path(work_dir) / TUNING_RECORD
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    forgotten = sorted(key for key in known if not key.startswith(SHIPPED_PREFIX))
    if forgotten:
        kept = {key: trials for key, trials in known.items() if key.startswith(SHIPPED_PREFIX)}
        write_bytes_atomic(json.dumps(kept, indent=1, sort_keys=True).encode(), path)
    return forgotten

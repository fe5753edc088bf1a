"""Which models a tuning database was tuned for, and with how many trials (``tuned.json``, beside it).

The tuner (:func:`explorer.lower.relax_tuning.compile_tuned`) skips tuning a model, its
shapes and target it already tuned with at least the trials asked; the shipped records
(:func:`explorer.lower.tvm_records.seed_database`) are added to a database once. Both read
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

__all__ = ["TUNING_RECORD", "tuned_trials", "record_trials"]

TUNING_RECORD = "tuned.json"
"""Beside the database: model-and-shapes key -> trials it was tuned with."""


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

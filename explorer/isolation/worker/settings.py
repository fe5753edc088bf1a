"""How every worker call is made: the defaults (timeout, memory cap, reuse, scratch folder) and the
constants the parent and the child share.

Examples
--------
>>> from explorer.isolation.worker.settings import defaults
>>> defaults.reuse
True
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any

from explorer.core.errors import (
    UsageError,
)

__all__ = ["WorkerDefaults", "defaults", "configure", "default_memory_mb"]

#: Text in an error message or stderr that means "an allocation failed".
_OOM_MARKERS = (
    "bad_alloc",
    "MemoryError",
    "Cannot allocate memory",
    "out of memory",
    "Out of memory",
    "Failed to allocate memory",
    "failed to allocate memory",
)
_TAIL_BYTES = 64 * 1024
#: How often a waiting call looks whether it was asked to stop (:meth:`Worker.cancel`).
_CANCEL_POLL_S = 0.2
_KILL_WAIT_S = 10.0
#: The worker processes' name (``multiprocessing.current_process().name`` in them, from their start).
_PROCESS_NAME = "explorer-worker"
#: The exit code of a worker that, still starting, found the parent's main script (imported again
#: by spawn) starting a worker: its top level runs without the ``__main__`` guard.
_MAIN_REIMPORTED_EXIT = 86


def default_memory_mb(fraction: float = 0.75) -> int | None:
    """Return a memory cap in MiB: ``fraction`` of physical RAM (or of the cgroup limit if lower).

    Parameters
    ----------
    fraction : float, optional
        Share of the available memory the child may map, by default 0.75.

    Returns
    -------
    int or None
        The cap in MiB, or None where the total memory cannot be read.

    Examples
    --------
    >>> from explorer.isolation.worker import default_memory_mb
    >>> default_memory_mb() > 0
    True
    """
    totals = [t for t in (_physical_memory_bytes(), _cgroup_limit_bytes()) if t]
    if not totals:
        return None
    return max(1, int(min(totals) * fraction) // 2**20)


def _physical_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _cgroup_limit_bytes() -> int | None:
    for name in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(name).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:
            return int(text)
    return None


@dataclasses.dataclass
class WorkerDefaults:
    """Settings used when a call does not give its own.

    Attributes
    ----------
    timeout : float or None
        Wall-clock limit of one call in seconds (600); None means no limit.
    memory_mb : int or None
        Address-space cap of the child in MiB (75% of RAM); None means no cap.
    reuse : bool
        Keep a warm worker per memory cap and reuse it between calls (True).
    start_timeout : float
        Seconds a new child may take to start and report ready (120).
    tail_lines : int
        How many of the child's last stderr lines errors carry (20).
    tmp_dir : str or None
        Where private temp folders are made; None means the system default.
    max_warm : int
        How many warm workers (one per memory cap) are kept at most (2).

    Examples
    --------
    >>> from explorer.isolation.worker import WorkerDefaults
    >>> WorkerDefaults(timeout=5).timeout
    5
    """

    timeout: float | None = 600.0
    memory_mb: int | None = dataclasses.field(default_factory=default_memory_mb)
    reuse: bool = True
    start_timeout: float = 120.0
    tail_lines: int = 20
    tmp_dir: str | None = None
    max_warm: int = 2


#: The module-wide defaults; change them with :func:`configure`.
defaults = WorkerDefaults()


def configure(**changes: Any) -> dict[str, Any]:
    """Change the module-wide defaults; return the previous values of what changed.

    Parameters
    ----------
    **changes
        Fields of :class:`WorkerDefaults`, e.g. ``timeout=60, memory_mb=4096``.

    Returns
    -------
    dict
        The old values, so that ``configure(**old)`` restores them.

    Raises
    ------
    TypeError
        If a name is not a field of :class:`WorkerDefaults`.

    Examples
    --------
    >>> from explorer.isolation import worker
    >>> old = worker.configure(timeout=60)
    >>> worker.defaults.timeout
    60
    >>> _ = worker.configure(**old)
    """
    fields = {f.name for f in dataclasses.fields(WorkerDefaults)}
    unknown = sorted(set(changes) - fields)
    if unknown:
        raise TypeError(f"unknown worker setting(s) {unknown}; known: {sorted(fields)}")
    old = {name: getattr(defaults, name) for name in changes}
    for name, value in changes.items():
        setattr(defaults, name, value)
    return old


def _resolve(value: float | None, default: float | None, name: str) -> float | None:
    """None means "use the default"; 0 means "no limit"; ``name`` is the argument's, for the error."""
    if value is None:
        value = default
    if value is None or value == 0 or value == math.inf:
        return None
    if value < 0:
        raise UsageError(
            f"{name} must be positive (0 means no limit, None the worker's default), got {value}"
        )
    return value

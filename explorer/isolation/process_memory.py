"""Memory of a process tree (a process, its children and theirs) summed, and its peak over time.

What a notebook costs is its kernel's memory plus that of everything the kernel started: the
explorer's worker (``docs/isolation.md``), multiprocessing's resource tracker, a pool of compile
jobs. Binder gives a visitor 1-2 GB for all of them together. :func:`tree_memory` sums the
resident set sizes (RSS) of a process and all its descendants at one instant;
:class:`ProcessTreeSampler` does that every ``interval_s`` in a background thread and keeps the
peak of the sums. A page shared by two processes (a library mapped by both, the pages a forked
child still shares with its parent) counts once per process in the RSS sum, an upper bound of what
the processes hold together; the sum of their proportional set sizes (PSS: each shared page split
among the processes that map it) counts it once, which is what a container's memory limit sees.
The peak is kept for both; PSS is the figure the course's 2 GB bound is checked against (it reads
as RSS where the system does not report PSS). The root's own PSS and that of its descendants (a
kernel and its worker) have their peaks too, each over the whole interval.

Examples
--------
>>> with ProcessTreeSampler(interval_s=0.01) as sampler:
...     block = bytearray(32 * 2**20)  # 32 MiB, touched
>>> peak = sampler.result
>>> peak.peak_rss_bytes >= 32 * 2**20 and peak.samples >= 1
True
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import psutil

from explorer.core.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MemoryPeak", "ProcessTreeSampler", "TreeMemory", "tree_memory", "release_freed_memory"]

MIB = 2**20


@dataclass(frozen=True)
class TreeMemory:
    """The memory of a process tree at one instant.

    Attributes
    ----------
    root_pid : int
        The process whose tree was read.
    rss_bytes : int
        The sum of the resident set sizes of the processes read (0 when the root is gone).
    processes : int
        How many processes were read (the root, when included, and its living descendants).
    pss_bytes : int
        The sum of their proportional set sizes (shared pages counted once over the tree).
    root_pss_bytes : int
        The root's own proportional set size (0 when it was not counted or is gone).
    anonymous_bytes : int
        The sum of their resident memory that no file backs (RSS less shared pages: a file mapped
        read-only is page cache the kernel can drop and read again).
    """

    root_pid: int
    rss_bytes: int
    processes: int
    pss_bytes: int = 0
    root_pss_bytes: int = 0
    anonymous_bytes: int = 0

    @property
    def rss_mib(self) -> float:
        """``rss_bytes`` in MiB."""
        return self.rss_bytes / MIB

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of the fields (and ``rss_mib``).

        Examples
        --------
        >>> TreeMemory(1, 3 * 2**20, 2).to_dict()["rss_mib"]
        3.0
        """
        return {**asdict(self), "rss_mib": self.rss_mib}

    def to_frame(self) -> pd.DataFrame:
        """Return a one-row DataFrame of :meth:`to_dict`.

        Examples
        --------
        >>> TreeMemory(1, 2**20, 1).to_frame().columns.tolist()
        ['root_pid', 'rss_bytes', 'processes', 'pss_bytes', 'root_pss_bytes', 'anonymous_bytes', 'rss_mib']
        """
        import pandas as pd

        return pd.DataFrame([self.to_dict()])


def tree_memory(pid: int | None = None, *, include_root: bool = True) -> TreeMemory:
    """Sum the resident set sizes of a process and all its descendants, now.

    Processes that end while they are read are left out; a root that is gone reads as zero.

    Parameters
    ----------
    pid : int, optional
        The root process (default: this one).
    include_root : bool
        Count the root itself (``False``: its descendants only, e.g. the kernels a notebook
        runner started, without the runner).

    Returns
    -------
    TreeMemory
        The sum and how many processes made it.

    Examples
    --------
    >>> m = tree_memory()
    >>> m.processes >= 1 and m.rss_bytes > 0
    True
    >>> tree_memory(include_root=False).rss_bytes <= tree_memory().rss_bytes + 2**30
    True
    """
    root_pid = os.getpid() if pid is None else pid
    try:
        root = psutil.Process(root_pid)
        processes = root.children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return TreeMemory(root_pid, 0, 0)
    if include_root:
        processes.insert(0, root)
    total = proportional = counted = own = anonymous = 0
    for process in processes:
        try:
            rss, pss, shared = _rss_pss_shared(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        total, proportional, counted = total + rss, proportional + pss, counted + 1
        anonymous += rss - shared
        if process.pid == root_pid:
            own = pss
    return TreeMemory(root_pid, total, counted, proportional, own, anonymous)


def _rss_pss_shared(process: psutil.Process) -> tuple[int, int, int]:
    """A process's resident and proportional set sizes (PSS read as RSS where there is none) and
    its resident shared (file-backed) memory."""
    try:
        full = process.memory_full_info()
    except psutil.AccessDenied:
        info = process.memory_info()
        return info.rss, info.rss, int(getattr(info, "shared", 0))
    return full.rss, int(getattr(full, "pss", full.rss)), int(getattr(full, "shared", 0))


@dataclass(frozen=True)
class MemoryPeak:
    """The peak of a process tree's summed memory over a sampled interval.

    Attributes
    ----------
    root_pid : int
        The root of the sampled tree (0 when sampling never started).
    peak_rss_bytes : int
        The largest sum of resident set sizes seen at one instant.
    processes_at_peak : int
        How many processes made that sum.
    max_processes : int
        The most processes seen at one instant.
    samples : int
        How many times the tree was read.
    interval_s : float
        The time asked for between two reads.
    duration_s : float
        From the first read to the last.
    peak_pss_bytes : int
        The largest sum of proportional set sizes seen at one instant (shared pages once).
    peak_root_pss_bytes : int
        The largest proportional set size of the root alone (0 when it was not counted).
    peak_children_pss_bytes : int
        The largest sum of the proportional set sizes of the root's descendants (a kernel's
        worker) at one instant; this peak and the root's may come at different instants.
    """

    root_pid: int
    peak_rss_bytes: int
    processes_at_peak: int
    max_processes: int
    samples: int
    interval_s: float
    duration_s: float
    peak_pss_bytes: int = 0
    peak_root_pss_bytes: int = 0
    peak_children_pss_bytes: int = 0

    @property
    def peak_mib(self) -> float:
        """``peak_rss_bytes`` in MiB."""
        return self.peak_rss_bytes / MIB

    @property
    def peak_pss_mib(self) -> float:
        """``peak_pss_bytes`` in MiB."""
        return self.peak_pss_bytes / MIB

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of the fields (and ``peak_mib``).

        Examples
        --------
        >>> MemoryPeak(7, 2**21, 2, 3, 10, 0.1, 0.9).to_dict()["peak_mib"]
        2.0
        """
        return {**asdict(self), "peak_mib": self.peak_mib, "peak_pss_mib": self.peak_pss_mib}

    def to_frame(self) -> pd.DataFrame:
        """Return a one-row DataFrame of :meth:`to_dict`.

        Examples
        --------
        >>> MemoryPeak(7, 2**21, 2, 3, 10, 0.1, 0.9).to_frame()["samples"].tolist()
        [10]
        """
        import pandas as pd

        return pd.DataFrame([self.to_dict()])


class ProcessTreeSampler:
    """Read a process tree's summed memory every ``interval_s`` in a thread; keep the peak.

    Use it as a context manager (sampling this process's tree, or ``pid``'s), or call
    :meth:`start` with a pid known only later (a kernel's, once it started) and :meth:`stop`.
    The tree is read again on every sample, so processes started or ended meanwhile count.

    Parameters
    ----------
    pid : int, optional
        The root process (default: this one; :meth:`start` can name it instead).
    interval_s : float
        Time between two reads (0.1: a read of a few processes takes well under a millisecond).
    include_root : bool
        Count the root itself, as :func:`tree_memory`.

    Examples
    --------
    >>> sampler = ProcessTreeSampler(interval_s=0.01).start()
    >>> peak = sampler.stop()
    >>> peak.samples >= 1 and peak.peak_rss_bytes > 0 and peak.root_pid == os.getpid()
    True
    """

    def __init__(self, pid: int | None = None, *, interval_s: float = 0.1, include_root: bool = True) -> None:
        if interval_s <= 0:
            raise UsageError(f"interval_s must be positive, got {interval_s}")
        self.pid = pid
        self.interval_s = interval_s
        self.include_root = include_root
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._peak = TreeMemory(0, 0, 0)
        self._peak_pss = self._peak_root_pss = self._peak_children_pss = 0
        self._max_processes = 0
        self._samples = 0
        self._first = self._last = 0.0
        self._result: MemoryPeak | None = None

    def start(self, pid: int | None = None) -> ProcessTreeSampler:
        """Read the tree once now, then every ``interval_s`` until :meth:`stop`.

        Parameters
        ----------
        pid : int, optional
            The root process, if not given to the constructor (default: this one).

        Returns
        -------
        ProcessTreeSampler
            ``self``, so that ``sampler = ProcessTreeSampler().start()`` reads well.

        Examples
        --------
        >>> ProcessTreeSampler(interval_s=0.01).start(os.getpid()).stop().root_pid == os.getpid()
        True
        """
        if self._thread is not None:
            raise RuntimeError("this sampler was already started")
        if pid is not None:
            self.pid = pid
        if self.pid is None:
            self.pid = os.getpid()
        self._first = time.perf_counter()
        self._sample()
        self._thread = threading.Thread(target=self._run, name="process-tree-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> MemoryPeak:
        """Read the tree a last time, end the thread and return the peak.

        Returns
        -------
        MemoryPeak
            The peak over the whole sampled interval; a sampler never started returns zeros.

        Examples
        --------
        >>> ProcessTreeSampler().stop().samples
        0
        """
        if self._result is not None:
            return self._result
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._sample()
        self._result = self.peak
        return self._result

    @property
    def peak(self) -> MemoryPeak:
        """The peak so far (while sampling goes on, or after :meth:`stop`)."""
        with self._lock:
            return MemoryPeak(
                root_pid=self.pid or 0,
                peak_rss_bytes=self._peak.rss_bytes,
                processes_at_peak=self._peak.processes,
                max_processes=self._max_processes,
                samples=self._samples,
                interval_s=self.interval_s,
                duration_s=max(self._last - self._first, 0.0) if self._samples else 0.0,
                peak_pss_bytes=self._peak_pss,
                peak_root_pss_bytes=self._peak_root_pss,
                peak_children_pss_bytes=self._peak_children_pss,
            )

    @property
    def result(self) -> MemoryPeak:
        """The peak returned by :meth:`stop` (an error before it)."""
        if self._result is None:
            raise RuntimeError("the sampler has not been stopped")
        return self._result

    def __enter__(self) -> ProcessTreeSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _sample(self) -> None:
        now = tree_memory(self.pid, include_root=self.include_root)
        with self._lock:
            self._samples += 1
            self._last = time.perf_counter()
            self._max_processes = max(self._max_processes, now.processes)
            if now.rss_bytes > self._peak.rss_bytes:
                self._peak = now
            self._peak_pss = max(self._peak_pss, now.pss_bytes)
            self._peak_root_pss = max(self._peak_root_pss, now.root_pss_bytes)
            self._peak_children_pss = max(self._peak_children_pss, now.pss_bytes - now.root_pss_bytes)


def release_freed_memory() -> bool:
    """Collect garbage and hand the C heap's free pages back to the system (glibc's ``malloc_trim``).

    A library that built a large structure and freed it (an MLIR module with its weights, a
    protobuf) leaves the pages with the allocator, still counted in this process's memory; a
    compiler started next would add its own peak on top. Returns whether the trim ran (only with
    glibc).

    Examples
    --------
    >>> release_freed_memory() in (True, False)
    True
    """
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return False
    trim(0)
    return True

"""The machine's measured peak: arithmetic (GFLOP/s) and memory bandwidth (GB/s), the roofline's roofs.

Measured, not looked up: a float32 matrix product through numpy's BLAS on every core (what a
tuned kernel can reach here), and a copy of arrays larger than the last-level cache (bytes
read plus bytes written per second). Measured once per process, in a fraction of a second.

Examples
--------
>>> peak = measure_peak()
>>> peak.gflops > 0 and peak.gbps > 0
True
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from explorer.isolation.cpu_cores import physical_cores

__all__ = ["MachinePeak", "measure_peak", "MATMUL_SIZE", "COPY_BYTES"]

MATMUL_SIZE = 1024
"""Side of the square float32 matrices multiplied to measure the arithmetic peak."""

COPY_BYTES = 64 << 20
"""Size of the array copied to measure bandwidth (above a server's last-level cache)."""


@dataclass(frozen=True)
class MachinePeak:
    """What this machine can do at best.

    Attributes
    ----------
    gflops : float
        Float32 GFLOP/s of a BLAS matrix product on every core.
    gbps : float
        GB/s moved (read + written) by a large copy.
    cores : int
        Physical cores (:func:`explorer.isolation.cpu_cores.physical_cores`).
    """

    gflops: float
    gbps: float
    cores: int

    @property
    def ridge(self) -> float:
        """FLOPs per byte where the roofline turns from memory-bound to compute-bound.

        Examples
        --------
        >>> MachinePeak(100.0, 20.0, 2).ridge
        5.0
        """
        return self.gflops / self.gbps

    def attainable(self, intensity: float) -> float:
        """GFLOP/s attainable at ``intensity`` FLOPs per byte: ``min(peak, bandwidth * intensity)``.

        Examples
        --------
        >>> MachinePeak(100.0, 20.0, 2).attainable(1.0)
        20.0
        """
        return min(self.gflops, self.gbps * intensity)

    def to_dict(self) -> dict[str, Any]:
        """The fields and the ridge point.

        Examples
        --------
        >>> MachinePeak(100.0, 20.0, 2).to_dict()["ridge"]
        5.0
        """
        return {**asdict(self), "ridge": self.ridge}


def _best_seconds(fn: Any, repeat: int) -> float:
    fn()  # warm-up: threads started, pages touched
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


@lru_cache(maxsize=1)
def measure_peak() -> MachinePeak:
    """Measure the arithmetic and bandwidth peaks (once per process; the best of a few runs).

    Examples
    --------
    >>> measure_peak() is measure_peak()
    True
    """
    rng = np.random.default_rng(0)
    a = rng.standard_normal((MATMUL_SIZE, MATMUL_SIZE), dtype=np.float32)
    b = rng.standard_normal((MATMUL_SIZE, MATMUL_SIZE), dtype=np.float32)
    out = np.empty_like(a)
    matmul_s = _best_seconds(lambda: np.matmul(a, b, out=out), repeat=5)
    src = np.ones(COPY_BYTES // 4, dtype=np.float32)
    dst = np.empty_like(src)
    copy_s = _best_seconds(lambda: np.copyto(dst, src), repeat=5)
    return MachinePeak(
        gflops=2.0 * MATMUL_SIZE**3 / matmul_s / 1e9,
        gbps=2.0 * COPY_BYTES / copy_s / 1e9,
        cores=physical_cores(),
    )

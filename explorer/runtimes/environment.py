"""The machine a notebook or benchmark runs on, in one value: cores, ISA, memory, versions, tuning records.

Every figure the course prints is this machine's: the notebooks' environment cell prints
:func:`environment` first so that a learner reads a latency or a ratio against the machine
that made it. Versions are read from the installed packages' metadata (nothing heavy is
imported: no TVM, no torch), so the cell costs milliseconds.

Examples
--------
>>> env = environment()
>>> env.physical_cores >= 1 and "onnx" in env.versions
True
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from explorer.isolation.cpu_cores import physical_cores
from explorer.lower.tvm.tvm_records import records_key, shipped_records

__all__ = ["Environment", "environment", "PACKAGES"]

PACKAGES = (
    "onnx",
    "onnxruntime",
    "onnxoptimizer",
    "onnxsim",
    "onnxscript",
    "apache-tvm",
    "iree-base-compiler",
    "iree-base-runtime",
    "torch",
    "numpy",
    "networkx",
    "plotly",
    "ipywidgets",
    "jupyterlab",
)
"""The distributions whose versions the environment reports (absent ones as None)."""


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith(("model name", "Model", "Hardware")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return round(pages * size / 2**30, 1)


@dataclass(frozen=True)
class Environment:
    """What a measurement ran on.

    Attributes
    ----------
    cpu : str
        The processor's model name.
    machine : str
        The architecture (``x86_64``, ``aarch64``).
    isa : str
        The widest vector unit TVM's shipped records key on (``avx512``, ``avx2``, ``sse``,
        ``neon``, ``sve``).
    physical_cores, logical_cpus : int
        Cores ONNX Runtime and TVM use one thread each on, and what the OS schedules.
    memory_gib : float or None
        Physical memory.
    python : str
        The interpreter's version.
    versions : dict
        Distribution name -> installed version (None: not installed).
    records_key : str
        The folder of shipped TVM tuning records that would apply here.
    records_shipped : bool
        Whether records are shipped for this CPU (``TvmRuntime(pretuned=True)`` then tunes in seconds).
    """

    cpu: str
    machine: str
    isa: str
    physical_cores: int
    logical_cpus: int
    memory_gib: float | None
    python: str
    versions: dict[str, str | None] = field(default_factory=dict)
    records_key: str = ""
    records_shipped: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready.

        Examples
        --------
        >>> sorted(environment().to_dict())[:3]
        ['cpu', 'isa', 'logical_cpus']
        """
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        """One row per fact (versions flattened as ``version: NAME``), column ``value``.

        Examples
        --------
        >>> "version: onnx" in environment().to_frame().index
        True
        """
        rows = {k: v for k, v in self.to_dict().items() if k != "versions"}
        rows.update({f"version: {name}": v for name, v in self.versions.items()})
        return pd.DataFrame({"value": [str(v) for v in rows.values()]}, index=list(rows))

    def to_text(self) -> str:
        """A few lines for a notebook's environment cell.

        Examples
        --------
        >>> "cores" in environment().to_text()
        True
        """
        installed = ", ".join(f"{k} {v}" for k, v in self.versions.items() if v)
        missing = [k for k, v in self.versions.items() if not v]
        records = (
            f"shipped TVM tuning records apply ({self.records_key})"
            if self.records_shipped
            else f"no shipped TVM tuning records for {self.records_key}: TVM runs untuned unless you tune"
        )
        memory = f", {self.memory_gib:g} GiB" if self.memory_gib else ""
        return "\n".join(
            [
                f"machine: {self.cpu} ({self.machine}, {self.isa}), {self.physical_cores} physical cores, "
                f"{self.logical_cpus} logical CPUs{memory}",
                f"python {self.python}; {installed}",
                *([f"not installed: {', '.join(missing)}"] if missing else []),
                records,
            ]
        )

    def __str__(self) -> str:
        return self.to_text()


def environment() -> Environment:
    """Describe this machine and the installed stack (no heavy imports).

    Returns
    -------
    Environment

    Examples
    --------
    >>> env = environment()
    >>> env.records_key.startswith("llvm-")
    True
    """
    key = records_key()
    return Environment(
        cpu=_cpu_model(),
        machine=platform.machine(),
        isa=key.rsplit("-", 1)[-1],
        physical_cores=physical_cores(),
        logical_cpus=os.cpu_count() or 1,
        memory_gib=_memory_gib(),
        python=sys.version.split()[0],
        versions={name: _version(name) for name in PACKAGES},
        records_key=key,
        records_shipped=shipped_records() is not None,
    )

"""ONNX Runtime as a :class:`~explorer.runtimes.base.Runtime`, one per execution provider of the build.

Options are the graph optimisation level (``disable`` ... ``all``, ONNX Runtime's default
``all``) and the intra-op thread count (0: ONNX Runtime's default, one per physical core).
A provider the installed build lacks, or CUDA without a GPU, is not :meth:`~OrtRuntime.available`
and is skipped, not failed.

Examples
--------
>>> OrtRuntime().name, OrtRuntime(provider="CUDAExecutionProvider").name
('ort', 'ort-cuda')
>>> OrtRuntime(optimization="basic", threads=1).label
'ONNX Runtime CPU (basic, 1 thread)'
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import worker
from ..model_files import worker_source
from ..native import ORT_LEVELS
from ..worker import ProgressEvent
from .base import PreparedSession, session_key
from .sessions import prepare_ort

if TYPE_CHECKING:
    from ..graph import ModelGraph

__all__ = ["OrtRuntime", "PROVIDER_NAMES", "available_providers"]

PROVIDER_NAMES = {"CPUExecutionProvider": "cpu", "CUDAExecutionProvider": "cuda"}
"""Execution provider -> the short name after ``ort-`` (the CPU's is plain ``ort``)."""


def _providers_here() -> list[str]:
    import onnxruntime as ort

    return list(ort.get_available_providers())


@functools.cache
def available_providers() -> tuple[str, ...]:
    """The execution providers of the installed ONNX Runtime build (asked in the worker, once).

    Examples
    --------
    >>> "CPUExecutionProvider" in available_providers()
    True
    """
    return tuple(worker.run(_providers_here))


def _gpu_present() -> bool:
    import shutil

    return shutil.which("nvidia-smi") is not None


@dataclass(frozen=True)
class OrtRuntime:
    """ONNX Runtime with one execution provider.

    Parameters
    ----------
    provider : str
        The execution provider (``CPUExecutionProvider``, ``CUDAExecutionProvider``, ...).
    optimization : str
        Graph optimisation level: one of :data:`explorer.native.ORT_LEVELS`.
    threads : int
        Intra-op threads; 0 is ONNX Runtime's default.

    Examples
    --------
    >>> OrtRuntime().available()
    True
    """

    provider: str = "CPUExecutionProvider"
    optimization: str = "all"
    threads: int = 0

    def __post_init__(self) -> None:
        if self.optimization not in ORT_LEVELS:
            raise ValueError(
                f"optimization must be one of {', '.join(ORT_LEVELS)}, not {self.optimization!r}"
            )

    @property
    def name(self) -> str:
        """``ort``, or ``ort-<provider>`` for other providers (``ort-cuda``)."""
        short = PROVIDER_NAMES.get(self.provider, self.provider.removesuffix("ExecutionProvider").lower())
        return "ort" if short == "cpu" else f"ort-{short}"

    @property
    def label(self) -> str:
        """``ONNX Runtime CPU (all)``, with the thread count when one was set."""
        short = PROVIDER_NAMES.get(self.provider, self.provider.removesuffix("ExecutionProvider"))
        threads = f", {self.threads} thread{'s' if self.threads != 1 else ''}" if self.threads else ""
        return f"ONNX Runtime {short.upper()} ({self.optimization}{threads})"

    @property
    def tuned(self) -> bool:
        """ONNX Runtime does not tune: False."""
        return False

    def available(self) -> bool:
        """Whether the installed build has the provider (and, for CUDA, a GPU is present)."""
        if self.provider not in available_providers():
            return False
        return self.provider != "CUDAExecutionProvider" or _gpu_present()

    def options(self) -> dict[str, Any]:
        """``{"provider", "optimization", "threads"}``."""
        return {"provider": self.provider, "optimization": self.optimization, "threads": self.threads}

    def prepare(
        self,
        graph: ModelGraph,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        *,
        progress: Callable[[ProgressEvent], object] | None = None,
    ) -> PreparedSession:
        """Create the ONNX Runtime session in the worker (or find it there).

        Examples
        --------
        >>> from explorer import load
        >>> OrtRuntime().prepare(load("zoo:mlp")).info["providers"]
        ['CPUExecutionProvider']
        """
        if graph.model is None:
            raise ValueError("a runtime needs a top-level ONNX graph (one with a ModelProto)")
        key = session_key(self, graph, input_shapes)
        info = worker.run_on_model(
            prepare_ort,
            worker_source(graph),
            key,
            self.options(),
            step=f"{self.label}: session",
            progress=progress,
        )
        return PreparedSession(self, key, info, graph, dict(input_shapes) if input_shapes else None)

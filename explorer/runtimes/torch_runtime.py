"""PyTorch eager as a :class:`~explorer.runtimes.base.Runtime`: the baseline people run before compiling.

The model runs one ``torch`` call per ONNX node from Python (:mod:`explorer.runtimes.torch_eager`),
in the worker, timed there like the other runtimes: so "compiled" (ONNX Runtime's fused
kernels, TVM's generated ones) is compared with what a PyTorch user runs first, on the same
inputs, with the agreement checked.

Examples
--------
>>> TorchEagerRuntime().label
'PyTorch eager'
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from explorer.core.errors import RuntimeUnsupportedError
from explorer.isolation.worker import ProgressEvent
from explorer.onnx_adapter.adapter import opset_versions
from explorer.runtimes.base import PreparedSession, prepare_in_worker
from explorer.runtimes.torch_prepare import prepare_torch

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = ["TorchEagerRuntime"]


@dataclass(frozen=True)
class TorchEagerRuntime:
    """PyTorch eager: the ONNX graph node by node as ``torch`` calls.

    Parameters
    ----------
    threads : int
        PyTorch's intra-op threads; 0 is one per physical core (as ONNX Runtime and TVM run here).

    Examples
    --------
    >>> TorchEagerRuntime(threads=1).label, TorchEagerRuntime().name
    ('PyTorch eager (1 thread)', 'torch-eager')
    """

    family: ClassVar[str] = "torch"
    """How its profile names kernels and what memory it needs (:class:`~explorer.runtimes.base.Runtime`)."""
    places_nodes: ClassVar[bool] = False
    """It compiles for one device: ONNX Runtime's ``--strict-placement`` does not apply."""

    threads: int = 0

    @property
    def name(self) -> str:
        """``torch-eager``."""
        return "torch-eager"

    @property
    def label(self) -> str:
        """``PyTorch eager``, with the thread count when one was set."""
        threads = f" ({self.threads} thread{'s' if self.threads != 1 else ''})" if self.threads else ""
        return f"PyTorch eager{threads}"

    @property
    def tuned(self) -> bool:
        """Eager runs what it is given: False."""
        return False

    def available(self) -> bool:
        """Whether PyTorch is installed (the ``torch`` extra)."""
        return importlib.util.find_spec("torch") is not None

    def options(self) -> dict[str, Any]:
        """``{"threads"}``."""
        return {"threads": self.threads}

    def prepare(
        self,
        graph: ModelGraph,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        *,
        progress: Callable[[ProgressEvent], object] | None = None,
    ) -> PreparedSession:
        """Load the model as eager PyTorch in the worker (or find it there).

        Raises
        ------
        RuntimeUnsupportedError
            A node whose op has no ``torch`` translation here (control flow, quantized ops,
            another domain's ops): the error names the op, its node and the ops it runs.

        Examples
        --------
        >>> from explorer import load
        >>> TorchEagerRuntime().prepare(load("zoo:mlp")).info["runtime"]
        'torch-eager'
        >>> try:
        ...     TorchEagerRuntime().prepare(load("zoo:control_flow"))
        ... except RuntimeUnsupportedError as err:
        ...     print(err.op_type)
        If
        """
        key, info = prepare_in_worker(
            self, graph, input_shapes, prepare_torch, step=f"{self.label}: load", progress=progress
        )
        if not info.get("ok", True):
            opsets = opset_versions(graph)
            domain = str(info.get("domain") or "")
            raise RuntimeUnsupportedError(
                str(info["reason"]),
                runtime=f"PyTorch {info.get('version', '')} eager",
                op_type=str(info["op_type"]),
                domain=domain,
                opset=opsets.get("" if domain == "ai.onnx" else domain),
                path=graph.source,
            )
        return PreparedSession(self, key, info, graph, dict(input_shapes) if input_shapes else None)

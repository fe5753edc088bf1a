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

from explorer.core.errors import RuntimeUnsupportedError
from explorer.isolation import worker
from explorer.isolation.worker import ProgressEvent
from explorer.onnx_adapter.adapter import opset_versions
from explorer.runtimes.base import PreparedSession, prepare_in_worker
from explorer.runtimes.ort import ORT_LEVELS
from explorer.runtimes.sessions import prepare_ort

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

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
        Graph optimisation level: one of :data:`explorer.runtimes.ort.ORT_LEVELS`.
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

    @property
    def missing(self) -> str | None:
        """Why it cannot run here, in words; None when it can: the installed build has the provider
        (and, for CUDA, a GPU is present).

        Examples
        --------
        >>> OrtRuntime().missing is None
        True
        >>> OrtRuntime("NoSuchExecutionProvider").missing.split(" (")[0]
        'this onnxruntime build has no NoSuchExecutionProvider'
        """
        providers = available_providers()
        if self.provider not in providers:
            return f"this onnxruntime build has no {self.provider} (it has {', '.join(providers)})"
        if self.provider == "CUDAExecutionProvider" and not _gpu_present():
            return "no NVIDIA GPU here (nvidia-smi is not on the PATH)"
        return None

    def available(self) -> bool:
        """Whether it can run here: :attr:`missing` is None."""
        return self.missing is None

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

        Raises
        ------
        RuntimeUnsupportedError
            ONNX Runtime refused the model for the model's sake: no kernel for an op at the
            version its opset resolves to (or for its types), an op of a domain it does not
            know, an opset newer than the build, a locale the machine lacks. The error names
            the op, its domain and opset, and the runtime (see
            :func:`explorer.runtimes.sessions.ort_refusal`). Any other failure stays as it is.

        Examples
        --------
        >>> from explorer import load
        >>> OrtRuntime().prepare(load("zoo:mlp")).info["providers"]
        ['CPUExecutionProvider']
        >>> from onnx import TensorProto, helper
        >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
        >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
        >>> node = helper.make_node("Foo", ["x"], ["y"], domain="my.ops")
        >>> opsets = [helper.make_opsetid("", 17), helper.make_opsetid("my.ops", 3)]
        >>> custom = helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=opsets)
        >>> try:
        ...     OrtRuntime().prepare(load(custom))
        ... except RuntimeUnsupportedError as err:
        ...     print(err.op_type, err.domain, err.opset)
        Foo my.ops 3
        """
        key, info = prepare_in_worker(
            self, graph, input_shapes, prepare_ort, step=f"{self.label}: session", progress=progress
        )
        if not info.get("ok", True):
            raise _refused(info, graph)
        return PreparedSession(self, key, info, graph, dict(input_shapes) if input_shapes else None)


def _refused(info: Mapping[str, Any], graph: ModelGraph) -> RuntimeUnsupportedError:
    """The typed error of ONNX Runtime's refusal (what ``prepare_ort`` returned), with the domain
    of the op (when the message did not say it) and the opset the model imports for it."""
    model = graph.model
    op, domain = info.get("op_type"), info.get("domain")
    if op and domain is None and model is not None:
        domain = _node_domain(model, str(op), str(info.get("node") or ""))
    opsets = opset_versions(graph)
    key = "" if domain in (None, "ai.onnx") else str(domain)
    node = f" (node {info['node']})" if info.get("node") else ""
    return RuntimeUnsupportedError(
        f"{info['reason']}{node}",
        runtime=f"onnxruntime {info.get('version', '')} {info.get('provider', '')}".replace("  ", " "),
        op_type=str(op) if op else None,
        domain=str(domain or ""),
        opset=opsets.get(key),
        path=graph.source,
    )


def _node_domain(model: Any, op: str, node: str) -> str:
    """The domain of the node called ``node`` with op ``op`` (or of any node with that op) in the
    model's graphs and functions; ``""`` when none has it."""
    from explorer.onnx_adapter.protos import iter_graphs

    graphs = [g.node for g, _ in iter_graphs(model.graph)] + [f.node for f in model.functions]
    found = [n for nodes in graphs for n in nodes if n.op_type == op]
    named = [n for n in found if node and n.name == node]
    return (named or found)[0].domain if found else ""

"""ONNX's reference implementation as a :class:`~explorer.runtimes.base.Runtime`: the specification's answer.

``onnx.reference.ReferenceEvaluator`` runs each operator as the ONNX specification writes it,
in numpy: orders of magnitude slower than a runtime, but the answer a runtime's outputs are
judged against when they disagree with each other. It runs in the worker like the others
(:func:`~explorer.runtimes.reference_prepare.prepare_reference`), timed and profiled per node.

Examples
--------
>>> OnnxReferenceRuntime().label, OnnxReferenceRuntime().name
('ONNX reference implementation', 'onnx-reference')
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from explorer.core.errors import RuntimeUnsupportedError
from explorer.isolation.worker import ProgressEvent
from explorer.runtimes.base import PreparedSession, prepare_in_worker
from explorer.runtimes.reference_prepare import prepare_reference

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = ["OnnxReferenceRuntime"]


@dataclass(frozen=True)
class OnnxReferenceRuntime:
    """ONNX's reference evaluator: every node as the specification defines it, in numpy.

    Examples
    --------
    >>> OnnxReferenceRuntime().available(), OnnxReferenceRuntime().tuned
    (True, False)
    """

    family: ClassVar[str] = "reference"
    """Its profile's records are named after the ONNX nodes (:func:`explorer.runtimes.profile.profile`)."""
    places_nodes: ClassVar[bool] = False
    """It runs everything on the CPU: ONNX Runtime's ``--strict-placement`` does not apply."""

    @property
    def name(self) -> str:
        """``onnx-reference``."""
        return "onnx-reference"

    @property
    def label(self) -> str:
        """``ONNX reference implementation``."""
        return "ONNX reference implementation"

    @property
    def tuned(self) -> bool:
        """The specification's code, as written: False."""
        return False

    def available(self) -> bool:
        """Whether ``onnx.reference`` is there (it comes with onnx)."""
        return importlib.util.find_spec("onnx.reference") is not None

    def options(self) -> dict[str, Any]:
        """None: ``{}``."""
        return {}

    def prepare(
        self,
        graph: ModelGraph,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        *,
        progress: Callable[[ProgressEvent], object] | None = None,
    ) -> PreparedSession:
        """Load the model into the reference evaluator in the worker (or find it there).

        Raises
        ------
        RuntimeUnsupportedError
            An operator it has no implementation for (another domain's op, or an opset older
            than its code): the error names the op, its domain and the opset.

        Examples
        --------
        >>> from explorer import load
        >>> OnnxReferenceRuntime().prepare(load("zoo:mlp")).info["runtime"]
        'onnx-reference'
        >>> try:
        ...     OnnxReferenceRuntime().prepare(load("zoo:qdq_cnn"))
        ... except RuntimeUnsupportedError as err:
        ...     print(err.op_type, err.opset)
        DequantizeLinear 17
        """
        key, info = prepare_in_worker(
            self, graph, input_shapes, prepare_reference, step=f"{self.label}: load", progress=progress
        )
        if not info.get("ok", True):
            raise RuntimeUnsupportedError(
                str(info["reason"]).split("\n")[0][:500],
                runtime=f"onnx {info.get('version', '')} reference implementation",
                op_type=str(info["op_type"]),
                domain=str(info["domain"]),
                opset=info.get("opset"),
                path=graph.source,
            )
        return PreparedSession(self, key, info, graph, dict(input_shapes) if input_shapes else None)

"""The Pass protocol and its result: one optimisation or rewrite step on an ONNX model.

A pass takes an ``onnx.ModelProto`` and returns a :class:`PassResult` with the
new model, whether it changed anything, how long it took and what it logged.
It never modifies its input. Native passes (onnxoptimizer, onnxsim, onnxscript,
ONNX Runtime and its transformer optimizer, the version converter) run in a
worker process (:mod:`explorer.worker`),
so a crash in them is a typed error, not a dead kernel.

Examples
--------
>>> from explorer import zoo
>>> from explorer.passes import get_pass
>>> result = get_pass("fuse_bn_into_conv").run(zoo.build("resnet18"))
>>> result.modified, result.model.graph.node[1].op_type
(True, 'Relu')
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import onnx
from onnx import ModelProto

__all__ = ["Pass", "PassResult", "FunctionPass", "Runner", "models_differ"]

Runner = Callable[[ModelProto, Mapping[str, Any]], tuple[ModelProto, list[str]]]
"""How a pass does its work: ``(model, parameters) -> (new model, log lines)``."""


@dataclass(frozen=True)
class PassResult:
    """What one pass did.

    Attributes
    ----------
    model : onnx.ModelProto
        The model after the pass (a new object; the input is untouched).
    modified : bool
        Whether the graph (nodes, initializers, inputs/outputs, opsets) changed.
    elapsed : float
        Seconds the pass took, including the worker round trip.
    log : tuple of str
        Messages from the pass.
    """

    model: ModelProto
    modified: bool
    elapsed: float
    log: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready facts (the model itself is left out).

        Examples
        --------
        >>> PassResult(onnx.ModelProto(), False, 0.5).to_dict()["elapsed_ms"]
        500.0
        """
        return {
            "modified": self.modified,
            "elapsed_ms": round(self.elapsed * 1000, 3),
            "nodes": len(self.model.graph.node),
            "log": list(self.log),
        }

    def to_frame(self) -> Any:
        """Return :meth:`to_dict` as a one-row DataFrame.

        Examples
        --------
        >>> PassResult(onnx.ModelProto(), False, 0.5).to_frame().shape
        (1, 4)
        """
        import pandas as pd

        row = self.to_dict()
        row["log"] = "\n".join(row["log"])
        return pd.DataFrame([row])


@runtime_checkable
class Pass(Protocol):
    """One step that rewrites a model.

    Attributes
    ----------
    name : str
        Registry name, e.g. ``"fuse_bn_into_conv"`` or ``"ort:extended"``.
    family : str
        One of :data:`explorer.passes.FAMILIES`: ``"onnxoptimizer"``, ``"onnxsim"``,
        ``"onnxscript"``, ``"ort"``, ``"ort-transformers"`` or ``"onnx"``.
    description : str
        One paragraph for a learner: what it rewrites, when it helps, its pitfalls.
    parameters : Mapping
        The parameters it runs with.
    """

    name: str
    family: str
    description: str
    parameters: Mapping[str, Any]

    def run(self, model: ModelProto) -> PassResult:
        """Run the pass on ``model`` (not modified) and return what it did."""
        ...


def models_differ(before: ModelProto, after: ModelProto) -> bool:
    """Whether two models differ in anything a pass can change (graph, opsets, functions).

    Examples
    --------
    >>> from explorer import zoo
    >>> m = zoo.build("mlp")
    >>> models_differ(m, m), models_differ(m, zoo.build("mlp", seed=1))
    (False, True)
    """
    if len(before.graph.node) != len(after.graph.node):
        return True
    if [(o.domain, o.version) for o in before.opset_import] != [
        (o.domain, o.version) for o in after.opset_import
    ]:
        return True
    if [n.op_type for n in before.graph.node] != [n.op_type for n in after.graph.node]:
        return True
    return _content(before) != _content(after)


def _content(model: ModelProto) -> list[bytes]:
    """What a pass can change, serialized; ``value_info`` (inferred shapes only) is left out."""
    graph = model.graph
    parts = [
        x.SerializeToString(deterministic=True)
        for field_ in (graph.node, graph.initializer, graph.sparse_initializer, graph.input, graph.output)
        for x in field_
    ]
    parts += [f.SerializeToString(deterministic=True) for f in model.functions]
    return parts


@dataclass(frozen=True)
class FunctionPass:
    """A pass whose work is done by a :data:`Runner` function.

    Parameters
    ----------
    name, family, description : str
        See :class:`Pass`.
    runner : callable
        ``(model, parameters) -> (new model, log lines)``.
    parameters : dict
        Default parameters; :meth:`with_parameters` makes a copy with others.
    kind : str
        ``"fuse"``, ``"eliminate"``, ``"rewrite"``, ``"rename"``, ``"split"``,
        ``"simplify"``, ``"convert"`` or ``"utility"``.

    Examples
    --------
    >>> def identity(model, params):
    ...     return model, ["nothing to do"]
    >>> p = FunctionPass("identity", "onnx", "Does nothing.", identity)
    >>> p.run(onnx.ModelProto()).modified
    False
    """

    name: str
    family: str
    description: str
    runner: Runner = field(repr=False, compare=False)
    parameters: Mapping[str, Any] = field(default_factory=dict)
    kind: str = "rewrite"

    def with_parameters(self, **parameters: Any) -> FunctionPass:
        """Return a copy of the pass with some parameters changed.

        Examples
        --------
        >>> p = FunctionPass("p", "onnx", "", lambda m, k: (m, []), {"opset": 17})
        >>> p.with_parameters(opset=13).parameters["opset"]
        13
        """
        unknown = set(parameters) - set(self.parameters)
        if unknown:
            known = ", ".join(sorted(self.parameters)) or "none"
            raise TypeError(f"pass {self.name!r} has no parameter {sorted(unknown)}; it takes: {known}")
        return replace(self, parameters={**self.parameters, **parameters})

    def run(self, model: ModelProto) -> PassResult:
        """Run the pass on ``model`` (never modified) and time it.

        Examples
        --------
        >>> from explorer import zoo
        >>> from explorer.passes import get_pass
        >>> get_pass("eliminate_identity").run(zoo.build("mlp")).modified
        False
        """
        start = time.perf_counter()
        new_model, log = self.runner(model, self.parameters)
        elapsed = time.perf_counter() - start
        if new_model is model:
            copy = onnx.ModelProto()
            copy.CopyFrom(model)
            new_model = copy
        return PassResult(new_model, models_differ(model, new_model), elapsed, tuple(log))

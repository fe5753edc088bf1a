"""The Pass protocol and its result: one optimisation or rewrite step on an ONNX model.

A pass takes an ``onnx.ModelProto`` and returns a :class:`PassResult` with the
new model, whether it changed anything, how long it took and what it logged.
It never modifies its input. Native passes (onnxoptimizer, onnxsim, onnxscript,
ONNX Runtime and its transformer optimizer, the version converter) run in a
worker process (:mod:`explorer.isolation.worker`),
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

import hashlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import onnx
from onnx import ModelProto

from explorer.core.errors import ModelTooLargeError
from explorer.core.tensors import PROTOBUF_LIMIT, format_bytes, over_protobuf_limit
from explorer.onnx_adapter.weights import content_key, model_bytes

__all__ = ["Pass", "PassResult", "FunctionPass", "Runner", "models_differ", "CONTRACT_CHECK_BYTES"]

Runner = Callable[[Any, Mapping[str, Any]], tuple[Any, list[str]]]
"""How a pass does its work: ``(model, parameters) -> (new model, log lines)``.

The new model is a ``ModelProto``, or the path of the file the pass wrote (then
the run loads its structure and keeps the path, so later steps read that file
instead of a re-serialized copy). A runner marked ``accepts_path = True`` may
also be given a model file's path instead of the ``ModelProto``. A runner marked
``isolated = True`` runs in the worker: the caller's ``ModelProto`` reaches it serialized,
so it cannot edit it in place.
"""

CONTRACT_CHECK_BYTES = 16 * 2**20
"""Largest model (serialized bytes) whose digest :meth:`FunctionPass.run` compares before and after
an in-process runner (a few tens of milliseconds at this size); larger models are not checked."""


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
    path : Path or None
        The file the pass wrote ``model`` to (external data beside it), when it ran in a worker.
    """

    model: ModelProto
    modified: bool
    elapsed: float
    log: tuple[str, ...] = ()
    path: Path | None = None

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


def models_differ(
    before: ModelProto,
    after: ModelProto,
    before_dir: Path | None = None,
    after_dir: Path | None = None,
) -> bool:
    """Whether two models differ in anything a pass can change (graph, opsets, functions).

    Initializers compare by content (:func:`~explorer.onnx_adapter.weights.content_key`), wherever
    their values are: in memory, or in files resolved in ``before_dir`` / ``after_dir``
    (external data, or a model file :func:`explorer.load` left its weights in).

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
    return _content(before, before_dir) != _content(after, after_dir)


def _content(model: ModelProto, base_dir: Path | None) -> list[bytes]:
    """What a pass can change, serialized; ``value_info`` (inferred shapes only) is left out."""
    graph = model.graph
    parts = [content_key(t, base_dir) for t in graph.initializer]
    parts += [
        x.SerializeToString(deterministic=True)
        for field_ in (graph.node, graph.sparse_initializer, graph.input, graph.output)
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
    large_models : bool
        Whether the pass works on models over protobuf's 2 GiB limit (through
        external data: ONNX Runtime's levels, onnxsim, onnxoptimizer's passes). Passes that do
        not (their library takes the model as one protobuf message, as the version converter
        does) are refused before they start, with :class:`~explorer.core.errors.ModelTooLargeError`.

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
    large_models: bool = False

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

    def run(self, model: ModelProto, *, model_path: str | os.PathLike[str] | None = None) -> PassResult:
        """Run the pass on ``model`` (never modified) and time it.

        Parameters
        ----------
        model : onnx.ModelProto
            The model.
        model_path : path, optional
            A file holding exactly ``model``; runners that read files use it
            instead of serializing ``model`` again.

        Raises
        ------
        ModelTooLargeError
            The model is over 2 GiB with its weights and the pass cannot take that.
        RuntimeError
            An in-process runner edited ``model`` in place (checked by digest for models up to
            :data:`CONTRACT_CHECK_BYTES`; runners marked ``isolated`` run in the worker and cannot).

        Examples
        --------
        >>> from explorer import zoo
        >>> from explorer.passes import get_pass
        >>> get_pass("eliminate_identity").run(zoo.build("mlp")).modified
        False

        A runner that edits its input breaks the contract, and the run says so:

        >>> def strip_last(model, params):
        ...     del model.graph.node[-1]
        ...     return model, []
        >>> FunctionPass("strip_last", "onnx", "Edits its input.", strip_last).run(zoo.build("mlp"))
        Traceback (most recent call last):
        ...
        RuntimeError: pass 'strip_last' modified its input model in place; a pass must leave its input ...
        """
        self.check_size(model)
        before = _digest(model) if not getattr(self.runner, "isolated", False) else None
        source: Any = model
        if model_path is not None and getattr(self.runner, "accepts_path", False):
            source = os.fspath(model_path)
        start = time.perf_counter()
        new_model, log = self.runner(source, self.parameters)
        path = None
        if isinstance(new_model, (str, os.PathLike)):
            path = Path(new_model)
            new_model = onnx.load(os.fspath(path), load_external_data=False)
        elapsed = time.perf_counter() - start
        if before is not None and _digest(model) != before:
            raise RuntimeError(
                f"pass {self.name!r} modified its input model in place; a pass must leave its input "
                "alone (copy it first: copy = onnx.ModelProto(); copy.CopyFrom(model))"
            )
        if new_model is model:
            copy = onnx.ModelProto()
            copy.CopyFrom(model)
            new_model = copy
        before_dir = Path(model_path).parent if model_path is not None else None
        changed = models_differ(model, new_model, before_dir, path.parent if path is not None else None)
        return PassResult(new_model, changed, elapsed, tuple(log), path)

    def check_size(self, model: ModelProto) -> None:
        """Refuse a model over protobuf's 2 GiB limit when the pass cannot take it, saying what to do.

        Examples
        --------
        >>> FunctionPass("p", "onnx", "", lambda m, k: (m, [])).check_size(onnx.ModelProto())
        """
        if self.large_models:
            return
        size = model_bytes(model)
        if size < PROTOBUF_LIMIT:
            return
        raise ModelTooLargeError(
            f"{self.name} ({self.family}) hands the whole model to its library as one protobuf "
            f"message, which protobuf limits to 2 GiB; this model is {format_bytes(size)} with its "
            "weights. ONNX Runtime's levels (ort:basic, ort:extended, ort:all), onnxsim and "
            "onnxoptimizer's passes work on it through external data; or make the weights smaller "
            "first (e.g. float16 or quantized weights)"
        )


def _digest(model: ModelProto) -> bytes | None:
    """The SHA-256 of the model's deterministic serialization; None when it is too large to hash quickly."""
    if over_protobuf_limit(model) or model.ByteSize() > CONTRACT_CHECK_BYTES:
        return None
    return hashlib.sha256(model.SerializeToString(deterministic=True)).digest()

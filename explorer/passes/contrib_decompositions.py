"""Rewrite ONNX Runtime's ``com.microsoft`` contrib ops into the standard ONNX they stand for.

ONNX Runtime's optimiser and its transformer optimizer write contrib ops (``FusedMatMul``,
``FusedConv``, ``BiasGelu``, ``SkipLayerNormalization``, ...) that only ONNX Runtime runs.
Other compilers (TVM 0.27's Relax importer has no ``FusedMatMul``) and NPU toolchains take
standard ONNX. Each decomposition here writes the contrib op's definition from ONNX
Runtime's ``ContribOperators.md`` in standard ops, so the result computes the same thing
(the tests compare both on ONNX Runtime). Nodes whose attributes have no exact standard
form, or whose rank must be known and is not, are kept, and the log says why.

Examples
--------
>>> from explorer import zoo
>>> model, log = decompose_contrib(zoo.build("custom_domain"))
>>> sorted({n.domain for n in model.graph.node}), log[0]
(['', 'zoo.local'], '/fc1/FusedMatMul (FusedMatMul): 2 standard nodes')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, helper, numpy_helper

from explorer.core.unique_names import UniqueNames
from explorer.onnx_adapter.files import save_model
from explorer.onnx_adapter.protos import declared_types

__all__ = ["decompose_contrib", "decompose_contrib_step", "DECOMPOSABLE", "CONTRIB_DOMAIN"]

CONTRIB_DOMAIN = "com.microsoft"
"""The domain of ONNX Runtime's contrib ops."""


class _Keep(Exception):
    """A node cannot be decomposed exactly; the message says why."""


@dataclass
class _Writer:
    """Emits the standard nodes replacing one contrib node, with fresh names in its scope."""

    node: NodeProto
    fresh: UniqueNames
    types: dict[str, tuple[int | None, int]]
    opset: int
    nodes: list[NodeProto] = field(default_factory=list)

    def op(self, op_type: str, inputs: Sequence[str], output: str | None = None, **attrs: object) -> str:
        """Add a node; its output is ``output`` (an original output name) or a fresh name."""
        scope = self.node.name.rsplit("/", 1)[0] if "/" in self.node.name else self.node.name
        name = self.fresh(f"{scope}/{op_type}")
        out = output if output is not None else self.fresh(f"{name}_output_0")
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=name, **attrs))
        return out

    def rank(self, name: str) -> int:
        """The rank of a value, or :class:`_Keep` when it is not known."""
        rank = self.types.get(name, (None, 0))[0]
        if rank is None:
            raise _Keep(f"the rank of {name!r} is not known (run shape inference or fix the input shapes)")
        return rank

    def scalar(self, value: float, like: str) -> str:
        """A scalar constant of ``like``'s element type (all inputs of these ops share one)."""
        known = (self.types.get(v, (None, 0))[1] for v in (like, *self.node.input))
        elem_type = next((t for t in known if t), 0)
        if not elem_type:
            raise _Keep(f"the element type of {like!r} is not known")
        array = np.array(value, dtype=helper.tensor_dtype_to_np_dtype(elem_type))
        return self.op("Constant", [], value=numpy_helper.from_array(array))

    def ints(self, values: Sequence[int]) -> str:
        """A 1-D int64 constant (shapes, axes, clip bounds as inputs)."""
        return self.op("Constant", [], value=numpy_helper.from_array(np.array(values, np.int64)))


def _attrs(node: NodeProto) -> dict[str, object]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _gelu(w: _Writer, x: str, output: str) -> None:
    """``0.5 * x * (1 + erf(x / sqrt(2)))``."""
    erf = w.op("Erf", [w.op("Div", [x, w.scalar(math.sqrt(2.0), x)])])
    w.op("Mul", [w.op("Mul", [x, w.op("Add", [erf, w.scalar(1.0, x)])]), w.scalar(0.5, x)], output)


def _fused_matmul(w: _Writer) -> None:
    a, b = w.node.input[0], w.node.input[1]
    attrs = _attrs(w.node)
    if attrs.get("transBatchA") or attrs.get("transBatchB"):
        raise _Keep("transBatchA/transBatchB move batch dimensions, which has no one-op standard form")
    operands = []
    for value, flag in ((a, "transA"), (b, "transB")):
        if attrs.get(flag):
            rank = w.rank(value)
            if rank < 2:
                raise _Keep(f"{flag} on a rank-{rank} operand")
            value = w.op("Transpose", [value], perm=[*range(rank - 2), rank - 1, rank - 2])
        operands.append(value)
    alpha = float(attrs.get("alpha", 1.0))
    if alpha == 1.0:
        w.op("MatMul", operands, w.node.output[0])
    else:
        w.op("Mul", [w.op("MatMul", operands), w.scalar(alpha, a)], w.node.output[0])


def _activation(w: _Writer, name: str, x: str, out: str, params: Sequence[float]) -> None:
    """FusedConv's ``activation`` with its ``activation_params``, as the standard op of that name."""
    if name == "LeakyRelu":
        w.op(name, [x], out, alpha=float(params[0]) if params else 0.01)
    elif name == "HardSigmoid":
        w.op(name, [x], out, alpha=float(params[0]), beta=float(params[1]))
    elif name == "Clip":
        w.op(name, [x, w.scalar(params[0], x), w.scalar(params[1], x)], out)
    else:
        w.op(name, [x], out)


_ACTIVATIONS = {"Relu": 0, "Tanh": 0, "Sigmoid": 0, "LeakyRelu": 0, "HardSigmoid": 2, "Clip": 2}
"""FusedConv activations written here, and how many ``activation_params`` each needs."""


def _fused_conv(w: _Writer) -> None:
    attrs = _attrs(w.node)
    activation = attrs.pop("activation", b"")
    activation = activation.decode() if isinstance(activation, bytes) else str(activation)
    params = [float(v) for v in attrs.pop("activation_params", [])]
    if activation and activation not in _ACTIVATIONS:
        raise _Keep(f"activation {activation!r} has no decomposition here")
    if activation and len(params) < _ACTIVATIONS[activation]:
        raise _Keep(f"activation {activation} needs {_ACTIVATIONS[activation]} activation_params")
    inputs = list(w.node.input)
    conv_inputs = inputs[:3] if len(inputs) >= 3 and inputs[2] else inputs[:2]
    z = inputs[3] if len(inputs) > 3 else ""
    y = w.op("Conv", conv_inputs, None if (activation or z) else w.node.output[0], **attrs)
    if z:
        y = w.op("Add", [y, z], None if activation else w.node.output[0])
    if activation:
        _activation(w, activation, y, w.node.output[0], params)


def _quick_gelu(w: _Writer) -> None:
    x = w.node.input[0]
    alpha = float(_attrs(w.node).get("alpha", 1.702))
    w.op("Mul", [x, w.op("Sigmoid", [w.op("Mul", [x, w.scalar(alpha, x)])])], w.node.output[0])


def _com_gelu(w: _Writer) -> None:
    _gelu(w, w.node.input[0], w.node.output[0])


def _bias_gelu(w: _Writer) -> None:
    _gelu(w, w.op("Add", list(w.node.input[:2])), w.node.output[0])


def _fast_gelu(w: _Writer) -> None:
    """``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`` with ``x = input + bias``."""
    x = w.node.input[0]
    if len(w.node.input) > 1 and w.node.input[1]:
        x = w.op("Add", [x, w.node.input[1]])
    cube = w.op("Mul", [w.op("Mul", [x, x]), x])
    inner = w.op("Add", [x, w.op("Mul", [cube, w.scalar(0.044715, x)])])
    tanh = w.op("Tanh", [w.op("Mul", [inner, w.scalar(math.sqrt(2.0 / math.pi), x)])])
    half = w.op("Mul", [x, w.scalar(0.5, x)])
    w.op("Mul", [half, w.op("Add", [tanh, w.scalar(1.0, x)])], w.node.output[0])


def _bias_add(w: _Writer) -> None:
    x, bias, skip = w.node.input[:3]
    w.op("Add", [w.op("Add", [x, bias]), skip], w.node.output[0])


def _skip_layer_norm(w: _Writer) -> None:
    """``LayerNormalization(input + skip [+ bias], gamma, beta)`` on the last axis (opset 17's op)."""
    if w.opset < 17:
        raise _Keep(f"standard LayerNormalization needs opset 17 (the model has {w.opset})")
    inputs = list(w.node.input) + [""] * 5
    x, skip, gamma, beta, bias = inputs[:5]
    outputs = list(w.node.output) + [""] * 4
    total = outputs[3] or None
    summed = w.op("Add", [x, skip], None if bias else total)
    if bias:
        summed = w.op("Add", [summed, bias], total)
    epsilon = float(_attrs(w.node).get("epsilon", 1e-5))
    scope = w.node.name.rsplit("/", 1)[0] if "/" in w.node.name else w.node.name
    norm_outputs = [outputs[0], outputs[1], outputs[2]]
    while norm_outputs and not norm_outputs[-1]:
        norm_outputs.pop()
    norm = helper.make_node(
        "LayerNormalization",
        [summed, gamma, *([beta] if beta else [])],
        norm_outputs,
        name=w.fresh(f"{scope}/LayerNormalization"),
        axis=-1,
        epsilon=epsilon,
    )
    w.nodes.append(norm)


DECOMPOSABLE: dict[str, Callable[[_Writer], None]] = {
    "FusedMatMul": _fused_matmul,
    "FusedConv": _fused_conv,
    "QuickGelu": _quick_gelu,
    "Gelu": _com_gelu,
    "BiasGelu": _bias_gelu,
    "FastGelu": _fast_gelu,
    "BiasAdd": _bias_add,
    "SkipLayerNormalization": _skip_layer_norm,
}
"""The ``com.microsoft`` ops this module writes in standard ONNX, and how."""


def _types(model: ModelProto) -> dict[str, tuple[int | None, int]]:
    """Value name -> (rank or None, element type) after ONNX shape inference (or as declared)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # a model shape inference rejects: what it declares is all we know
        inferred = model
    return {
        name: (len(shape) if shape is not None else None, elem_type)
        for name, (shape, elem_type) in declared_types(inferred.graph).items()
    }


def _one_round(
    model: ModelProto, ops: Collection[str], opset: int
) -> tuple[list[NodeProto], list[str], list[str]]:
    """Decompose what can be in one pass over the nodes: (new nodes, log lines, reasons kept)."""
    types = _types(model)
    taken = {v for n in model.graph.node for v in (*n.input, *n.output, n.name)}
    fresh = UniqueNames(taken | set(types))
    new_nodes: list[NodeProto] = []
    log: list[str] = []
    kept: list[str] = []
    for node in model.graph.node:
        if node.domain != CONTRIB_DOMAIN or node.op_type not in ops or node.op_type not in DECOMPOSABLE:
            new_nodes.append(node)
            continue
        writer = _Writer(node, fresh, types, opset)
        try:
            DECOMPOSABLE[node.op_type](writer)
        except _Keep as why:
            kept.append(f"{node.name or node.op_type} ({node.op_type}): kept: {why}")
            new_nodes.append(node)
            continue
        first = types.get(node.input[0], (None, 0))
        for out in node.output:  # elementwise and matmul-like: the first input's element type
            types.setdefault(out, (None, first[1]))
        standard = [n for n in writer.nodes if n.op_type != "Constant"]
        log.append(f"{node.name or node.op_type} ({node.op_type}): {len(standard)} standard nodes")
        new_nodes.extend(writer.nodes)
    return new_nodes, log, kept


def decompose_contrib(model: ModelProto, ops: Collection[str] | None = None) -> tuple[ModelProto, list[str]]:
    """Write ``com.microsoft`` contrib ops in standard ONNX (a new model; ``model`` is kept).

    Parameters
    ----------
    model : onnx.ModelProto
        The model.
    ops : collection of str, optional
        Only these op types (default: every op in :data:`DECOMPOSABLE`).

    Returns
    -------
    (onnx.ModelProto, list of str)
        The new model and one log line per contrib node: decomposed, or kept and why.

    Examples
    --------
    >>> from explorer import zoo
    >>> model, log = decompose_contrib(zoo.build("custom_domain"), ops={"BiasGelu"})
    >>> [n.op_type for n in model.graph.node if n.domain == "com.microsoft"]
    ['FusedMatMul', 'FusedMatMul']
    """
    wanted = set(DECOMPOSABLE) if ops is None else set(ops)
    out = ModelProto()
    out.CopyFrom(model)
    opset = next((o.version for o in out.opset_import if o.domain in ("", "ai.onnx")), 1)
    log: list[str] = []
    kept: list[str] = []
    for _ in range(8):  # a value's rank may be known only once the contrib node before it is standard
        nodes, done, kept = _one_round(out, wanted, opset)
        del out.graph.node[:]
        out.graph.node.extend(nodes)
        log.extend(done)
        if not done or not kept:
            break
    others = sorted({n.op_type for n in out.graph.node if n.domain == CONTRIB_DOMAIN} - set(DECOMPOSABLE))
    if not any(n.domain == CONTRIB_DOMAIN for n in out.graph.node):
        _drop_opset(out, CONTRIB_DOMAIN)
    extra = [f"no standard form here for {', '.join(others)}"] if others else []
    return out, [*log, *kept, *extra] or ["no com.microsoft op to decompose"]


def _drop_opset(model: ModelProto, domain: str) -> None:
    for i, entry in enumerate(model.opset_import):
        if entry.domain == domain:
            del model.opset_import[i]
            return


def decompose_contrib_step(path: str, ops: Sequence[str] | None = None, *, out_path: str) -> list[str]:
    """The worker step of ``explorer:decompose_contrib``: :func:`decompose_contrib`, file to file.

    Examples
    --------
    >>> import os, tempfile
    >>> from explorer import zoo
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     src = str(zoo.save("custom_domain", tmp))
    ...     log = decompose_contrib_step(src, out_path=os.path.join(tmp, "o.onnx"))
    >>> len(log)
    3
    """
    model, log = decompose_contrib(onnx.load(path), ops)
    save_model(model, out_path)
    return log

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
from collections.abc import Collection, Sequence

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, helper

from explorer.core.unique_names import UniqueNames
from explorer.onnx_adapter.files import save_model
from explorer.onnx_adapter.protos import declared_types
from explorer.passes import contrib_attention, contrib_norms, contrib_quantized
from explorer.passes.contrib_writer import Keep, Rule, Writer, node_attrs

__all__ = [
    "decompose_contrib",
    "decompose_contrib_step",
    "is_decomposable",
    "DECOMPOSABLE",
    "ONNX_DOMAIN_OPS",
    "CONTRIB_DOMAIN",
]

CONTRIB_DOMAIN = "com.microsoft"
"""The domain of ONNX Runtime's contrib ops."""


def _gelu(w: Writer, x: str, output: str) -> None:
    """``0.5 * x * (1 + erf(x / sqrt(2)))``."""
    erf = w.op("Erf", [w.op("Div", [x, w.scalar(math.sqrt(2.0), x)])])
    w.op("Mul", [w.op("Mul", [x, w.op("Add", [erf, w.scalar(1.0, x)])]), w.scalar(0.5, x)], output)


def _fused_matmul(w: Writer) -> None:
    a, b = w.node.input[0], w.node.input[1]
    attrs = node_attrs(w.node)
    if attrs.get("transBatchA") or attrs.get("transBatchB"):
        raise Keep("transBatchA/transBatchB move batch dimensions, which has no one-op standard form")
    operands = []
    for value, flag in ((a, "transA"), (b, "transB")):
        if attrs.get(flag):
            rank = w.rank(value)
            if rank < 2:
                raise Keep(f"{flag} on a rank-{rank} operand")
            value = w.op("Transpose", [value], perm=[*range(rank - 2), rank - 1, rank - 2])
        operands.append(value)
    alpha = float(attrs.get("alpha", 1.0))
    if alpha == 1.0:
        w.op("MatMul", operands, w.node.output[0])
    else:
        w.op("Mul", [w.op("MatMul", operands), w.scalar(alpha, a)], w.node.output[0])


def _activation(w: Writer, name: str, x: str, out: str, params: Sequence[float]) -> None:
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


def _fused_conv(w: Writer) -> None:
    attrs = node_attrs(w.node)
    activation = attrs.pop("activation", b"")
    activation = activation.decode() if isinstance(activation, bytes) else str(activation)
    params = [float(v) for v in attrs.pop("activation_params", [])]
    if activation and activation not in _ACTIVATIONS:
        raise Keep(f"activation {activation!r} has no decomposition here")
    if activation and len(params) < _ACTIVATIONS[activation]:
        raise Keep(f"activation {activation} needs {_ACTIVATIONS[activation]} activation_params")
    inputs = list(w.node.input)
    conv_inputs = inputs[:3] if len(inputs) >= 3 and inputs[2] else inputs[:2]
    z = inputs[3] if len(inputs) > 3 else ""
    y = w.op("Conv", conv_inputs, None if (activation or z) else w.node.output[0], **attrs)
    if z:
        y = w.op("Add", [y, z], None if activation else w.node.output[0])
    if activation:
        _activation(w, activation, y, w.node.output[0], params)


def _quick_gelu(w: Writer) -> None:
    x = w.node.input[0]
    alpha = float(node_attrs(w.node).get("alpha", 1.702))
    w.op("Mul", [x, w.op("Sigmoid", [w.op("Mul", [x, w.scalar(alpha, x)])])], w.node.output[0])


def _com_gelu(w: Writer) -> None:
    _gelu(w, w.node.input[0], w.node.output[0])


def _bias_gelu(w: Writer) -> None:
    _gelu(w, w.op("Add", list(w.node.input[:2])), w.node.output[0])


def _fast_gelu(w: Writer) -> None:
    """``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`` with ``x = input + bias``."""
    x = w.node.input[0]
    if len(w.node.input) > 1 and w.node.input[1]:
        x = w.op("Add", [x, w.node.input[1]])
    cube = w.op("Mul", [w.op("Mul", [x, x]), x])
    inner = w.op("Add", [x, w.op("Mul", [cube, w.scalar(0.044715, x)])])
    tanh = w.op("Tanh", [w.op("Mul", [inner, w.scalar(math.sqrt(2.0 / math.pi), x)])])
    half = w.op("Mul", [x, w.scalar(0.5, x)])
    w.op("Mul", [half, w.op("Add", [tanh, w.scalar(1.0, x)])], w.node.output[0])


def _bias_add(w: Writer) -> None:
    x, bias, skip = w.node.input[:3]
    w.op("Add", [w.op("Add", [x, bias]), skip], w.node.output[0])


def _skip_layer_norm(w: Writer) -> None:
    """``LayerNormalization(input + skip [+ bias], gamma, beta)`` on the last axis (opset 17's op)."""
    if w.opset < 17:
        raise Keep(f"standard LayerNormalization needs opset 17 (the model has {w.opset})")
    inputs = list(w.node.input) + [""] * 5
    x, skip, gamma, beta, bias = inputs[:5]
    outputs = list(w.node.output) + [""] * 4
    total = outputs[3] or None
    summed = w.op("Add", [x, skip], None if bias else total)
    if bias:
        summed = w.op("Add", [summed, bias], total)
    epsilon = float(node_attrs(w.node).get("epsilon", 1e-5))
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


_OWN: dict[str, Rule] = {
    "FusedMatMul": _fused_matmul,
    "FusedConv": _fused_conv,
    "QuickGelu": _quick_gelu,
    "Gelu": _com_gelu,
    "BiasGelu": _bias_gelu,
    "FastGelu": _fast_gelu,
    "BiasAdd": _bias_add,
    "SkipLayerNormalization": _skip_layer_norm,
}

DECOMPOSABLE: dict[str, Rule] = {
    **_OWN,
    **contrib_quantized.RULES,
    **contrib_norms.RULES,
    **contrib_attention.RULES,
}
"""The ``com.microsoft`` ops this module writes in standard ONNX, and how (the decoder-LLM ops'
rules live in :mod:`~explorer.passes.contrib_quantized`, :mod:`~explorer.passes.contrib_norms`
and :mod:`~explorer.passes.contrib_attention`)."""

ONNX_DOMAIN_OPS = contrib_norms.ONNX_DOMAIN_OPS
"""Ops of :data:`DECOMPOSABLE` that ONNX Runtime registers in the default domain (no standard
ONNX op has their name): ``SimplifiedLayerNormalization``."""


def is_decomposable(domain: str, op_type: str) -> bool:
    """Whether a node of ``domain`` and ``op_type`` has a rule here (ONNX Runtime's ops only).

    Examples
    --------
    >>> is_decomposable("com.microsoft", "MatMulNBits"), is_decomposable("", "SimplifiedLayerNormalization")
    (True, True)
    >>> is_decomposable("", "MatMul")
    False
    """
    if domain == CONTRIB_DOMAIN:
        return op_type in DECOMPOSABLE
    return domain in ("", "ai.onnx") and op_type in ONNX_DOMAIN_OPS


def _types(model: ModelProto) -> dict[str, tuple[tuple | None, int]]:
    """Value name -> (shape or None, element type) after ONNX shape inference (or as declared)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # a model shape inference rejects: what it declares is all we know
        inferred = model
    return declared_types(inferred.graph)


def _one_round(
    model: ModelProto, ops: Collection[str], opset: int, options: dict[str, object]
) -> tuple[list[NodeProto], list[str], list[str]]:
    """Decompose what can be in one pass over the nodes: (new nodes, log lines, reasons kept).

    New initializers are added to ``model``'s graph."""
    declared = _types(model)
    types = {name: (len(s) if s is not None else None, t) for name, (s, t) in declared.items()}
    shapes = {name: s for name, (s, _) in declared.items() if s is not None}
    weights = {t.name: t for t in model.graph.initializer}
    weights.update(_folded_reshapes(model, weights))
    taken = {v for n in model.graph.node for v in (*n.input, *n.output, n.name)}
    fresh = UniqueNames(taken | set(types) | set(weights))
    new_nodes: list[NodeProto] = []
    log: list[str] = []
    kept: list[str] = []
    for node in model.graph.node:
        if node.op_type not in ops or not is_decomposable(node.domain, node.op_type):
            new_nodes.append(node)
            continue
        writer = Writer(node, fresh, types, opset, shapes=shapes, weights=weights, options=options)
        try:
            DECOMPOSABLE[node.op_type](writer)
        except Keep as why:
            kept.append(f"{node.name or node.op_type} ({node.op_type}): kept: {why}")
            new_nodes.append(node)
            continue
        first = types.get(node.input[0], (None, 0))
        for out in node.output:  # elementwise and matmul-like: the first input's element type
            types.setdefault(out, (None, writer.out_types.get(out, first[1])))
        standard = [n for n in writer.nodes if n.op_type != "Constant"]
        note = f" ({writer.note})" if writer.note else ""
        log.append(f"{node.name or node.op_type} ({node.op_type}): {len(standard)} standard nodes{note}")
        new_nodes.extend(writer.nodes)
        model.graph.initializer.extend(writer.initializers)
    return new_nodes, log, kept


def _folded_reshapes(model: ModelProto, weights: dict[str, onnx.TensorProto]) -> dict[str, onnx.TensorProto]:
    """The outputs of ``Reshape`` nodes of an initializer to a constant shape, as tensors: a rule
    reads them as weights (onnxruntime-genai's tied embedding gathers ``Reshape(lm_head's weight)``).

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import numpy_helper
    >>> w = {"q": numpy_helper.from_array(np.zeros((2, 3, 4), np.uint8), "q")}
    >>> shape = helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(np.array([2, -1])))
    >>> g = helper.make_graph([shape, helper.make_node("Reshape", ["q", "s"], ["r"])], "g", [], [])
    >>> list(_folded_reshapes(helper.make_model(g), w)["r"].dims)
    [2, 12]
    """
    from onnx import numpy_helper

    constants = dict(weights)
    folded: dict[str, onnx.TensorProto] = {}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None and node.output:
                constants[node.output[0]] = value
        elif node.op_type == "Reshape" and node.domain in ("", "ai.onnx") and len(node.input) == 2:
            data, shape = (constants.get(v) for v in node.input)
            if data is None or shape is None or data.data_type not in _BYTE_TYPES:
                continue
            array, dims = numpy_helper.to_array(data), numpy_helper.to_array(shape).astype(np.int64)
            allowzero = int(node_attrs(node).get("allowzero", 0))
            dims = [array.shape[i] if d == 0 and not allowzero else int(d) for i, d in enumerate(dims)]
            try:
                tensor = numpy_helper.from_array(array.reshape(dims), node.output[0])
            except ValueError:
                continue
            constants[node.output[0]] = folded[node.output[0]] = tensor
    return folded


_BYTE_TYPES = frozenset({onnx.TensorProto.UINT8, onnx.TensorProto.INT8})
"""Element types whose Reshape :func:`_folded_reshapes` folds (packed quantised weights)."""


def _drop_dead_producers(model: ModelProto, candidates: set[str]) -> None:
    """Remove nodes whose every output is among ``candidates`` (inputs of rewritten nodes) and read
    by no node now, nor a graph output, and then their own producers so left unread: the Reshape of
    a weight a rule read folded, the attention's ``seqlens_k`` from the mask (graph inputs stay)."""
    while True:
        used = {v for n in model.graph.node for v in n.input} | {o.name for o in model.graph.output}
        used |= _subgraph_inputs(model.graph)
        dead = [n for n in model.graph.node if n.output and all(o in candidates - used for o in n.output)]
        if not dead:
            return
        inputs = {i.name for i in model.graph.input}  # the model's interface stays as it is
        for node in dead:
            candidates.update(v for v in node.input if v not in inputs)
            model.graph.node.remove(node)


def decompose_contrib(
    model: ModelProto,
    ops: Collection[str] | None = None,
    *,
    rms_norm: bool = False,
    quantized: str = contrib_quantized.DEQUANTIZE_LINEAR,
) -> tuple[ModelProto, list[str]]:
    """Write ``com.microsoft`` contrib ops in standard ONNX (a new model; ``model`` is kept).

    Parameters
    ----------
    model : onnx.ModelProto
        The model.
    ops : collection of str, optional
        Only these op types (default: every op in :data:`DECOMPOSABLE`).
    rms_norm : bool
        Write ``SimplifiedLayerNormalization`` as ONNX's ``RMSNormalization`` (opset 23, when the
        model's opset is 23 or more) rather than Pow/ReduceMean/Add/Sqrt/Div/Mul, the default
        because IREE 3.13's importer has no ``RMSNormalization``.
    quantized : str
        How ``MatMulNBits`` and ``GatherBlockQuantized`` write their weights
        (:mod:`~explorer.passes.contrib_quantized`): ``"dequantize_linear"`` (uint4 + blocked
        ``DequantizeLinear``, opset 21: ONNX Runtime and NPU toolchains) or ``"primitive"`` (bytes +
        Cast/Sub/Mul/Reshape: what TVM and IREE import; the compilers' fix writes it).

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
    consumed = {v for n in out.graph.node if is_decomposable(n.domain, n.op_type) for v in n.input}
    log: list[str] = []
    kept: list[str] = []
    for _ in range(8):  # a value's rank may be known only once the contrib node before it is standard
        nodes, done, kept = _one_round(out, wanted, opset, {"rms_norm": rms_norm, "quantized": quantized})
        del out.graph.node[:]
        out.graph.node.extend(nodes)
        log.extend(done)
        if not done or not kept:
            break
    _drop_dead_producers(out, consumed)
    _drop_unused_weights(out, consumed)
    others = sorted({n.op_type for n in out.graph.node if n.domain == CONTRIB_DOMAIN} - set(DECOMPOSABLE))
    if not any(n.domain == CONTRIB_DOMAIN for n in out.graph.node):
        _drop_opset(out, CONTRIB_DOMAIN)
    extra = [f"no standard form here for {', '.join(others)}"] if others else []
    return out, [*log, *kept, *extra] or ["no com.microsoft op to decompose"]


def _drop_unused_weights(model: ModelProto, candidates: set[str]) -> None:
    """Remove the initializers among ``candidates`` (inputs of rewritten nodes) no node reads now
    (a packed weight replaced by its unpacked form)."""
    used = {v for n in model.graph.node for v in n.input} | {o.name for o in model.graph.output}
    used |= _subgraph_inputs(model.graph)
    dead = candidates - used
    if not dead:
        return
    keep = [t for t in model.graph.initializer if t.name not in dead]
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep)
    inputs = [i for i in model.graph.input if i.name not in dead]
    del model.graph.input[:]
    model.graph.input.extend(inputs)


def _subgraph_inputs(graph: onnx.GraphProto) -> set[str]:
    """Names read inside the subgraphs of ``graph``'s nodes (outer-scope references)."""
    names: set[str] = set()
    for node in graph.node:
        for attr in node.attribute:
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs):
                names |= {v for n in sub.node for v in n.input} | _subgraph_inputs(sub)
    return names


def _drop_opset(model: ModelProto, domain: str) -> None:
    for i, entry in enumerate(model.opset_import):
        if entry.domain == domain:
            del model.opset_import[i]
            return


def decompose_contrib_step(
    path: str,
    ops: Sequence[str] | None = None,
    rms_norm: bool = False,
    quantized: str = contrib_quantized.DEQUANTIZE_LINEAR,
    *,
    out_path: str,
) -> list[str]:
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
    model, log = decompose_contrib(onnx.load(path), ops, rms_norm=rms_norm, quantized=quantized)
    save_model(model, out_path)
    return log

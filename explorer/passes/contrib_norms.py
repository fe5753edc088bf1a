"""ONNX Runtime's RMS normalisations in standard ONNX: ``SimplifiedLayerNormalization`` and
``SkipSimplifiedLayerNormalization``.

``y = x / sqrt(mean(x^2) + epsilon) * scale`` over the axes from ``axis`` on, in float32 for
half-precision inputs (``stash_type`` 1), written by default as Pow / ReduceMean / Add / Sqrt /
Div / Mul, the form TVM 0.27's and IREE 3.13's ONNX importers both take (IREE's has no
``RMSNormalization``); with the ``rms_norm`` option, as ONNX's ``RMSNormalization`` (opset 23)
when the model's opset has it. The skip variant adds ``skip`` (and ``bias``) first; its sum
output is that Add, its ``inv_std_var`` output ``1 / sqrt(mean(x^2) + epsilon)``.

Examples
--------
>>> sorted(RULES), sorted(ONNX_DOMAIN_OPS)
(['SimplifiedLayerNormalization', 'SkipSimplifiedLayerNormalization'], ['SimplifiedLayerNormalization'])
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from explorer.passes.contrib_writer import Keep, Rule, Writer, node_attrs

__all__ = ["RULES", "ONNX_DOMAIN_OPS", "rms_norm"]

ONNX_DOMAIN_OPS = frozenset({"SimplifiedLayerNormalization"})
"""Ops here that ONNX Runtime registers in the default ONNX domain rather than com.microsoft."""


def rms_norm(
    w: Writer,
    x: str,
    scale: str,
    output: str,
    *,
    axis: int = -1,
    epsilon: float = 1e-5,
    inv_std_var: str = "",
    elem_type: int = 0,
) -> None:
    """Write ``x / sqrt(mean(x^2) + epsilon) * scale`` over the axes from ``axis`` on into ``output``
    (and ``1 / sqrt(mean(x^2) + epsilon)``, kept dims, into ``inv_std_var`` when named);
    ``elem_type`` is ``x``'s element type when the writer does not know it.

    Examples
    --------
    >>> from onnx import helper
    >>> from explorer.core.unique_names import UniqueNames
    >>> node = helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"], name="n")
    >>> w = Writer(node, UniqueNames({"x", "g", "y"}), {"x": (3, 1), "g": (1, 1)}, opset=18)
    >>> rms_norm(w, "x", "g", "y")
    >>> [n.op_type for n in w.nodes if n.op_type != "Constant"]
    ['Pow', 'ReduceMean', 'Add', 'Sqrt', 'Div', 'Mul']
    """
    elem_type = elem_type or w.elem_type(x)
    if not elem_type:
        raise Keep(f"the element type of {x!r} is not known")
    axes = list(range(axis, w.rank(x))) if axis >= 0 else list(range(axis, 0))
    if w.options.get("rms_norm") and w.opset >= 23 and not inv_std_var:
        w.op("RMSNormalization", [x, scale], output, axis=axis, epsilon=epsilon)
        return
    half = elem_type != TensorProto.FLOAT and elem_type != TensorProto.DOUBLE
    xf = w.op("Cast", [x], to=TensorProto.FLOAT) if half else x
    dtype = np.float32 if half else helper.tensor_dtype_to_np_dtype(elem_type)

    def const(value: float) -> str:
        return w.op("Constant", [], value=numpy_helper.from_array(np.array(value, dtype)))

    squares = w.op("Pow", [xf, const(2.0)])
    if w.opset >= 18:
        mean = w.op("ReduceMean", [squares, w.ints(axes)], keepdims=1)
    else:
        mean = w.op("ReduceMean", [squares], axes=axes, keepdims=1)
    root = w.op("Sqrt", [w.op("Add", [mean, const(epsilon)])])
    if inv_std_var:
        w.op("Reciprocal", [root], inv_std_var)
        w.out_types[inv_std_var] = TensorProto.FLOAT
    normed = w.op("Div", [xf, root])
    if half:
        scaled = w.op("Mul", [normed, w.op("Cast", [scale], to=TensorProto.FLOAT)])
        w.op("Cast", [scaled], output, to=elem_type)
    else:
        w.op("Mul", [normed, scale], output)


def _simplified_layer_norm(w: Writer) -> None:
    attrs = node_attrs(w.node)
    if int(attrs.get("stash_type", 1)) != 1:
        raise Keep("stash_type other than float32")
    outputs = [*list(w.node.output), ""]
    rms_norm(
        w,
        w.node.input[0],
        w.node.input[1],
        outputs[0],
        axis=int(attrs.get("axis", -1)),
        epsilon=float(attrs.get("epsilon", 1e-5)),
        inv_std_var=outputs[1],
    )


def _skip_simplified_layer_norm(w: Writer) -> None:
    inputs = list(w.node.input) + [""] * 4
    x, skip, gamma, bias = inputs[:4]
    outputs = list(w.node.output) + [""] * 4
    if outputs[1]:
        raise Keep("its mean output: RMS normalisation computes no mean")
    total = outputs[3] or None
    summed = w.op("Add", [x, skip], None if bias else total)
    if bias:
        summed = w.op("Add", [summed, bias], total)
    epsilon = float(node_attrs(w.node).get("epsilon", 1e-5))
    rms_norm(w, summed, gamma, outputs[0], epsilon=epsilon, inv_std_var=outputs[2], elem_type=w.elem_type(x))


RULES: dict[str, Rule] = {
    "SimplifiedLayerNormalization": _simplified_layer_norm,
    "SkipSimplifiedLayerNormalization": _skip_simplified_layer_norm,
}
"""The op types this module writes in standard ONNX."""

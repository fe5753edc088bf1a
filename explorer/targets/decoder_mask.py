"""Bounded attention masks: a decoder's "minus infinity" as a value 16-bit activations can hold.

Decoders mask a score by adding a huge negative number (``-1e9``, or float32's lowest) or by
putting one in its place; softmax then gives the position no weight. Quantised, that value
sets the range of every tensor it flows into: a uint16 activation over ``[-3.4e38, 10]`` has a
step of 5e33, so every real score rounds to the same value and attention becomes uniform.
:func:`bound_masks` replaces such constants by :data:`MASK_FLOOR` (``exp(-100)`` is 4e-44 of
a weight: the softmax is the same), so the scores keep a step of about 0.002 at 16 bits.

It runs on the fixed-shape, simplified graph (the mask's constants folded), before QDQ:
:data:`BOUND_MASKS` is the pass the decoder pipeline runs.

Examples
--------
>>> import numpy as np
>>> from onnx import TensorProto, helper, numpy_helper
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
>>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
>>> mask = numpy_helper.from_array(np.array([0.0, -1e9], np.float32), "mask")
>>> graph = helper.make_graph([helper.make_node("Add", ["x", "mask"], ["y"])], "g", [x], [y], [mask])
>>> model, log = bound_masks(helper.make_model(graph))
>>> numpy_helper.to_array(model.graph.initializer[0]).tolist(), log
([0.0, -100.0], ['mask: 1 values below -10000 set to -100 (read by Add)'])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from explorer.passes.base import FunctionPass

__all__ = ["MASK_FLOOR", "MASK_THRESHOLD", "MASK_READERS", "bound_masks", "BOUND_MASKS"]

MASK_FLOOR = -100.0
"""What a masked score becomes (the softmax weight ``exp(-100)`` is nil next to any real score)."""
MASK_THRESHOLD = -1e4
"""Constants below this are "minus infinity" (no real weight or score is that negative)."""
MASK_READERS = frozenset({"Add", "Sub", "Where", "Mul", "Min", "Max"})
"""The ops a mask constant feeds (a weight feeds MatMul or Gather, and is never read)."""


def bound_masks(
    model: onnx.ModelProto, floor: float = MASK_FLOOR, threshold: float = MASK_THRESHOLD
) -> tuple[onnx.ModelProto, list[str]]:
    """A copy of ``model`` whose float constants below ``threshold``, read by :data:`MASK_READERS`,
    hold ``floor`` there instead; the log names each constant changed.

    Examples
    --------
    >>> from explorer import zoo
    >>> bound_masks(zoo.build("mlp"))[1]
    ['no mask constant below -10000']
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    readers: dict[str, set[str]] = {}
    for node in out.graph.node:
        if node.op_type in MASK_READERS and node.domain in ("", "ai.onnx"):
            for name in node.input:
                readers.setdefault(name, set()).add(node.op_type)
    log = []
    for tensor in out.graph.initializer:
        log += _bound(tensor, tensor.name, readers, floor, threshold)
    for node in out.graph.node:  # Constant nodes (onnxsim leaves some)
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for attr in node.attribute:
                if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
                    log += _bound(attr.t, node.output[0], readers, floor, threshold)
    return out, log or [f"no mask constant below {threshold:g}"]


def _bound(
    tensor: onnx.TensorProto, name: str, readers: dict[str, set[str]], floor: float, threshold: float
) -> list[str]:
    """Bound ``tensor`` in place (it belongs to the copy) when a mask reader reads it as ``name``."""
    if name not in readers or tensor.data_type not in _FLOATS:
        return []
    values = numpy_helper.to_array(tensor)
    low = values < threshold
    if not low.any():
        return []
    bounded = np.where(low, np.asarray(floor, values.dtype), values).astype(values.dtype)
    tensor.CopyFrom(numpy_helper.from_array(bounded, tensor.name))
    ops = ", ".join(sorted(readers[name]))
    return [f"{name}: {int(low.sum())} values below {threshold:g} set to {floor:g} (read by {ops})"]


_FLOATS = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16})


def _run(path: str, params: dict[str, Any]) -> tuple[onnx.ModelProto, list[str]]:
    """The pass's runner: the model at ``path`` read whole (a folded mask is a large tensor, which a
    lazily read model keeps in the file), then :func:`bound_masks`."""
    return bound_masks(onnx.load(path), float(params["floor"]), float(params["threshold"]))


_run.accepts_path = True  # type: ignore[attr-defined]


BOUND_MASKS = FunctionPass(
    "explorer:bound_masks",
    "explorer",
    "Attention-mask constants (-1e9, float32's lowest) set to -100, so 16-bit activations keep the "
    "scores' resolution; the softmax is unchanged.",
    _run,
    {"floor": MASK_FLOOR, "threshold": MASK_THRESHOLD},
    kind="rewrite",
    large_models=True,
)
"""The pass: :func:`bound_masks` in a decoder's pipeline, after onnxsim and before QDQ."""

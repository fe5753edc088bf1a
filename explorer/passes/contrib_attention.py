"""ONNX Runtime's decoder attention ops in standard ONNX: ``GroupQueryAttention``, ``RotaryEmbedding``.

``RotaryEmbedding`` rotates pairs of channels (the two halves of the rotary part, or neighbours
when ``interleaved``) by the cached ``cos``/``sin`` of each token's position: Gather of the
caches, then Mul/Sub/Add and Concat. ``GroupQueryAttention`` becomes the attention it fuses:
Q, K, V split into heads (from packed QKV too), rotary embedding of Q and K at positions
``past + 0 .. S-1``, ``present = Concat(past, new)`` on the sequence axis, each KV head
repeated for its ``num_heads / kv_num_heads`` query heads (a Gather on the head axis),
``Softmax(Q K^T * scale [softcapped],
causal mask shifted by the past length) V``.

That form is exact when the KV cache is not a shared buffer and no row is padded:
``total_sequence_length = past + S`` and ``seqlens_k[b] = total_sequence_length - 1`` for every
``b``, always so for batch 1 as onnxruntime-genai runs a decoder. A padded row puts its new
keys at ``seqlens_k[b] + 1 - S`` rather than after the whole past, which ``Concat`` cannot
say; the data decides, not the graph, so the log line of each decomposed node says it.
Features with no form here keep the node, with the reason: ``local_window_size``, the
windowed cache, quantised KV caches, ``qk_output`` and the inputs ``position_ids``,
``attention_bias``, ``head_sink``, ``q_norm_weight``/``k_norm_weight`` and ``query_seqlens``.

Examples
--------
>>> sorted(RULES)
['GroupQueryAttention', 'RotaryEmbedding']
"""

from __future__ import annotations

import math

import numpy as np
from onnx import helper

from explorer.passes.contrib_writer import Keep, Rule, Writer, node_attrs

__all__ = ["RULES", "rotate"]

_GQA_EXTRAS = (
    "position_ids",
    "attention_bias",
    "head_sink",
    "k_scale",
    "v_scale",
    "q_norm_weight",
    "k_norm_weight",
    "query_seqlens",
)
"""GroupQueryAttention's inputs after ``sin_cache`` (ONNX Runtime 1.32's order): none has a form here."""


def _need_opset_16(w: Writer) -> None:
    if w.opset < 16:
        raise Keep(
            f"this form needs opset 16 (Unsqueeze axes as input, LessOrEqual; the model has {w.opset})"
        )


def _dim(w: Writer, x: str, axis: int) -> str:
    """A dimension of ``x`` at run time, as a 0-D int64."""
    return w.op("Gather", [w.op("Shape", [x]), w.int_scalar(axis)])


def _slice(w: Writer, x: str, start: int, end: int, axis: int = -1) -> str:
    return w.op("Slice", [x, w.ints([start]), w.ints([end]), w.ints([axis])])


def rotate(
    w: Writer,
    x: str,
    cos: str,
    sin: str,
    *,
    interleaved: bool,
    rot_dim: int,
    head_size: int,
    output: str | None = None,
) -> str:
    """Rotary embedding of ``x`` (rank 4, head channels last) by ``cos``/``sin`` (broadcastable to
    ``x``'s shape with ``rot_dim / 2`` channels); channels past ``rot_dim`` pass through.

    Examples
    --------
    >>> from onnx import helper
    >>> from explorer.core.unique_names import UniqueNames
    >>> node = helper.make_node("RotaryEmbedding", ["x", "p", "c", "s"], ["y"], name="r")
    >>> w = Writer(node, UniqueNames({"x", "c", "s", "y"}), {}, opset=17)
    >>> rotate(w, "x", "c", "s", interleaved=False, rot_dim=8, head_size=8, output="y")
    'y'
    """
    part = x if rot_dim == head_size else _slice(w, x, 0, rot_dim)
    if interleaved:
        pairs = w.op("Reshape", [part, w.ints([0, 0, 0, rot_dim // 2, 2])])
        x1, x2 = _slice(w, pairs, 0, 1), _slice(w, pairs, 1, 2)
        axis = w.ints([-1])
        cos, sin = w.op("Unsqueeze", [cos, axis]), w.op("Unsqueeze", [sin, axis])
    else:
        x1, x2 = _slice(w, part, 0, rot_dim // 2), _slice(w, part, rot_dim // 2, rot_dim)
    first = w.op("Sub", [w.op("Mul", [x1, cos]), w.op("Mul", [x2, sin])])
    second = w.op("Add", [w.op("Mul", [x2, cos]), w.op("Mul", [x1, sin])])
    last = rot_dim == head_size and not interleaved
    rotated = w.op("Concat", [first, second], output if last else None, axis=-1)
    if interleaved:
        rotated = w.op(
            "Reshape", [rotated, w.ints([0, 0, 0, rot_dim])], output if rot_dim == head_size else None
        )
    if rot_dim < head_size:
        rotated = w.op("Concat", [rotated, _slice(w, x, rot_dim, head_size)], output, axis=-1)
    return rotated


def _rotary_embedding(w: Writer) -> None:
    """``RotaryEmbedding(input [B,S,hidden] or [B,N,S,H], position_ids [B,S] or offset [1], cos, sin)``."""
    _need_opset_16(w)
    attrs = node_attrs(w.node)
    x, positions, cos_cache, sin_cache = w.node.input[:4]
    if attrs.get("is_packed_batching", 0):
        raise Keep("is_packed_batching: ragged batches have no standard form here")
    if float(attrs.get("scale", 1.0)) != 1.0:
        raise Keep("scale other than 1")
    rank, half = w.rank(x), w.dim(cos_cache, 1)
    if rank not in (3, 4) or half is None:
        raise Keep("the input must be rank 3 or 4 and cos_cache's second dimension known")
    rot_dim = int(attrs.get("rotary_embedding_dim", 0)) or 2 * half
    num_heads = int(attrs.get("num_heads", 0))
    if rank == 4:
        head_size = w.dim(x, 3)
    elif num_heads:
        hidden = w.dim(x, 2)
        head_size = hidden // num_heads if hidden is not None else None
    else:
        head_size = rot_dim
    if head_size is None:
        raise Keep("the head size is not known (num_heads and the input's last dimension)")
    if w.rank(positions) == 1:  # an offset: positions offset .. offset + S - 1
        start = w.op("Reshape", [positions, w.ints([])])
        length = _dim(w, x, 1 if rank == 3 else 2)
        positions = w.op("Range", [start, w.op("Add", [start, length]), w.int_scalar(1)])
        head_axis = [1] if rank == 3 else []  # cos [S, d] against [B, S, N, H] or [B, N, S, H]
    else:
        head_axis = [2] if rank == 3 else [1]  # cos [B, S, d]
    cos, sin = (w.op("Gather", [cache, positions], axis=0) for cache in (cos_cache, sin_cache))
    if head_axis:
        cos, sin = (w.op("Unsqueeze", [c, w.ints(head_axis)]) for c in (cos, sin))
    hidden = w.dim(x, 2) if rank == 3 else None
    heads = hidden // head_size if hidden is not None else -1  # no -1 where known: TVM needs a known shape
    x4 = w.op("Reshape", [x, w.ints([0, 0, heads, head_size])]) if rank == 3 else x
    interleaved = bool(attrs.get("interleaved", 0))
    out = None if rank == 3 else w.node.output[0]
    rotated = rotate(
        w, x4, cos, sin, interleaved=interleaved, rot_dim=rot_dim, head_size=head_size, output=out
    )
    if rank == 3:
        w.op("Reshape", [rotated, w.ints([0, 0, hidden if hidden is not None else -1])], w.node.output[0])


def _gqa_checks(w: Writer, attrs: dict[str, object], inputs: list[str]) -> None:
    """:class:`Keep` for the features with no form here."""
    _need_opset_16(w)
    for name, value in zip(_GQA_EXTRAS, inputs[9:], strict=False):
        if value:
            raise Keep(f"its {name} input has no form here")
    if int(attrs.get("local_window_size", -1)) != -1 or attrs.get("sliding_window_cache", 0):
        raise Keep("local_window_size / sliding_window_cache (local attention) has no form here")
    if attrs.get("qk_output", 0):
        raise Keep("qk_output")
    quant = {attrs.get(a, b"NONE") for a in ("k_quant_type", "v_quant_type")}
    if quant - {b"NONE", "NONE"} or attrs.get("kv_cache_bit_width", 0):
        raise Keep("a quantised KV cache")


def _heads(w: Writer, x: str, heads: int, head_size: int) -> str:
    """``[B, S, heads * head_size]`` -> ``[B, heads, S, head_size]``."""
    return w.op("Transpose", [w.op("Reshape", [x, w.ints([0, 0, heads, head_size])])], perm=[0, 2, 1, 3])


def _group_query_attention(w: Writer) -> None:
    """GroupQueryAttention as Concat with the past, head repeat, masked Softmax(Q K^T) V."""
    attrs = node_attrs(w.node)
    inputs = list(w.node.input) + [""] * 18
    q, k, v, past_k, past_v, _seqlens_k, _total, cos_cache, sin_cache = inputs[:9]
    _gqa_checks(w, attrs, inputs)
    outputs = list(w.node.output) + [""] * 4
    if outputs[3]:
        raise Keep("its output_qk output")
    n, kv = int(attrs["num_heads"]), int(attrs["kv_num_heads"])
    packed = not k
    width = w.dim(q, -1)
    head_size = width // (n + 2 * kv if packed else n) if width is not None else w.dim(past_k, 3)
    if head_size is None:
        raise Keep("the head size is not known (the query's last dimension)")
    if packed:
        qkv = w.op(
            "Transpose", [w.op("Reshape", [q, w.ints([0, 0, n + 2 * kv, head_size])])], perm=[0, 2, 1, 3]
        )
        q4, k4, v4 = (
            _slice(w, qkv, 0, n, 1),
            _slice(w, qkv, n, n + kv, 1),
            _slice(w, qkv, n + kv, n + 2 * kv, 1),
        )
    else:
        q4, k4, v4 = _heads(w, q, n, head_size), _heads(w, k, kv, head_size), _heads(w, v, kv, head_size)
    past = _dim(w, past_k, 2) if past_k else w.int_scalar(0)
    end = w.op("Add", [past, _dim(w, q, 1)])
    positions = w.op("Range", [past, end, w.int_scalar(1)])  # the new tokens' absolute positions
    if attrs.get("do_rotary", 0):
        half = w.dim(cos_cache, 1)
        if half is None:
            raise Keep("cos_cache's second dimension is not known")
        cos, sin = (w.op("Gather", [cache, positions], axis=0) for cache in (cos_cache, sin_cache))
        interleaved = bool(attrs.get("rotary_interleaved", 0))
        q4, k4 = (
            rotate(w, t, cos, sin, interleaved=interleaved, rot_dim=2 * half, head_size=head_size)
            for t in (q4, k4)
        )
    present = []
    for new, old, out in ((k4, past_k, outputs[1]), (v4, past_v, outputs[2])):
        present.append(
            w.op("Concat", [old, new], out or None, axis=2) if old else w.op("Identity", [new], out or None)
        )
    repeat = n // kv
    keys, values = present
    if repeat > 1:  # KV head h serves query heads h * repeat .. (h + 1) * repeat - 1
        heads = w.ints([h // repeat for h in range(n)])
        keys, values = (w.op("Gather", [t, heads], axis=1) for t in (keys, values))
    scale = float(attrs.get("scale", 0.0)) or 1.0 / math.sqrt(head_size)
    scores = w.op(
        "Mul", [w.op("MatMul", [q4, w.op("Transpose", [keys], perm=[0, 1, 3, 2])]), w.scalar(scale, q)]
    )
    softcap = float(attrs.get("softcap", 0.0))
    if softcap > 0.0:
        scores = w.op(
            "Mul", [w.op("Tanh", [w.op("Div", [scores, w.scalar(softcap, q)])]), w.scalar(softcap, q)]
        )
    if int(attrs.get("causal", 1)):
        keys_at = w.op("Range", [w.int_scalar(0), _dim(w, keys, 2), w.int_scalar(1)])
        allowed = w.op("LessOrEqual", [keys_at, w.op("Unsqueeze", [positions, w.ints([1])])])
        lowest = np.finfo(helper.tensor_dtype_to_np_dtype(w.elem_type(q) or 1)).min
        scores = w.op("Where", [allowed, scores, w.scalar(float(lowest), q)])
    if attrs.get("smooth_softmax", 0):  # one more logit of 0 in the denominator
        zero = w.op("Mul", [_slice(w, scores, 0, 1), w.scalar(0.0, q)])
        widened = w.op("Softmax", [w.op("Concat", [scores, zero], axis=-1)], axis=-1)
        probs = w.op("Slice", [widened, w.ints([0]), w.ints([-1]), w.ints([-1])])
    else:
        probs = w.op("Softmax", [scores], axis=-1)
    context = w.op("Transpose", [w.op("MatMul", [probs, values])], perm=[0, 2, 1, 3])
    w.op("Reshape", [context, w.ints([0, 0, n * head_size])], outputs[0])
    w.note = "exact when seqlens_k = total_sequence_length - 1 = past + S - 1 in every row: no padding"


RULES: dict[str, Rule] = {
    "GroupQueryAttention": _group_query_attention,
    "RotaryEmbedding": _rotary_embedding,
}
"""The op types this module writes in standard ONNX."""

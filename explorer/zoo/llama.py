"""The zoo's ``llama``: a Llama-style decoder LLM with a KV cache, in standard ONNX.

What a deployed decoder computes, in ops every runtime and compiler takes (no contrib op):
token embedding, per layer RMS normalisation, grouped-query attention with rotary position
embedding over the cached keys and values (``past_key_values.N.key`` in, ``present.N.key``
out, as onnxruntime-genai names them), a SwiGLU MLP, and the logits. Positions count on from
the past's length, and the causal mask sees the past, so one graph serves the prompt (prefill,
past length 0) and each new token (decode, sequence length 1).

Examples
--------
>>> from explorer import zoo
>>> model = zoo.build("llama")
>>> [i.name for i in model.graph.input][:3]
['input_ids', 'attention_mask', 'past_key_values.0.key']
>>> [o.name for o in model.graph.output][:2]
['logits', 'present.0.key']
"""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto

from explorer.core.errors import UsageError
from explorer.zoo.parts import _Built, _check_positive, _GraphBuilder, _scope, _value

__all__: list[str] = []

_MASKED = -1e9  # added to a masked score: softmax gives it no weight, and two of them stay finite


def _rms_norm(b: _GraphBuilder, x: str, path: str, hidden: int) -> str:
    """``x / sqrt(mean(x^2) + eps) * weight``, as the PyTorch exporter writes Llama's RMSNorm."""
    scope = _scope(path)
    weight = b.normal(f"{path}.weight", (hidden,), 0.02, mean=1.0)
    square = b.op("Pow", [x, b.const(scope, 2.0, np.float32)], scope)
    mean = b.op("ReduceMean", [square, b.const(scope, [-1])], scope, keepdims=1)
    root = b.op("Sqrt", [b.op("Add", [mean, b.const(scope, 1e-6, np.float32)], scope)], scope)
    return b.op("Mul", [b.op("Div", [x, root], scope), weight], scope)


def _linear(b: _GraphBuilder, x: str, path: str, cin: int, cout: int, output: str | None = None) -> str:
    weight = b.normal(f"{path}.weight", (cin, cout), 1.0 / math.sqrt(cin))
    outputs = None if output is None else [output]
    return b.node("MatMul", [x, weight], _scope(path), outputs=outputs)[0]


def _heads(b: _GraphBuilder, x: str, scope: str, heads: int, head_size: int) -> str:
    """``[batch, seq, heads * head_size]`` to ``[batch, heads, seq, head_size]``."""
    y = b.op("Reshape", [x, b.const(scope, [0, 0, heads, head_size])], scope)
    return b.op("Transpose", [y], scope, perm=[0, 2, 1, 3])


def _rotary(b: _GraphBuilder, x: str, scope: str, cos: str, sin: str) -> str:
    """Rotate the two halves of each head by the positions' angles (``rotate_half``, not interleaved)."""
    first, second = b.node("Split", [x], scope, n_outputs=2, axis=-1, num_outputs=2)
    rotated_first = b.op("Sub", [b.op("Mul", [first, cos], scope), b.op("Mul", [second, sin], scope)], scope)
    rotated_second = b.op("Add", [b.op("Mul", [second, cos], scope), b.op("Mul", [first, sin], scope)], scope)
    return b.op("Concat", [rotated_first, rotated_second], scope, axis=-1)


def _attention(
    b: _GraphBuilder,
    x: str,
    layer: int,
    sizes: dict[str, int],
    cos: str,
    sin: str,
    mask: str,
) -> str:
    path = f"model.layers.{layer}.self_attn"
    scope = _scope(path)
    heads, kv_heads, head_size, hidden = (
        sizes["heads"],
        sizes["kv_heads"],
        sizes["head_size"],
        sizes["hidden"],
    )
    q = _heads(b, _linear(b, x, f"{path}.q_proj", hidden, heads * head_size), scope, heads, head_size)
    k = _heads(b, _linear(b, x, f"{path}.k_proj", hidden, kv_heads * head_size), scope, kv_heads, head_size)
    v = _heads(b, _linear(b, x, f"{path}.v_proj", hidden, kv_heads * head_size), scope, kv_heads, head_size)
    q, k = _rotary(b, q, scope, cos, sin), _rotary(b, k, scope, cos, sin)
    keys = b.node(
        "Concat", [f"past_key_values.{layer}.key", k], scope, outputs=[f"present.{layer}.key"], axis=2
    )
    values = b.node(
        "Concat", [f"past_key_values.{layer}.value", v], scope, outputs=[f"present.{layer}.value"], axis=2
    )
    group = heads // kv_heads
    repeat = b.const(scope, [1, 1, group, 1, 1])
    merged = b.const(scope, [0, heads, -1, head_size])
    axis2 = b.const(scope, [2])
    keys_all, values_all = (
        b.op(
            "Reshape",
            [b.op("Expand", [b.op("Unsqueeze", [t[0], axis2], scope), repeat], scope), merged],
            scope,
        )
        for t in (keys, values)
    )
    scores = b.op("MatMul", [q, b.op("Transpose", [keys_all], scope, perm=[0, 1, 3, 2])], scope)
    scores = b.op("Mul", [scores, b.const(scope, 1.0 / math.sqrt(head_size), np.float32)], scope)
    probs = b.op("Softmax", [b.op("Add", [scores, mask], scope)], scope, axis=-1)
    context = b.op("Transpose", [b.op("MatMul", [probs, values_all], scope)], scope, perm=[0, 2, 1, 3])
    context = b.op("Reshape", [context, b.const(scope, [0, 0, heads * head_size])], scope)
    return _linear(b, context, f"{path}.o_proj", heads * head_size, hidden)


def _mlp(b: _GraphBuilder, x: str, layer: int, hidden: int, intermediate: int) -> str:
    path = f"model.layers.{layer}.mlp"
    scope = _scope(path)
    gate = _linear(b, x, f"{path}.gate_proj", hidden, intermediate)
    up = _linear(b, x, f"{path}.up_proj", hidden, intermediate)
    silu = b.op("Mul", [gate, b.op("Sigmoid", [gate], scope)], scope)
    return _linear(b, b.op("Mul", [silu, up], scope), f"{path}.down_proj", intermediate, hidden)


def _positions_and_mask(b: _GraphBuilder, context: int, head_size: int) -> tuple[str, str, str]:
    """The rotary cos/sin of each new token's position, and the additive mask ``[batch, 1, seq, total]``."""
    scope = "/model/rotary_emb"
    zero, one = b.const(scope, 0), b.const(scope, 1)
    past = b.op("Gather", [b.op("Shape", ["past_key_values.0.key"], scope), b.const(scope, 2)], scope, axis=0)
    seq = b.op("Gather", [b.op("Shape", ["input_ids"], scope), one], scope, axis=0)
    positions = b.op("Range", [past, b.op("Add", [past, seq], scope), one], scope)
    inverse = 1.0 / (10000.0 ** (np.arange(0, head_size, 2, dtype=np.float64) / head_size))
    angles = np.outer(np.arange(context, dtype=np.float64), inverse)
    cos = b.op("Gather", [b.param("cos_cache", np.cos(angles).astype(np.float32)), positions], scope, axis=0)
    sin = b.op("Gather", [b.param("sin_cache", np.sin(angles).astype(np.float32)), positions], scope, axis=0)

    scope = "/model/attn_mask"
    total = b.op("Gather", [b.op("Shape", ["attention_mask"], scope), one], scope, axis=0)
    keys = b.op("Range", [zero, total, one], scope)
    causal = b.op(
        "LessOrEqual",
        [
            b.op("Unsqueeze", [keys, b.const(scope, [0])], scope),
            b.op("Unsqueeze", [positions, b.const(scope, [1])], scope),
        ],
        scope,
    )
    causal = b.op(
        "Where", [causal, b.const(scope, 0.0, np.float32), b.const(scope, _MASKED, np.float32)], scope
    )
    padding = b.op("Cast", ["attention_mask"], scope, to=TensorProto.FLOAT)
    padding = b.op(
        "Mul",
        [b.op("Sub", [b.const(scope, 1.0, np.float32), padding], scope), b.const(scope, _MASKED, np.float32)],
        scope,
    )
    padding = b.op("Unsqueeze", [padding, b.const(scope, [1, 2])], scope)
    return cos, sin, b.op("Add", [padding, causal], scope)


def _llama(
    layers: int = 2,
    hidden: int = 32,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate: int = 64,
    vocab: int = 128,
    context: int = 128,
    seed: int = 0,
) -> _Built:
    _check_positive(
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        intermediate=intermediate,
        vocab=vocab,
        context=context,
    )
    if hidden % heads or heads % kv_heads or (hidden // heads) % 2:
        raise UsageError(
            f"llama needs hidden ({hidden}) a multiple of heads ({heads}), heads a multiple of kv_heads "
            f"({kv_heads}) and an even head size"
        )
    head_size = hidden // heads
    sizes = {"heads": heads, "kv_heads": kv_heads, "head_size": head_size, "hidden": hidden}
    b = _GraphBuilder(np.random.default_rng(seed))
    cos, sin, mask = _positions_and_mask(b, context, head_size)
    table = b.normal("model.embed_tokens.weight", (vocab, hidden), 1.0)
    x = b.op("Gather", [table, "input_ids"], _scope("model.embed_tokens"), axis=0)
    for layer in range(layers):
        normed = _rms_norm(b, x, f"model.layers.{layer}.input_layernorm", hidden)
        x = b.op(
            "Add", [x, _attention(b, normed, layer, sizes, cos, sin, mask)], _scope(f"model.layers.{layer}")
        )
        normed = _rms_norm(b, x, f"model.layers.{layer}.post_attention_layernorm", hidden)
        x = b.op("Add", [x, _mlp(b, normed, layer, hidden, intermediate)], _scope(f"model.layers.{layer}"))
    x = _rms_norm(b, x, "model.norm", hidden)
    _linear(b, x, "lm_head", hidden, vocab, output="logits")

    kv_shape = ["batch", kv_heads, "past_sequence_length", head_size]
    present_shape = ["batch", kv_heads, "total_sequence_length", head_size]
    inputs = [
        _value("input_ids", TensorProto.INT64, ["batch", "sequence_length"]),
        _value("attention_mask", TensorProto.INT64, ["batch", "total_sequence_length"]),
    ]
    outputs = [_value("logits", TensorProto.FLOAT, ["batch", "sequence_length", vocab])]
    for layer in range(layers):
        for kind in ("key", "value"):
            inputs.append(_value(f"past_key_values.{layer}.{kind}", TensorProto.FLOAT, kv_shape))
            outputs.append(_value(f"present.{layer}.{kind}", TensorProto.FLOAT, present_shape))
    doc = (
        f"Llama-style decoder: {layers} layers, {heads} heads ({kv_heads} KV heads) of {head_size}, "
        f"hidden {hidden}, vocab {vocab}, context {context}; KV cache past_key_values.N -> present.N"
    )
    return _Built(b.graph("llama", inputs, outputs, doc_string=doc), 18)

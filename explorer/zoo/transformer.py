"""The zoo's ``transformer``: a pre-LN encoder over token ids, exported PyTorch-style.

Attention reshapes its heads with the exporter's run-time ``Shape``/``Gather``/``Unsqueeze``/
``Concat`` chains, and GELU is either the opset-20 ``Gelu`` or the ``Div/Erf/Add/Mul/Mul``
that opset 17 exports write.

Examples
--------
>>> from explorer import zoo
>>> len(zoo.build("transformer", layers=1, hidden=32, heads=2).graph.node)
92
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from onnx import TensorProto

from explorer.core.errors import UsageError
from explorer.zoo.parts import (
    _Built,
    _check_positive,
    _dynamic_dim,
    _GraphBuilder,
    _scope,
    _unsqueeze0,
    _value,
)

__all__: list[str] = []


def _runtime_shape(b: _GraphBuilder, x: str, scope: str, tail: Sequence[int]) -> str:
    """``[batch, seq, *tail]`` computed from ``x`` the way the PyTorch exporter does."""
    batch = _unsqueeze0(b, _dynamic_dim(b, x, 0, scope), scope)
    seq = _unsqueeze0(b, _dynamic_dim(b, x, 1, scope), scope)
    return b.op("Concat", [batch, seq, *(b.const(scope, [t]) for t in tail)], scope, axis=0)


def _layer_norm(b: _GraphBuilder, x: str, path: str, hidden: int, output: str | None = None) -> str:
    scale = b.normal(f"{path}.weight", (hidden,), 0.02, mean=1.0)
    bias = b.normal(f"{path}.bias", (hidden,), 0.02)
    outputs = None if output is None else [output]
    return b.node(
        "LayerNormalization", [x, scale, bias], _scope(path), outputs=outputs, axis=-1, epsilon=1e-5
    )[0]


def _dense(b: _GraphBuilder, x: str, path: str, cin: int, cout: int) -> str:
    """``nn.Linear`` on a 3-D input: ``MatMul`` with a ``[in, out]`` weight, then ``Add``."""
    w = b.normal(f"{path}.weight", (cin, cout), 0.02)
    bias = b.normal(f"{path}.bias", (cout,), 0.02)
    scope = _scope(path)
    return b.op("Add", [b.op("MatMul", [x, w], scope), bias], scope)


def _self_attention(b: _GraphBuilder, x: str, path: str, hidden: int, heads: int) -> str:
    head_dim = hidden // heads
    scope = _scope(path)
    split = {}
    for proj, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        y = _dense(b, x, f"{path}.{proj}_proj", hidden, hidden)
        y = b.op("Reshape", [y, _runtime_shape(b, y, scope, [heads, head_dim])], scope)
        split[proj] = b.op("Transpose", [y], scope, perm=perm)
    scores = b.op("MatMul", [split["q"], split["k"]], scope)
    scores = b.op("Div", [scores, b.const(scope, math.sqrt(head_dim), np.float32)], scope)
    probs = b.op("Softmax", [scores], scope, axis=-1)
    context = b.op("Transpose", [b.op("MatMul", [probs, split["v"]], scope)], scope, perm=[0, 2, 1, 3])
    context = b.op("Reshape", [context, _runtime_shape(b, context, scope, [hidden])], scope)
    return _dense(b, context, f"{path}.out_proj", hidden, hidden)


def _gelu(b: _GraphBuilder, x: str, path: str, how: str) -> str:
    scope = _scope(path)
    if how == "op":
        return b.op("Gelu", [x], scope)
    y = b.op("Erf", [b.op("Div", [x, b.const(scope, math.sqrt(2.0), np.float32)], scope)], scope)
    y = b.op("Mul", [x, b.op("Add", [y, b.const(scope, 1.0, np.float32)], scope)], scope)
    return b.op("Mul", [y, b.const(scope, 0.5, np.float32)], scope)


def _encoder_layer(b: _GraphBuilder, x: str, path: str, hidden: int, heads: int, ffn: int, gelu: str) -> str:
    """A pre-LN Transformer encoder layer (``nn.TransformerEncoderLayer(norm_first=True)``)."""
    y = _layer_norm(b, x, f"{path}.norm1", hidden)
    x = b.op("Add", [x, _self_attention(b, y, f"{path}.self_attn", hidden, heads)], _scope(path))
    y = _layer_norm(b, x, f"{path}.norm2", hidden)
    y = _gelu(b, _dense(b, y, f"{path}.linear1", hidden, ffn), f"{path}.activation", gelu)
    y = _dense(b, y, f"{path}.linear2", ffn, hidden)
    return b.op("Add", [x, y], _scope(path))


def _transformer(
    *,
    layers: int = 2,
    hidden: int = 256,
    heads: int = 4,
    ffn: int | None = None,
    vocab: int = 1000,
    max_positions: int = 512,
    gelu: str = "op",
    seed: int = 0,
) -> _Built:
    """A pre-LN Transformer encoder over token ids, exported PyTorch-style."""
    _check_positive(layers=layers, hidden=hidden, heads=heads, vocab=vocab, max_positions=max_positions)
    if hidden % heads:
        raise UsageError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
    if gelu not in ("op", "erf"):
        raise UsageError(f"gelu must be 'op' (opset-20 Gelu) or 'erf' (Div/Erf/Add/Mul/Mul), got {gelu!r}")
    ffn = 4 * hidden if ffn is None else ffn
    _check_positive(ffn=ffn)
    b = _GraphBuilder(np.random.default_rng(seed))
    scope = _scope("embeddings")
    words = b.normal("embeddings.word_embeddings.weight", (vocab, hidden), 0.02)
    x = b.op("Gather", [words, "input_ids"], _scope("embeddings.word_embeddings"), axis=0)
    seq = _dynamic_dim(b, "input_ids", 1, scope)
    positions = b.op("Range", [b.const(scope, 0), seq, b.const(scope, 1)], scope)
    table = b.normal("embeddings.position_embeddings.weight", (max_positions, hidden), 0.02)
    x = b.op(
        "Add",
        [x, b.op("Gather", [table, positions], _scope("embeddings.position_embeddings"), axis=0)],
        scope,
    )
    x = _layer_norm(b, x, "embeddings.LayerNorm", hidden)
    for i in range(layers):
        x = _encoder_layer(b, x, f"encoder.layers.{i}", hidden, heads, ffn, gelu)
    _layer_norm(b, x, "encoder.norm", hidden, output="last_hidden_state")
    graph = b.graph(
        "transformer",
        [_value("input_ids", TensorProto.INT64, ["batch", "seq"])],
        [_value("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", hidden])],
        f"Pre-LN Transformer encoder: {layers} layers, hidden {hidden}, {heads} heads, FFN {ffn}.",
    )
    return _Built(graph, 20 if gelu == "op" else 17)

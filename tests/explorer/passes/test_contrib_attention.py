"""GroupQueryAttention and RotaryEmbedding in standard ONNX, against ONNX Runtime (prefill and decode)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from explorer.passes.contrib_decompositions import decompose_contrib
from tests.explorer.passes.contrib_check import max_diffs, one_node_model

RNG = np.random.default_rng(0)
HEADS, KV_HEADS, HEAD_SIZE, MAX_POSITIONS = 4, 2, 64, 64
F = TensorProto.FLOAT
STEPS = {"prefill": (8, 0), "decode": (1, 8)}  # (sequence, past)


def _caches(half: int) -> dict[str, np.ndarray]:
    return {name: RNG.uniform(-1, 1, (MAX_POSITIONS, half)).astype(np.float32) for name in ("cos", "sin")}


def _gqa(step: str, packed: bool = False, rotary: bool = True, half: int = HEAD_SIZE // 2, **attrs: object):
    seq, past = STEPS[step]
    inputs = ["q", "", ""] if packed else ["q", "k", "v"]
    inputs += ["past_k", "past_v", "seqlens_k", "total"] + (["cos", "sin"] if rotary else [])
    node = helper.make_node(
        "GroupQueryAttention", inputs, ["out", "present_k", "present_v"], name="/attn/GroupQueryAttention",
        domain="com.microsoft", num_heads=HEADS, kv_num_heads=KV_HEADS, do_rotary=int(rotary), **attrs,
    )  # fmt: skip
    width = (HEADS + 2 * KV_HEADS) * HEAD_SIZE if packed else HEADS * HEAD_SIZE
    shapes = {"q": (1, seq, width)}
    if not packed:
        shapes |= {"k": (1, seq, KV_HEADS * HEAD_SIZE), "v": (1, seq, KV_HEADS * HEAD_SIZE)}
    shapes |= {"past_k": (1, KV_HEADS, past, HEAD_SIZE), "past_v": (1, KV_HEADS, past, HEAD_SIZE)}
    values = {k: (F, s) for k, s in shapes.items()}
    values |= {"seqlens_k": (TensorProto.INT32, (1,)), "total": (TensorProto.INT32, ())}
    outputs = {"out": F, "present_k": F, "present_v": F}
    model = one_node_model(node, values, _caches(half) if rotary else {}, outputs)
    feeds = {k: RNG.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    feeds |= {"seqlens_k": np.array([past + seq - 1], np.int32), "total": np.array(past + seq, np.int32)}
    return model, feeds


GQA_CASES = {
    "separate QKV, no rotary": {"rotary": False},
    "separate QKV, rotary": {},
    "packed QKV, interleaved rotary": {"packed": True, "rotary_interleaved": 1},
    "partial rotary": {"half": 16},
    "softcap": {"softcap": 30.0},
    "smooth softmax and a scale": {"smooth_softmax": 1, "scale": 0.05},
}


@pytest.mark.parametrize("step", sorted(STEPS))
@pytest.mark.parametrize("case", sorted(GQA_CASES))
def test_group_query_attention_computes_what_onnx_runtime_computes(case: str, step: str) -> None:
    model, feeds = _gqa(step, **GQA_CASES[case])
    diffs, decomposed, log = max_diffs(model, feeds)
    assert max(diffs) <= 2e-6  # measured: at most 5e-7 (output), 2.4e-7 (present_key), 0 (present_value)
    assert "no padding" in log[0]
    ops = {n.op_type for n in decomposed.graph.node}
    assert {"Concat", "Softmax", "MatMul", "Where", "Gather"} <= ops  # Gather: 2 query heads per KV head


@pytest.mark.parametrize(
    ("attrs", "why"),
    [
        ({"local_window_size": 4}, "local_window_size"),
        ({"qk_output": 1}, "qk_output"),
    ],
)
def test_group_query_attention_features_without_a_form_keep_the_node(attrs: dict, why: str) -> None:
    model, _ = _gqa("decode", **attrs)
    _, log = decompose_contrib(model)
    assert log[0].startswith("/attn/GroupQueryAttention (GroupQueryAttention): kept: ") and why in log[0]


def _rotary(step: str, rank: int, interleaved: int, offset: bool, half: int):
    seq, past = STEPS[step]
    shape = (1, seq, HEADS * HEAD_SIZE) if rank == 3 else (1, HEADS, seq, HEAD_SIZE)
    attrs = {"interleaved": interleaved}
    if rank == 3 or half != HEAD_SIZE // 2:
        attrs["num_heads"] = HEADS
    if half != HEAD_SIZE // 2:
        attrs["rotary_embedding_dim"] = 2 * half
    node = helper.make_node(
        "RotaryEmbedding",
        ["x", "pos", "cos", "sin"],
        ["y"],
        name="/q/RotaryEmbedding",
        domain="com.microsoft",
        **attrs,
    )
    positions = np.array([past]) if offset else np.arange(past, past + seq)[None]
    values = {"x": (F, shape), "pos": (TensorProto.INT64, positions.shape)}
    model = one_node_model(node, values, _caches(half), {"y": F})
    return model, {"x": RNG.standard_normal(shape).astype(np.float32), "pos": positions.astype(np.int64)}


@pytest.mark.parametrize("step", sorted(STEPS))
@pytest.mark.parametrize(
    ("rank", "interleaved", "offset", "half"),
    [
        (3, 0, False, 32),
        (3, 1, True, 32),
        (4, 0, True, 32),
        (4, 1, False, 32),
        (3, 0, False, 16),
        (4, 1, True, 16),
    ],
)
def test_rotary_embedding_computes_what_onnx_runtime_computes(
    rank: int, interleaved: int, offset: bool, half: int, step: str
) -> None:
    model, feeds = _rotary(step, rank, interleaved, offset, half)
    (diff,), decomposed, _ = max_diffs(model, feeds)
    assert diff <= 1e-6  # measured: at most 4.8e-7
    assert {"Gather", "Mul", "Sub", "Add", "Concat"} <= {n.op_type for n in decomposed.graph.node}

"""MatMulNBits and GatherBlockQuantized in standard ONNX: ONNX Runtime's kernels against the rewrite."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from explorer.passes.contrib_decompositions import decompose_contrib
from explorer.passes.contrib_quantized import PRIMITIVE, int_tensor, unpack_bits
from tests.explorer.passes.contrib_check import max_diffs, one_node_model

RNG = np.random.default_rng(0)
K, N, BLOCK = 256, 96, 32
PREFILL_DECODE = [8, 1]


def _matmul_nbits(bits: int, zero_points: str, bias: bool, seq: int, accuracy_level: int = 0, k: int = K):
    k_blocks = -(-k // BLOCK)
    weights = {
        "B": RNG.integers(0, 256, (N, k_blocks, BLOCK * bits // 8), dtype=np.uint8),
        "scales": RNG.uniform(0.01, 0.1, (N, k_blocks)).astype(np.float32),
    }
    inputs = ["A", "B", "scales"]
    if zero_points == "packed":
        weights["zp"] = RNG.integers(0, 256, (N, -(-k_blocks * bits // 8)), dtype=np.uint8)
        inputs.append("zp")
    elif zero_points == "float":
        weights["zp"] = RNG.integers(0, 1 << bits, (N, k_blocks)).astype(np.float32)
        inputs.append("zp")
    if bias:
        inputs += [""] * (5 - len(inputs)) + ["bias"]
        weights["bias"] = RNG.standard_normal(N).astype(np.float32)
    node = helper.make_node(
        "MatMulNBits", inputs, ["Y"], name="/fc/MatMulNBits", domain="com.microsoft",
        K=k, N=N, bits=bits, block_size=BLOCK, accuracy_level=accuracy_level,
    )  # fmt: skip
    model = one_node_model(node, {"A": (TensorProto.FLOAT, (1, seq, k))}, weights, {"Y": TensorProto.FLOAT})
    return model, {"A": RNG.standard_normal((1, seq, k)).astype(np.float32)}


@pytest.mark.parametrize("seq", PREFILL_DECODE)
@pytest.mark.parametrize(
    ("bits", "zero_points", "bias"),
    [(4, "packed", False), (4, "none", True), (4, "float", False), (8, "packed", True), (8, "none", False)],
)
def test_matmul_nbits_is_a_blocked_dequantize_and_a_matmul(
    bits: int, zero_points: str, bias: bool, seq: int
) -> None:
    model, feeds = _matmul_nbits(bits, zero_points, bias, seq)
    (diff,), decomposed, _log = max_diffs(model, feeds)
    assert (
        diff <= 1e-4
    )  # measured: 0 (prefill), a few 1e-6 (decode: ONNX Runtime's GEMV sums in another order)
    assert [n.op_type for n in decomposed.graph.node if n.op_type != "Constant"] == [
        "DequantizeLinear", "MatMul", *(["Add"] if bias else [])
    ]  # fmt: skip
    weights = {t.name: t for t in decomposed.graph.initializer}
    assert "B" not in weights and "zp" not in weights  # the packed forms are gone
    unpacked = weights["B_unpacked"]
    assert unpacked.data_type == (TensorProto.UINT4 if bits == 4 else TensorProto.UINT8)
    assert list(unpacked.dims) == [K, N] and len(unpacked.raw_data) == K * N * bits // 8
    dq = next(n for n in decomposed.graph.node if n.op_type == "DequantizeLinear")
    assert {a.name: helper.get_attribute_value(a) for a in dq.attribute} == {"axis": 0, "block_size": BLOCK}


def test_accuracy_level_4_is_noted_since_onnx_runtime_then_quantises_the_activations() -> None:
    model, feeds = _matmul_nbits(4, "none", False, 8, accuracy_level=4)
    (diff,), _, log = max_diffs(model, feeds)
    assert "accuracy_level 4" in log[0]
    assert 1e-3 < diff < 1.0  # ONNX Runtime's int8 A; the rewrite keeps A in float (the definition)


def test_matmul_nbits_is_kept_when_it_cannot_be_unpacked_exactly() -> None:
    model, _ = _matmul_nbits(4, "none", False, 8)
    model.graph.node[0].input.extend(["", "g_idx"])
    model.graph.initializer.append(helper.make_tensor("g_idx", TensorProto.INT32, [K], RNG.permutation(K)))
    assert "non-trivial g_idx" in decompose_contrib(model)[1][0]
    model, _ = _matmul_nbits(4, "none", False, 8)
    model.opset_import[0].version = 20
    assert "needs opset 21" in decompose_contrib(model)[1][0]


def _gather_block_quantized(zero_points: bool, seq: int):
    vocab, hidden = 64, 256
    weights = {
        "data": RNG.integers(0, 256, (vocab, hidden // 2), dtype=np.uint8),
        "scales": RNG.uniform(0.01, 0.1, (vocab, hidden // BLOCK)).astype(np.float32),
    }
    if zero_points:
        weights["zp"] = RNG.integers(0, 256, (vocab, hidden // BLOCK // 2), dtype=np.uint8)
    node = helper.make_node(
        "GatherBlockQuantized", ["data", "ids", "scales", *(["zp"] if zero_points else [])], ["y"],
        name="/embed/GatherBlockQuantized", domain="com.microsoft",
        gather_axis=0, quantize_axis=1, block_size=BLOCK, bits=4,
    )  # fmt: skip
    model = one_node_model(node, {"ids": (TensorProto.INT64, (1, seq))}, weights, {"y": TensorProto.FLOAT})
    return model, {"ids": RNG.integers(0, vocab, (1, seq))}


@pytest.mark.parametrize("seq", PREFILL_DECODE)
@pytest.mark.parametrize("zero_points", [True, False])
def test_gather_block_quantized_is_a_dequantize_then_a_gather(zero_points: bool, seq: int) -> None:
    model, feeds = _gather_block_quantized(zero_points, seq)
    (diff,), decomposed, _log = max_diffs(model, feeds)
    assert diff == 0.0
    assert [n.op_type for n in decomposed.graph.node] == ["DequantizeLinear", "Gather"]
    assert {t.name: t.data_type for t in decomposed.graph.initializer}["data_unpacked"] == TensorProto.UINT4


def test_unpacking_follows_onnx_runtime_low_bits_first() -> None:
    assert unpack_bits(np.array([0xE4], np.uint8), 2).tolist() == [0, 1, 2, 3]
    assert int_tensor(np.arange(4, dtype=np.uint8).reshape(2, 2), 4).raw_data == bytes([0x10, 0x32])


PRIMITIVE_NODES = ["Cast", "Sub", "Mul", "Reshape"]
"""The primitive form's dequantisation (zero points subtracted, scales multiplied per block)."""


@pytest.mark.parametrize("seq", PREFILL_DECODE)
@pytest.mark.parametrize(
    ("bits", "zero_points", "bias", "k"),
    [(4, "packed", False, K), (4, "none", True, K), (4, "float", False, K), (8, "packed", True, K),
     (4, "packed", False, K - 12)],
)  # fmt: skip
def test_matmul_nbits_primitive_form_is_bytes_cast_sub_mul_and_a_matmul(
    bits: int, zero_points: str, bias: bool, k: int, seq: int
) -> None:
    model, feeds = _matmul_nbits(bits, zero_points, bias, seq, k=k)
    model.opset_import[0].version = 17  # the primitive form needs no opset 21
    (diff,), decomposed, _log = max_diffs(model, feeds, quantized=PRIMITIVE)
    assert diff <= 1e-4  # measured: 0 (prefill), a few 1e-6 (decode: ONNX Runtime's GEMV order)
    ops = [n.op_type for n in decomposed.graph.node if n.op_type != "Constant"]
    short = ["Slice"] if k % BLOCK else []  # the last block padded, then sliced off
    assert ops == [*PRIMITIVE_NODES, *short, "MatMul", *(["Add"] if bias else [])]
    weights = {t.name: t for t in decomposed.graph.initializer}
    assert "B" not in weights and "zp" not in weights
    q = weights["B_bytes"]
    assert q.data_type == TensorProto.UINT8 and list(q.dims) == [-(-k // BLOCK), BLOCK, N]
    assert list(weights["B_scales_blocked"].dims) == [-(-k // BLOCK), 1, N]


@pytest.mark.parametrize("seq", PREFILL_DECODE)
@pytest.mark.parametrize("zero_points", [True, False])
def test_gather_block_quantized_primitive_form_gathers_the_rows_then_dequantises_them(
    zero_points: bool, seq: int
) -> None:
    """As ONNX Runtime's kernel: only the rows gathered are dequantised (not a 49152-row table a call)."""
    model, feeds = _gather_block_quantized(zero_points, seq)
    (diff,), decomposed, _log = max_diffs(model, feeds, quantized=PRIMITIVE)
    assert diff == 0.0
    ops = [n.op_type for n in decomposed.graph.node if n.op_type != "Constant"]
    assert ops == ["Gather", "Cast", "Gather", "Sub", "Gather", "Mul", "Reshape"]  # zero points always
    assert {t.name: t.data_type for t in decomposed.graph.initializer}["data_bytes"] == TensorProto.UINT8


def test_a_tied_embedding_gathers_from_a_reshape_of_the_lm_heads_weight() -> None:
    """onnxruntime-genai ties the embedding to the LM head: GatherBlockQuantized reads
    ``Reshape(lm_head's packed weight)``, which the rewrite reads folded (and drops)."""
    vocab, hidden = 64, 64
    packed = RNG.integers(0, 256, (vocab, hidden // BLOCK, BLOCK // 2), dtype=np.uint8)
    scales = RNG.uniform(0.01, 0.1, (vocab, hidden // BLOCK)).astype(np.float32)
    shape = np.array([vocab, hidden // 2], np.int64)
    nodes = [
        helper.make_node("Reshape", ["W", "shape"], ["table"], name="/embed/Reshape"),
        helper.make_node(
            "GatherBlockQuantized", ["table", "ids", "scales"], ["h"], name="/embed/GatherBlockQuantized",
            domain="com.microsoft", gather_axis=0, quantize_axis=1, block_size=BLOCK, bits=4,
        ),
        helper.make_node(
            "MatMulNBits", ["h", "W", "scales"], ["logits"], name="/lm_head/MatMulNBits",
            domain="com.microsoft", K=hidden, N=vocab, bits=4, block_size=BLOCK,
        ),
    ]  # fmt: skip
    weights = {"W": packed, "scales": scales, "shape": shape}
    model = one_node_model(
        nodes[0], {"ids": (TensorProto.INT64, (1, 5))}, weights, {"logits": TensorProto.FLOAT}
    )
    model.graph.node.extend(nodes[1:])
    feeds = {"ids": RNG.integers(0, vocab, (1, 5))}
    for form in ("dequantize_linear", PRIMITIVE):
        (diff,), decomposed, log = max_diffs(model, feeds, quantized=form)
        assert diff <= 1e-5, (form, log)
        assert "/embed/Reshape" not in {n.name for n in decomposed.graph.node}
        assert "W" not in {t.name for t in decomposed.graph.initializer}  # the packed weight is gone


def test_an_unknown_quantized_form_keeps_the_node_and_says_the_forms() -> None:
    model, _ = _matmul_nbits(4, "none", False, 1)
    assert "the forms are dequantize_linear, primitive" in decompose_contrib(model, quantized="int8")[1][0]

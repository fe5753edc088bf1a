"""SimplifiedLayerNormalization and SkipSimplifiedLayerNormalization as standard ONNX, against ORT."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from explorer.passes.contrib_decompositions import decompose_contrib
from tests.explorer.passes.contrib_check import max_diffs, one_node_model

RNG = np.random.default_rng(0)
HIDDEN = 256
F = TensorProto.FLOAT


def _simplified(seq: int, opset: int = 21, inv_std_var: bool = True):
    outputs = ["y", "inv"] if inv_std_var else ["y"]
    node = helper.make_node(
        "SimplifiedLayerNormalization",
        ["x", "g"],
        outputs,
        name="/norm/SimplifiedLayerNormalization",
        epsilon=1e-6,
    )  # ONNX Runtime registers it in the default domain
    weights = {"g": RNG.standard_normal(HIDDEN).astype(np.float32)}
    model = one_node_model(node, {"x": (F, (1, seq, HIDDEN))}, weights, dict.fromkeys(outputs, F), opset)
    return model, {"x": RNG.standard_normal((1, seq, HIDDEN)).astype(np.float32)}


@pytest.mark.parametrize("seq", [8, 1])
def test_simplified_layer_norm_is_written_in_primitive_ops_by_default(seq: int) -> None:
    model, feeds = _simplified(seq)
    diffs, decomposed, _ = max_diffs(model, feeds)
    assert max(diffs) <= 1e-6  # measured: 5e-7 on y, 0 on inv_std_var
    ops = [n.op_type for n in decomposed.graph.node if n.op_type != "Constant"]
    assert ops == ["Pow", "ReduceMean", "Add", "Sqrt", "Reciprocal", "Div", "Mul"]


@pytest.mark.parametrize("seq", [8, 1])
def test_simplified_layer_norm_can_be_onnx_rms_normalization(seq: int) -> None:
    model, feeds = _simplified(seq, opset=23, inv_std_var=False)
    (diff,), decomposed, _ = max_diffs(model, feeds, rms_norm=True)
    assert diff <= 1e-6
    assert [n.op_type for n in decomposed.graph.node] == ["RMSNormalization"]
    old, _ = _simplified(seq, opset=21, inv_std_var=False)  # opset 21 has no RMSNormalization
    assert "RMSNormalization" not in {n.op_type for n in decompose_contrib(old, rms_norm=True)[0].graph.node}


@pytest.mark.parametrize("seq", [8, 1])
@pytest.mark.parametrize("bias", [True, False])
def test_skip_simplified_layer_norm_gives_its_sum_and_inv_std_var_too(bias: bool, seq: int) -> None:
    inputs = ["x", "s", "g", *(["b"] if bias else [])]
    weights = {"g": RNG.standard_normal(HIDDEN).astype(np.float32)}
    if bias:
        weights["b"] = RNG.standard_normal(HIDDEN).astype(np.float32)
    node = helper.make_node(
        "SkipSimplifiedLayerNormalization", inputs, ["y", "", "inv", "sum"],
        name="/layer/SkipSimplifiedLayerNormalization", domain="com.microsoft", epsilon=1e-6,
    )  # fmt: skip
    shape = (1, seq, HIDDEN)
    model = one_node_model(node, {"x": (F, shape), "s": (F, shape)}, weights, {"y": F, "inv": F, "sum": F})
    feeds = {k: RNG.standard_normal(shape).astype(np.float32) for k in "xs"}
    diffs, _, _ = max_diffs(model, feeds)
    assert max(diffs) <= 2e-6  # measured: 1e-6 on y, 2e-7 on inv_std_var, 0 on the sum


def test_the_mean_output_has_no_rms_form_and_keeps_the_node() -> None:
    node = helper.make_node(
        "SkipSimplifiedLayerNormalization", ["x", "s", "g"], ["y", "mean"], name="n", domain="com.microsoft"
    )
    model = one_node_model(
        node, {"x": (F, (1, 2, 8)), "s": (F, (1, 2, 8))}, {"g": np.ones(8, np.float32)}, {"y": F}
    )
    assert decompose_contrib(model)[1] == [
        "n (SkipSimplifiedLayerNormalization): kept: its mean output: RMS normalisation computes no mean"
    ]

"""Contrib ops written in standard ONNX: the same outputs on ONNX Runtime, or kept with a reason."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from explorer import zoo
from explorer.passes import contrib_attention, contrib_norms, contrib_quantized
from explorer.passes.contrib_decompositions import CONTRIB_DOMAIN, DECOMPOSABLE, decompose_contrib

RNG = np.random.default_rng(0)


def _model(node: onnx.NodeProto, inputs: dict[str, tuple], weights: dict[str, np.ndarray], outputs: int = 1):
    values = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v)) for k, v in inputs.items()]
    outs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in node.output[:outputs]]
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()]
    graph = helper.make_graph([node], "g", values, outs, inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(CONTRIB_DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets)


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _ms(op: str, inputs: list[str], outputs: list[str], **attrs: object) -> onnx.NodeProto:
    return helper.make_node(op, inputs, outputs, name=f"/block/{op}", domain=CONTRIB_DOMAIN, **attrs)


CASES = {
    "FusedMatMul": (
        _ms("FusedMatMul", ["a", "w"], ["y"], alpha=0.5, transA=1, transB=1),
        {"a": (2, 5, 3)},
        {"w": RNG.standard_normal((4, 5))},
    ),
    "FusedConv": (
        _ms(
            "FusedConv",
            ["x", "w", "b", "z"],
            ["y"],
            activation="Clip",
            activation_params=[0.0, 0.5],
            pads=[1] * 4,
        ),
        {"x": (1, 3, 6, 6), "z": (1, 4, 6, 6)},
        {"w": RNG.standard_normal((4, 3, 3, 3)), "b": RNG.standard_normal(4)},
    ),
    "QuickGelu": (_ms("QuickGelu", ["x"], ["y"], alpha=1.5), {"x": (3, 8)}, {}),
    "Gelu": (_ms("Gelu", ["x"], ["y"]), {"x": (3, 8)}, {}),
    "BiasGelu": (_ms("BiasGelu", ["x", "b"], ["y"]), {"x": (3, 8)}, {"b": RNG.standard_normal(8)}),
    "FastGelu": (_ms("FastGelu", ["x", "b"], ["y"]), {"x": (3, 8)}, {"b": RNG.standard_normal(8)}),
    "BiasAdd": (
        _ms("BiasAdd", ["x", "b", "s"], ["y"]),
        {"x": (2, 3, 8), "s": (2, 3, 8)},
        {"b": RNG.standard_normal(8)},
    ),
    "SkipLayerNormalization": (
        _ms("SkipLayerNormalization", ["x", "s", "g", "beta", "bias"], ["y", "", "", "sum"], epsilon=1e-6),
        {"x": (2, 3, 8), "s": (2, 3, 8)},
        {"g": RNG.standard_normal(8), "beta": RNG.standard_normal(8), "bias": RNG.standard_normal(8)},
    ),
}


def test_every_decomposition_has_a_case() -> None:  # the decoder-LLM ops: in their modules' tests
    llm = {*contrib_quantized.RULES, *contrib_norms.RULES, *contrib_attention.RULES}
    assert set(CASES) | llm == set(DECOMPOSABLE) and not set(CASES) & llm


@pytest.mark.parametrize("op", sorted(CASES))
def test_a_decomposed_contrib_op_computes_what_onnx_runtime_computes(op: str) -> None:
    node, inputs, weights = CASES[op]
    model = _model(node, inputs, weights, outputs=4 if op == "SkipLayerNormalization" else 1)
    if op == "SkipLayerNormalization":
        del model.graph.output[1:]
        model.graph.output.append(helper.make_tensor_value_info("sum", TensorProto.FLOAT, None))
    before = model.SerializeToString()
    decomposed, log = decompose_contrib(model)
    assert model.SerializeToString() == before  # the input is kept
    assert log[0].startswith(f"/block/{op} ({op}): ") and "standard nodes" in log[0]
    assert all(n.domain == "" for n in decomposed.graph.node)
    assert CONTRIB_DOMAIN not in {o.domain for o in decomposed.opset_import}
    feeds = {k: RNG.standard_normal(v).astype(np.float32) for k, v in inputs.items()}
    if op == "BiasAdd":  # ONNX Runtime has it only on CUDA: its documented formula instead
        expected = [feeds["x"] + weights["b"].astype(np.float32) + feeds["s"]]
    else:
        expected = _run(model, feeds)
    for want, got in zip(expected, _run(decomposed, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_nodes_without_an_exact_standard_form_are_kept_with_the_reason() -> None:
    batch = _ms("FusedMatMul", ["a", "w"], ["y"], transBatchA=1)
    model = _model(batch, {"a": (2, 5, 3)}, {"w": RNG.standard_normal((3, 4))})
    same, log = decompose_contrib(model)
    assert [n.op_type for n in same.graph.node] == ["FusedMatMul"]
    assert log == [
        "/block/FusedMatMul (FusedMatMul): kept: transBatchA/transBatchB move batch dimensions, "
        "which has no one-op standard form"
    ]
    unknown = _ms("FusedMatMul", ["a", "w"], ["y"], transA=1)
    model = _model(unknown, {}, {"w": RNG.standard_normal((3, 4))})
    model.graph.input.append(helper.make_tensor_value_info("a", TensorProto.FLOAT, None))
    assert "the rank of 'a' is not known" in decompose_contrib(model)[1][0]
    attention = _ms("Attention", ["a"], ["y"])
    assert decompose_contrib(_model(attention, {"a": (1, 2, 8)}, {}))[1] == [
        "no standard form here for Attention"
    ]


def test_a_chain_of_contrib_ops_is_decomposed_with_ranks_learned_on_the_way() -> None:
    model = zoo.build("custom_domain")
    decomposed, log = decompose_contrib(model)
    ops = [(n.domain, n.op_type) for n in decomposed.graph.node]
    assert ("zoo.local", "Swish") in ops and not any(d == CONTRIB_DOMAIN for d, _ in ops)
    assert len(log) == 3 and all("standard nodes" in line for line in log)
    feeds = {"input": RNG.standard_normal((2, 64)).astype(np.float32)}
    np.testing.assert_allclose(_run(decomposed, feeds)[0], _run(model, feeds)[0], rtol=1e-4, atol=1e-5)


def test_only_the_ops_asked_for_are_decomposed() -> None:
    decomposed, _ = decompose_contrib(zoo.build("custom_domain"), ops={"FusedMatMul"})
    assert [n.op_type for n in decomposed.graph.node if n.domain == CONTRIB_DOMAIN] == ["BiasGelu"]
    assert CONTRIB_DOMAIN in {o.domain for o in decomposed.opset_import}

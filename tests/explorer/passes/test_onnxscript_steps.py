"""onnxscript's optimizer parts and ORT fusion rule sets, one step at a time, on the zoo transformer."""

from __future__ import annotations

import importlib
from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from explorer import zoo
from explorer.core.timeline import Timeline
from explorer.passes import get_pass, pass_names
from explorer.passes.onnxscript_steps import FUSION_STEPS, OPTIMIZER_PARTS
from explorer.passes.pipeline import run_pipeline

LAYERS = 2
SMALL = {"layers": LAYERS, "hidden": 64, "heads": 4}
SKIP_LN = "Add + Add + LayerNormalization -> com.microsoft::SkipLayerNormalization"


def _ops(timeline: Timeline, index: int) -> Counter[str]:
    return Counter(n.op_type for n in timeline[index].graph.model.graph.node)


def _patterns(timeline: Timeline, index: int) -> Counter[str]:
    return Counter(f.pattern for f in timeline.diff(index).fusions)


def _verified(timeline: Timeline) -> None:
    for snap in timeline.snapshots[1:]:
        assert snap.error is None, (snap.name, snap.error)
        if snap.changed:
            assert snap.max_abs_diff is not None and snap.max_abs_diff < 1e-4, (snap.name, snap.max_abs_diff)


def _dynamo_style(model: onnx.ModelProto) -> onnx.ModelProto:
    """Read every run-time size from the graph input, as torch.onnx.export(dynamo=True) does.

    The zoo writes the older exporter's ``Shape`` of the tensor being reshaped; every such
    ``Shape`` feeds a ``Gather`` of dim 0 (batch) or 1 (sequence), which ``input_ids`` has too.
    """
    for node in model.graph.node:
        if node.op_type == "Shape":
            node.input[0] = "input_ids"
    return model


def _runtime_attention_scale(model: onnx.ModelProto) -> onnx.ModelProto:
    """Divide the attention scores by ``Sqrt(Cast(Shape(q)[3]))`` computed at run time, not a constant."""
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    softmax_inputs = {n.input[0] for n in graph.node if n.op_type == "Softmax"}
    nodes = []
    for node in graph.node:
        if node.op_type == "Div" and node.output[0] in softmax_inputs:
            query = producer[node.input[0]].input[0]
            p = node.name.rsplit("/", 1)[0] + "/scale"
            graph.initializer.append(numpy_helper.from_array(np.array(3, np.int64), f"{p}/axis"))
            nodes += [
                helper.make_node("Shape", [query], [f"{p}/shape"], name=f"{p}/Shape"),
                helper.make_node(
                    "Gather", [f"{p}/shape", f"{p}/axis"], [f"{p}/dim"], name=f"{p}/Gather", axis=0
                ),
                helper.make_node(
                    "Cast", [f"{p}/dim"], [f"{p}/dim_f"], name=f"{p}/Cast", to=TensorProto.FLOAT
                ),
                helper.make_node("Sqrt", [f"{p}/dim_f"], [p], name=f"{p}/Sqrt"),
            ]
            node.input[1] = p
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def test_every_optimizer_part_and_fusion_function_is_a_pass() -> None:
    names = set(pass_names("onnxscript"))
    assert {f"onnxscript:{part}" for part in OPTIMIZER_PARTS} | {"onnxscript:ort_fusions"} <= names
    core = importlib.import_module("onnxscript.rewriter.ort_fusions._core")
    for name in FUSION_STEPS:
        assert f"onnxscript:{name}" in names
        if name != "ort_pattern_rewrite_rules":
            assert callable(getattr(core, name)), f"{name} is not one of fuse_xformers' functions"
    for name in names:
        found = get_pass(name)
        assert found.family == "onnxscript" and len(found.description) > 200, name


def test_optimize_for_ort_fuses_skip_layer_norm_attention_and_bias_gelu_per_layer() -> None:
    timeline = run_pipeline(zoo.build("transformer", **SMALL), "onnxscript:ort_fusions")
    _verified(timeline)
    ops = _ops(timeline, 1)
    assert ops["SkipLayerNormalization"] == 2 * LAYERS
    assert ops["MultiHeadAttention"] == LAYERS
    assert ops["BiasGelu"] == LAYERS
    assert ops["Softmax"] == 0 and ops["Gelu"] == 0
    assert f"skip_layer_normalization {2 * LAYERS}, sdpa {LAYERS}" in timeline[1].log[-1]
    patterns = _patterns(timeline, 1)
    assert patterns[SKIP_LN] == 2 * LAYERS
    assert patterns["Add + Gelu -> com.microsoft::BiasGelu"] == LAYERS


def test_rule_sets_one_by_one_say_which_rule_fused_what_and_why_mha_did_not() -> None:
    steps = [
        "onnxscript:optimize",
        "onnxscript:fuse_skip_layer_normalization",
        "onnxscript:fuse_sdpa",
        "onnxscript:fuse_mha2",
        "onnxscript:replace_sdpa_by_mha",
        "onnxscript:fuse_bias_gelu",
    ]
    timeline = run_pipeline(zoo.build("transformer", **SMALL), ",".join(steps))
    _verified(timeline)
    assert [s.changed for s in timeline.snapshots[1:]] == [True, True, True, False, True, True]
    assert _patterns(timeline, 2) == {SKIP_LN: 2 * LAYERS}
    assert (
        f"fused {2 * LAYERS}: SkipLayerNormPreBias -> com.microsoft::SkipLayerNormalization"
        in timeline[2].log
    )
    sdpa = "Transpose + MatMul + Div + Softmax + MatMul -> ai.onnxruntime._fusion::SDPA"
    assert _patterns(timeline, 3) == {sdpa: LAYERS}
    assert _ops(timeline, 3)["SDPA"] == LAYERS  # kept as model-local functions, so ONNX Runtime ran it
    # the zoo reads the attention output's shape for the final Reshape, as the TorchScript exporter did
    mha = [line for line in timeline[4].log if line.strip().startswith("MHA:")]
    assert mha and "no_match): Matched nodes have other uses preventing replacement. (" in mha[0]
    assert "self_attn/Transpose_3 is also read by /encoder/layers.0/self_attn/Shape" in mha[0]
    assert _patterns(timeline, 5) == {
        "ai.onnxruntime._fusion::SDPA -> com.microsoft::MultiHeadAttention": LAYERS
    }
    assert _ops(timeline, 5)["SDPA"] == 0
    assert _patterns(timeline, 6) == {"Add + Gelu -> com.microsoft::BiasGelu": LAYERS}


def test_dynamo_style_sizes_and_fixed_shapes_fuse_all_the_way_to_attention() -> None:
    model = _dynamo_style(zoo.build("transformer", **SMALL))
    steps = [
        "onnxscript:optimize",
        "onnxscript:fuse_skip_layer_normalization",
        "onnxscript:fuse_sdpa",
        "onnxscript:fuse_mha2",
        "onnxscript:fuse_mha_bias",
        "onnxscript:fuse_attention",
    ]
    timeline = run_pipeline(model, ",".join(steps), input_shapes={"input_ids": [2, 16]})
    _verified(timeline)
    assert all(s.changed for s in timeline.snapshots[1:])
    mha = Counter(
        p for p in _patterns(timeline, 4).elements() if p.endswith("-> com.microsoft::MultiHeadAttention")
    )
    assert sum(mha.values()) == LAYERS
    attention = "MatMul + MatMul + MatMul + com.microsoft::MultiHeadAttention -> com.microsoft::Attention"
    assert _patterns(timeline, 6) == {attention: LAYERS}
    assert _ops(timeline, 6)["Attention"] == LAYERS and _ops(timeline, 6)["MultiHeadAttention"] == 0


def test_a_scale_computed_at_run_time_keeps_sdpa_from_matching_and_the_log_says_why() -> None:
    model = _runtime_attention_scale(zoo.build("transformer", layers=1, hidden=32, heads=2))
    onnx.checker.check_model(model)
    result = get_pass("onnxscript:fuse_sdpa").run(model)
    assert not result.modified
    assert result.log[1] == "fuse_sdpa matched nothing; closest near-miss of each rule:"
    assert result.log[2] == (
        "  SDPA: closest near-miss at /encoder/layers.0/self_attn/MatMul_1 "
        "(5 pattern nodes matched, condition failed): qk_scale is not a scalar. "
        "(around /encoder/layers.0/self_attn/scale)"
    )
    # with the constant scale the same rule set fuses
    assert (
        get_pass("onnxscript:fuse_sdpa").run(zoo.build("transformer", layers=1, hidden=32, heads=2)).modified
    )


def test_inline_replaces_a_function_call_by_its_body() -> None:
    timeline = run_pipeline(zoo.build("custom_domain"), "onnxscript:inline")
    _verified(timeline)
    assert timeline.diff(1).op_deltas == {"Mul": 1, "Sigmoid": 1, "Swish": -1}
    assert not timeline[1].graph.model.functions


def test_rewrite_folds_batchnorm_into_conv_and_constant_folding_then_remove_unused() -> None:
    timeline = run_pipeline(zoo.build("resnet18", width=8, image_size=64), "onnxscript:rewrite")
    _verified(timeline)
    assert timeline.diff(1).op_deltas["BatchNormalization"] == -20

    a = numpy_helper.from_array(np.ones(4, np.float32), "a")
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["a", "a"], ["b"], name="fold_me"),
            helper.make_node("Mul", ["x", "b"], ["y"], name="mul"),
            helper.make_node("Neg", ["x"], ["dead"], name="dead"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [a],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    timeline = run_pipeline(model, "onnxscript:remove_unused,onnxscript:constant_folding")
    _verified(timeline)
    assert timeline.diff(1).op_deltas == {"Neg": -1}
    assert timeline.diff(2).op_deltas["Add"] == -1


@pytest.mark.parametrize("name", ["onnxscript:fuse_gelu", "onnxscript:fuse_erfgelu"])
def test_the_erf_gelu_of_older_exports(name: str) -> None:
    timeline = run_pipeline(zoo.build("transformer", gelu="erf", **SMALL), name)
    _verified(timeline)
    if name == "onnxscript:fuse_gelu":
        assert _patterns(timeline, 1) == {"Div + Erf + Add + Mul + Mul -> com.microsoft::Gelu": LAYERS}
    else:  # its patterns want 0.5 * (x * ...) or x * (0.5 * ...); the exporter writes (x * ...) * 0.5
        assert not timeline[1].changed
        assert any("is not a constant, expecting 0.5" in line for line in timeline[1].log)


@pytest.mark.parametrize("name", pass_names("onnxscript"))
def test_each_pass_runs_on_the_zoo_transformer_and_verifies_in_onnx_runtime(name: str) -> None:
    step = run_pipeline(zoo.build("transformer", layers=1, hidden=32, heads=2), [name])[1]
    assert step.error is None, step.error
    if step.changed:
        onnx.checker.check_model(step.graph.model)
        assert step.max_abs_diff is not None and step.max_abs_diff < 1e-4, step.max_abs_diff

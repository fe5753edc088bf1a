"""Tests of :mod:`explorer.zoo`: every model is valid, runs in ONNX Runtime, and is deterministic."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from explorer import zoo
from explorer.core.errors import ExplorerError

# Small options where size is not the point, so the whole file stays quick.
SMALL: dict[str, dict[str, Any]] = {
    "mlp": {},
    "resnet18": {"width": 8, "image_size": 64},
    "mobilenetv2": {"width_mult": 0.35, "image_size": 64},
    "transformer": {"layers": 2, "hidden": 32, "heads": 4},
    "detection_head": {"width": 8, "fpn_channels": 16, "num_classes": 5},
    "yolov8": {"width": 4, "num_classes": 5},
    "control_flow": {},
    "custom_domain": {},
    "qdq_cnn": {},
    "elementwise": {"ops": 7, "features": None},
    "llama": {},
}
# Concrete values for the symbolic input dimensions.
DIMS = {
    "batch": 2,
    "seq": 8,
    "height": 64,
    "width": 96,
    "features": 40,
    # a decoder's call: 8 new tokens after 3 cached ones
    "sequence_length": 8,
    "past_sequence_length": 3,
    "total_sequence_length": 11,
}
# Output dimensions that are symbolic in the model but known for the inputs above.
EXTRA_OUTPUT_DIMS: dict[str, dict[str, int]] = {
    # strides 8/16/32 of 64x96 give 8x12 + 4x6 + 2x3 cells, 3 anchors each
    "detection_head": {"anchors": 3 * (96 + 24 + 6), "mask_height": 16, "mask_width": 24},
    "yolov8": {"anchors": 96 + 24 + 6},  # one anchor per cell
}
SPEC_NAMES = ["mlp", "resnet18", "mobilenetv2", "transformer", "detection_head", "control_flow"]

_cache: dict[str, onnx.ModelProto] = {}


def small_model(name: str) -> onnx.ModelProto:
    """The model ``name`` at its small test options, built once per test session."""
    if name not in _cache:
        _cache[name] = zoo.build(name, **SMALL.get(name, {}))
    return _cache[name]


def all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of ``graph`` and of its subgraphs, depth first."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from all_nodes(attr.g)
            for sub in attr.graphs:
                yield from all_nodes(sub)


def dims_of(value: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def random_feeds(model: onnx.ModelProto, dims: dict[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        shape = [dims[d] if isinstance(d, str) else d for d in dims_of(value)]
        if value.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            feeds[value.name] = rng.integers(0, 100, shape, dtype=np.int64)
        else:
            feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    outputs = session(model).run(None, feeds)
    return {value.name: array for value, array in zip(model.graph.output, outputs, strict=True)}


def weights(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


# --------------------------------------------------------------------------------------
# Every model
# --------------------------------------------------------------------------------------


def test_names_lists_the_spec_models() -> None:
    names = zoo.names()
    assert all(isinstance(n, str) for n in names)
    assert len(set(names)) == len(names)
    assert set(SPEC_NAMES) <= set(names)
    assert set(SMALL) == set(names), "add small test options for the new model"
    names.append("changed")
    assert "changed" not in zoo.names()


@pytest.mark.parametrize("name", zoo.names())
def test_check_model_full(name: str) -> None:
    onnx.checker.check_model(small_model(name), full_check=True)


@pytest.mark.parametrize("name", zoo.names())
def test_runs_in_onnxruntime_with_expected_shapes(name: str) -> None:
    model = small_model(name)
    outputs = run(model, random_feeds(model, DIMS))
    known = {**DIMS, **EXTRA_OUTPUT_DIMS.get(name, {})}
    for value in model.graph.output:
        expected = [known[d] if isinstance(d, str) else d for d in dims_of(value)]
        assert list(outputs[value.name].shape) == expected, value.name
        assert outputs[value.name].dtype == np.float32
        assert np.isfinite(outputs[value.name]).all(), value.name


@pytest.mark.parametrize("name", zoo.names())
def test_model_metadata(name: str) -> None:
    model = small_model(name)
    assert model.producer_name == "onnx-graph-explorer.zoo"
    assert model.producer_version
    assert model.graph.name == name
    assert model.graph.doc_string
    opsets = {o.domain: o.version for o in model.opset_import}
    assert opsets[""] >= 17
    assert model.ir_version == onnx.helper.find_min_ir_version_for(model.opset_import, ignore_unknown=True)
    props = {p.key: p.value for p in model.metadata_props}
    assert props["zoo.name"] == name
    assert json.loads(props["zoo.options"]).keys() == zoo.defaults(name).keys()


@pytest.mark.parametrize("name", zoo.names())
def test_named_typed_inputs_and_outputs(name: str) -> None:
    model = small_model(name)
    initializers = {t.name for t in model.graph.initializer}
    for value in [*model.graph.input, *model.graph.output]:
        assert value.name and value.name not in initializers
        assert value.type.tensor_type.elem_type != onnx.TensorProto.UNDEFINED, value.name
        assert value.type.tensor_type.HasField("shape"), value.name
        for dim in value.type.tensor_type.shape.dim:
            assert dim.HasField("dim_param") or dim.HasField("dim_value"), value.name
    assert dims_of(model.graph.input[0])[0] == "batch"


@pytest.mark.parametrize("name", zoo.names())
def test_nodes_have_unique_exporter_style_names(name: str) -> None:
    nodes = list(all_nodes(small_model(name).graph))
    names = [n.name for n in nodes]
    assert len(set(names)) == len(names), [n for n, c in Counter(names).items() if c > 1]
    for node in nodes:
        assert node.name.startswith("/"), node.name
        assert node.name.rsplit("/", 1)[1].split("_")[0] == node.op_type, node.name


@pytest.mark.parametrize("name", zoo.names())
def test_deterministic(name: str) -> None:
    first = zoo.build(name, **SMALL[name]).SerializeToString()
    assert zoo.build(name, **SMALL[name]).SerializeToString() == first
    assert zoo.build(name, **SMALL[name], seed=1).SerializeToString() != first


def test_unknown_name_lists_valid_names() -> None:
    with pytest.raises(KeyError) as info:
        zoo.build("alexnet")
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, ExplorerError)
    message = str(info.value)
    assert "alexnet" in message
    assert all(name in message for name in zoo.names())
    with pytest.raises(ValueError, match="valid names"):
        zoo.defaults("alexnet")


def test_unknown_option_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="depth"):
        zoo.build("resnet18", depth=50)


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("transformer", {"hidden": 30, "heads": 4}),
        ("transformer", {"layers": 0}),
        ("transformer", {"gelu": "tanh"}),
        ("resnet18", {"width": 0}),
        ("mlp", {"hidden": (16, -1)}),
    ],
)
def test_bad_option_values(name: str, options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        zoo.build(name, **options)


def test_defaults_match_signature() -> None:
    assert zoo.defaults("transformer") == {
        "layers": 2,
        "hidden": 256,
        "heads": 4,
        "ffn": None,
        "vocab": 1000,
        "max_positions": 512,
        "gelu": "op",
        "seed": 0,
    }
    for name in zoo.names():
        assert "seed" in zoo.defaults(name)


# --------------------------------------------------------------------------------------
# Model by model
# --------------------------------------------------------------------------------------


def test_resnet18_default_is_the_real_size() -> None:
    model = zoo.build("resnet18")
    onnx.checker.check_model(model, full_check=True)
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    # torchvision's 11,689,512 parameters plus the BatchNorm running statistics
    assert params == 11_699_112
    ops = Counter(n.op_type for n in model.graph.node)
    assert ops["Conv"] == 20 and ops["BatchNormalization"] == 20 and ops["Add"] == 8
    assert ops["MaxPool"] == ops["GlobalAveragePool"] == ops["Flatten"] == ops["Gemm"] == 1
    assert dims_of(model.graph.input[0]) == ["batch", 3, 224, 224]
    names = {n.name for n in model.graph.node}
    assert {"/conv1/Conv", "/bn1/BatchNormalization", "/maxpool/MaxPool", "/fc/Gemm"} <= names
    assert "/layer1/layer1.0/conv1/Conv" in names
    assert "/layer2/layer2.0/downsample/downsample.0/Conv" in names
    assert "/layer1/layer1.0/downsample/downsample.0/Conv" not in names
    for t in model.graph.initializer:
        if t.name.endswith("running_var"):
            assert (numpy_helper.to_array(t) > 0).all()
    logits = run(model, {"input": np.random.default_rng(0).standard_normal((1, 3, 224, 224), np.float32)})
    assert logits["logits"].shape == (1, 1000) and np.isfinite(logits["logits"]).all()


def test_resnet18_symbolic_image_size() -> None:
    model = zoo.build("resnet18", width=8, image_size=None)
    assert dims_of(model.graph.input[0]) == ["batch", 3, "height", "width"]
    out = run(model, random_feeds(model, {"batch": 1, "height": 40, "width": 72}))
    assert out["logits"].shape == (1, 1000)


def test_mobilenetv2_structure() -> None:
    model = zoo.build("mobilenetv2")
    nodes = list(model.graph.node)
    inits = {t.name: t for t in model.graph.initializer}
    ops = Counter(n.op_type for n in nodes)
    assert ops["Add"] == 10  # the residual blocks of the standard configuration
    assert ops["Conv"] == 52
    depthwise = [n for n in nodes if n.op_type == "Conv" and onnx.helper.get_node_attr_value(n, "group") > 1]
    assert len(depthwise) == 17
    for node in depthwise:
        assert onnx.helper.get_node_attr_value(node, "group") == inits[node.input[1]].dims[0]
        assert list(inits[node.input[1]].dims[1:]) == [1, 3, 3]
    clips = [n for n in nodes if n.op_type == "Clip"]
    assert clips and all(len(n.input) == 3 for n in clips)
    assert float(numpy_helper.to_array(inits[clips[0].input[2]])) == 6.0
    assert "/features/features.2/conv/conv.1/conv.1.0/Conv" in {n.name for n in nodes}
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    assert 3.5e6 < params < 3.6e6  # 3.5M parameters, plus BatchNorm statistics


def test_transformer_node_count_is_linear_in_layers() -> None:
    counts = {n: len(zoo.build("transformer", layers=n, hidden=32).graph.node) for n in (1, 2, 5, 10)}
    per_layer = counts[2] - counts[1]
    assert per_layer > 50
    assert all(counts[n] == counts[1] + (n - 1) * per_layer for n in counts)
    erf = {n: len(zoo.build("transformer", layers=n, hidden=32, gelu="erf").graph.node) for n in (1, 2)}
    assert erf[2] - erf[1] == per_layer + 7


def test_transformer_ten_thousand_nodes() -> None:
    model = zoo.build("transformer", layers=123, hidden=32, heads=2)
    assert 9_500 < len(model.graph.node) < 10_500
    onnx.checker.check_model(model)


def test_transformer_has_exporter_shape_chains() -> None:
    model = small_model("transformer")
    ops = Counter(n.op_type for n in model.graph.node)
    for op in ("Shape", "Gather", "Unsqueeze", "Concat", "Reshape", "Transpose", "Range", "Softmax", "Gelu"):
        assert ops[op] > 0, op
    assert ops["LayerNormalization"] == 2 * 2 + 2
    by_name = {n.name: n for n in model.graph.node}
    assert by_name["/encoder/layers.0/self_attn/q_proj/MatMul"].op_type == "MatMul"
    reshape = by_name["/encoder/layers.1/self_attn/Reshape"]
    producers = {out: n for n in model.graph.node for out in n.output}
    concat = producers[reshape.input[1]]
    assert concat.op_type == "Concat"
    assert [producers[i].op_type for i in concat.input] == ["Unsqueeze", "Unsqueeze", "Constant", "Constant"]
    assert producers[producers[concat.input[0]].input[0]].op_type == "Gather"
    assert dims_of(model.graph.input[0]) == ["batch", "seq"]
    assert dims_of(model.graph.output[0]) == ["batch", "seq", 32]


def _layer_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * scale + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _reference_encoder(w: dict[str, np.ndarray], ids: np.ndarray, layers: int, heads: int) -> np.ndarray:
    """The transformer in numpy, written from its architecture rather than from the graph."""
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][: ids.shape[1]]
    )
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    batch, seq, hidden = x.shape
    for i in range(layers):
        p = f"encoder.layers.{i}."

        def dense(y: np.ndarray, name: str, p: str = p) -> np.ndarray:
            return y @ w[p + name + ".weight"] + w[p + name + ".bias"]

        y = _layer_norm(x, w[p + "norm1.weight"], w[p + "norm1.bias"])
        q, k, v = (
            dense(y, f"self_attn.{n}_proj").reshape(batch, seq, heads, -1).transpose(0, 2, 1, 3)
            for n in "qkv"
        )
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hidden // heads)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
        x = x + dense(context, "self_attn.out_proj")
        y = _layer_norm(x, w[p + "norm2.weight"], w[p + "norm2.bias"])
        x = x + dense(_gelu(dense(y, "linear1")), "linear2")
    return _layer_norm(x, w["encoder.norm.weight"], w["encoder.norm.bias"])


@pytest.mark.parametrize("gelu", ["op", "erf"])
def test_transformer_matches_numpy_reference(gelu: str) -> None:
    model = zoo.build("transformer", layers=2, hidden=32, heads=4, gelu=gelu)
    assert {o.domain: o.version for o in model.opset_import}[""] == (20 if gelu == "op" else 17)
    ids = np.random.default_rng(3).integers(0, 1000, (2, 5), dtype=np.int64)
    got = run(model, {"input_ids": ids})["last_hidden_state"]
    expected = _reference_encoder(weights(model), ids, layers=2, heads=4)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_detection_head_runtime_shapes_for_odd_sizes() -> None:
    model = small_model("detection_head")
    ops = Counter(n.op_type for n in model.graph.node)
    for op in ("Shape", "Slice", "Concat", "Reshape", "Resize", "Sigmoid", "Conv"):
        assert ops[op] > 0, op
    sizes = [n for n in model.graph.node if n.op_type == "Resize" and len(n.input) == 4]
    assert len(sizes) == 2  # the FPN upsamplings take sizes computed at run time
    height, width = 70, 100  # not multiples of the stride 32
    out = run(model, random_feeds(model, {"batch": 1, "height": height, "width": width}))
    cells = 0
    for _ in range(3):  # strides 2, 4, 8 of the stem and first stage
        height, width = math.ceil(height / 2), math.ceil(width / 2)
    for _ in range(3):  # the levels at strides 8, 16, 32
        cells += height * width
        height, width = math.ceil(height / 2), math.ceil(width / 2)
    assert out["scores"].shape == (1, 3 * cells, 5)
    assert out["boxes"].shape == (1, 3 * cells, 4)
    assert ((out["scores"] > 0) & (out["scores"] < 1)).all()
    # shared heads: every level's classifier reads the same weight initializer
    cls = [n for n in model.graph.node if n.op_type == "Conv" and n.input[1] == "head.cls.weight"]
    assert len(cls) == 3


def test_control_flow_takes_both_branches() -> None:
    model = small_model("control_flow")
    ops = {n.op_type for n in model.graph.node}
    assert {"If", "Loop", "ReduceSum", "Greater"} <= ops
    sub_nodes = [n for n in all_nodes(model.graph) if n not in model.graph.node]
    assert len(sub_nodes) >= 6
    w = weights(model)
    loop_body = next(n for n in model.graph.node if n.op_type == "Loop").attribute[0].g
    if_node = next(n for n in model.graph.node if n.op_type == "If")
    else_graph = next(a.g for a in if_node.attribute if a.name == "else_branch")
    w_else = numpy_helper.to_array(else_graph.initializer[0])
    assert not loop_body.initializer  # the body reads outer-scope weights

    base = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
    for x in (np.abs(base), -np.abs(base)):
        out = run(model, {"x": x})
        if x.sum() > 0:
            h = np.maximum(x @ w["branch.then.weight"] + w["branch.then.bias"], 0)
        else:
            h = -(x @ w_else)
        trace = []
        for _ in range(3):
            h = np.tanh(h @ w["loop.weight"] + w["loop.bias"])
            trace.append(h.mean(axis=1))
        np.testing.assert_allclose(out["output"], h, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out["trace"], np.stack(trace), rtol=1e-5, atol=1e-5)


def test_custom_domain_matches_reference() -> None:
    model = small_model("custom_domain")
    opsets = {o.domain: o.version for o in model.opset_import}
    assert opsets["com.microsoft"] == 1 and "zoo.local" in opsets
    assert [(f.domain, f.name) for f in model.functions] == [("zoo.local", "Swish")]
    assert {n.domain for n in model.graph.node} == {"", "com.microsoft", "zoo.local"}
    w = weights(model)
    x = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
    y = _gelu(x @ w["fc1.weight"].T + w["fc1.bias"])
    y = y @ w["fc2.weight"] + w["fc2.bias"]
    y = y / (1 + np.exp(-y))
    expected = 0.5 * y @ w["head.weight"].T
    np.testing.assert_allclose(run(model, {"input": x})["output"], expected, rtol=1e-4, atol=1e-5)


def test_qdq_cnn_is_quantized() -> None:
    model = small_model("qdq_cnn")
    ops = Counter(n.op_type for n in model.graph.node)
    assert ops["QuantizeLinear"] == 5 and ops["DequantizeLinear"] == 9
    int8 = [t for t in model.graph.initializer if t.data_type == onnx.TensorProto.INT8]
    assert len([t for t in int8 if t.name.endswith("weight_quantized")]) == 4


@pytest.mark.parametrize("name", zoo.names())
def test_default_options_run(name: str) -> None:
    model = zoo.build(name)
    decoder = {"sequence_length": 8, "past_sequence_length": 3, "total_sequence_length": 11}
    outputs = run(model, random_feeds(model, {"batch": 1, "seq": 8, "height": 64, "width": 64, **decoder}))
    assert all(np.isfinite(array).all() for array in outputs.values())


def test_elementwise_is_a_chain_of_scale_shift_activation() -> None:
    model = zoo.build("elementwise", ops=8, features=None, activation="Tanh")
    assert [n.op_type for n in model.graph.node] == ["Mul", "Add", "Tanh"] * 2 + ["Mul", "Add"]
    assert all(t.dims == [] for t in model.graph.initializer)  # scalars: only activations move
    assert dims_of(model.graph.input[0]) == dims_of(model.graph.output[0]) == ["batch", "features"]
    for a, b in zip(model.graph.node[:-1], model.graph.node[1:], strict=True):
        assert b.input[0] == a.output[0]  # one chain, nothing branches
    w = weights(model)
    x = np.random.default_rng(0).standard_normal((3, 50)).astype(np.float32)
    expected = x
    for i in range(8):
        block = f"blocks.{i // 3}"
        expected = (
            expected * w[f"{block}.scale"],
            expected + w[f"{block}.shift"],
            np.tanh(expected),
        )[i % 3]
    np.testing.assert_allclose(run(model, {"x": x})["y"], expected, rtol=1e-5, atol=1e-6)
    assert dims_of(zoo.build("elementwise").graph.input[0]) == ["batch", 1024]
    assert len(zoo.build("elementwise").graph.node) == 12


@pytest.mark.parametrize("activation", zoo.ELEMENTWISE_ACTIVATIONS)
def test_elementwise_activations_run(activation: str) -> None:
    model = zoo.build("elementwise", ops=3, features=16, activation=activation)
    assert model.graph.node[-1].op_type == activation
    out = run(model, random_feeds(model, DIMS))["y"]
    assert out.shape == (2, 16) and np.isfinite(out).all()


@pytest.mark.parametrize("options", [{"ops": 0}, {"features": -4}, {"activation": "Gelu"}])
def test_elementwise_bad_options(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        zoo.build("elementwise", **options)


def test_yolov8_makes_its_anchors_from_run_time_shapes_and_decodes_boxes_in_the_graph() -> None:
    model = zoo.build("yolov8")
    ops = Counter(n.op_type for n in model.graph.node)
    # the dynamic-shape post-processing of an ultralytics export: make_anchors, DFL, dist2bbox
    assert ops["Range"] == 6 and ops["ConstantOfShape"] == 3 and ops["Expand"] == 6 and ops["Softmax"] == 1
    assert {"Shape", "Gather", "Cast", "Split", "Sigmoid", "Concat"} <= set(ops)
    assert dims_of(model.graph.input[0]) == ["batch", 3, "height", "width"]
    dfl = next(t for t in model.graph.initializer if t.name == "model.22.dfl.conv.weight")
    assert numpy_helper.to_array(dfl).ravel().tolist() == list(range(16))
    images = np.random.default_rng(0).random((1, 3, 320, 320), np.float32)
    (output,) = run(model, {"images": images}).values()
    assert output.shape == (1, 84, 40 * 40 + 20 * 20 + 10 * 10)  # 4 box + 80 class rows, an anchor per cell
    centres = output[0, :2]  # the decoded boxes' centres lie around their anchors, in pixels
    assert 0 < centres.mean() < 320 and (output[0, 4:] > 0).all() and (output[0, 4:] < 1).all()

"""Qualcomm AI Hub's profile (``download_profile()``), written in the test to its documented schema."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from explorer import load
from explorer.core.errors import UsageError
from explorer.overlays import Overlay, read


def layer(name: str, kind: str, unit: str, micros: float, cycles: int = 0) -> dict[str, object]:
    return {
        "name": name,
        "type": kind,
        "compute_unit": unit,
        "execution_time": micros,
        "execution_cycles": cycles,
    }


PROFILE = {
    "execution_summary": {"estimated_inference_time": 1000, "first_load_time": 120000},
    "execution_detail": [
        layer("/layer1/layer1.0/conv1/Conv", "Conv2d", "NPU", 300, 150000),  # the ONNX name as it is
        layer("_layer1_layer1_0_conv2_Conv", "Conv2d", "NPU", 200, 100000),  # as QNN spells it
        layer("_layer1_layer1_0_Add:OpId_42", "ElementWiseAdd", "NPU", 50),  # as qnn-net-run prints ops
        layer("logits", "FullyConnected", "CPU", 100),  # the tensor it writes
        layer("_input_0_converted_QNN_DATATYPE_UFIXED_POINT_8", "Convert", "NPU", 40),  # the converter's
        layer("/layer1/layer1.0/conv1/Conv", "Conv2d", "NPU", 10),  # a second layer for one node
    ],
}


@pytest.fixture(scope="module")
def overlay(tmp_path_factory: pytest.TempPathFactory) -> Overlay:
    path = tmp_path_factory.mktemp("ai-hub") / "profile.json"
    path.write_text(json.dumps(PROFILE))
    return read(path, load("zoo:resnet18"))


def test_layers_map_by_onnx_name_by_qnn_name_and_by_tensor(overlay: Overlay) -> None:
    assert overlay.format == "ai-hub-profile" and overlay.mapped_nodes == 4
    conv1 = overlay.values["/layer1/layer1.0/conv1/Conv"]
    assert conv1.time_ms == pytest.approx(0.31) and conv1.cycles == 150000 and conv1.compute_unit == "NPU"
    assert conv1.op == "Conv2d" and len(conv1.entries) == 1  # the same name twice: one entry, times added
    assert overlay.values["/layer1/layer1.0/conv2/Conv"].entries == ("_layer1_layer1_0_conv2_Conv",)
    assert overlay.values["/layer1/layer1.0/Add"].time_ms == pytest.approx(0.05)
    assert overlay.values["/fc/Gemm"].compute_unit == "CPU"


def test_a_layer_of_the_converter_is_unmapped_with_its_time(overlay: Overlay) -> None:
    [unmapped] = overlay.unmapped
    assert unmapped.name == "_input_0_converted_QNN_DATATYPE_UFIXED_POINT_8"
    assert "no node or tensor of the model is named" in unmapped.reason and "QNN" in unmapped.reason
    assert unmapped.time_ms == pytest.approx(0.04)
    assert overlay.total_ms == pytest.approx(0.7)
    assert overlay.time_share_mapped == pytest.approx(0.66 / 0.7, abs=1e-6)
    assert overlay.about["ms_per_compute_unit"] == {"NPU": pytest.approx(0.6), "CPU": pytest.approx(0.1)}
    assert overlay.about["estimated_inference_ms"] == 1.0


def test_a_sanitized_name_several_nodes_share_is_not_guessed() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [
        helper.make_node("Relu", ["x"], ["h"], name="a/b"),
        helper.make_node("Relu", ["h"], ["y"], name="a.b"),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    overlay = read({"execution_detail": [layer("a_b", "Relu", "NPU", 10)]}, load(model))
    assert overlay.mapped_nodes == 0
    assert overlay.unmapped[0].reason == "its name, as QNN spells names, fits 2 nodes: 'a/b', 'a.b'"


@pytest.mark.parametrize(
    ("detail", "says"),
    [
        ([{"type": "Conv2d"}], "execution_detail[0] is not a layer with a 'name'"),
        ([layer("x", "Conv2d", "NPU", -5)], "layer 'x' has execution_time -5, not a number of µs >= 0"),
        ([{"name": "x", "execution_time": "fast"}], "layer 'x' has execution_time 'fast'"),
    ],
)
def test_a_malformed_profile_is_refused_naming_the_file(detail: object, says: str, tmp_path: Path) -> None:
    path = tmp_path / "hub.json"
    path.write_text(json.dumps({"execution_detail": detail}))
    with pytest.raises(UsageError, match=f"^{path}: ") as info:
        read(path, load("zoo:mlp"))
    assert says in str(info.value)


def test_without_a_graph_the_layers_keep_their_names() -> None:
    overlay = read(PROFILE)
    assert overlay.mapped_nodes == 0 and "_layer1_layer1_0_conv2_Conv" in overlay.values

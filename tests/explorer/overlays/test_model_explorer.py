"""Model Explorer's node data: read onto a graph (node ids, ONNX names, output tensors), and written back."""

from __future__ import annotations

import json
import os
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from explorer import load
from explorer.core.errors import UsageError
from explorer.overlays import Overlay, read, write_model_explorer
from explorer.overlays.model_explorer import node_data
from explorer.overlays.value import NodeValue

NODE_DATA = {
    "main_graph": {
        "results": {
            "/fc1/Gemm": {"value": 1.0, "bgColor": "#ff0000", "textColor": "white"},  # a node's name
            "/fc2/Gemm_output_0": {"value": 10.0},  # an output tensor: its producer
            "/relu1/Relu": {"value": 5.5},
            "input": {"value": 3.0},  # a graph input, no node
            "/no/such/Node": {"value": 2.0},
            "/broken": {"bgColor": "#00ff00"},  # no value
        },
        "gradient": [{"stop": 0, "bgColor": "#000000"}, {"stop": 1, "bgColor": "#ffffff"}],
    }
}


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_node_data_maps_by_name_and_output_tensor_and_reports_the_rest(tmp_path: Path) -> None:
    graph = load("zoo:mlp")
    overlay = read(write(tmp_path / "node_data.json", NODE_DATA), graph)
    assert overlay.format == "model-explorer" and overlay.mapped_nodes == 3
    assert list(overlay.values) == ["/fc1/Gemm", "/relu1/Relu", "/fc2/Gemm"]  # graph order
    gemm = overlay.values["/fc1/Gemm"]
    assert (gemm.value, gemm.color, gemm.text_color) == (1.0, "#ff0000", "white")  # the result's colours win
    assert overlay.values["/fc2/Gemm"].entries == ("/fc2/Gemm_output_0",)
    assert overlay.values["/fc2/Gemm"].color == "#ffffff"  # the top of the gradient: the largest value
    assert overlay.values["/relu1/Relu"].color == "#808080"  # halfway between 1 and 10
    reasons = {u.name: u.reason for u in overlay.unmapped}
    assert reasons == {
        "input": "'input' is a graph input, not a node",
        "/no/such/Node": "no node or tensor of the model is named '/no/such/Node'",
        "/broken": "not a node-data result {value, bgColor?, textColor?}",
    }
    assert overlay.time_share_mapped is None and overlay.total_ms is None
    assert overlay.gradient == tuple(NODE_DATA["main_graph"]["gradient"])


def test_thresholds_colour_the_nodes_without_colours_of_their_own() -> None:
    data = {
        "g": {
            "results": {"/fc1/Gemm": {"value": 5}, "/fc2/Gemm": {"value": 50}, "/fc3/Gemm": {"value": 500}},
            "thresholds": [{"value": 10, "bgColor": "green"}, {"value": 100, "bgColor": "red"}],
        }
    }
    overlay = read(data, load("zoo:mlp"))
    assert overlay.by_node("color") == {
        "/fc1/Gemm": "green",
        "/fc2/Gemm": "red",
    }  # above every threshold: none


def test_one_graphs_object_alone_and_a_chosen_graph_id() -> None:
    graph = load("zoo:mlp")
    alone = read({"results": {"/fc1/Gemm": {"value": "NPU"}}}, graph)
    assert alone.values["/fc1/Gemm"].value == "NPU"
    two = {"a": {"results": {"/fc1/Gemm": {"value": 1}}}, "b": {"results": {"/fc2/Gemm": {"value": 2}}}}
    assert list(read(two, graph, graph_id="b").values) == ["/fc2/Gemm"]
    assert list(read(two, graph).values) == ["/fc1/Gemm", "/fc2/Gemm"]
    with pytest.raises(UsageError, match="no graph 'c' in the node data; it has: a, b"):
        read(two, graph, graph_id="c")


def unnamed_model() -> onnx.ModelProto:
    """Relu -> Relu without node names: Model Explorer knows them by their output tensors."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    return model


def test_written_node_data_reads_back_the_same(tmp_path: Path) -> None:
    graph = load("zoo:mlp")
    overlay = read(NODE_DATA, graph)
    path = write_model_explorer(overlay, tmp_path / "out.json", graph=graph)
    assert sorted(os.listdir(tmp_path)) == ["out.json"]  # no temp file left beside it
    again = read(path, graph)
    assert again.by_node("value") == overlay.by_node("value")
    assert again.by_node("color") == overlay.by_node("color") and again.gradient == overlay.gradient
    written = json.loads(path.read_text())["mlp"]  # Model Explorer's ONNX adapter: the graph's name
    assert written["results"]["/fc1/Gemm"] == {"value": 1.0, "bgColor": "#ff0000", "textColor": "white"}


def test_unnamed_nodes_are_written_as_model_explorers_onnx_adapter_names_them() -> None:
    graph = load(unnamed_model())
    overlay = Overlay(
        "ort-profile", None, graph.source, {n: NodeValue(n, time_ms=1.0) for n in graph.op_nodes()}
    )
    data = node_data(overlay, graph=graph)
    assert sorted(data["g"]["results"]) == ["<node_0>", "<node_1>"]  # the graph's name, the adapter's ids
    again = read(data, graph)
    assert again.by_node("value") == {"Relu#0": 1.0, "Relu#1": 1.0}  # read back onto the same nodes
    assert read({"g": {"results": {"h": {"value": 1}}}}, graph).mapped_nodes == 1  # output tensors still map


def test_string_values_are_categories_with_their_colours_and_the_name_round_trips() -> None:
    overlay = Overlay("p", None, "m", {"a": NodeValue("a", value="CPU", color="#b4b4b4")}, name="placement")
    data = node_data(overlay)["main_graph"]
    assert data["name"] == "placement" and data["showExpandedSummaryOnGroupNode"] is True
    assert data["results"] == {"a": {"value": "CPU", "bgColor": "#b4b4b4"}}
    assert read({"main_graph": data}).name == "placement"


def test_a_timing_overlay_is_written_with_its_times_or_the_field_asked_for() -> None:
    overlay = Overlay("ai-hub-profile", None, "m", {"a": NodeValue("a", time_ms=0.5, compute_unit="NPU")})
    assert overlay.to_model_explorer("g")["g"]["results"] == {"a": {"value": 0.5}}
    assert overlay.to_model_explorer(field="compute_unit")["main_graph"]["results"] == {"a": {"value": "NPU"}}
    with pytest.raises(UsageError, match="no overlay field 'speed'"):
        overlay.to_model_explorer(field="speed")


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"main_graph": {"nodes": {}}}, "not a format the explorer reads"),
        ({}, "not a format the explorer reads"),
    ],
)
def test_not_node_data_is_refused_naming_the_file(data: object, says: str, tmp_path: Path) -> None:
    path = write(tmp_path / "other.json", data)
    with pytest.raises(UsageError, match=says) as info:
        read(path, load("zoo:mlp"))
    assert str(info.value).startswith(f"{path}: ")
    with pytest.raises(UsageError, match="not Model Explorer node data"):
        read(path, load("zoo:mlp"), format="model-explorer")

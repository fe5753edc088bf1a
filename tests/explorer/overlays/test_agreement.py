"""A Qualcomm AI Hub profile, written in the test to its documented schema, against the qnn-htp prediction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from explorer import load
from explorer.core.errors import UsageError
from explorer.overlays import placement_agreement, read
from explorer.overlays.agreement import AGREEMENT_COLORS, PlacementAgreement
from explorer.targets import coverage
from tests.explorer.overlays.test_ai_hub import layer

# zoo:control_flow, static: qnn-htp takes /ReduceSum, /Greater and /branch/If, and not /loop/Loop
PROFILE = {
    "execution_summary": {"estimated_inference_time": 400},
    "execution_detail": [
        layer("_ReduceSum", "ReduceSum", "NPU", 100),  # agrees (as QNN spells the name)
        layer("/Greater", "ElementWiseGreater", "CPU", 50),  # predicted NPU, ran on the CPU
        layer("_branch_If:OpId_3", "If", "GPU", 70),  # predicted NPU, ran on the GPU
        layer("/loop/Loop", "Loop", "NPU", 80),  # predicted to fall back, ran on the NPU
        layer("_x_converted_QNN_DATATYPE_FLOAT_16", "Convert", "NPU", 5),  # the converter's: unmapped
    ],
}


@pytest.fixture(scope="module")
def agreement(tmp_path_factory: pytest.TempPathFactory) -> PlacementAgreement:
    path = tmp_path_factory.mktemp("ai-hub") / "profile.json"
    path.write_text(json.dumps(PROFILE))
    graph = load("zoo:control_flow")  # a dynamic batch: judged with it fixed to 1, as AI Hub compiles
    return placement_agreement(graph, read(path, graph))


def test_each_node_is_predicted_measured_and_compared(agreement: PlacementAgreement) -> None:
    assert agreement.target == "qnn-htp" and agreement.input_shapes == {"x": [1, 16]}
    assert agreement.measured_from.endswith("profile.json")
    rows = {n.node: (n.predicted, n.measured, n.agrees) for n in agreement.nodes}
    assert rows == {
        "/ReduceSum": ("NPU", "NPU", True),
        "/Greater": ("NPU", "CPU", False),
        "/branch/If": ("NPU", "GPU", False),
        "/loop/Loop": ("CPU", "NPU", False),
    }
    assert agreement.compared == 4 and agreement.agreeing == 1 and agreement.share_agreeing == 0.25
    assert agreement.predicted_npu_measured_elsewhere == ("/Greater", "/branch/If")
    assert agreement.measured_npu_predicted_elsewhere == ("/loop/Loop",)
    loop = next(n for n in agreement.nodes if n.node == "/loop/Loop")
    assert loop.reasons  # why qnn-htp does not take it
    assert agreement.categories() == {
        "agree": 1,
        "predicted NPU, measured CPU": 1,
        "predicted NPU, measured GPU": 1,
        "predicted CPU, measured NPU": 1,
    }


def test_the_frame_the_dict_and_the_overlay(agreement: PlacementAgreement) -> None:
    frame = agreement.to_frame()
    assert frame.columns.tolist() == ["node", "op", "predicted", "measured", "agrees", "category", "reasons"]
    assert frame.set_index("node").loc["/Greater", "category"] == "predicted NPU, measured CPU"
    data = json.loads(json.dumps(agreement.to_dict()))
    assert data["share_agreeing"] == 0.25 and data["measured_npu_predicted_elsewhere"] == ["/loop/Loop"]
    assert len(data["nodes"]) == 4
    overlay = agreement.to_overlay()
    assert overlay.name == "qnn-htp: predicted vs measured" and overlay.mapped_onto == "zoo:control_flow"
    assert overlay.values["/loop/Loop"].value == "predicted CPU, measured NPU"
    assert overlay.values["/ReduceSum"].color == AGREEMENT_COLORS["agree"]
    assert "1 of 4 nodes agree (25.0%)" in overlay.notes[0]


def test_a_node_run_on_two_units_disagrees_and_an_unmeasured_one_is_left_out() -> None:
    graph = load("zoo:mlp", input_shapes={"input": [1, 1, 28, 28]})
    profile = {
        "execution_detail": [
            layer("/fc1/Gemm", "FullyConnected", "NPU", 10),
            layer("_fc1_Gemm", "FC", "CPU", 5),
        ]
    }
    result = placement_agreement(graph, read(profile, graph))
    assert result.input_shapes == {}  # the graph is static already: judged as it is
    fc1 = next(n for n in result.nodes if n.node == "/fc1/Gemm")
    assert (fc1.measured, fc1.agrees, fc1.category) == ("NPU/CPU", False, "predicted NPU, measured NPU/CPU")
    assert result.compared == 1 and result.share_agreeing == 0.0 and len(result.not_measured) == 5
    assert result.to_overlay().values["/relu1/Relu"].value == "not measured"


def test_a_coverage_reports_partitioning_is_used_as_it_is() -> None:
    graph = load("zoo:mlp")  # dynamic batch: the report predicts every node on the CPU
    report = coverage(graph, ["qnn-htp"])
    measured = read({"execution_detail": [layer("/fc1/Gemm", "FullyConnected", "NPU", 10)]}, graph)
    result = placement_agreement(graph, measured, partitioning=report.partitionings["qnn-htp"])
    assert result.measured_npu_predicted_elsewhere == ("/fc1/Gemm",) and result.input_shapes == {}


def test_an_overlay_without_compute_units_or_a_model_is_refused(tmp_path: Path) -> None:
    graph = load("zoo:mlp")
    node_data = read({"main_graph": {"results": {"/fc1/Gemm": {"value": 1}}}}, graph)
    with pytest.raises(UsageError, match="no node has a compute unit"):
        placement_agreement(graph, node_data)
    with pytest.raises(UsageError, match="read without a model"):
        placement_agreement(graph, read(PROFILE))

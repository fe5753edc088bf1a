"""CoveragePanel: check targets, the graph coloured by partition, the NPU-ready pipeline with Q/DQ hidden,
and a measured Qualcomm AI Hub profile against the qnn-htp prediction."""

from __future__ import annotations

import html
import json
import logging
import re
from pathlib import Path

import pytest

from explorer import load, zoo
from explorer.overlays import placement_agreement, read
from explorer.overlays.agreement import AGREEMENT_COLORS
from explorer.views.target_figures import FALLBACK_COLOR
from tests.explorer.overlays.test_ai_hub import layer
from widgets import CoveragePanel


def test_check_colours_the_graph_by_partition_with_the_fallback_grey() -> None:
    graph = load(zoo.build("resnet18"))
    panel = CoveragePanel(graph, targets=("ort-cpu", "coreml-mlprogram"))
    report = panel.check()
    assert panel.view.color_menu.value == "partition: coreml-mlprogram"  # the accelerator, not the CPU
    overlay = panel.view.overlays["partition: coreml-mlprogram"]
    assert overlay["/bn1/BatchNormalization"] == "CPU" and overlay["/conv1/Conv"] == "partition 1"
    palette = panel.view.palettes["partition: coreml-mlprogram"]
    assert palette["CPU"] == FALLBACK_COLOR and len({palette[f"partition {i}"] for i in (1, 2)}) == 2
    assert "19 partitions" in panel.table.value and "yes" in panel.table.value  # ORT CPU agrees
    assert panel.heatmap.data[0].type == "heatmap"
    marks = panel.view.edge_marks["partition: coreml-mlprogram"]  # boundaries marked on the edges
    assert marks and all(m.startswith("⇄ ") for m in marks.values())
    assert report.get("ort-cpu").coverage == 1.0


def test_prepare_steps_through_the_pipeline_and_hides_qdq() -> None:
    panel = CoveragePanel("zoo:mlp")
    prepared = panel.prepare()
    assert [s.pass_name for s in prepared.steps][-1] == "ort-quant:qnn_qdq"
    assert "max abs diff" in panel.steps.value and panel.stepper in panel.children[-1].children
    shown = panel.stepper.timeline
    quantized = shown[len(shown) - 1].graph
    assert quantized.op_counts["QuantizeLinear"] > 0
    panel.hide_qdq.value = True
    hidden = panel.stepper.timeline[len(shown) - 1].graph
    assert hidden.op_counts["QuantizeLinear"] == 0 and len(hidden.op_nodes()) < len(quantized.op_nodes())


# zoo:control_flow with its batch fixed to 1 (as AI Hub compiles it): qnn-htp takes /ReduceSum,
# /Greater and /branch/If, and not /loop/Loop. A profile to AI Hub's documented schema
# (download_profile()): two layers on the NPU, one on the CPU, one name of the converter's that maps
# to no node, and /branch/If left out (not measured).
HUB = {
    "execution_summary": {"estimated_inference_time": 235},
    "execution_detail": [
        layer("_ReduceSum", "ReduceSum", "NPU", 100),  # predicted NPU, ran there (as QNN spells it)
        layer("/Greater", "ElementWiseGreater", "CPU", 50),  # predicted NPU, ran on the CPU
        layer("/loop/Loop", "Loop", "NPU", 80),  # predicted to fall back, ran on the NPU
        layer("_x_converted_QNN_DATATYPE_FLOAT_16", "Convert", "NPU", 5),  # maps to no node
    ],
}
COMPARED = "qnn-htp: predicted vs measured"


def _hub_file(tmp_path: Path, profile: object = HUB, name: str = "hub.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(profile))
    return path


def test_a_measured_profile_is_compared_with_the_prediction_node_by_node(tmp_path: Path) -> None:
    graph = load("zoo:control_flow")
    path = _hub_file(tmp_path)
    expected = placement_agreement(graph, read(path, graph))
    assert expected.categories() == {  # the profile says what the comment above says
        "agree": 1,
        "predicted NPU, measured CPU": 1,
        "predicted CPU, measured NPU": 1,
        "not measured": 1,
    }
    panel = CoveragePanel(graph, targets=("qnn-htp",))
    panel.check()
    panel.measured_path.value = str(path)
    panel.compare_button.click()
    assert panel.agreement == expected

    assert panel.status.value == html.escape(expected.summary())
    assert "qnn-htp predicted vs measured: 1 of 3 nodes agree" in panel.status.value

    table = panel.measured_table.value
    assert html.escape(expected.summary()) in table
    for category, count in expected.categories().items():
        assert f"<tr><td>{html.escape(category)}</td><td>{count}</td></tr>" in table
    disagreeing, _, not_measured = table.partition("oge-agreement-not-measured")
    disagreeing = disagreeing.partition("oge-agreement-nodes")[2]
    shown = {
        name: re.findall(r"<td><code>([^<]+)</code></td>", part)
        for name, part in (("disagreeing", disagreeing), ("not measured", not_measured))
    }
    assert shown == {
        "disagreeing": [
            *expected.predicted_npu_measured_elsewhere,
            *expected.measured_npu_predicted_elsewhere,
        ],
        "not measured": list(expected.not_measured),
    }
    assert shown == {"disagreeing": ["/Greater", "/loop/Loop"], "not measured": ["/branch/If"]}
    assert "_x_converted" not in table and "/ReduceSum" not in table  # unmapped, and agreeing

    view = panel.view
    assert view.color_menu.value == COMPARED and view.overlay.name == COMPARED  # GraphView's overlay
    assert view.overlays[COMPARED] == {n.node: n.category for n in expected.nodes}
    assert view.palettes[COMPARED] == {c: AGREEMENT_COLORS[c] for c in expected.categories()}
    assert "partition: qnn-htp" in view.overlays  # the check's colourings stay in the menu
    view.select("/Greater")
    assert "predicted NPU, measured CPU" in view.details.value


def test_a_profile_as_a_dict_in_the_constructor_or_as_an_overlay() -> None:
    graph = load("zoo:control_flow")
    expected = placement_agreement(graph, read(HUB, graph))
    panel = CoveragePanel("zoo:control_flow", measured=HUB)
    assert panel.agreement == expected and panel.view.color_menu.value == COMPARED
    assert panel.compare_measured(read(HUB, panel.graph)) == expected
    assert list(panel.view.color_menu.options).count(COMPARED) == 1  # replaced, not added twice


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{not json", "not valid JSON (Expecting property name"),
        (b'{"something": "else"}', "not a format the explorer reads"),
        (b'{"execution_detail": [3]}', "execution_detail[0] is not a layer with a 'name'"),
        (b'{"main_graph": {"results": {"/loop/Loop": {"value": 1}}}}', "no node has a compute unit"),
        (None, "no such file"),
    ],
)
def test_a_broken_profile_is_named_in_the_status_line_and_the_comparison_stays(
    content: bytes | None, says: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = _hub_file(tmp_path, name="good.json")
    panel = CoveragePanel("zoo:control_flow", measured=good)
    before, table = panel.agreement, panel.measured_table.value
    assert before is not None and panel.measured_path.value == str(good)
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_bytes(content)
    panel.measured_path.value = str(bad)
    with caplog.at_level(logging.WARNING):
        panel.compare_button.click()  # no exception: the reason is in the status line
    assert not [r for r in caplog.records if r.exc_info]  # ipywidgets logs what a click handler raises
    said = html.unescape(panel.status.value)
    assert said.startswith(f"<b>could not read</b> {bad}: ") and says in said and "Traceback" not in said
    assert panel.agreement is before and panel.measured_table.value == table
    assert panel.view.color_menu.value == COMPARED and not panel.compare_button.disabled
    with pytest.raises(Exception, match=re.escape(says)):  # called from code, it raises as well
        panel.compare_measured(bad)
    built = CoveragePanel("zoo:control_flow", measured=bad)  # nor in the constructor
    assert built.agreement is None and says in html.unescape(built.status.value)
    assert COMPARED not in built.view.overlays and built.measured_table.value == ""


def test_compare_without_a_path_asks_for_one() -> None:
    panel = CoveragePanel("zoo:mlp")
    panel.compare_button.click()
    assert "path of a Qualcomm AI Hub profile" in panel.status.value and panel.agreement is None

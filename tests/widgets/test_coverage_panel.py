"""CoveragePanel: check targets, the graph coloured by partition, the NPU-ready pipeline with Q/DQ hidden."""

from __future__ import annotations

from explorer import load, zoo
from explorer.views.target_figures import FALLBACK_COLOR
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

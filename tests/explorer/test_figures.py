"""Figures are pure functions: fixed trace order, overlays, hover text, big graphs open collapsed."""

from __future__ import annotations

import math

import numpy as np

from explorer import load, zoo
from explorer.diff import diff
from explorer.figures import (
    ARROWS,
    DIFF_COLORS,
    EDGES,
    LABELS,
    NODES,
    diff_overlay,
    graph_figure,
    node_hover,
    op_color,
    op_histogram_figure,
    timeline_figure,
)
from explorer.layout import layered
from explorer.timeline import run_pipeline


def test_trace_order_and_one_marker_per_item() -> None:
    graph = load("zoo:resnet18")
    layout = layered(graph)
    fig = graph_figure(graph, layout)
    assert [t.name for t in fig.data] == ["edges", "arrows", "nodes", "labels"]
    assert list(fig.data[NODES].customdata) == list(layout.positions)
    assert fig.data[NODES].type == "scattergl" and fig.data[EDGES].type == "scattergl"
    # one polyline per edge, separated by gaps
    assert int(np.isnan(np.asarray(fig.data[EDGES].x, dtype=float)).sum()) == len(layout.edges)
    assert len(fig.data[ARROWS].x) == len(layout.edges)
    assert fig.data[LABELS].visible is True


def test_colours_by_op_type_and_by_diff_overlay() -> None:
    graph = load("zoo:resnet18")
    fig = graph_figure(graph)
    colors = dict(zip(fig.data[NODES].customdata, fig.data[NODES].marker.color, strict=True))
    assert colors["/conv1/Conv"] == op_color("Conv") == colors["/layer1/layer1.0/conv1/Conv"]
    timeline = run_pipeline(graph, "fuse_bn_into_conv", verify=False)
    overlay = diff_overlay(timeline.diff(1), "before")
    fig = graph_figure(graph, overlay=overlay, palette=DIFF_COLORS)
    colors = dict(zip(fig.data[NODES].customdata, fig.data[NODES].marker.color, strict=True))
    assert colors["/bn1/BatchNormalization"] == DIFF_COLORS["fused"]
    assert colors["/conv1/Conv"] == DIFF_COLORS["changed"]
    assert colors["/relu/Relu"] == DIFF_COLORS["kept"]


def test_numeric_overlay_uses_a_colour_scale() -> None:
    graph = load("zoo:mlp")
    fig = graph_figure(graph, overlay={"/fc1/Gemm": 2.0, "/fc2/Gemm": 0.5})
    assert fig.data[NODES].marker.showscale is True
    assert float(min(fig.data[NODES].marker.color)) == 0.5


def test_hover_tells_shapes_dtypes_and_weights() -> None:
    graph = load("zoo:resnet18")
    text = node_hover(graph, layered(graph), "/conv1/Conv")
    assert "<b>Conv</b>" in text and "[batch, 3, 224, 224] float32" in text
    assert "conv1.weight: [64, 3, 7, 7] float32" in text


def test_big_graphs_open_collapsed_without_labels() -> None:
    graph = load(zoo.build("transformer", layers=123, hidden=32))
    fig = graph_figure(graph)
    assert len(fig.data[NODES].x) < 300  # a few boxes, not 7000 markers
    assert any(str(i).startswith("scope:") for i in fig.data[NODES].customdata)


def test_histogram_and_timeline_figures() -> None:
    graph = load("zoo:resnet18")
    bars = op_histogram_figure(graph.summary()).data[0]
    assert dict(zip(bars.x, bars.y, strict=True))["Conv"] == 20
    timeline = run_pipeline(graph, "eliminate_identity,fuse_bn_into_conv", verify=False)
    fig = timeline_figure(timeline)
    assert list(fig.data[0].y) == [69, 69, 49]
    assert not math.isnan(float(fig.data[0].y[0]))


def test_figures_do_not_depend_on_widgets() -> None:
    import sys

    assert "ipywidgets" not in sys.modules or "explorer.figures" in sys.modules
    import explorer.figures as figures

    assert "ipywidgets" not in figures.__dict__


def test_diff_overlay_sides() -> None:
    a = load("zoo:mlp")
    d = diff(a, a)
    assert set(diff_overlay(d, "after").values()) == {"kept"}

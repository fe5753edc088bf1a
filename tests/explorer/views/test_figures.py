"""Figures are pure functions: fixed trace order, overlays, hover text, big graphs open collapsed."""

from __future__ import annotations

import math

import numpy as np

from explorer import load, zoo
from explorer.core.diff import diff
from explorer.core.op_categories import CATEGORIES
from explorer.passes.pipeline import run_pipeline
from explorer.views.figures import (
    ARROWS,
    BODIES,
    BODY_SLOTS,
    DETAILS,
    DIFF_COLORS,
    EDGE_LABELS,
    EDGES,
    HEADS,
    LABELS,
    NODES,
    SELECTION,
    TRACE_COUNT,
    box_geometry,
    diff_overlay,
    graph_figure,
    node_hover,
    op_histogram_figure,
    text_in_view,
    text_visibility,
    timeline_figure,
)
from explorer.views.layout import layered
from explorer.views.node_boxes import PX_PER_UNIT, node_box_size


def test_small_figures_draw_points_with_svg_and_large_ones_with_webgl(monkeypatch) -> None:
    import explorer.views.figures.graph as figures  # graph_figure reads the limit from its module

    graph = load("zoo:resnet18")
    layout = layered(graph)
    point_traces = (EDGES, ARROWS, NODES)
    assert len(layout.positions) <= figures.SVG_MAX_ITEMS
    assert {graph_figure(graph, layout).data[i].type for i in point_traces} == {"scatter"}
    assert {graph_figure(graph, layout, webgl=True).data[i].type for i in point_traces} == {"scattergl"}
    monkeypatch.setattr(figures, "SVG_MAX_ITEMS", len(layout.positions) - 1)
    fig = graph_figure(graph, layout)
    assert {fig.data[i].type for i in point_traces} == {"scattergl"}
    assert graph_figure(graph, layout, webgl=False).data[NODES].type == "scatter"
    # the boxes and text are SVG either way; only the point traces change
    assert [t.type for i, t in enumerate(fig.data) if i not in point_traces] == [
        t.type for i, t in enumerate(graph_figure(graph, layout, webgl=False).data) if i not in point_traces
    ]


def test_trace_order_and_one_marker_per_item() -> None:
    graph = load("zoo:resnet18")
    layout = layered(graph)
    fig = graph_figure(graph, layout)
    names = [t.name for t in fig.data]
    assert len(names) == TRACE_COUNT
    assert [names[i] for i in (EDGES, ARROWS, NODES, SELECTION, LABELS, DETAILS, EDGE_LABELS)] == [
        "edges",
        "arrows",
        "nodes",
        "selection",
        "labels",
        "details",
        "edge labels",
    ]
    assert names[HEADS : HEADS + len(CATEGORIES)] == [c.legend for c in CATEGORIES.values()]
    assert list(fig.data[NODES].customdata) == list(layout.positions)
    assert {fig.data[i].type for i in (EDGES, ARROWS, NODES)} == {"scatter"}  # 71 items: SVG
    # one polyline per edge, separated by gaps
    assert int(np.isnan(np.asarray(fig.data[EDGES].x, dtype=float)).sum()) == len(layout.edges)
    assert len(fig.data[ARROWS].x) == len(layout.edges)
    assert fig.data[LABELS].visible is True


def test_colours_by_op_type_and_by_diff_overlay() -> None:
    graph = load("zoo:resnet18")
    fig = graph_figure(graph)
    colors = dict(zip(fig.data[NODES].customdata, fig.data[NODES].marker.color, strict=True))
    conv = CATEGORIES["conv"].color
    assert colors["/conv1/Conv"] == conv == colors["/layer1/layer1.0/conv1/Conv"]
    assert colors["/relu/Relu"] == CATEGORIES["activation"].color
    timeline = run_pipeline(graph, "fuse_bn_into_conv", verify=False)
    overlay = diff_overlay(timeline.diff(1), "before")
    fig = graph_figure(graph, overlay=overlay, palette=DIFF_COLORS)
    colors = dict(zip(fig.data[NODES].customdata, fig.data[NODES].marker.color, strict=True))
    assert colors["/bn1/BatchNormalization"] == DIFF_COLORS["fused"]
    assert colors["/conv1/Conv"] == DIFF_COLORS["changed"]
    assert colors["/relu/Relu"] == DIFF_COLORS["kept"]
    # the diff shows on the box bodies (tinted fill, outline in the status colour), under category headers
    outlines = {fig.data[i].line.color for i in range(BODIES, BODIES + BODY_SLOTS) if len(fig.data[i].x)}
    assert {DIFF_COLORS["fused"], DIFF_COLORS["changed"], DIFF_COLORS["kept"]} <= outlines
    assert fig.data[HEADS].name == CATEGORIES["conv"].legend and len(fig.data[HEADS].x) > 0


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

    assert "ipywidgets" not in sys.modules or "explorer.views.figures" in sys.modules
    import explorer.views.figures as figures

    assert "ipywidgets" not in figures.__dict__


def test_diff_overlay_sides() -> None:
    a = load("zoo:mlp")
    d = diff(a, a)
    assert set(diff_overlay(d, "after").values()) == {"kept"}


def _boxes(fig, first: int, count: int) -> int:
    """How many closed shapes (NaN-separated) the filled traces ``first..first+count`` draw."""
    return sum(
        int(np.isnan(np.asarray(fig.data[i].x, dtype=float)).sum()) for i in range(first, first + count)
    )


def test_boxes_are_sized_to_their_text_and_do_not_overlap() -> None:
    graph = load("zoo:resnet18")
    layout = layered(graph)
    fig = graph_figure(graph, layout)
    geo = box_geometry(graph, layout)
    assert _boxes(fig, BODIES, BODY_SLOTS) == _boxes(fig, HEADS, len(CATEGORIES)) == len(layout.positions)
    k = geo.items.index("/conv1/Conv")
    assert (geo.width[k], geo.height[k]) == node_box_size(graph.nx.nodes["/conv1/Conv"])
    assert geo.texts[k].header == "Conv" and "W 64×3×7×7" in geo.texts[k].body
    assert geo.width[geo.items.index("/layer1/layer1.0/bn1/BatchNormalization")] > geo.width[k] * 0.9
    # no two boxes overlap (the figure stretches x where the layout is too tight for the boxes)
    x0, x1 = geo.x - geo.width / 2, geo.x + geo.width / 2
    y0, y1 = geo.y - geo.height / 2, geo.y + geo.height / 2
    overlap = (x0[:, None] < x1[None, :]) & (x0[None, :] < x1[:, None])
    overlap &= (y0[:, None] < y1[None, :]) & (y0[None, :] < y1[:, None])
    np.fill_diagonal(overlap, False)
    assert not overlap.any()
    # labels sit inside their boxes: header text in the header, body text in the body
    labels, details = fig.data[LABELS], fig.data[DETAILS]
    assert labels.meta["text"] == [t.header for t in geo.texts]  # all of it; the trace draws what is in view
    assert 0 < len(labels.text) < len(geo.items) and set(labels.text) <= set(labels.meta["text"])
    label_y = np.array(labels.meta["y"])
    assert np.all((label_y > geo.y) & (label_y < y1))
    has_body = np.array([bool(t.body) for t in geo.texts])
    detail_x, detail_y = np.array(details.meta["x"]), np.array(details.meta["y"])
    assert len(detail_x) == has_body.sum()
    assert np.all((detail_x > x0[has_body]) & (detail_x < geo.x[has_body]))  # left-aligned inside
    assert np.all((detail_y > y0[has_body]) & (detail_y < label_y[has_body]))


def test_collapsed_scopes_read_as_groups() -> None:
    graph = load("zoo:resnet18")
    fig = graph_figure(graph, layered(graph, collapse=1))
    labels = dict(zip(fig.data[NODES].customdata, fig.data[LABELS].meta["text"], strict=True))
    assert labels["scope:layer1"] == "layer1 · 14 ops"
    details = " ".join(fig.data[DETAILS].meta["text"])
    assert "Conv ×4" in details and "BatchNormalization ×4" in details and "Add ×2" in details
    assert fig.data[HEADS + list(CATEGORIES).index("group")].showlegend is True


def test_edges_are_smooth_curves_with_shapes_beside_them() -> None:
    graph = load("zoo:resnet18")
    layout = layered(graph)
    fig = graph_figure(graph, layout)
    x = np.asarray(fig.data[EDGES].x, dtype=float)
    # a curve has many points per edge, not a polyline's two or three
    assert len(x) > 5 * len(layout.edges)
    shapes = fig.data[EDGE_LABELS].meta["text"]
    assert " batch×3×224×224" in shapes and " batch×64×56×56" in shapes
    assert len(shapes) <= len(layout.edges)


def test_text_follows_the_zoom() -> None:
    graph = load("zoo:resnet18")
    fig = graph_figure(graph, layered(graph))
    nodes, edges = fig.data[NODES], fig.data[EDGE_LABELS].meta
    x, y = float(nodes.x[0]), float(nodes.y[0])
    near = PX_PER_UNIT  # the whole plot height is this many pixels for one unit: text fits
    assert text_visibility(
        nodes.x, nodes.y, edges["x"], edges["y"], [x - 1, x + 1], [y - 1, y + 1], 2 * near
    ) == (
        True,
        True,
    )
    far = text_visibility(
        nodes.x, nodes.y, edges["x"], edges["y"], [x - 50, x + 50], [y - 50, y + 50], 2 * near
    )
    assert far == (False, False)
    # the text traces draw only the text near the view
    near_view = text_in_view(fig.data[LABELS].meta, [x - 1, x + 1], [y - 1, y + 1])
    assert 0 < len(near_view["text"]) < 10 and near_view["text"][0] == fig.data[LABELS].meta["text"][0]


def test_a_model_made_in_memory_is_titled_by_its_name() -> None:
    from explorer.targets import coverage
    from explorer.views.target_figures import op_support_heatmap

    figure = op_support_heatmap(coverage(load(zoo.build("mlp")), ["ort-cpu"]))
    assert figure.layout.title.text == "op support of mlp"


def test_symbolic_sizes_that_are_expressions_read_unambiguously_everywhere() -> None:
    """A YOLO-style export with symbolic input sizes: each compound dimension is one term, where drawn."""
    from onnx import TensorProto, helper, numpy_helper

    from explorer.views.details import details_html, node_details

    h, w = "floor(height/2 - 1/2) + 1", "floor(width/2 - 1/2) + 1"  # as onnxsim writes them
    weight = numpy_helper.from_array(np.zeros((16, 3, 3, 3), np.float32), "model.0.conv.weight")
    conv = helper.make_node("Conv", ["images", weight.name], ["c"], name="/model.0/conv/Conv", strides=[2, 2])
    relu = helper.make_node("Relu", ["c"], ["y"], name="/model.0/act/Relu")
    graph = helper.make_graph(
        [conv, relu],
        "yolo-style",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, "height", "width"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16, h, w])],
        [weight],
        value_info=[helper.make_tensor_value_info("c", TensorProto.FLOAT, ["batch", 16, h, w])],
    )
    model = load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    layout = layered(model)
    fig = graph_figure(model, layout)
    drawn = "batch×16×(floor(height/2 - 1/2) + 1)×(floor(width/2 - 1/2) + 1)"
    assert f" {drawn}" in fig.data[EDGE_LABELS].meta["text"]
    assert " batch×3×height×width" in fig.data[EDGE_LABELS].meta["text"]  # plain names stay plain
    assert f"{drawn} float32" in fig.data[DETAILS].meta["text"]  # the output's box
    listed = f"[batch, 16, {h}, {w}] float32"  # commas separate the dimensions already
    assert f"out y: {listed}" in node_hover(model, layout, "/model.0/act/Relu")
    assert f"[batch, 16, {h}, {w}]" in details_html(node_details(model, "/model.0/act/Relu"))

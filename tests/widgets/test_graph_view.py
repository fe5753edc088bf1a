"""GraphView in Python (the browser tests drive it in JupyterLab): state and events without a page."""

from __future__ import annotations

from types import SimpleNamespace

from explorer import zoo
from explorer.views.figures import DIFF_COLORS, LABEL_LIMIT, LABELS, NODES
from widgets import GraphView


def _click(view: GraphView, item: str) -> None:
    trace = view.figure.data[NODES]
    index = list(trace.customdata).index(item)
    view._clicked(trace, SimpleNamespace(point_inds=[index]), None)


def test_click_on_a_node_selects_it_and_shows_its_details() -> None:
    view = GraphView("zoo:resnet18", collapse=None)
    _click(view, "/conv1/Conv")
    assert view.selected == "/conv1/Conv"
    assert 'data-node="/conv1/Conv"' in view.details.value
    widths = list(view.figure.data[NODES].marker.line.width)
    assert widths[list(view.figure.data[NODES].customdata).index("/conv1/Conv")] == 2.5


def test_a_view_that_grows_past_the_svg_limit_draws_with_webgl_and_still_takes_clicks(monkeypatch) -> None:
    import explorer.views.figures.graph as figures  # graph_figure reads the limit from its module

    view = GraphView("zoo:resnet18", collapse=1)
    assert view.figure.data[NODES].type == "scatter"
    monkeypatch.setattr(figures, "SVG_MAX_ITEMS", len(view.layout_.positions) + 1)
    view.set_collapse(None)  # 71 items now: past the limit
    nodes = view.figure.data[NODES]
    assert nodes.type == "scattergl" and len(nodes.x) == len(view.layout_.positions)
    index = list(nodes.customdata).index("/conv1/Conv")
    nodes._dispatch_on_click(SimpleNamespace(point_inds=[index]), None)  # as plotly's front end does
    assert view.selected == "/conv1/Conv"


def test_click_on_a_box_expands_it_in_place() -> None:
    view = GraphView("zoo:resnet18", collapse=1)
    before = dict(view.layout_.positions)
    _click(view, "scope:layer4")
    after = view.layout_.positions
    assert "scope:layer4" not in after
    assert any(item.startswith("scope:layer4/") or item.startswith("/layer4/") for item in after)
    assert after["scope:layer1"] == before["scope:layer1"]  # what is above the box does not move


def test_a_box_opened_shows_whole_and_a_view_that_shows_it_stays() -> None:
    view = GraphView("zoo:llama", collapse=2)
    box = next(item for item in view.layout_.positions if item.startswith("scope:") and "layers.1" in item)
    nodes = view.figure.data[NODES]
    k = list(nodes.customdata).index(box)
    view.figure.layout.xaxis.range = [nodes.x[k] - 0.5, nodes.x[k] + 0.5]  # zoomed onto the box alone
    view.figure.layout.yaxis.range = [nodes.y[k] - 0.5, nodes.y[k] + 0.5]
    before = set(view.layout_.positions)
    _click(view, box)
    opened = [item for item in view.layout_.positions if item not in before]
    nodes = view.figure.data[NODES]
    index = {item: k for k, item in enumerate(nodes.customdata)}
    (x0, x1), (y0, y1) = (sorted(view.figure.layout[axis].range) for axis in ("xaxis", "yaxis"))
    assert opened and all(x0 < nodes.x[index[i]] < x1 and y0 < nodes.y[index[i]] < y1 for i in opened)
    assert (x1 - x0) / (y1 - y0) == 1.0  # zoomed out on both axes alike
    shown = (view.figure.layout.xaxis.range, view.figure.layout.yaxis.range)
    view.bring_into_view(opened[:1])  # already on screen: nothing moves
    assert (view.figure.layout.xaxis.range, view.figure.layout.yaxis.range) == shown


def test_search_finds_by_op_type_and_name_and_reveals_hidden_nodes() -> None:
    view = GraphView("zoo:resnet18", collapse=1)
    assert len(view.find("batchnormalization")) == 20
    assert view.selected in view.layout_.positions  # revealed from its box
    assert view.find("layer3.1/conv2")[0] == "/layer3/layer3.1/conv2/Conv"
    assert view.find("no-such-thing") == [] and "no node matches" in view.status.value


def test_overlays_and_colour_by() -> None:
    view = GraphView("zoo:mlp")
    view.set_overlay("status", {"/fc1/Gemm": "added"}, palette=DIFF_COLORS)
    colors = dict(zip(view.figure.data[NODES].customdata, view.figure.data[NODES].marker.color, strict=True))
    assert colors["/fc1/Gemm"] == DIFF_COLORS["added"]
    view.color_menu.value = "scope"
    assert view.figure.data[NODES].marker.color != colors


def test_subgraphs_open_and_close() -> None:
    view = GraphView("zoo:control_flow")
    node = next(n for n in view.graph.subgraphs if view.graph.node(n)["op_type"] == "If")
    view.select(node)
    assert len(view.subgraph_buttons.children) == 2
    view.subgraph_buttons.children[0].click()
    assert view.graph.depth == 1 and view.back_button.layout.display is None
    view.close_subgraph()
    assert view.graph.depth == 0 and view.back_button.layout.display == "none"


def test_labels_follow_the_zoom() -> None:
    view = GraphView(zoo.build("transformer", layers=6, hidden=32), collapse=None)
    assert len(view.layout_.positions) > LABEL_LIMIT
    labels = view.figure.data[LABELS]
    view._zoomed(None, [-1000, 1000], [-1000, 1000])
    assert labels.visible is False  # too many items in view to read labels
    x, y = view.layout_.positions["input:input_ids"]
    view._zoomed(None, [x - 2, x + 2], [y - 2, y + 2])
    assert labels.visible is True


def test_an_overlay_colours_the_graph_and_shows_in_the_details(tmp_path) -> None:
    import json

    from explorer import load
    from explorer.overlays.ours import placement_overlay
    from explorer.overlays.value import NodeValue, Overlay
    from explorer.targets import get_target, partition
    from explorer.targets.palette import FALLBACK_COLOR, PARTITION_COLORS

    graph = load("zoo:resnet18")
    view = GraphView(
        graph, collapse=None, overlay=placement_overlay(partition(graph, get_target("coreml-mlprogram")))
    )
    assert view.color_menu.value == "placement on coreml-mlprogram: value"  # the overlay shown first
    assert "placement on coreml-mlprogram: compute_unit" in view.color_menu.options
    colors = dict(zip(view.figure.data[NODES].customdata, view.figure.data[NODES].marker.color, strict=True))
    assert (
        colors["/bn1/BatchNormalization"] == FALLBACK_COLOR and colors["/conv1/Conv"] == PARTITION_COLORS[0]
    )
    _click(view, "/bn1/BatchNormalization")
    assert 'class="oge-overlay"' in view.details.value and "compute_unit" in view.details.value
    path = tmp_path / "times.json"  # a file: read onto the graph, time as a continuous colouring
    path.write_text(
        json.dumps({"mlp": {"results": {"/fc1/Gemm": {"value": 2.5}, "/fc2/Gemm": {"value": 1.0}}}})
    )
    timed = GraphView("zoo:mlp", overlay=str(path))
    assert timed.overlays[timed.color_menu.value] == {"/fc1/Gemm": 2.5, "/fc2/Gemm": 1.0}
    timed.show_overlay(
        Overlay(
            "ort-profile",
            None,
            "zoo:mlp",
            {"/fc1/Gemm": NodeValue("/fc1/Gemm", time_ms=1.0, provider="CPUExecutionProvider")},
        )
    )
    assert (
        timed.color_menu.value == "ort-profile: time_ms"
        and "ort-profile: provider" in timed.color_menu.options
    )


def test_hiding_the_overlay_keeps_the_colourings_set_apart_and_the_one_shown() -> None:
    view = GraphView("zoo:mlp")
    view.set_overlay("latency", {"/fc1/Gemm": 1.5})
    view.show_overlay({"main_graph": {"results": {"/fc1/Gemm": {"value": 2.0}}}})
    view.color_menu.value = "latency"
    view.select("/fc1/Gemm")
    assert 'class="oge-overlay"' in view.details.value
    view.hide_overlay()
    assert view.overlay is None and view.color_menu.value == "latency"
    assert list(view.color_menu.options)[-1] == "latency" and "model-explorer: value" not in view.overlays
    assert 'class="oge-overlay"' not in view.details.value

"""A graph of another IR, built only with the graph model's schema (no ONNX proto), works in every view.

This is what the Relax adapter will build: bindings as nodes with qualified ops, a fused
function as the scope of its members, weights as TensorInfo, ``origin`` pointing back
at the ONNX nodes.
"""

from __future__ import annotations

import networkx as nx

from explorer.core.diff import diff
from explorer.core.graph import ModelGraph
from explorer.core.graph_schema import edge_data, node_data
from explorer.core.tensors import TensorInfo
from explorer.core.timeline import Snapshot, Timeline
from explorer.views.figures import NODES, graph_figure
from explorer.views.layout import layered


def relax_like(fused: bool) -> ModelGraph:
    g = nx.MultiDiGraph(name="main")
    weight = TensorInfo("conv1.weight", (64, 3, 7, 7), "float32", 64 * 3 * 7 * 7, 64 * 3 * 7 * 7 * 4)
    scope = ("fused_conv2d_add_relu",) if fused else ()
    g.add_node(
        "input:x", **node_data("input", "Input", "x", outputs=["x"], shape=(1, 3, 224, 224), dtype="float32")
    )
    ops = [
        ("lv0", "nn.conv2d", "/conv1/Conv"),
        ("lv1", "add", "/conv1/Conv"),
        ("lv2", "nn.relu", "/relu/Relu"),
    ]
    for index, (var, op, onnx_node) in enumerate(ops):
        g.add_node(
            var,
            **node_data(
                "op",
                op,
                var,
                op=f"relax.{op}",
                index=index,
                scope=scope,
                weights=(weight,) if op == "nn.conv2d" else (),
                origin=(onnx_node,),
            ),
        )
    g.add_node("output:y", **node_data("output", "Output", "y", inputs=["lv2"], shape=(1, 64, 112, 112)))
    shape = (1, 64, 112, 112)
    for u, v, tensor in (
        ("input:x", "lv0", "x"),
        ("lv0", "lv1", "lv0"),
        ("lv1", "lv2", "lv1"),
        ("lv2", "output:y", "lv2"),
    ):
        g.add_edge(u, v, key=tensor, **edge_data(tensor, shape, "float32", 4 * 64 * 112 * 112, slots=(0,)))
    return ModelGraph(g, ir="relax", source="relax:example")


def test_layout_figure_summary_and_diff_need_no_proto() -> None:
    plain, fused = relax_like(False), relax_like(True)
    assert plain.proto is None and plain.model is None and plain.name == "main"
    assert plain.op_counts == {"nn.conv2d": 1, "add": 1, "nn.relu": 1}
    summary = plain.summary()
    assert (
        summary.nodes == 3
        and summary.params == 64 * 3 * 7 * 7
        and summary.inputs[0].shape == (1, 3, 224, 224)
    )
    layout = layered(fused, collapse=1, node_size="auto")
    assert "scope:fused_conv2d_add_relu" in layout.positions  # the fused function is a box
    fig = graph_figure(fused, layered(fused, node_size="auto"))
    assert list(fig.data[NODES].customdata) == list(layered(fused, node_size="auto").positions)
    step = diff(plain, fused)
    assert step.op_deltas == {} and fused.nx.nodes["lv0"]["origin"] == ("/conv1/Conv",)


def test_a_lowering_timeline_of_such_graphs_steps_in_the_widgets() -> None:
    from widgets import GraphView, TimelineStepper

    class FuseOps:
        name, family, description = "FuseOps", "relax", "Groups operators into fused functions."

    plain, fused = relax_like(False), relax_like(True)
    timeline = Timeline(
        (Snapshot.original(plain), Snapshot.after(1, FuseOps(), fused, changed=True, elapsed=0.02)), "relax"
    )
    stepper = TimelineStepper(timeline)
    assert stepper.step == 1 and "FuseOps" in stepper.step_title.value
    view = GraphView(fused, collapse=1)
    assert "scope:fused_conv2d_add_relu" in view.layout_.positions
    assert "3 nodes" in view.status.value

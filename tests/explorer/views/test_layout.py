"""Layered layout: positions, data-flow order, collapse/expand, stability across versions, crossings."""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter
from typing import Any

import networkx as nx
import numpy as np
import onnx
import pytest

from explorer import load, zoo
from explorer.core.graph import ModelGraph
from explorer.onnx_adapter.adapter import ONNX
from explorer.onnx_adapter.graph_builder import build_graph
from explorer.views import layout as lay
from tests.explorer.dynamo_names import dynamo_style

MODELS = zoo.names()


@pytest.fixture(scope="module")
def transformer() -> ModelGraph:
    return load("zoo:transformer", input_shapes={"input_ids": [1, 8]})


@pytest.fixture(scope="module")
def deep() -> ModelGraph:
    """A transformer of about 50k ONNX nodes (built without shape inference, once)."""
    return build_graph(zoo.build("transformer", layers=617, hidden=32), source="zoo:transformer")


def _chain(n: int, block: int = 100) -> ModelGraph:
    """input -> n Relu nodes in scopes of ``block`` -> output, as a ModelGraph."""
    g = nx.MultiDiGraph()
    g.add_node("input:x", kind="input", op_type="Input", scope=(), index=-1)
    prev = "input:x"
    for i in range(n):
        node = f"/block{i // block}/Relu_{i}"
        g.add_node(node, kind="op", op_type="Relu", scope=(f"block{i // block}",), index=i)
        g.add_edge(prev, node, key=f"t{i}")
        prev = node
    g.add_node("output:y", kind="output", op_type="Output", scope=(), index=-1)
    g.add_edge(prev, "output:y", key="y")
    return ModelGraph(g, proto=onnx.GraphProto(name="chain"), adapter=ONNX)


def _edited(graph: ModelGraph, remove: str) -> ModelGraph:
    """A copy of the graph with one node taken out of its chain (producers wired to its consumers)."""
    g = graph.nx.copy()
    outs = [(v, k, d) for _, v, k, d in g.out_edges(remove, keys=True, data=True)]
    preds = list(g.predecessors(remove))
    g.remove_node(remove)
    for p in preds:
        for v, k, d in outs:
            g.add_edge(p, v, key=k, **d)
    return ModelGraph(g, proto=graph.proto, source="edited", adapter=ONNX)


def _check_drawing(layout: lay.Layout) -> None:
    """Edges go down (up only when marked back), one polyline point per layer, endpoints on items."""
    for u, v in layout.edges:
        lu, lv = layout.layers[u], layout.layers[v]
        assert (lu < lv) != ((u, v) in layout.back_edges), (u, v, lu, lv)
        points = layout.edge_points[(u, v)]
        assert len(points) == abs(lv - lu) + 1
        assert points[0] == layout.positions[u] and points[-1] == layout.positions[v]
        assert [round(-y / layout.vgap) for _, y in points] == list(
            range(lu, lv + (1 if lv > lu else -1), 1 if lv > lu else -1)
        )
    spots = {(layout.layers[i], x) for i, (x, _) in layout.positions.items()}
    assert len(spots) == len(layout.positions), "two items share a spot"
    for item, (_, y) in layout.positions.items():
        assert y == -layout.layers[item] * layout.vgap


# --------------------------------------------------------------------------- positions and order


@pytest.mark.parametrize("name", MODELS)
def test_every_node_of_a_zoo_model_gets_a_position_in_data_flow_order(name: str) -> None:
    graph = load(f"zoo:{name}")
    layout = lay.layered(graph)
    assert set(layout.positions) == set(graph.nx.nodes)
    assert not layout.back_edges
    assert all(layout.layers[u] < layout.layers[v] for u, v in layout.edges)
    assert set(layout.edges) == {(u, v) for u, v in graph.nx.edges()}
    _check_drawing(layout)


def test_subgraphs_with_outer_reads_lay_out_too() -> None:
    graph = load("zoo:control_flow")
    subs = list(graph.iter_subgraphs())
    assert subs
    for _, sub in subs:
        layout = lay.layered(sub)
        assert set(layout.positions) == set(sub.nx.nodes)
        _check_drawing(layout)
    assert any(kind == "outer" for _, sub in subs for kind in lay.layered(sub).kinds.values())


def test_nodes_fed_only_by_constants_sit_just_above_their_first_consumer() -> None:
    graph = load("zoo:transformer", constants_as_nodes=True)
    layout = lay.layered(graph)
    fed_by_nothing = [
        n for n, kind in graph.nx.nodes(data="kind") if kind == "op" and graph.nx.in_degree(n) == 0
    ]
    assert len(fed_by_nothing) > 10  # the exporter's Constant nodes
    for node in fed_by_nothing:
        first = min(layout.layers[s] for s in graph.nx.successors(node))
        assert layout.layers[node] == first - 1
    assert max(layout.layers[n] for n in fed_by_nothing) > 10  # not all at the top


def test_weights_drawn_as_nodes_sit_next_to_their_consumer(transformer: ModelGraph) -> None:
    graph = transformer.with_constant_nodes()
    layout = lay.layered(graph)
    consts = [n for n, kind in graph.nx.nodes(data="kind") if kind == "constant"]
    for node in consts:
        assert layout.layers[node] == min(layout.layers[s] for s in graph.nx.successors(node)) - 1
    assert sum(layout.layers[n] > 0 for n in consts) > len(consts) // 2


def test_parallel_edges_are_merged_and_keep_their_tensor_names() -> None:
    layout = lay.layered(load("zoo:detection_head"), collapse=1)
    assert len(layout.edges) == len(set(layout.edges))
    assert all(u != v for u, v in layout.edges)
    assert len(layout.edge_tensors[("scope:backbone", "scope:fpn")]) == 3  # three feature levels


# --------------------------------------------------------------------------- collapse


def test_collapse_by_depth_draws_boxes_that_list_their_members(transformer: ModelGraph) -> None:
    full = lay.layered(transformer)
    previous = len(full.positions)
    for depth in (3, 2, 1):
        layout = lay.layered(transformer, collapse=depth)
        assert len(layout.positions) < previous
        previous = len(layout.positions)
        shown = [n for n in layout.positions if n not in layout.groups]
        members = [m for ms in layout.groups.values() for m in ms]
        assert sorted(shown + members) == sorted(transformer.nx.nodes)
        for gid, ms in layout.groups.items():
            scope = layout.scopes[gid]
            assert gid == "scope:" + "/".join(scope) and len(scope) == depth
            assert layout.kinds[gid] == "group"
            assert all(transformer.nx.nodes[m]["scope"][:depth] == scope for m in ms)
        assert layout.collapsed == frozenset(layout.scopes.values())
        _check_drawing(layout)
    assert set(lay.layered(transformer, collapse=1).groups) == {"scope:embeddings", "scope:encoder"}


def test_explicit_scopes_collapse_into_the_outermost_one(transformer: ModelGraph) -> None:
    scopes = {("encoder", "layers.0"), ("encoder", "layers.0", "self_attn"), ("embeddings",)}
    layout = lay.layered(transformer, collapse=scopes)
    assert set(layout.groups) == {"scope:encoder/layers.0", "scope:embeddings"}
    assert layout.item_of["/encoder/layers.0/self_attn/MatMul"] == "scope:encoder/layers.0"
    assert layout.item_of["/encoder/layers.1/self_attn/MatMul"] == "/encoder/layers.1/self_attn/MatMul"
    again = lay.layered(transformer, collapse=layout.collapsed)
    assert set(again.positions) == set(layout.positions)


def test_collapsing_a_reused_module_draws_the_cycle_with_upward_edges() -> None:
    graph = load("zoo:resnet18")  # each block calls its `relu` module twice
    layout = lay.layered(graph, collapse=3)
    assert layout.back_edges
    _check_drawing(layout)


def test_bad_collapse_values_are_refused(transformer: ModelGraph) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        lay.layered(transformer, collapse=0)
    with pytest.raises(TypeError):
        lay.layered(transformer, collapse="encoder")


def test_auto_collapse_leaves_small_graphs_open(transformer: ModelGraph) -> None:
    assert lay.auto_collapse(transformer) is None
    assert lay.auto_collapse(load("zoo:resnet18")) is None
    depth = lay.auto_collapse(transformer, max_items=60)
    layout = lay.layered(transformer, collapse=depth)
    assert len(layout.positions) <= 60
    # its two layers, each a box (not their self_attn, linear1, linear2 as before)
    assert set(layout.groups) == {"scope:encoder/layers.0", "scope:encoder/layers.1"}


def _scoped_chain(scopes: list[tuple[str, ...]]) -> ModelGraph:
    """input -> one Relu per scope in the list -> output, as a ModelGraph."""
    g = nx.MultiDiGraph()
    g.add_node("input:x", kind="input", op_type="Input", scope=(), index=-1)
    prev = "input:x"
    for i, scope in enumerate(scopes):
        node = "/" + "/".join((*scope, f"Relu_{i}"))
        g.add_node(node, kind="op", op_type="Relu", scope=scope, index=i)
        g.add_edge(prev, node, key=f"t{i}")
        prev = node
    g.add_node("output:y", kind="output", op_type="Output", scope=(), index=-1)
    g.add_edge(prev, "output:y", key="y")
    return ModelGraph(g, proto=onnx.GraphProto(name="scoped"), adapter=ONNX)


def test_auto_collapse_opens_a_bert_sized_encoder_with_its_layers_not_their_parts() -> None:
    """12 layers of 4 parts (scoped as the dynamo exporter scopes them) open as 12 boxes, then the parts."""
    model = dynamo_style(zoo.build("transformer", layers=12, hidden=16))
    graph = build_graph(model, source="dynamo-style")
    assert graph.nx.number_of_nodes() > 300
    depth = lay.auto_collapse(graph)
    layout = lay.layered(graph, collapse=depth)
    assert set(layout.groups) == {f"scope:encoder/layers.{i}" for i in range(12)}
    assert len(layout.positions) < 40
    opened = lay.expand(layout, graph, "scope:encoder/layers.3")
    parts = {s[2] for s in opened.collapsed if s[:2] == ("encoder", "layers.3")}
    assert {"self_attn", "linear1", "linear2"} <= parts
    # by size alone (the deepest depth that fits in 300 items) it opened at the parts: 48 boxes
    assert len(lay.layered(graph, collapse=3).groups) >= 36


def test_auto_collapse_opens_a_yolo_at_its_numbered_modules() -> None:
    graph = load("zoo:yolov8")
    depth = lay.auto_collapse(graph)
    assert depth == 1
    groups = lay.layered(graph, collapse=depth).groups
    assert groups and all(g.startswith("scope:model.") for g in groups)


def test_repeated_blocks_are_numbered_siblings_holding_most_nodes() -> None:
    blocks = [("stages", f"stages.{s}", "blocks", f"blocks.{b}", "conv") for s in range(4) for b in range(3)]
    assert lay.repeated_depths(Counter(blocks * 10)) == [2, 4]  # the stages, and the blocks in each
    # conv1, conv2, conv3 in a small stem: numbered, but holding few of the nodes
    stem = [("conv1",), ("conv2",), ("conv3",)]
    assert lay.repeated_depths(Counter(stem + [("head", "fc")] * 20)) == []
    # two numbered leaves are not blocks; two numbered scopes with parts inside are
    assert lay.repeated_depths(Counter([("norm1",), ("norm2",)] * 5)) == []
    assert lay.repeated_depths(Counter([("layers.0", "attn"), ("layers.1", "attn")] * 5)) == [1]
    # Keras names its repeated layers dense, dense_1, dense_2
    keras = [("model", "dense"), ("model", "dense_1"), ("model", "dense_2")]
    assert lay.repeated_depths(Counter(keras)) == [2]


def test_auto_collapse_without_repeated_blocks_takes_the_deepest_depth_that_fits() -> None:
    parts = ("attention", "mlp", "norm", "proj", "gate")
    scopes = [(top, part, leaf) for top in ("encoder", "decoder") for part in parts for leaf in ("a", "b")]
    graph = _scoped_chain([s for s in scopes for _ in range(20)])  # 400 nodes, 20 per leaf scope
    assert lay.repeated_depths(Counter(s for _, s in graph.nx.nodes(data="scope"))) == []
    assert lay.auto_collapse(graph) == 3  # 20 boxes plus input and output
    assert lay.auto_collapse(graph, max_items=15, min_items=1) == 2  # 10 boxes plus input and output
    assert lay.auto_collapse(graph, max_items=15) == 3  # 12 items are too coarse: one level finer


def test_auto_collapse_opens_a_50k_node_model_with_a_few_hundred_boxes(deep: ModelGraph) -> None:
    assert sum(1 for _ in deep.model.graph.node) > 49_000
    depth = lay.auto_collapse(deep, max_items=300)
    assert depth is not None
    layout = lay.layered(deep, collapse=depth)
    # depth 1 would be 4 boxes (input, embeddings, encoder, output): too coarse, so one box per layer
    assert 100 < len(layout.positions) <= 1000
    assert lay.auto_collapse(deep, max_items=300, min_items=1) == 1
    assert sum(len(m) for m in layout.groups.values()) + len(layout.positions) - len(layout.groups) == len(
        deep.nx
    )
    _check_drawing(layout)


# --------------------------------------------------------------------------- expand / collapse one group


def test_expand_shows_the_same_items_as_a_full_layout_and_keeps_the_rest_in_place(
    transformer: ModelGraph,
) -> None:
    before = lay.layered(transformer, collapse=2)
    group = "scope:encoder/layers.0"
    after = lay.expand(before, transformer, group)
    full = lay.layered(transformer, collapse=after.collapsed)
    assert after is not full
    assert set(after.positions) == set(full.positions)
    assert set(after.edges) == set(full.edges)
    assert after.groups == full.groups
    assert ("encoder", "layers.0") not in after.collapsed
    assert ("encoder", "layers.0", "self_attn") in after.collapsed
    _check_drawing(after)
    g_layer = before.layers[group]
    grow = max(after.layers.values()) - max(before.layers.values())
    assert grow > 0
    for item, (x, y) in before.positions.items():
        if item == group:
            continue
        if before.layers[item] < g_layer:  # upstream: untouched
            assert after.positions[item] == (x, y)
        elif before.layers[item] > g_layer:  # downstream: same x, moved down by the same amount
            assert after.positions[item][0] == x
            assert after.layers[item] == before.layers[item] + grow


@pytest.mark.parametrize("name", ["resnet18", "detection_head", "mobilenetv2"])
def test_expanding_each_group_matches_the_full_layout(name: str) -> None:
    graph = load(f"zoo:{name}")
    before = lay.layered(graph, collapse=1)
    for group in before.groups:
        after = lay.expand(before, graph, group)
        full = lay.layered(graph, collapse=after.collapsed)
        assert set(after.positions) == set(full.positions)
        assert set(after.edges) == set(full.edges)
        _check_drawing(after)


def test_collapse_group_undoes_expand_and_closes_any_scope(transformer: ModelGraph) -> None:
    closed = lay.layered(transformer, collapse=1)
    opened = lay.expand(closed, transformer, "scope:encoder")
    assert lay.collapse_group(opened, transformer, ("encoder",)) is closed
    full = lay.layered(transformer)
    boxed = lay.collapse_group(full, transformer, ("encoder", "layers.1"))
    reference = lay.layered(transformer, collapse={("encoder", "layers.1")})
    assert set(boxed.positions) == set(reference.positions)
    assert set(boxed.edges) == set(reference.edges)
    _check_drawing(boxed)
    above = [
        i
        for i in boxed.positions
        if i in full.positions and full.layers[i] < boxed.layers["scope:encoder/layers.1"]
    ]
    assert above and all(boxed.positions[i] == full.positions[i] for i in above)


def test_expand_and_collapse_refuse_what_they_cannot_do(transformer: ModelGraph) -> None:
    layout = lay.layered(transformer, collapse=1)
    with pytest.raises(KeyError, match="not a collapsed group"):
        lay.expand(layout, transformer, "scope:nowhere")
    with pytest.raises(ValueError, match="no node"):
        lay.collapse_group(layout, transformer, ("nowhere",))
    with pytest.raises(ValueError, match="another version"):
        lay.expand(layout, load("zoo:mlp"), "scope:encoder")


# --------------------------------------------------------------------------- versions, cache


def test_previous_layout_keeps_retained_nodes_in_place(transformer: ModelGraph) -> None:
    base = lay.layered(transformer)
    edited = _edited(transformer, "/encoder/layers.1/activation/Gelu")
    lay.clear_cache()
    fresh = lay.layered(edited)
    lay.clear_cache()
    stable = lay.layered(edited, previous=base)
    common = [n for n in stable.positions if n in base.positions]
    kept = sum(stable.positions[n] == base.positions[n] for n in common)
    assert kept >= 0.95 * len(common)
    assert kept > sum(fresh.positions[n] == base.positions[n] for n in common)
    _check_drawing(stable)


def test_previous_layout_makes_room_for_an_added_node_with_small_shifts(transformer: ModelGraph) -> None:
    edited = _edited(transformer, "/encoder/layers.1/self_attn/Softmax")
    base = lay.layered(edited)
    stable = lay.layered(transformer, previous=base)  # the Softmax comes back
    common = [n for n in stable.positions if n in base.positions]
    assert sum(stable.positions[n] == base.positions[n] for n in common) >= 0.5 * len(common)
    assert sum(stable.positions[n][0] == base.positions[n][0] for n in common) >= 0.9 * len(common)
    assert all(0 <= stable.layers[n] - base.layers[n] <= 1 for n in common)
    _check_drawing(stable)


def test_a_stable_layout_depends_on_its_previous_not_on_what_was_asked_first(transformer: ModelGraph) -> None:
    edited = _edited(transformer, "/encoder/layers.1/activation/Gelu")
    base = lay.layered(transformer)
    lay.clear_cache()
    after_base = lay.layered(edited, previous=base)
    lay.clear_cache()
    alone = lay.layered(edited)  # asked first without a previous: it must not answer the next call
    again = lay.layered(edited, previous=base)
    assert again is not alone and again.positions == after_base.positions
    assert lay.layered(edited, previous=base) is again  # and the memo still serves repeats
    assert lay.layout_digest(again) == lay.layout_digest(after_base) != lay.layout_digest(alone)


def test_layouts_are_cached_by_graph_fingerprint_and_collapse(transformer: ModelGraph) -> None:
    lay.clear_cache()
    first = lay.layered(transformer, collapse=2)
    assert lay.layered(transformer, collapse=2) is first
    twin = load("zoo:transformer", input_shapes={"input_ids": [1, 8]})
    assert lay.graph_fingerprint(twin) == lay.graph_fingerprint(transformer) == first.version
    assert lay.layered(twin, collapse=2) is first
    assert lay.layered(transformer, collapse=1) is not first
    assert lay.graph_fingerprint(_edited(transformer, "/encoder/norm/LayerNormalization")) != first.version
    for depth in range(3, lay.CACHE_SIZE + 3):  # 16 newer layouts (depths past 4 look alike)
        lay.layered(transformer, collapse=depth)
    assert lay.layered(transformer, collapse=2) is not first  # evicted (least recently used)


# --------------------------------------------------------------------------- crossings


def _segments_layout(top: list[float], bottom: list[float], edges: list[tuple[int, int]]) -> lay.Layout:
    positions = {f"t{i}": (x, 0.0) for i, x in enumerate(top)} | {
        f"b{i}": (x, -1.0) for i, x in enumerate(bottom)
    }
    layers = {k: 0 if k.startswith("t") else 1 for k in positions}
    return lay.Layout(
        positions=positions,
        layers=layers,
        edges=tuple((f"t{a}", f"b{b}") for a, b in edges),
        edge_points={},
        edge_tensors={},
        groups={},
        scopes={},
        kinds=dict.fromkeys(positions, "op"),
        collapsed=frozenset(),
    )


def test_crossings_on_a_hand_made_example() -> None:
    #  t0  t1  t2          t0 -> b2, t1 -> b0, t2 -> b1, t2 -> b2
    #  b0  b1  b2          crossings: (t0-b2, t1-b0), (t0-b2, t2-b1)
    layout = _segments_layout([0, 1, 2], [0, 1, 2], [(0, 2), (1, 0), (2, 1), (2, 2)])
    assert lay.count_crossings(layout) == 2
    assert lay.count_crossings(_segments_layout([0, 1], [0, 1], [(0, 0), (1, 1)])) == 0
    assert lay.count_crossings(_segments_layout([0], [0, 1], [(0, 0), (0, 1)])) == 0  # shared end


def test_crossings_match_a_brute_force_count() -> None:
    rng = random.Random(7)
    for _ in range(20):
        top, bottom = rng.randint(1, 9), rng.randint(1, 9)
        edges = sorted({(rng.randrange(top), rng.randrange(bottom)) for _ in range(rng.randint(1, 25))})
        expected = sum(1 for (a, b), (c, d) in itertools.combinations(edges, 2) if (a - c) * (b - d) < 0)
        layout = _segments_layout([float(i) for i in range(top)], [float(i) for i in range(bottom)], edges)
        assert lay.count_crossings(layout) == expected


def test_crossings_follow_bends_of_long_edges() -> None:
    # a -> c spans two layers and bends right of b's edge b -> d: a(0) bend(2) c(0); b(1) -> d(1)
    layout = lay.Layout(
        positions={"a": (0.0, 0.0), "b": (1.0, -1.0), "c": (0.0, -2.0), "d": (1.0, -2.0)},
        layers={"a": 0, "b": 1, "c": 2, "d": 2},
        edges=(("a", "c"), ("b", "d")),
        edge_points={
            ("a", "c"): ((0.0, 0.0), (2.0, -1.0), (0.0, -2.0)),
            ("b", "d"): ((1.0, -1.0), (1.0, -2.0)),
        },
        edge_tensors={},
        groups={},
        scopes={},
        kinds={},
        collapsed=frozenset(),
    )
    assert lay.count_crossings(layout) == 1


def test_a_chain_has_no_crossings_and_zoo_models_few(transformer: ModelGraph) -> None:
    assert lay.count_crossings(lay.layered(_chain(500))) == 0
    assert lay.count_crossings(lay.layered(transformer)) == 0  # residuals and attention: planar
    assert lay.count_crossings(lay.layered(load("zoo:resnet18"))) == 0


def _fan_along_a_chain(layers: int) -> ModelGraph:
    """A decoder's attention mask in miniature: ``ids -> embed -> layers.0 -> ... -> layers.N-1``, and one
    ``mask -> Cast`` that every layer also reads (long edges from one item to every layer of a chain)."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Identity", ["ids"], ["h"], name="/embed/Identity"),
        helper.make_node("Cast", ["mask"], ["m"], name="/mask/Cast", to=TensorProto.FLOAT),
    ]
    h = "h"
    for i in range(layers):
        nodes.append(helper.make_node("Add", [h, "m"], [f"h{i}"], name=f"/layers.{i}/Add"))
        h = f"h{i}"
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("mask", "ids")]
    output = helper.make_tensor_value_info(h, TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph(nodes, "fan", inputs, [output])
    return load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


@pytest.mark.parametrize("node_size", [None, "auto"])
def test_a_fan_out_along_a_chain_runs_down_one_side_of_it(node_size: str | None) -> None:
    # Placed by the median of all they read, the layers land among the mask's long edges, which then
    # run down both sides of the chain and cross it (10 crossings at 30 layers): a layer is placed by
    # the layer above it, and the long edges go down one side.
    graph = _fan_along_a_chain(30)
    lay.clear_cache()
    layout = lay.layered(graph, node_size=node_size)
    assert lay.count_crossings(layout) == 0
    chain_x = {layout.layers[f"/layers.{i}/Add"]: layout.positions[f"/layers.{i}/Add"][0] for i in range(30)}
    sides = {
        np.sign(x - chain_x[layout.layers["/mask/Cast"] + k])
        for (source, _), points in layout.edge_points.items()
        if source == "/mask/Cast"
        for k, (x, _) in enumerate(points[1:-1], start=1)
        if layout.layers["/mask/Cast"] + k in chain_x
    }
    assert len(sides) == 1 and 0 not in sides, sides


@pytest.mark.slow
def test_a_100k_node_chain_lays_out_without_recursion() -> None:
    graph = _chain(100_000)
    layout = lay.layered(graph)
    assert len(layout.positions) == 100_002
    assert layout.layers["output:y"] == 100_001
    assert len(lay.layered(graph, collapse=1).positions) == 1002


# --------------------------------------------------------------------------- values


def test_layout_turns_into_a_frame_a_dict_and_a_box(transformer: ModelGraph) -> None:
    layout = lay.layered(transformer, collapse=2)
    frame = layout.to_frame()
    assert list(frame.columns) == ["item", "x", "y", "layer", "kind", "size"]
    assert len(frame) == len(layout.positions)
    assert frame["size"].sum() == transformer.nx.number_of_nodes()
    data = json.loads(json.dumps(layout.to_dict()))
    assert len(data["items"]) == len(layout.positions) and len(data["edges"]) == len(layout.edges)
    xmin, ymin, xmax, ymax = layout.bbox()
    assert ymax == 0.0 and ymin == -max(layout.layers.values())
    assert all(xmin <= x <= xmax for x, _ in layout.positions.values())
    assert layout.key == (layout.version, tuple(sorted(layout.collapsed)))


# --------------------------------------------------------------------------- straight paths, lanes, boxes

# crossings of `layered(graph)` in docs/performance.md (before straight placement): (weights folded, as nodes)
CROSSINGS_TABLE = {
    "mlp": (0, 0),
    "resnet18": (0, 0),
    "mobilenetv2": (0, 236),
    "transformer": (0, 2),
    "detection_head": (7, 30),
    "control_flow": (0, 0),
    "custom_domain": (0, 0),
    "qdq_cnn": (0, 0),
}
BOX_MODELS = ["resnet18", "transformer", "detection_head", "mobilenetv2"]


def _silu_cnn(stages: int = 2) -> onnx.ModelProto:
    """A small YOLO-style CNN: Conv -> Sigmoid -> Mul (SiLU) blocks, C2f-like concat skips, one FPN skip."""
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[onnx.NodeProto] = []
    weights: list[onnx.TensorProto] = []

    def silu_conv(x: str, name: str, cin: int, cout: int) -> str:
        w = numpy_helper.from_array(np.zeros((cout, cin, 3, 3), np.float32), f"{name}.w")
        weights.append(w)
        c, sig, y = f"{name}.c", f"{name}.s", f"{name}.y"
        nodes.append(helper.make_node("Conv", [x, w.name], [c], name=f"/{name}/conv/Conv", pads=[1] * 4))
        nodes.append(helper.make_node("Sigmoid", [c], [sig], name=f"/{name}/act/Sigmoid"))
        nodes.append(helper.make_node("Mul", [c, sig], [y], name=f"/{name}/act/Mul"))
        return f"{name}.y"

    x = silu_conv("images", "stem", 3, 8)
    first = None
    for s in range(stages):
        x = silu_conv(x, f"s{s}.down", 8, 8)
        b = silu_conv(silu_conv(x, f"s{s}.m0", 8, 8), f"s{s}.m1", 8, 8)
        nodes.append(helper.make_node("Concat", [x, b], [f"s{s}.cat"], name=f"/s{s}/Concat", axis=1))
        x = silu_conv(f"s{s}.cat", f"s{s}.out", 16, 8)
        first = first or x
    nodes.append(helper.make_node("Concat", [first, x], ["fpn"], name="/fpn/Concat", axis=1))
    y = silu_conv("fpn", "head", 16, 4)
    graph = helper.make_graph(
        nodes,
        "silu_cnn",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 4, 32, 32])],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _check_boxes(layout: lay.Layout) -> None:
    """Boxes of a layer keep box_gap apart, so do bends and boxes; layers have room for the tallest box."""
    assert layout.sizes and set(layout.sizes) == set(layout.positions)
    assert layout.vgap >= max(h for _, h in layout.sizes.values()) + layout.box_gap - 1e-9
    rows: dict[int, list[tuple[float, float, str]]] = {}
    for item, (x, _) in layout.positions.items():
        rows.setdefault(layout.layers[item], []).append((x, layout.sizes[item][0], item))
    for row in rows.values():
        row.sort()
        for (xa, wa, a), (xb, wb, b) in itertools.pairwise(row):
            assert xb - xa >= (wa + wb) / 2 + layout.box_gap - 1e-9, (a, b)
    for edge, points in layout.edge_points.items():
        for x, y in points[1:-1]:
            for bx, w, item in rows.get(round(-y / layout.vgap), ()):
                assert abs(x - bx) >= w / 2 + layout.box_gap - 1e-9, (edge, item)


def _boxes_crossed(layout: lay.Layout, edge: tuple[str, str]) -> list[str]:
    """Items (other than its ends) whose box the edge's polyline passes through, sampled finely."""
    items = [i for i in layout.positions if i not in edge]
    centres = np.array([layout.positions[i] for i in items])
    half = np.array([layout.sizes[i] for i in items]) / 2
    points = np.array(layout.edge_points[edge])
    t = np.linspace(0.0, 1.0, 41)[:, None]
    samples = np.concatenate([a + t * (b - a) for a, b in itertools.pairwise(points)])
    inside = (np.abs(samples[:, None, :] - centres[None, :, :]) < half[None, :, :] - 1e-9).all(axis=2)
    return [items[k] for k in np.flatnonzero(inside.any(axis=0))]


def test_a_silu_block_is_one_straight_column_with_the_skip_edge_beside_it() -> None:
    graph = load(_silu_cnn())
    for node_size in (None, "auto"):
        layout = lay.layered(graph, node_size=node_size)
        for block in ("stem", "s0.down", "s0.m1", "s1.out", "head"):
            conv, sigmoid, mul = (f"/{block}/conv/Conv", f"/{block}/act/Sigmoid", f"/{block}/act/Mul")
            x = layout.positions[conv][0]
            assert layout.positions[sigmoid][0] == x and layout.positions[mul][0] == x, block
            skip = layout.edge_points[(conv, mul)]
            assert len(skip) == 3  # one bend, on the Sigmoid's layer
            assert abs(skip[1][0] - x) >= layout.hgap - 1e-9  # beside the column, not on it
        _check_drawing(layout)
    # the whole backbone is one column: every SiLU block and concat sits on the stem's x
    column = layout.positions["/stem/conv/Conv"][0]
    assert all(layout.positions[n][0] == column for n in graph.nx if n.endswith(("/Conv", "/Mul", "/Concat")))


def test_long_skip_edges_run_as_side_lanes_and_pass_no_box() -> None:
    graph = load(_silu_cnn())
    layout = lay.layered(graph, node_size="auto")
    long_edges = [e for e, points in layout.edge_points.items() if len(points) > 3]
    assert long_edges  # the C2f concat skips and the FPN skip
    column = layout.positions["/stem/conv/Conv"][0]
    for edge in long_edges:
        bends = [x for x, _ in layout.edge_points[edge][1:-1]]
        assert len(set(bends)) == 1 and bends[0] != column  # one straight lane beside the column
        assert _boxes_crossed(layout, edge) == []
    for name in ("resnet18", "transformer"):
        # as drawn: a lane runs straight past its layer's boxes and curves between layers
        zoo_graph = load(f"zoo:{name}")
        zoo_layout = lay.layered(zoo_graph, node_size="auto")
        assert _drawn_edge_samples_in_boxes(zoo_graph, zoo_layout) == 0, name


def _drawn_edge_samples_in_boxes(graph: Any, layout: lay.Layout) -> int:
    """How many points of the figure's drawn edge curves lie inside a box."""
    from explorer.views.figures import EDGES, box_geometry, graph_figure

    geo = box_geometry(graph, layout)
    trace = graph_figure(graph, layout).data[EDGES]
    points = np.array([trace.x, trace.y], dtype=float).T
    points = points[~np.isnan(points[:, 0])]
    inside_x = np.abs(points[:, None, 0] - geo.x[None]) < geo.width[None] / 2 - 1e-6
    inside_y = np.abs(points[:, None, 1] - geo.y[None]) < geo.height[None] / 2 - 1e-6
    return int((inside_x & inside_y).sum())


def test_the_main_path_of_a_resnet_block_is_straight() -> None:
    layout = lay.layered(load("zoo:resnet18"), node_size="auto")
    for block in ("layer1/layer1.0", "layer2/layer2.0", "layer4/layer4.1"):
        path = ["conv1/Conv", "bn1/BatchNormalization", "relu/Relu", "conv2/Conv", "bn2/BatchNormalization"]
        path = [f"/{block}/{p}" for p in path] + [f"/{block}/Add", f"/{block}/relu/Relu_1"]
        assert len({layout.positions[n][0] for n in path}) == 1, block
    downsample = "/layer2/layer2.0/downsample/downsample.0/Conv"
    assert layout.positions[downsample][0] != layout.positions["/layer2/layer2.0/conv1/Conv"][0]


def test_a_transformer_layer_runs_down_one_column_with_residuals_beside_it(transformer: ModelGraph) -> None:
    layout = lay.layered(transformer)
    layer = "/encoder/layers.0"
    path = ["norm1/LayerNormalization", "self_attn/q_proj/Add", "self_attn/out_proj/Add", "Add"]
    path += ["norm2/LayerNormalization", "activation/Gelu", "linear2/Add", "Add_1"]
    assert len({layout.positions[f"{layer}/{p}"][0] for p in path}) == 1
    column = layout.positions[f"{layer}/Add"][0]
    residuals = [e for e in layout.edges if e[1] in (f"{layer}/Add", f"{layer}/Add_1") and e[0] not in path]
    residuals = [e for e in residuals if len(layout.edge_points[e]) > 2]
    assert len(residuals) == 2
    assert all(x != column for e in residuals for x, _ in layout.edge_points[e][1:-1])


def test_edges_from_one_item_share_a_lane_where_they_run_side_by_side() -> None:
    g = nx.MultiDiGraph()
    g.add_node("input:x", kind="input", op_type="Input", scope=())
    chain = [f"r{i}" for i in range(8)]
    for i, node in enumerate(chain):
        g.add_node(node, kind="op", op_type="Relu", scope=())
        g.add_edge(chain[i - 1] if i else "input:x", node, key=f"t{i}")
    for far in ("r4", "r7"):  # two skip edges from r0, to consumers at different depths
        g.add_edge("r0", far, key=f"skip_{far}", slots=(1,))
    layout = lay.layered(ModelGraph(g, proto=onnx.GraphProto(name="skips"), adapter=ONNX))
    short, long = layout.edge_points[("r0", "r4")], layout.edge_points[("r0", "r7")]
    assert [x for x, _ in short[1:-1]] == [x for x, _ in long[1 : len(short) - 1]]  # one lane while together
    assert len({x for x, _ in long[1:-1]}) == 1
    assert len({layout.positions[n][0] for n in chain}) == 1
    _check_drawing(layout)


@pytest.mark.parametrize("name", BOX_MODELS)
def test_boxes_of_given_sizes_never_overlap_on_zoo_models(name: str) -> None:
    graph = load(f"zoo:{name}")

    def size(data: dict) -> tuple[float, float]:
        text = data.get("op_type") or data.get("name") or "?"
        return 0.3 + 0.09 * len(str(text)), 0.25 + 0.1 * len(data.get("weights") or ())

    for view in (graph, graph.with_constant_nodes()):
        for node_size in ("auto", size):
            layout = lay.layered(view, node_size=node_size)
            _check_boxes(layout)
            _check_drawing(layout)
    collapsed = lay.layered(graph, collapse=1, node_size="auto")
    _check_boxes(collapsed)
    one_line = lay.label_size({"kind": "op", "op_type": "Relu"})
    assert all(collapsed.sizes[g][1] > one_line[1] for g in collapsed.groups)  # name line plus op mix


@pytest.mark.parametrize("name", sorted(CROSSINGS_TABLE))
def test_crossings_on_zoo_models_are_no_worse_than_the_table(name: str) -> None:
    graph = load(f"zoo:{name}")
    for view, most in zip((graph, graph.with_constant_nodes()), CROSSINGS_TABLE[name], strict=True):
        straight = lay.layered(view)
        assert lay.count_crossings(straight) <= most
        assert lay.count_crossings(straight) == lay.count_crossings(lay.layered(view, straight=False))
        assert lay.count_crossings(lay.layered(view, node_size="auto")) <= most


def test_node_sizes_are_part_of_the_cache_key_and_bad_sizes_are_refused(transformer: ModelGraph) -> None:
    lay.clear_cache()
    small = dict.fromkeys(transformer.nx, (0.5, 0.2))
    wide = dict.fromkeys(transformer.nx, (2.0, 0.2))
    first = lay.layered(transformer, node_size=small)
    assert lay.layered(transformer, node_size=dict(small)) is first
    other = lay.layered(transformer, node_size=wide)
    assert other is not first and other.sizes["input:input_ids"] == (2.0, 0.2)
    width = max(x for x, _ in other.positions.values()) - min(x for x, _ in other.positions.values())
    assert width > max(x for x, _ in first.positions.values()) - min(x for x, _ in first.positions.values())
    by_rule = lay.layered(transformer, node_size=lambda data: (0.5, 0.2))
    assert lay.layered(transformer, node_size=lambda data: (0.5, 0.2)) is by_rule  # same sizes, same layout
    assert by_rule.positions == first.positions
    assert lay.layered(transformer, node_size=lambda data: (0.5, 0.3)) is not by_rule
    assert lay.layered(transformer).sizes == {}
    tall = lay.layered(transformer, node_size=lambda data: (0.5, 3.0))
    assert tall.vgap == 3.0 + lay.BOX_GAP and tall.positions["input:input_ids"][1] == 0.0
    with pytest.raises(ValueError, match="input:input_ids"):
        lay.layered(transformer, node_size={"input:input_ids": (-1.0, 0.2)})
    with pytest.raises(TypeError, match="width, height"):
        lay.layered(transformer, node_size=lambda data: 1.0)
    with pytest.raises(TypeError, match="input:input_ids"):
        lay.layered(transformer, node_size={"input:input_ids": 1.0})
    with pytest.raises(TypeError, match="node_size"):
        lay.layered(transformer, node_size="big")
    with pytest.raises(ValueError, match="straight"):
        lay.layered(transformer, node_size="auto", straight=False)


@pytest.mark.parametrize("name", ["resnet18", "transformer"])
def test_expand_collapse_and_previous_keep_boxes_apart(name: str) -> None:
    graph = load(f"zoo:{name}")
    closed = lay.layered(graph, collapse=1, node_size="auto")
    for group in closed.groups:
        opened = lay.expand(closed, graph, group)
        assert opened.node_size == "auto"
        _check_boxes(opened)
        _check_drawing(opened)
        assert lay.collapse_group(opened, graph, closed.scopes[group]) is closed
    full = lay.layered(graph, node_size="auto")
    scope = next(iter(closed.scopes.values()))
    boxed = lay.collapse_group(full, graph, scope)
    _check_boxes(boxed)
    _check_drawing(boxed)
    some = next(n for n, kind in graph.nx.nodes(data="kind") if kind == "op" and graph.nx.out_degree(n) == 1)
    stable = lay.layered(_edited(graph, some), previous=full, node_size="auto")
    _check_boxes(stable)
    _check_drawing(stable)

"""Graph inputs and outputs beside what reads and writes them; a decoder opens as its layers.

A decoder's ``past_key_values.N`` / ``present.N`` sit at layer N (not in one row at the top and
one at the bottom), inside layer N's box while it is collapsed, and a CNN's one input stays on top.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from explorer import load, zoo
from explorer.core.graph import ModelGraph
from explorer.views import layout as lay
from explorer.views.node_boxes import group_data

_LAYER = re.compile(r"/layers\.(\d+)/")


@pytest.fixture(scope="module")
def llama() -> ModelGraph:
    """The zoo's standard-ONNX decoder, 4 layers (295 nodes: opens uncollapsed)."""
    return load(zoo.build("llama", layers=4))


@pytest.fixture(scope="module")
def llama8() -> ModelGraph:
    """8 layers: big enough to open collapsed."""
    return load(zoo.build("llama", layers=8))


def _kv_inputs(graph: ModelGraph) -> list[str]:
    return sorted(n for n in graph.nx if n.startswith("input:past_key_values."))


def _kv_outputs(graph: ModelGraph) -> list[str]:
    return sorted(n for n in graph.nx if n.startswith("output:present."))


def _index(name: str) -> int:
    return int(name.split(".")[1])


def _check_flat(graph: ModelGraph, reader_op: str) -> None:
    """Each KV input one layer above its layer's reader, each KV output one below its producer."""
    layout = lay.layered(graph, node_size="auto")
    pitch = layout.vgap
    for name in _kv_inputs(graph):
        n = _index(name)
        readers = set(graph.nx.successors(name))
        assert any(f"/layers.{n}/" in r for r in readers), name
        if reader_op:
            assert any(graph.nx.nodes[r].get("op_type") == reader_op for r in readers), (name, readers)
        first = min(readers, key=layout.layers.__getitem__)  # the mask's Shape may read layer 0's too
        assert layout.layers[name] == layout.layers[first] - 1, (name, first)
        assert layout.positions[name][1] == pytest.approx(layout.positions[first][1] + pitch)
        if all(f"/layers.{n}/" in r for r in readers):
            assert n == 0 or layout.layers[name] > 1, name  # beside layer n, not the top row
    for name in _kv_outputs(graph):
        (producer,) = set(graph.nx.predecessors(name))
        assert f"/layers.{_index(name)}/" in producer
        assert layout.layers[name] == layout.layers[producer] + 1, (name, producer)
    rows = {layout.layers[name] for name in _kv_inputs(graph)}
    assert len(rows) >= len(_kv_inputs(graph)) // 2  # a row per layer, not one row of all of them


def _check_layer_boxes(graph: ModelGraph, layout: lay.Layout, layers: int) -> None:
    """One box per decoder layer, in one straight column, holding its own KV inputs and outputs."""
    boxes = {gid for gid in layout.groups if re.fullmatch(r"scope:model/layers\.\d+", gid)}
    assert boxes == {f"scope:model/layers.{n}" for n in range(layers)}
    assert len({round(layout.positions[b][0], 6) for b in boxes}) == 1  # the main path is straight
    order = sorted(boxes, key=layout.layers.__getitem__)
    assert order == [f"scope:model/layers.{n}" for n in range(layers)]
    for name in [*_kv_inputs(graph), *_kv_outputs(graph)]:
        item = layout.item_of[name]
        if item != name:  # drawn in its layer's box
            assert item == f"scope:model/layers.{_index(name)}", name
    inside = sum(layout.item_of[name] != name for name in _kv_inputs(graph))
    assert inside >= len(_kv_inputs(graph)) - 1  # all but the one the mask's shape also reads
    assert all(layout.item_of[name] != name for name in _kv_outputs(graph))
    for box in boxes:  # inputs and outputs in a box are no ops
        ops = group_data(graph, layout.scopes[box], layout.groups[box])["ops"]
        assert "input" not in ops and "output" not in ops


def test_llama_kv_inputs_beside_their_layer(llama: ModelGraph) -> None:
    _check_flat(llama, "")


def test_llama_opens_as_its_layers(llama8: ModelGraph) -> None:
    depth = lay.auto_collapse(llama8)
    assert depth == 2
    layout = lay.layered(llama8, collapse=depth, node_size="auto")
    _check_layer_boxes(llama8, layout, 8)
    assert layout.layers["input:input_ids"] == 0
    assert layout.kinds["output:logits"] == "output"


def test_opening_a_layer_shows_its_kv_beside_the_attention(llama8: ModelGraph) -> None:
    layout = lay.layered(llama8, collapse=2, node_size="auto")
    opened = lay.expand(layout, llama8, "scope:model/layers.5")
    assert "scope:model/layers.5/self_attn" in opened.groups
    assert opened.item_of["input:past_key_values.5.value"] == "scope:model/layers.5/self_attn"
    attn = lay.expand(opened, llama8, "scope:model/layers.5/self_attn")
    name = "input:past_key_values.5.value"
    assert attn.item_of[name] == name
    (reader,) = set(llama8.nx.successors(name))
    assert attn.layers[name] == attn.layers[reader] - 1
    assert attn.layers["scope:model/layers.4"] < attn.layers[name] < attn.layers["scope:model/layers.6"]
    assert lay.collapse_group(attn, llama8, ("model", "layers.5", "self_attn")) is opened


def test_genai_decoder_kv_beside_group_query_attention(genai_decoder_int4: Path) -> None:
    graph = load(genai_decoder_int4)
    _check_flat(graph, "GroupQueryAttention")
    depth = lay.auto_collapse(graph, max_items=20)
    assert depth == 2
    layers = len(_kv_inputs(graph)) // 2
    _check_layer_boxes(graph, lay.layered(graph, collapse=depth, node_size="auto"), layers)


@pytest.mark.parametrize("collapse", [None, 1, 2])
def test_cnn_input_stays_on_top(collapse: int | None) -> None:
    graph = load("zoo:mobilenetv2")
    layout = lay.layered(graph, collapse=collapse, node_size="auto")
    assert layout.item_of["input:input"] == "input:input"
    assert layout.layers["input:input"] == 0
    assert min(layout.layers.values()) == 0
    (output,) = (n for n, kind in graph.nx.nodes(data="kind") if kind == "output")
    assert layout.item_of[output] == output
    assert layout.layers[output] == max(layout.layers.values())


def test_a_layer_box_counts_its_ops_and_names_the_kv_inside(llama8: ModelGraph) -> None:
    from explorer.views.figures.items import node_hover
    from explorer.views.node_boxes import box_text

    layout = lay.layered(llama8, collapse=2, node_size="auto")
    box = "scope:model/layers.5"
    members = layout.groups[box]
    kv = [m for m in members if llama8.nx.nodes[m].get("kind") in ("input", "output")]
    assert {"input:past_key_values.5.key", "output:present.5.value"} <= set(kv)
    header = box_text(group_data(llama8, layout.scopes[box], members)).header
    assert header == f"layers.5 · {len(members) - len(kv)} ops"  # the KV cache drawn inside is no op
    hover = node_hover(llama8, layout, box).split("<br>")
    assert hover[1].startswith(f"{len(members) - len(kv)} ops: ")
    assert "past_key_values.5.key" in hover[2] and hover[-1] == "<i>click to expand</i>"

"""Name scopes: the dynamo exporter's metadata reads as the classic exporter's node names do."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import helper

from explorer import load, zoo
from explorer.core.scopes import TORCH_NAME_SCOPES, node_scope, scope_of, torch_name_scopes
from explorer.onnx_adapter.graph_builder import build_graph
from explorer.views import layout as lay
from tests.explorer.dynamo_names import dynamo_style, qualified_names

SCOPED = ("resnet18", "mobilenetv2", "transformer", "detection_head", "yolov8")


def _scopes_by_output(model: onnx.ModelProto) -> dict[tuple[str, ...], tuple[str, ...]]:
    graph = build_graph(model)
    return {tuple(d["outputs"]): d["scope"] for _, d in graph.nx.nodes(data=True) if d["kind"] == "op"}


@pytest.mark.parametrize("name", SCOPED)
def test_dynamo_metadata_gives_the_classic_exporters_scopes(name: str) -> None:
    classic = zoo.build(name)
    dynamo = dynamo_style(classic)
    assert all(scope_of(n.name) == () for n in dynamo.graph.node)  # node_Conv_3: the name says nothing
    expected = _scopes_by_output(classic)
    assert any(len(s) >= 2 for s in expected.values())
    assert _scopes_by_output(dynamo) == expected


def test_qualified_names_round_trip_through_the_metadata() -> None:
    scope = ("features", "features.1", "conv", "conv.0", "conv.0.0")
    names = qualified_names(scope)
    assert names == ["features", "features.1", "features.1.conv", "features.1.conv.0", "features.1.conv.0.0"]
    assert torch_name_scopes(repr(["", *names, "conv2d_3"])) == scope
    assert torch_name_scopes("['', 'encoder', 'encoder.layer.0', 'encoder.layer.0.attention', 'sdpa']") == (
        "encoder",
        "layer.0",
        "attention",
    )


def test_nodes_outside_any_module_and_bad_metadata() -> None:
    model = dynamo_style(zoo.build("transformer"), outside=3)
    first = {n.name for n in model.graph.node[:3]}
    assert any(scope_of(n.name, n.output) for n in zoo.build("transformer").graph.node[:3])
    scopes = {node.name: node_scope(node) for node in model.graph.node}
    assert {scopes[name] for name in first} == {()}  # dynamo's _empty_nn_module_stack pseudo-module
    node = helper.make_node("Relu", ["x"], ["y"], name="/block/Relu")
    helper.set_metadata_props(node, {TORCH_NAME_SCOPES: "not a list"})
    assert node_scope(node) == ("block",)  # unreadable metadata: the name's scope
    helper.set_metadata_props(node, {TORCH_NAME_SCOPES: "['', 'linear']"})
    assert node_scope(node) == ()  # an op of the root module


@pytest.mark.torch
def test_torch_zoo_exports_open_with_their_repeated_blocks(tmp_path: Path) -> None:
    """Today's PyTorch exporter: scopes spelled as the classic exporter does, layers collapsed first."""
    torch_zoo = pytest.importorskip("explorer.zoo.torch_exports")
    pytest.importorskip("torch")
    bert = load(torch_zoo.export("bert_encoder", tmp_path))
    scopes = {s for _, s in bert.nx.nodes(data="scope") if s}
    assert ("encoder", "layer.0", "attention") in {s[:3] for s in scopes}
    assert not any("encoder.layer" in part for s in scopes for part in s)  # not the qualified names
    depth = lay.auto_collapse(bert, max_items=60)
    layout = lay.layered(bert, collapse=depth)
    assert set(layout.groups) == {"scope:encoder/layer.0", "scope:encoder/layer.1"}

"""Lowering provenance as Model Explorer's sync-navigation mapping: one entry per group of ONNX nodes
lowered together, every id in one entry (the web app keeps only an id's last entry)."""

from __future__ import annotations

import importlib.util

import pytest

from explorer import load
from explorer.core.errors import UsageError
from explorer.lower import relax_pipeline
from explorer.overlays.sync_mapping import mapping_step, sync_mapping


def check_entries(graph, lowered, mapping) -> list[dict]:
    entries = mapping["mappingEntries"]
    lefts = [n for e in entries for n in e["leftNodeIds"]]
    rights = [n for e in entries for n in e["rightNodeIds"]]
    assert len(lefts) == len(set(lefts)) and len(rights) == len(set(rights))  # each id in one entry
    names = {graph.nx.nodes[n]["name"] for n in graph.op_nodes()}
    assert set(lefts) <= names  # Model Explorer's ONNX adapter ids: the node names
    assert set(rights) <= set(lowered.nx.nodes)
    for entry in entries:
        for right in entry["rightNodeIds"]:
            assert set(lowered.nx.nodes[right]["origin"]) & set(entry["leftNodeIds"])
    assert mapping["disableMappingFallback"] is True
    return entries


def test_mlp_maps_onnx_nodes_to_relax_bindings_and_to_tvm_kernels() -> None:
    graph = load("zoo:mlp")
    timeline = relax_pipeline(graph, None, "zero")
    imported = check_entries(graph, timeline[0].graph, sync_mapping(graph, timeline[0].graph))
    assert {"leftNodeIds": ["/fc1/Gemm"], "rightNodeIds": ["lv1", "lv2", "lv3"]} in imported
    step = mapping_step(timeline)
    assert step.name == "FuseTIR"
    kernels = check_entries(graph, step.graph, sync_mapping(graph, step.graph))
    assert [e["leftNodeIds"] for e in kernels] == [["/Flatten"], ["/fc1/Gemm"], ["/fc2/Gemm"], ["/fc3/Gemm"]]


def test_resnet18_groups_a_fused_kernel_with_the_onnx_nodes_it_names() -> None:
    graph = load("zoo:resnet18")
    timeline = relax_pipeline(graph, None, "zero")
    step = mapping_step(timeline, "FuseTIR")
    entries = check_entries(graph, step.graph, sync_mapping(graph, step.graph))
    assert entries[0] == {"leftNodeIds": ["/conv1/Conv"], "rightNodeIds": ["lv"]}
    residual = {
        "leftNodeIds": [
            "/layer2/layer2.0/bn2/BatchNormalization",
            "/layer2/layer2.0/downsample/downsample.1/BatchNormalization",
            "/layer2/layer2.0/Add",
        ],
        "rightNodeIds": ["lv6#2"],
    }
    assert residual in entries  # one kernel: both batch norms and the residual add
    assert len(entries) == 36 < len(graph.op_nodes())


def test_a_step_the_lowering_has_not_is_refused_naming_the_steps() -> None:
    timeline = relax_pipeline(load("zoo:mlp"), None, "zero")
    with pytest.raises(UsageError, match="no step 'NoSuchPass' in the lowering; its steps are: relax import"):
        mapping_step(timeline, "NoSuchPass")


@pytest.mark.skipif(importlib.util.find_spec("iree") is None, reason="needs the iree extra")
def test_iree_dispatches_at_flow_carry_the_onnx_nodes_they_fused() -> None:
    from explorer.lower.iree.iree_pipeline import iree_pipeline

    graph = load("zoo:mlp")
    step = mapping_step(iree_pipeline(graph, "llvm-cpu", "phases"))
    assert step.name == "flow"
    entries = check_entries(graph, step.graph, sync_mapping(graph, step.graph))
    assert ["/fc1/Gemm", "/relu1/Relu"] in [e["leftNodeIds"] for e in entries]

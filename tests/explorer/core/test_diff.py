"""explorer.core.diff: matching across renames, change detection, fusions, summaries."""

from __future__ import annotations

import json

import onnx
import pytest

from explorer import load, zoo
from explorer.core.diff import GraphDiff, diff


def _renamed(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same model with every node name dropped and every intermediate tensor renamed."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    keep = {v.name for v in copy.graph.input} | {v.name for v in copy.graph.output}
    keep |= {t.name for t in copy.graph.initializer}
    mapping = {}
    for i, node in enumerate(copy.graph.node):
        node.name = ""
        for j, out in enumerate(node.output):
            if out and out not in keep:
                mapping[out] = f"t{i}_{j}"
                node.output[j] = mapping[out]
    for node in copy.graph.node:
        for j, name in enumerate(node.input):
            node.input[j] = mapping.get(name, name)
    return copy


def test_identical_models_are_all_kept() -> None:
    d = diff(load("zoo:resnet18"), load("zoo:resnet18"))
    assert d.is_empty and len(d.kept) == 69 - 0 and not d.fusions and d.op_deltas == {}
    assert d.matched_by == {"name": 69}


def test_structure_matches_nodes_when_names_and_tensors_are_gone() -> None:
    model = zoo.build("resnet18", width=8, image_size=64)
    d = diff(load(model), load(_renamed(model)))
    assert not d.added and not d.removed and not d.changed
    assert len(d.kept) == len(model.graph.node)
    assert d.matched_by.get("structure", 0) > 0


def test_weight_change_is_detected_and_counted() -> None:
    a = zoo.build("mlp")
    b = zoo.build("mlp")
    weight = b.graph.initializer[0]
    weight.raw_data = bytes(len(weight.raw_data))
    d = diff(load(a), load(b))
    assert [(c.op_type, c.what) for c in d.changed] == [("Gemm", ("weights",))]
    assert d.weight_bytes_changed == len(weight.raw_data)


def test_attribute_change_is_detected() -> None:
    a = zoo.build("resnet18", width=8, image_size=64)
    b = onnx.ModelProto()
    b.CopyFrom(a)
    pool = next(n for n in b.graph.node if n.op_type == "MaxPool")
    for attr in pool.attribute:
        if attr.name == "kernel_shape":
            attr.ints[:] = [2, 2]
    d = diff(load(a), load(b))
    assert [(c.before, c.what) for c in d.changed] == [(pool.name, ("attributes",))]


def test_removed_identity_does_not_mark_its_consumer_changed() -> None:
    from explorer.passes.pipeline import run_pipeline

    timeline = run_pipeline("zoo:mobilenetv2", "fuse_bn_into_conv", verify=False)
    d = timeline.diff(1)
    assert all(c.op_type == "Conv" for c in d.changed)  # Clip/Add after the folded BNs are not "changed"


def test_to_dict_has_the_cli_keys_and_is_json() -> None:
    d = diff(load("zoo:mlp"), load("zoo:mlp"))
    data = json.loads(json.dumps(d.to_dict()))
    assert {"added", "removed", "modified", "kept", "fusions", "op_deltas"} <= set(data)
    assert data["kept"] == 6


def test_frame_and_status_maps() -> None:
    d = diff(load("zoo:mlp"), load("zoo:mlp"))
    assert set(d.to_frame().status) == {"kept"}
    assert set(d.status_after().values()) == {"kept"}


def test_diff_is_frozen() -> None:
    d = diff(load("zoo:mlp"), load("zoo:mlp"))
    assert isinstance(d, GraphDiff)
    with pytest.raises(AttributeError):
        d.added = ()  # type: ignore[misc]

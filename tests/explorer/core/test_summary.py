"""ModelSummary: the op histogram is exactly the node list's, and the rest is right."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from explorer import load, zoo
from tests.conftest import tiny_model


@pytest.mark.parametrize("name", zoo.names())
def test_histogram_equals_the_node_list(name: str) -> None:
    model = zoo.build(name)
    summary = load(model).summary()
    assert summary.ops == dict(Counter(n.op_type for n in model.graph.node))
    assert summary.nodes == len(model.graph.node)


def test_tiny_model_summary() -> None:
    summary = load(tiny_model()).summary()
    assert summary.params == 4 * 3 + 3
    assert summary.param_bytes == (4 * 3 + 3) * 4
    assert summary.opsets == {"ai.onnx": 17}
    assert [t.to_dict() for t in summary.inputs] == [{"name": "x", "dtype": "float32", "shape": ["batch", 4]}]
    assert summary.dynamic_dims == ("batch",)
    assert summary.subgraphs == 0 and summary.unknown_ops == () and summary.custom_domains == ()
    assert summary.shapes_known == 1.0


def test_resnet18_params_match_the_real_architecture() -> None:
    model = zoo.build("resnet18")
    expected = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    summary = load(model).summary()
    assert summary.params == expected
    assert summary.param_bytes == expected * 4


def test_contrib_ops_are_told_apart_from_unknown_ops() -> None:
    summary = load("zoo:custom_domain").summary()
    assert "com.microsoft::FusedMatMul" in summary.runtime_ops
    assert summary.unknown_ops == ()  # the local function Swish is defined by the model
    assert "com.microsoft" in summary.custom_domains


def test_to_dict_is_json_and_to_frame_is_the_histogram() -> None:
    summary = load("zoo:resnet18").summary()
    data = json.loads(summary.to_json())
    assert data["ops"]["Conv"] == 20
    frame = summary.to_frame()
    assert dict(zip(frame.op_type, frame["count"], strict=True)) == summary.ops


def test_text_summary_reads_well() -> None:
    text = load("zoo:control_flow").summary().to_text()
    assert "subgraphs" in text and "inputs" in text and "ops" in text


def test_summary_is_frozen() -> None:
    summary = load(tiny_model()).summary()
    with pytest.raises(AttributeError):
        summary.nodes = 0  # type: ignore[misc]

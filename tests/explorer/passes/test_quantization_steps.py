"""The ort-quant passes on their own: fixed shapes, QNN preprocessing, QDQ quantisation."""

from __future__ import annotations

import pytest

from explorer import load, zoo
from explorer.passes import get_pass
from explorer.passes.pipeline import run_pipeline


def test_fix_shapes_changes_only_the_io_types_and_is_a_change() -> None:
    shapes = {"input": [2, 1, 28, 28]}
    timeline = run_pipeline(load(zoo.build("mlp")), ["ort-quant:fix_shapes"], input_shapes=shapes)
    step = timeline[1]  # the graph was loaded dynamic; the verification runs both on batch 2
    assert step.changed and step.max_abs_diff == 0.0
    assert step.log[0] == "input: ['batch', 1, 28, 28] -> [2, 1, 28, 28]"
    assert step.graph.nx.edges["input:input", "/Flatten", "input"]["shape"] == (2, 1, 28, 28)


def test_fix_shapes_names_a_missing_input() -> None:
    timeline = run_pipeline(
        zoo.build("mlp"), [("ort-quant:fix_shapes", {"input_shapes": {"images": [1, 3]}})]
    )
    assert "no graph input 'images'" in timeline[1].error


def test_preprocess_keeps_metadata_and_qdq_quantises() -> None:
    model = zoo.build("resnet18")
    model.metadata_props.add(
        key="author", value="tests"
    )  # ONNX Runtime 1.32's preprocessing trips on metadata
    graph = load(model, input_shapes={"input": [1, 3, 224, 224]})
    timeline = run_pipeline(
        graph,
        ["ort-quant:qnn_preprocess", ("ort-quant:qnn_qdq", {"samples": 2})],
        input_shapes={"input": [1, 3, 224, 224]},
    )
    assert timeline[1].error is None
    assert {p.key: p.value for p in timeline[1].graph.model.metadata_props}["author"] == "tests"
    qdq = timeline[2]
    assert qdq.changed and qdq.graph.op_counts["QuantizeLinear"] > 0 and qdq.max_abs_diff > 0


def test_a_bad_activation_type_is_refused() -> None:
    timeline = run_pipeline(zoo.build("mlp"), [("ort-quant:qnn_qdq", {"activation_type": "float8"})])
    assert "activation_type must be one of" in timeline[1].error
    assert get_pass("ort-quant:qnn_qdq").family == "ort-quant"


@pytest.mark.parametrize("name", ["ort-quant:fix_shapes", "ort-quant:qnn_preprocess", "ort-quant:qnn_qdq"])
def test_every_step_has_a_learners_explanation(name: str) -> None:
    assert len(get_pass(name).description) > 200

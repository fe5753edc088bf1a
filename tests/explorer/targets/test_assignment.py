"""The prediction beside ONNX Runtime's own placement."""

from __future__ import annotations

import pytest

from explorer import load, zoo
from explorer.targets import compare_assignment, get_target, partition, real_assignment

from .models import unknown_op


@pytest.mark.parametrize("name", zoo.names())
def test_cpu_prediction_matches_onnx_runtime_on_every_zoo_model(name: str) -> None:
    graph = load(zoo.build(name))
    predicted = partition(graph, get_target("ort-cpu"))
    assignment = real_assignment(graph)
    result = compare_assignment(predicted, assignment, "CPUExecutionProvider")
    assert result["agree"], result
    assert assignment.error is None and set(assignment.providers) == set(predicted.support)


def test_a_node_without_a_kernel_is_the_session_error_both_predict() -> None:
    graph = load(unknown_op())
    predicted = partition(graph, get_target("ort-cpu"))
    assignment = real_assignment(graph)
    assert "Frobnicate" in (assignment.error or "") and predicted.fallback_nodes == ("frob",)
    assert compare_assignment(predicted, assignment, "CPUExecutionProvider")["agree"]

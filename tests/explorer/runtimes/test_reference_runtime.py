"""ONNX's reference implementation as a runtime: it agrees with ONNX Runtime, refuses what it lacks by name,
and its profile lands on the nodes (the runtime that followed docs/architecture.md's "Add a backend")."""

from __future__ import annotations

import pytest

from explorer import load
from explorer.core.errors import RuntimeUnsupportedError
from explorer.runtimes import bench
from explorer.runtimes.profile import profile
from explorer.runtimes.reference_runtime import OnnxReferenceRuntime
from explorer.runtimes.registry import RUNTIMES, get_runtime

TAKEN = ["mlp", "mobilenetv2", "transformer", "llama", "detection_head", "control_flow", "elementwise"]


def test_the_registry_makes_it_and_the_runtimes_tab_offers_it() -> None:
    runtime = get_runtime("onnx-reference")
    assert isinstance(runtime, OnnxReferenceRuntime) and runtime.name == "onnx-reference"
    assert RUNTIMES["onnx-reference"].menu and RUNTIMES["onnx-reference"].flag_options({"threads": 2}) == {}


@pytest.mark.parametrize("name", TAKEN)
def test_it_agrees_with_onnx_runtime_on_the_models_it_takes(name: str) -> None:
    report = bench(load(f"zoo:{name}"), ["ort", "onnx-reference"], min_runs=1, min_seconds=0.0, warmup=0)
    reference = report.results[1]
    assert reference.runtime == "onnx-reference" and reference.agrees, (name, reference.max_abs_err)


@pytest.mark.parametrize(
    ("name", "op_type", "opset"),
    [("custom_domain", "FusedMatMul", None), ("qdq_cnn", "DequantizeLinear", 17)],
)
def test_an_operator_it_lacks_is_refused_by_name(name: str, op_type: str, opset: int | None) -> None:
    with pytest.raises(RuntimeUnsupportedError) as caught:
        OnnxReferenceRuntime().prepare(load(f"zoo:{name}"))
    assert caught.value.op_type == op_type and caught.value.opset == opset
    assert "reference implementation" in str(caught.value)


def test_its_profile_puts_each_nodes_time_on_the_node() -> None:
    graph = load("zoo:resnet18")
    from explorer.runtimes import random_feeds

    timed = profile(OnnxReferenceRuntime().prepare(graph), random_feeds(graph.model), runs=1)
    convs = [n for n in graph.op_nodes() if graph.nx.nodes[n]["op_type"] == "Conv"]
    assert set(convs) <= set(timed.node_ms) and timed.runs == 1
    assert timed.kernels[0].node in graph.nx and sum(timed.node_ms.values()) > 0  # the slowest is a node

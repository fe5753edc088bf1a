"""Our results as overlays: a real ONNX Runtime profile's time per node, a target's placement in the
partition palette, fallback reasons, and the output drift per node."""

from __future__ import annotations

import pytest

from explorer import load
from explorer.overlays.ours import (
    DRIFT_COLOR,
    TIME_GRADIENT,
    drift_overlay,
    fallback_overlay,
    placement_overlay,
    profile_overlay,
)
from explorer.runtimes import OrtRuntime, random_feeds
from explorer.runtimes.intermediates import IntermediateComparison, TensorAgreement
from explorer.runtimes.profile import profile
from explorer.targets import get_target, partition
from explorer.targets.palette import FALLBACK_COLOR, PARTITION_COLORS, partition_palette


def test_an_ort_profile_becomes_time_per_node_with_the_viridis_gradient() -> None:
    graph = load("zoo:mlp")
    prof = profile(OrtRuntime(optimization="disable").prepare(graph), random_feeds(graph.model), runs=2)
    overlay = profile_overlay(prof, graph)
    assert overlay.by_node("time_ms") == pytest.approx(dict(prof.node_ms))
    assert set(overlay.by_node("time_ms")) == set(graph.op_nodes())  # every node of the MLP timed
    assert overlay.time_share_mapped == pytest.approx(prof.coverage, abs=1e-6)
    assert overlay.gradient == TIME_GRADIENT and overlay.name.startswith("time on ")
    assert overlay.values["/fc1/Gemm"].op == "Gemm" and not overlay.by_node("color")  # the gradient colours


def test_a_decoder_call_is_named_in_the_overlay() -> None:
    graph = load("zoo:mlp")
    prof = profile(OrtRuntime(optimization="disable").prepare(graph), random_feeds(graph.model), runs=1)
    assert profile_overlay(prof, graph, call="decode").name.endswith(", decode (ms)")


def test_placement_takes_the_partition_palette_and_fallback_its_reasons() -> None:
    graph = load("zoo:resnet18")
    p = partition(graph, get_target("coreml-mlprogram"))
    placement = placement_overlay(p, graph)
    assert set(placement.values) == set(graph.op_nodes())
    palette = partition_palette(p)
    assert all(v.color == palette[v.value] for v in placement.values.values())
    assert placement.values["/conv1/Conv"].color == PARTITION_COLORS[0]
    assert placement.values["/bn1/BatchNormalization"].value == "CPU" == p.fallback
    fallback = fallback_overlay(p, graph)
    assert set(fallback.values) == set(p.fallback_nodes)
    assert all(v.color == FALLBACK_COLOR for v in fallback.values.values())
    assert "BatchNormalization is not in ONNX Runtime's coreml-mlprogram table" in str(
        fallback.values["/bn1/BatchNormalization"].value
    )


def test_drift_is_the_largest_error_of_a_nodes_outputs_red_past_the_tolerance() -> None:
    tensors = (
        TensorAgreement("a", "Split", "a0", (2,), 1e-7, 1e-7, True),
        TensorAgreement("a", "Split", "a1", (2,), 3e-6, 1e-6, True),
        TensorAgreement("b", "Relu", "b0", (2,), 0.5, 0.5, False),
    )
    overlay = drift_overlay(IntermediateComparison("ort", "tvm", tensors, (("c", "no Relax binding"),)))
    assert overlay.by_node("value") == {"a": 3e-6, "b": 0.5}
    assert overlay.by_node("color") == {"b": DRIFT_COLOR}
    assert [(u.name, u.reason) for u in overlay.unmapped] == [("c", "no Relax binding")]

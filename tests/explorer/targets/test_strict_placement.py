"""Strict placement: ONNX Runtime's own assignment, and its refusal with session.disable_cpu_ep_fallback."""

from __future__ import annotations

import pytest

from explorer import load
from explorer.core.errors import RuntimeUnsupportedError
from explorer.runtimes.ort_runtime import OrtRuntime, available_providers
from explorer.targets.strict_placement import CPU_PROVIDER, STRICT_KEY, strict_placement

AZURE = "AzureExecutionProvider"  # in the CPU build: a provider other than the CPU's that takes no node


def test_the_cpu_provider_is_strict_trivially_and_every_node_is_on_it() -> None:
    p = strict_placement(load("zoo:yolov8"))
    assert not p.flag_set and p.strict and p.refused is None and p.error is None
    assert set(p.nodes.values()) == {CPU_PROVIDER} and len(p.nodes) > 100
    assert p.to_dict()["config"] == {} and p.verdict.startswith("strict trivially")
    assert p.to_frame().shape == (len(p.nodes), 1)


def test_the_cpu_runtime_with_the_flag_runs_as_without_it() -> None:
    info = OrtRuntime(strict_placement=True).prepare(load("zoo:mlp")).info  # no conflict: the flag is not set
    assert info["providers"] == [CPU_PROVIDER]


@pytest.mark.skipif(AZURE not in available_providers(), reason="this onnxruntime build has no Azure provider")
def test_a_provider_that_takes_nothing_is_refused_under_the_flag_naming_every_node() -> None:
    graph = load("zoo:mlp")
    p = strict_placement(graph, AZURE)
    assert p.flag_set and not p.strict and "fallback to CPU EP has been explicitly disabled" in p.refused
    assert sorted(p.fallback_nodes) == sorted(graph.op_nodes())  # ONNX Runtime's names are the graph's ids
    assert p.to_dict()["config"] == {STRICT_KEY: "1"} and "6 of 6 nodes would fall back" in p.verdict
    with pytest.raises(RuntimeUnsupportedError, match=r"session\.disable_cpu_ep_fallback=1"):
        OrtRuntime(AZURE, strict_placement=True).prepare(graph)  # the timed session is strict too
    loose = OrtRuntime(AZURE).prepare(graph).info["providers"]  # without it: the CPU runs everything, quietly
    assert loose == [AZURE, CPU_PROVIDER]

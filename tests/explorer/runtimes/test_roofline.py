"""Nodes against the machine's measured roofline (real ONNX Runtime and TVM profiles)."""

from __future__ import annotations

import pytest

from explorer import load
from explorer.runtimes import OrtRuntime, TvmRuntime, random_feeds
from explorer.runtimes.cost_model import node_costs
from explorer.runtimes.machine import MachinePeak, measure_peak
from explorer.runtimes.profile import profile
from explorer.runtimes.roofline import roofline
from explorer.views.runtime_figures import roofline_figure


def test_the_roof_is_the_lower_of_peak_and_bandwidth_times_intensity() -> None:
    peak = MachinePeak(gflops=100.0, gbps=20.0, cores=2)
    assert peak.ridge == 5.0 and peak.attainable(1.0) == 20.0 and peak.attainable(50.0) == 100.0
    measured = measure_peak()
    assert measured.gflops > 1 and measured.gbps > 0.5 and measured is measure_peak()  # once a process


def test_a_cnn_on_both_runtimes_is_placed_under_the_roof_with_its_kernel_counts() -> None:
    graph = load("zoo:resnet18")
    feeds, costs = random_feeds(graph.model), node_costs(graph)
    peak = measure_peak()
    lines = [
        roofline(profile(runtime.prepare(graph), feeds, runs=1), costs, peak)
        for runtime in (OrtRuntime(), TvmRuntime())
    ]
    ort, tvm = lines
    for line in lines:
        frame = line.to_frame()
        assert frame["op_type"].eq("Conv").sum() >= 15  # every convolution has a time and FLOPs
        assert (frame["flops"] > 0).all() and (frame["gflops"] > 0).all()
        assert set(frame["bound"]) <= {"memory", "compute"} and frame["ms"].is_monotonic_decreasing
        assert line.launches > 0 and line.written_bytes and line.written_bytes > 0
    assert ort.achieved_gflops > tvm.achieved_gflops  # untuned loop nests are far below the roof
    convs = ort.to_frame().query("op_type == 'Conv'")
    assert (convs["intensity"] > 1).all()  # convolutions reuse their weights: high intensity
    assert tvm.launches < 69  # fusion: fewer kernels than ONNX nodes
    fig = roofline_figure(lines)
    assert [t.name for t in fig.data][1:] == [ort.label, tvm.label] and fig.layout.xaxis.type == "log"
    assert ort.to_dict()["peak"]["gflops"] == pytest.approx(peak.gflops)

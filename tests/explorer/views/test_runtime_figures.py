"""Figures of runtime results: a distribution per runtime, a log axis when far apart, slowest kernels."""

from __future__ import annotations

import pytest

from explorer.runtimes.bench import BenchReport, BenchResult, latency_stats
from explorer.runtimes.profile import KernelTime, Profile
from explorer.views.runtime_figures import kernel_time_figure, latency_figure


def _result(label: str, times: list[float]) -> BenchResult:
    stats = latency_stats(times)
    return BenchResult(
        label,
        label,
        False,
        runs=len(times),
        prepare_s=0.1,
        reused=False,
        threads=2,
        max_abs_err=0.0,
        max_rel_err=0.0,
        agrees=True,
        times_ms=tuple(times),
        **stats,
    )


def test_latency_boxes_side_by_side_on_a_log_axis_when_the_medians_differ_more_than_20x() -> None:
    report = BenchReport((_result("ort", [1.0, 1.1, 0.9]), _result("tvm", [100.0, 101.0, 99.0])), "m", {}, 0)
    fig = latency_figure(report)
    assert [t.name for t in fig.data] == ["ort", "tvm"] and fig.layout.yaxis.type == "log"
    close = BenchReport((_result("a", [1.0, 1.2]), _result("b", [2.0, 2.1])), "m", {}, 0)
    assert latency_figure(close, kind="violin").layout.yaxis.type == "linear"
    with pytest.raises(ValueError, match="box"):
        latency_figure(report, kind="bar")


def test_kernel_bars_slowest_on_top_and_unmapped_kernels_grey() -> None:
    kernels = tuple(KernelTime(f"k{i}", "Conv", float(10 - i), f"n{i}" if i % 2 else None) for i in range(10))
    fig = kernel_time_figure(Profile("ort", "ORT", 1, 55.0, kernels), top=4)
    bar = fig.data[0]
    assert list(bar.y) == ["k3", "k2", "k1", "k0"] and list(bar.marker.color)[-1] == "#9e9e9e"
    assert "overlay holds" in fig.layout.title.text

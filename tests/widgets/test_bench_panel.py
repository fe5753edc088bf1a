"""BenchPanel without a browser (real runtimes): the controls choose the runtimes, a run fills every part."""

from __future__ import annotations

from widgets import BenchPanel


def test_the_controls_describe_the_runtimes_and_a_run_fills_the_panel() -> None:
    panel = BenchPanel("zoo:mlp", min_runs=3, min_seconds=0.0)
    panel.ort_level.value, panel.ort_threads.value = "basic", 1
    assert [r.label for r in panel.chosen()] == ["ONNX Runtime CPU (basic, 1 thread)", "TVM llvm untuned"]
    panel.runtimes.value = ("ort",)
    report = panel.run()
    assert [r.runtime for r in report.results] == ["ort"] and panel.progress.value == 1.0
    assert "ONNX Runtime CPU (basic, 1 thread)" in panel.table.value and panel.status.value.startswith("done")
    assert [t.type for t in panel.latency.data] == ["box"] and panel.kernels.data[0].type == "bar"
    assert panel.view.color_menu.value == "time: ONNX Runtime CPU (basic, 1 thread)"
    panel.kind.value = "violin"
    assert panel.latency.data[0].type == "violin"

"""BenchPanel without a browser (real runtimes): the controls choose the runtimes, a run fills every part."""

from __future__ import annotations

import pytest

from widgets import BenchPanel


def test_the_controls_describe_the_runtimes_and_a_run_fills_the_panel() -> None:
    panel = BenchPanel("zoo:mlp", min_runs=3, min_seconds=0.0)
    panel.ort_level.value, panel.ort_threads.value = "basic", 1
    labels = ["ONNX Runtime CPU (basic, 1 thread)", "TVM llvm untuned (default schedules)"]
    assert [r.label for r in panel.chosen()] == labels
    panel.runtimes.value = ("ort",)
    report = panel.run()
    assert [r.runtime for r in report.results] == ["ort"] and panel.progress.value == 1.0
    assert "ONNX Runtime CPU (basic, 1 thread)" in panel.table.value and panel.status.value.startswith("done")
    assert [t.type for t in panel.latency.data] == ["box"] and panel.kernels.data[0].type == "bar"
    assert panel.view.color_menu.value == "time: ONNX Runtime CPU (basic, 1 thread)"
    assert panel.roofline.data[0].name.startswith("roof") and panel.roofline.data[1].x  # nodes placed
    assert "<th>kernels</th>" in panel.table.value and panel.rooflines[0].launches > 0
    panel.kind.value = "violin"
    assert panel.latency.data[0].type == "violin"


def test_the_tvm_controls_choose_shipped_records_and_a_remote_server() -> None:
    panel = BenchPanel("zoo:mlp")
    panel.runtimes.value = ("tvm",)
    panel.tune_trials.value, panel.pretuned.value = 0, True
    assert [r.label for r in panel.chosen()] == ["TVM llvm pre-tuned"]
    panel.rpc_tracker.value, panel.rpc_key.value = "127.0.0.1:9190", "board"
    (remote,) = panel.chosen()
    assert (remote.rpc_tracker, remote.rpc_key, remote.pretuned) == ("127.0.0.1:9190", "board", True)
    panel.rpc_key.value = ""  # a tracker without a key: said in the panel, nothing runs
    with pytest.raises(ValueError, match="rpc_tracker and rpc_key go together"):
        panel.run()
    assert "rpc_tracker and rpc_key go together" in panel.status.value and not panel.run_button.disabled


def test_a_tvm_run_shows_each_task_with_its_schedule_share_and_gflops() -> None:
    panel = BenchPanel("zoo:mlp", input_shapes={"input": [1, 1, 28, 28]}, min_runs=3, min_seconds=0.0)
    panel.runtimes.value = ("tvm", "tvm-naive")
    assert [r.label for r in panel.chosen()] == [
        "TVM llvm untuned (default schedules)",
        "TVM llvm untuned (plain loops)",
    ]
    panel.run()
    default, naive = (panel.task_coverage[r.label] for r in panel.chosen())
    assert {t.schedule for t in default.tasks} == {"heuristic"}
    assert {t.schedule for t in naive.tasks} == {"naive"}
    gemms = [t for t in default.tasks if "matmul" in t.task]
    assert gemms and all(t.gflops and t.gflops > 0 for t in gemms)  # arithmetic kernels: GFLOP/s known
    assert "<th>GFLOP/s</th>" in panel.tasks.value and "default schedule" in panel.tasks.value
    panel.time_menu.value = naive.label
    assert "100% plain loops" in panel.tasks.value


def test_pytorch_eager_joins_as_the_baseline_people_run_first() -> None:
    pytest.importorskip("torch")
    panel = BenchPanel("zoo:mlp", min_runs=3, min_seconds=0.0)
    panel.runtimes.value = ("ort", "torch-eager")
    report = panel.run()
    assert [r.runtime for r in report.results] == ["ort", "torch-eager"] and report.results[1].agrees
    assert "PyTorch eager" in panel.table.value and "time: PyTorch eager" in panel.view.color_menu.options


def test_iree_joins_with_its_dispatches_on_the_graph() -> None:
    pytest.importorskip("iree.runtime")
    panel = BenchPanel("zoo:mlp", min_runs=3, min_seconds=0.0)
    panel.runtimes.value = ("ort", "iree")
    assert [r.label for r in panel.chosen()] == ["ONNX Runtime CPU (all)", "IREE llvm-cpu"]
    report = panel.run()
    assert [r.runtime for r in report.results] == ["ort", "iree"] and report.results[1].agrees
    assert "IREE llvm-cpu" in panel.table.value and "time: IREE llvm-cpu" in panel.view.color_menu.options
    timed = panel.profiles["IREE llvm-cpu"]  # every dispatch on its Gemm but data tiling's packing
    assert timed.coverage > 0.9 and all("_encoding_" in name for name in timed.unmapped), timed.unmapped
    assert set(timed.node_ms) == {"/fc1/Gemm", "/fc2/Gemm", "/fc3/Gemm"}


def test_a_decoder_shows_its_generation_and_the_time_of_each_call_on_the_graph() -> None:
    panel = BenchPanel("zoo:llama", min_runs=2, min_seconds=0.0)
    panel.runtimes.value = ("ort",)
    report = panel.run()
    assert report.results[0].llm is not None
    assert sorted(panel.profiles) == ["ONNX Runtime CPU (all) · decode", "ONNX Runtime CPU (all) · prefill"]
    overlays = [o for o in panel.view.color_menu.options if "time" in str(o)]
    assert len(overlays) == 2
    assert "prefill tok/s" in panel.table.value and "decode tok/s" in panel.table.value
    decode = panel.profiles["ONNX Runtime CPU (all) · decode"].node_ms
    assert any("self_attn" in node for node in decode)  # the attention's nodes carry the decode step's time


def test_a_model_whose_values_disagree_with_a_shape_fails_in_the_panel_as_a_typed_error() -> None:
    """The Runtimes tab's path (BenchPanel -> explorer.runtimes) gives the same InvalidModelError as the CLI,
    naming the tensor, not ONNX Runtime's bare FAIL (#39)."""
    from explorer.core.errors import InvalidModelError
    from explorer.onnx_adapter.graph_builder import build_graph
    from tests.explorer.bad_models import stored_values_mismatch

    with pytest.raises(InvalidModelError, match="tensor 'W' holds 12 bytes"):
        BenchPanel(stored_values_mismatch())  # loaded by the panel: refused as the CLI refuses it
    panel = BenchPanel(
        build_graph(stored_values_mismatch(), source="short.onnx"), min_runs=1, min_seconds=0.0
    )
    panel.runtimes.value = ("ort",)
    with pytest.raises(InvalidModelError, match=r"short\.onnx: tensor 'W' holds 12 bytes"):
        panel.run()
    assert panel.status.value.startswith("<b>failed</b>: InvalidModelError: short.onnx: tensor &#x27;W&#x27;")
    assert "FAIL" not in panel.status.value and not panel.run_button.disabled

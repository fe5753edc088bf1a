"""ONNX Runtime's profile, written by a real ONNX Runtime run, mapped back onto the model's own nodes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from explorer import load, zoo
from explorer.core.errors import ExplorerError, UsageError
from explorer.overlays import read
from explorer.overlays.ort_profile import kernels

LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}


def profile_file(model: Path, level: str, folder: Path, runs: int = 3) -> Path:
    """Run ``model`` ``runs`` times in an InferenceSession at ``level`` with enable_profiling; the file
    ONNX Runtime wrote."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, LEVELS[level])
    options.enable_profiling = True
    options.profile_file_prefix = str(folder / f"profile-{level}")
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    feed = session.get_inputs()[0]
    x = np.random.default_rng(0).random((1, *feed.shape[1:]), dtype=np.float32)
    for _ in range(runs):
        session.run(None, {feed.name: x})
    return Path(session.end_profiling())


@pytest.fixture(scope="module")
def resnet18(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """zoo:resnet18 saved, and its profile at the extended level."""
    folder = tmp_path_factory.mktemp("ort-profile")
    model = zoo.save("resnet18", folder)
    return model, profile_file(model, "extended", folder)


def test_the_extended_profile_of_resnet18_maps_all_of_its_time_onto_source_nodes(
    resnet18: tuple[Path, Path],
) -> None:
    model, profile = resnet18
    graph = load(model)
    overlay = read(profile, graph)
    assert overlay.format == "ort-profile" and overlay.source == str(profile)
    assert overlay.about["level"] == "extended" and overlay.about["level_found"] == "exact match"
    assert overlay.about["runs"] == 3
    assert overlay.unmapped == ()
    assert overlay.time_share_mapped == 1.0
    # every node of the model ran in some kernel: the BatchNormalizations and Relus inside FusedConvs too
    assert set(overlay.values) == set(graph.op_nodes()) and overlay.mapped_nodes == 69
    conv, bn, relu = "/conv1/Conv", "/bn1/BatchNormalization", "/relu/Relu"
    assert overlay.values[bn].op == "FusedConv" and overlay.values[bn].entries == (conv,)
    assert set(overlay.values[conv].shared_with) == {bn, relu}
    fused = next(k for k in kernels(json.loads(profile.read_text()))[0] if k.name == conv)
    shares = [overlay.values[n].time_ms for n in (conv, bn, relu)]
    assert shares == pytest.approx([fused.ms / 3] * 3)  # split evenly
    assert overlay.values[conv].provider == "CPUExecutionProvider"
    assert sum(overlay.by_node().values()) == pytest.approx(overlay.total_ms)


def test_the_anchor_split_puts_a_fused_kernel_on_its_convolution(resnet18: tuple[Path, Path]) -> None:
    model, profile = resnet18
    overlay = read(profile, load(model), level="extended", split="anchor")
    assert overlay.about["level_found"] == "given" and overlay.time_share_mapped == 1.0
    assert overlay.values["/bn1/BatchNormalization"].time_ms == 0.0
    assert overlay.values["/conv1/Conv"].time_ms > 0


def test_kernels_that_do_not_map_are_listed_with_the_reason(
    resnet18: tuple[Path, Path], tmp_path: Path
) -> None:
    model, profile = resnet18
    events = json.loads(profile.read_text())
    stranger = {
        "cat": "Node",
        "name": "/not/in/the/model_kernel_time",
        "ph": "X",
        "dur": 1000 * 3,  # 1 ms per run over the file's 3 runs
        "args": {"op_name": "Relu", "provider": "CUDAExecutionProvider"},
    }
    path = tmp_path / "profile.json"
    path.write_text(json.dumps([*events, stranger]))
    overlay = read(path, load(model), level="extended")
    assert [u.name for u in overlay.unmapped] == ["/not/in/the/model"]
    unmapped = overlay.unmapped[0]
    assert "no node of ONNX Runtime's extended-level graph is named '/not/in/the/model'" in unmapped.reason
    assert unmapped.time_ms == pytest.approx(1.0)
    assert overlay.time_share_mapped == pytest.approx(1 - 1.0 / overlay.total_ms, abs=1e-5)


def test_the_all_level_maps_nchwc_kernels_and_lists_the_layout_reorder(
    resnet18: tuple[Path, Path], tmp_path: Path
) -> None:
    model, _ = resnet18
    graph = load(model)
    overlay = read(profile_file(model, "all", tmp_path, runs=3), graph)  # 3: one preempted kernel weighs less
    assert overlay.about["level"] == "all"
    assert set(overlay.values) == set(graph.op_nodes())  # NCHWc convolutions named after tensors
    # the residual Add and its Relu went into an NCHWc Conv, no kernel of their own
    add = overlay.values["/layer1/layer1.0/Add"]
    assert add.entries == ("/layer1/layer1.0/bn2/BatchNormalization_output_0_nchwc",)
    reorders = [u for u in overlay.unmapped if u.name.startswith("ReorderOutput")]
    assert reorders and all("a layout reorder" in u.reason for u in reorders)
    assert overlay.time_share_mapped > 0.95


def test_without_a_graph_the_kernels_keep_their_names(resnet18: tuple[Path, Path]) -> None:
    _, profile = resnet18
    overlay = read(profile)
    assert overlay.mapped_onto is None and overlay.mapped_nodes == 0 and overlay.time_share_mapped is None
    assert overlay.values["/conv1/Conv"].op == "FusedConv" and len(overlay.values) == 40


def test_a_bad_level_or_split_is_a_usage_error(resnet18: tuple[Path, Path]) -> None:
    model, profile = resnet18
    with pytest.raises(UsageError, match="no ONNX Runtime optimisation level 'fast'"):
        read(profile, load(model), level="fast")
    with pytest.raises(UsageError, match="no split rule 'half'"):
        read(profile, load(model), split="half")


def test_a_profile_without_runs_is_read_as_one_run() -> None:
    events = [{"cat": "Node", "name": "/fc1/Gemm_kernel_time", "dur": 2000, "args": {"op_name": "Gemm"}}]
    overlay = read(events, load("zoo:mlp"), level="disable")
    assert overlay.about["runs"] == 1 and overlay.values["/fc1/Gemm"].time_ms == 2.0


def test_a_fused_gemm_lands_on_its_gemm_and_relu(tmp_path: Path) -> None:
    model = zoo.save("mlp", tmp_path)
    overlay = read(str(profile_file(model, "extended", tmp_path, runs=2)), load(model))
    assert overlay.time_share_mapped == 1.0 and overlay.about["level"] in ("extended", "all")
    gemm, relu = overlay.values["/fc1/Gemm"], overlay.values["/relu1/Relu"]
    assert gemm.op == relu.op == "FusedGemm" and gemm.time_ms == relu.time_ms
    assert relu.shared_with == ("/fc1/Gemm",)


def test_a_level_onnx_runtime_cannot_optimise_the_model_at_is_left_out_or_refused() -> None:
    from tests.explorer.cli.test_cli_matrix import unknown_op_model

    graph = load(unknown_op_model())  # com.acme::Frobnicate: ONNX Runtime refuses the model
    events = [{"cat": "Node", "name": "relu_kernel_time", "dur": 10, "args": {"op_name": "Relu"}}]
    overlay = read(events, graph)
    assert overlay.about["level"] == "disable" and overlay.time_share_mapped == 1.0
    assert any("could not optimise" in note and "Frobnicate" in note for note in overlay.notes)
    with pytest.raises(ExplorerError, match=r"could not optimise .* at the extended level"):
        read(events, graph, level="extended")

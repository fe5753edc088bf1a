"""``coverage --split`` and ``bench --strict-placement`` from the command line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import onnx
import pytest

from tests.explorer.in_process import run_cli

FAST_BENCH = ("--min-runs", "1", "--min-seconds", "0", "--warmup", "0")
DETECTOR = ("coverage", "zoo:yolov8", "--target", "qnn-htp", "--input-shape", "images=1,3,64,64")


def test_split_writes_the_pieces_and_says_them_in_json(tmp_path: Path) -> None:
    out = tmp_path / "pieces"
    done = run_cli(*DETECTOR, "--split", str(out), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads(done.stdout)
    split = document["split"]
    assert {
        "format",
        "folder",
        "manifest",
        "target",
        "device",
        "fallback",
        "inputs",
        "outputs",
        "pieces",
    } <= set(split)
    assert (
        split["target"] == "qnn-htp" and split["folder"] == str(out) and document["targets"][0]["partitions"]
    )
    kinds = [p["kind"] for p in split["pieces"]]
    assert kinds.count("supported") == document["targets"][0]["partitions"] and "fallback" in kinds
    assert json.loads((out / "partitions.json").read_text())["pieces"] == split["pieces"]
    for piece in split["pieces"]:
        onnx.checker.check_model(str(out / piece["file"]), full_check=True)


def test_split_says_each_piece_in_text(tmp_path: Path) -> None:
    done = run_cli("coverage", "zoo:detection_head", "--target", "nnapi", "--split", str(tmp_path / "p"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "wrote 7 pieces: 3 partitions on Android NNAPI" in done.stdout
    assert "01-fallback1.onnx" in done.stdout and "partition 1" in done.stdout


@pytest.mark.parametrize("targets", [[], ["nnapi", "qnn-htp"]], ids=["none", "two"])
def test_split_needs_exactly_one_target(targets: list[str], tmp_path: Path) -> None:
    words = [w for t in targets for w in ("--target", t)]
    done = run_cli("coverage", "zoo:mlp", *words, "--split", str(tmp_path / "p"), "--json")
    assert done.returncode == 2 and "exactly one --target" in done.stderr
    assert json.loads(done.stdout)["error"]["exit_code"] == 2 and os.listdir(tmp_path) == []


def test_split_into_the_models_own_folder_is_refused_before_loading(tmp_path: Path) -> None:
    from explorer import zoo

    model = zoo.save("mlp", tmp_path)
    done = run_cli("coverage", str(model), "--target", "nnapi", "--split", str(tmp_path), "--json")
    assert done.returncode == 2 and "holds the input model" in done.stderr and str(tmp_path) in done.stderr
    assert json.loads(done.stdout)["error"]["type"] == "OutputPathError"
    assert os.listdir(tmp_path) == ["mlp.onnx"]


def test_strict_placement_on_the_cpu_reports_onnx_runtimes_own_placement() -> None:
    done = run_cli("bench", "zoo:mlp", "--runtime", "ort", "--strict-placement", "--json", *FAST_BENCH)
    assert done.returncode == 0, done.stderr[-2000:]
    placement = json.loads(done.stdout)["placement"]["ort"]
    assert placement["strict"] and placement["config"] == {} and placement["fallback_nodes"] == []
    assert {"provider", "optimization", "refused", "error", "nodes_per_provider", "verdict"} <= set(placement)
    assert len(placement["nodes_per_provider"]["CPUExecutionProvider"]) == 6
    text = run_cli("bench", "zoo:mlp", "--runtime", "ort", "--strict-placement", *FAST_BENCH)
    assert text.returncode == 0 and "ort: strict placement: strict trivially" in text.stdout


def test_strict_placement_without_the_flag_adds_nothing() -> None:
    done = run_cli("bench", "zoo:mlp", "--runtime", "ort", "--json", *FAST_BENCH)
    assert done.returncode == 0 and "placement" not in json.loads(done.stdout)


def test_strict_placement_with_cuda_unavailable_exits_3_like_any_unavailable_runtime() -> None:
    from explorer.runtimes.ort_runtime import OrtRuntime

    if OrtRuntime("CUDAExecutionProvider").available():
        pytest.skip("CUDA runs here")
    done = run_cli("bench", "zoo:mlp", "--runtime", "ort-cuda", "--strict-placement", "--json", *FAST_BENCH)
    assert done.returncode == 3 and "has no CUDAExecutionProvider" in done.stderr
    document = json.loads(done.stdout)
    assert document["error"]["exit_code"] == 3 and document["results"] == []
    assert "placement" not in document  # nothing measured for a provider that is not here

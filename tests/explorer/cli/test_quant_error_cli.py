"""``onnx-explorer quant-error FLOAT QDQ``: SQNR per node and the first breaking node, on a model quantised in
the test by ONNX Runtime's ``quantize_static``; its refusals (exit 2) name the file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from explorer import zoo
from explorer.runtimes.qdq_pairs import tiny_pair
from tests.explorer.in_process import run_cli


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("quant-error-cli")
    float_model, qdq_model = tiny_pair()
    onnx.save(float_model, folder / "float.onnx")
    onnx.save(qdq_model, folder / "qdq.onnx")
    return folder / "float.onnx", folder / "qdq.onnx"


def test_json_has_the_nodes_and_the_first_breaking_node(pair: tuple[Path, Path], tmp_path: Path) -> None:
    np.savez(
        tmp_path / "inputs.npz", x=np.random.default_rng(0).standard_normal((6, 1, 4)).astype(np.float32)
    )
    inputs = str(tmp_path / "inputs.npz")
    done = run_cli("quant-error", *map(str, pair), "--inputs", inputs, "--threshold", "100", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert {row["node"] for row in document["nodes"]} == {"/fc/MatMul", "/fc/Add", "/act/Relu"}
    assert all(isinstance(row["sqnr_db"], float) for row in document["nodes"])
    assert document["inputs"] == f"6 samples from {tmp_path / 'inputs.npz'}" and not document["random_inputs"]
    first = document["first_breaking"]
    assert first["node"] == "/fc/MatMul" and first["threshold"] == 100  # 8 bits never reach 100 dB
    assert isinstance(first["kept_float_metric"], float) and first["steps"][0]["what"] == "float"


def test_text_output_and_the_exported_overlays(pair: tuple[Path, Path], tmp_path: Path) -> None:
    target = tmp_path / "sqnr.json"
    done = run_cli(
        "quant-error", str(pair[0]), str(pair[1]), "--samples", "2", "--export-overlay", str(target)
    )
    assert done.returncode == 0, done.stderr
    assert "/fc/MatMul" in done.stdout and "first breaking node (reverse search" in done.stdout
    assert "2 random inputs (seeds 0..1; give real ones for real ranges)" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sqnr.json", "sqnr.weight-sqnr-db.json"]
    assert f"wrote {target}" in done.stdout
    results = next(iter(json.loads(target.read_text()).values()))["results"]
    assert set(results) == {
        "/fc/MatMul",
        "/act/Relu",
    }  # activations: /fc/Add's output is /act/Relu's (folded)


@pytest.mark.parametrize(
    ("which", "says"),
    [
        ("float-twice", "not a QDQ model: it has no QuantizeLinear or DequantizeLinear nodes"),
        ("qdq-twice", "not a float model"),
        ("other-float", "do not correspond: inputs"),
    ],
)
def test_models_that_do_not_correspond_exit_2_naming_the_file(
    pair: tuple[Path, Path], tmp_path: Path, which: str, says: str
) -> None:
    other = tmp_path / "other.onnx"
    onnx.save(zoo.build("mlp"), other)
    words, named = {
        "float-twice": ((pair[0], pair[0]), pair[0]),
        "qdq-twice": ((pair[1], pair[1]), pair[1]),
        "other-float": ((other, pair[1]), other),
    }[which]
    done = run_cli("quant-error", *map(str, words), "--json")
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and str(named) in done.stderr
    assert json.loads(done.stdout)["error"]["exit_code"] == 2
    assert "Traceback" not in done.stderr


def test_bad_inputs_files_exit_2_naming_them(pair: tuple[Path, Path], tmp_path: Path) -> None:
    np.savez(tmp_path / "wrong.npz", y=np.ones((2, 1, 4), np.float32))
    for path, says in (
        (tmp_path / "wrong.npz", "no array for input 'x'"),
        (tmp_path / "none.npz", "no such file"),
    ):
        done = run_cli("quant-error", str(pair[0]), str(pair[1]), "--inputs", str(path))
        assert done.returncode == 2 and says in done.stderr and str(path) in done.stderr, done.stderr

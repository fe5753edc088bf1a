"""Coverage per target and per op, by nodes and by FLOPs; the CLI's text and JSON."""

from __future__ import annotations

import json

import pytest

from explorer import load, zoo
from explorer.cli import main
from explorer.targets import coverage

from .models import chain


def test_coverage_by_nodes_and_by_flops() -> None:
    report = coverage(load(zoo.build("resnet18")), ["coreml-mlprogram", "ort-cpu"])
    ml = report.get("coreml-mlprogram")
    assert ml.supported_nodes < ml.total_nodes and ml.fallback_ops["BatchNormalization"]["count"] == 20
    assert ml.flops_coverage > ml.coverage  # the convolutions, nearly all the FLOPs, are supported
    table = report.op_table()
    assert table.loc["BatchNormalization", "coreml-mlprogram"] == "0/20"
    assert table.loc["Conv", "ort-cpu"] == "20/20"
    assert report.op_fractions().loc["Conv", "coreml-mlprogram"] == 1.0
    assert list(report.to_frame().index) == ["coreml-mlprogram", "ort-cpu"]
    with pytest.raises(KeyError, match="coreml-mlprogram"):
        report.get("nnapi")


def test_cli_json_keys(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    import onnx

    path = tmp_path / "chain.onnx"
    onnx.save(chain("Erf"), path)
    assert main(["coverage", str(path), "--target", "nnapi", "--target", "ort-cpu", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    first = out["targets"][0]
    assert {"target", "supported_nodes", "total_nodes", "coverage", "partitions", "fallback_ops"} <= set(
        first
    )
    assert first["target"] == "nnapi" and first["partitions"] == 2
    assert first["fallback_ops"]["Erf"]["count"] == 1 and first["fallback_ops"]["Erf"]["reasons"]
    assert main(["coverage", str(path), "--target", "npu"]) == 2
    assert "no target 'npu'" in capsys.readouterr().err


def test_cli_text_and_target_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["coverage", "--list-targets"]) == 0
    listed = capsys.readouterr().out
    for name in ("ort-cpu", "ort-cuda", "nnapi", "coreml-mlprogram", "coreml-nn", "qnn-htp", "tvm-llvm"):
        assert name in listed
    assert main(["coverage", "zoo:mlp", "--input-shape", "input=1,1,28,28", "--target", "qnn-htp"]) == 0
    text = capsys.readouterr().out
    assert "qnn-htp" in text and "100.0%" in text

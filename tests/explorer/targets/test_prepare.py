"""The NPU-ready pipeline: static shapes, onnxsim, QNN preprocessing, QDQ; coverage and accuracy per step."""

from __future__ import annotations

import json
import math

import onnx
import pytest

from explorer import load, zoo
from explorer.cli import main
from explorer.runtimes import random_feeds, run_onnxruntime
from explorer.targets.prepare import prepare_for_target, prepare_pipeline


def test_a_dynamic_cnn_becomes_a_static_qdq_model_on_the_htp() -> None:
    prepared = prepare_for_target(
        load(zoo.build("mobilenetv2")), "qnn-htp", input_shapes={"input": [1, 3, 224, 224]}, samples=2
    )
    names = [s.pass_name for s in prepared.steps]
    assert names == [
        "original",
        "ort-quant:fix_shapes",
        "onnxsim",
        "ort-quant:qnn_preprocess",
        "ort-quant:qnn_qdq",
    ]
    first, last = prepared.steps[0], prepared.steps[-1]
    assert first.coverage == 0.0 and last.coverage == 1.0 and last.partitions == 1
    assert "dynamic shape" in first.verdict
    # the accuracy cost is measured: the QDQ model ran on ONNX Runtime beside the float one
    assert last.max_abs_diff is not None and math.isfinite(last.max_abs_diff) and last.max_abs_diff > 0
    assert 0 < last.relative_diff < 0.5
    graph = prepared.graph
    # titled by what it is, not by the pass's temporary file (which workers still read)
    assert graph.source == "mobilenetv2 after ort-quant:qnn_qdq"
    assert graph.model_path is not None and "pass-" in str(graph.model_path)
    assert graph.op_counts["QuantizeLinear"] > 0 and graph.op_counts["DequantizeLinear"] > 0
    assert prepared.timeline[len(prepared.timeline) - 1].metrics["qnn-htp nodes"] == last.supported_nodes
    model = graph.model
    (out,) = run_onnxruntime(model, random_feeds(model))
    assert out.shape == (1, 1000) or out.ndim == 2


def test_sixteen_bit_activations_and_given_calibration_inputs() -> None:
    model = zoo.build("mlp")
    calibration = [random_feeds(model, {"input": [1, 1, 28, 28]}, seed=s) for s in range(2)]
    prepared = prepare_for_target(model, "qnn-htp", activation_type="uint16", calibration=calibration)
    log = " ".join(prepared.timeline[len(prepared.timeline) - 1].log)
    assert "2 inputs given" in log and "activations uint16" in log
    pipeline = prepare_pipeline("qnn-htp", {"input": [1, 1, 28, 28]}, activation_type="uint16")
    assert pipeline[-1][1]["activation_type"] == "uint16" and pipeline[-1][1]["weight_type"] == "uint8"
    with pytest.raises(KeyError, match="no NPU-ready pipeline for 'ort-cpu'"):
        prepare_pipeline("ort-cpu", {})


def test_sixteen_bit_weights_reach_the_quantiser_and_the_model() -> None:
    prepared = prepare_for_target(zoo.build("mlp"), "qnn-htp", weight_type="uint16", samples=2)
    assert "weights uint16" in " ".join(prepared.timeline[len(prepared.timeline) - 1].log)
    weights = prepared.graph.weights.values()
    matrices = [w for w in weights if w.name.endswith("_quantized") and len(w.shape) == 2]
    assert matrices and {w.dtype for w in matrices} == {"uint16"}


def test_cli_prepare_json_and_output(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    out_path = tmp_path / "mlp_qdq.onnx"
    code = main(
        ["prepare", "zoo:mlp", "--target", "qnn-htp", "--samples", "2", "--output", str(out_path), "--json"]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert [set(s) >= {"pass", "coverage", "partitions", "max_abs_diff"} for s in data["steps"]] == [True] * 5
    assert data["steps"][0]["coverage"] == 0.0 and data["steps"][-1]["coverage"] == 1.0
    saved = onnx.load(out_path)
    assert any(n.op_type == "QuantizeLinear" for n in saved.graph.node)
    assert main(["prepare", "zoo:mlp", "--target", "tvm-llvm"]) == 2

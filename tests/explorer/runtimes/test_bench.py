"""Benchmarking ONNX Runtime and TVM side by side (real runtimes): statistics, agreement, the CLI contract."""

from __future__ import annotations

import json

import numpy as np
import pytest

from explorer import load, zoo
from explorer.cli import main
from explorer.core.compare import agreement
from explorer.lower import RelaxImportFailed
from explorer.runtimes.bench import bench, get_runtime, latency_stats
from explorer.runtimes.ort_runtime import OrtRuntime

QUICK = {"warmup": 1, "min_runs": 5, "min_seconds": 0.0, "max_seconds": 20.0}


def test_latency_statistics_are_the_usual_percentiles() -> None:
    stats = latency_stats([5.0, 1.0, 2.0, 3.0, 4.0])
    assert stats == {
        "median_ms": 3.0,
        "p90_ms": 4.6,
        "p99_ms": pytest.approx(4.96),
        "min_ms": 1.0,
        "iqr_ms": 2.0,
    }


def test_agreement_uses_dtype_tolerances_and_names_the_worst_output() -> None:
    a = [np.array([1.0, 100.0], np.float32), np.array([1, 2], np.int64)]
    close = [a[0] * (1 + 5e-5), a[1]]
    assert agreement(a, close).ok and agreement(a, close).worst_output == 0
    assert not agreement(a, [a[0], np.array([1, 3], np.int64)]).ok  # integers must be equal
    assert not agreement(a, [a[0] * 1.01, a[1]]).ok
    assert agreement(a, a[:1]).max_abs_err == float("inf")  # an output missing


def test_ort_and_tvm_on_the_same_inputs_agree_and_report_their_costs() -> None:
    report = bench(load("zoo:mobilenetv2"), ["ort", "tvm"], **QUICK)
    ort_result, tvm_result = report.results
    assert (ort_result.runtime, tvm_result.runtime) == ("ort", "tvm")
    assert ort_result.max_abs_err == 0.0 and tvm_result.agrees and tvm_result.max_abs_err < 1e-2
    for result in report.results:
        assert result.runs >= 3 and result.min_ms <= result.median_ms <= result.p90_ms <= result.p99_ms
        assert result.prepare_s > 0 and result.threads >= 1 and len(result.times_ms) == result.runs
    assert tvm_result.info["compile_s"] > 0 and not tvm_result.tuned
    frame = report.times_frame()
    assert set(frame.runtime) == {"ONNX Runtime CPU (all)", "TVM llvm untuned (default schedules)"}
    assert report.to_dict()["input_shapes"] == {"input": [1, 3, 224, 224]} and report.seed == 0


def test_given_inputs_runtimes_not_available_and_models_tvm_cannot_import() -> None:
    graph = load("zoo:mlp")
    feeds = {"input": np.ones((1, 1, 28, 28), np.float32)}
    cuda = OrtRuntime(provider="CUDAExecutionProvider")
    report = bench(graph, ["ort", cuda], feeds=feeds, **QUICK)
    assert [r.runtime for r in report.results] == ["ort"] and report.seed is None
    ((name, why),) = report.skipped  # no GPU here: skipped, saying why, not failed
    assert name == "ort-cuda" and ("has no CUDAExecutionProvider" in why or "no NVIDIA GPU" in why), why
    with pytest.raises(RelaxImportFailed, match="unroll"):  # the import's fix is in the message
        bench(load("zoo:control_flow"), ["ort", "tvm"], **QUICK)
    with pytest.raises(ValueError, match="the runtimes are ort, ort-cuda, ort-genai, tvm"):
        get_runtime("tensorrt")


def test_bench_cli_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "zoo:mlp", "--runtime", "ort", "--runtime", "tvm", "--tune-trials", "0", "--json"]
    assert main([*args, "--min-runs", "5", "--min-seconds", "0"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert [r["runtime"] for r in results] == ["ort", "tvm"]
    for row in results:
        assert {"runtime", "tuned", "median_ms", "p90_ms", "runs", "prepare_s", "max_abs_err"} <= set(row)
    assert results[0]["max_abs_err"] == 0.0 and results[1]["tuned"] is False and results[1]["runs"] >= 5
    assert main(["bench", "zoo:mlp", "--runtime", "ort", "--min-runs", "3", "--min-seconds", "0"]) == 0
    out = capsys.readouterr().out
    assert "ONNX Runtime CPU (all)" in out and "agrees" in out
    assert main(["bench", "zoo:mlp", "--runtime", "tensorrt"]) == 2
    assert main(["bench", "zoo:control_flow", "--runtime", "tvm"]) == 3  # TVM cannot import it: the fix
    assert "explorer:unroll_loops" in capsys.readouterr().err
    tracker = ["--rpc-tracker", "127.0.0.1:1", "--rpc-key", "x"]
    assert main(["bench", "zoo:mlp", "--runtime", "tvm", *tracker]) == 2  # no tracker: a clear error
    assert "no RPC tracker answers at 127.0.0.1:1" in capsys.readouterr().err
    assert main(["bench", "zoo:mlp", "--runtime", "tvm", "--tvm-target", "llvm -opt=3"]) == 2
    assert "unknown target flag -opt in 'llvm -opt=3'" in capsys.readouterr().err
    avx2 = ["--tvm-target", "llvm -mcpu=haswell -num-cores=2"]
    assert (
        main(
            ["bench", "zoo:mlp", "--runtime", "tvm", *avx2, "--min-runs", "3", "--min-seconds", "0", "--json"]
        )
        == 0
    )
    (row,) = json.loads(capsys.readouterr().out)["results"]
    assert row["runtime"] == "tvm-llvm -mcpu=haswell -num-cores=2" and row["agrees"]


@pytest.mark.parametrize("name", zoo.names())
def test_bench_runs_every_zoo_model_on_both_runtimes_and_they_agree(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # as a user would: the CLI, with --fix for the models TVM's importer needs rewritten first
    args = ["bench", f"zoo:{name}", "--runtime", "ort", "--runtime", "tvm", "--fix", "--json"]
    assert main([*args, "--warmup", "1", "--min-runs", "2", "--min-seconds", "0"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["runtime"] for r in report["results"]] == ["ort", "tvm"]
    assert all(r["agrees"] for r in report["results"]), report["results"][1]["max_abs_err"]
    assert bool(report["fixes"]) == (
        name in {"transformer", "yolov8", "control_flow", "custom_domain", "llama"}
    )


def test_a_quantized_model_agrees_within_onnx_runtimes_own_rounding() -> None:
    report = bench(load("zoo:qdq_cnn"), ["ort", "tvm"], **QUICK)
    # ONNX Runtime's QDQ graph unoptimised vs its fused int8 kernels: a value rounds to the next step
    (floor,) = report.rounding_floor
    assert floor > 1e-3 and report.results[1].max_abs_err > 1e-3 and report.results[1].agrees
    assert bench(load("zoo:mlp"), ["ort"], **QUICK).rounding_floor == ()  # a float model: none
    ones = [np.ones(4, np.float32)]
    assert not agreement(ones, [ones[0] + 2 * floor], [floor]).ok  # beyond the rounding: disagrees

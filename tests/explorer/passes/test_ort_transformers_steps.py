"""ONNX Runtime's transformer optimizer per model type, on the zoo transformer."""

from __future__ import annotations

from collections import Counter

import onnx
import pytest

from explorer import zoo
from explorer.core.errors import PipelineSyntaxError
from explorer.passes import get_pass, parse_pipeline, pass_names
from explorer.passes.ort_transformers_steps import MODEL_TYPES
from explorer.passes.pipeline import run_pipeline

LAYERS = 2
SMALL = {"layers": LAYERS, "hidden": 64, "heads": 4}


def test_every_model_type_of_the_installed_optimizer_is_a_pass() -> None:
    from onnxruntime.transformers.optimizer import MODEL_TYPES as INSTALLED

    assert list(MODEL_TYPES) == list(INSTALLED)
    assert pass_names("ort-transformers") == [f"ort-transformers:{t}" for t in MODEL_TYPES]
    bert = get_pass("ort-transformers:bert")
    assert bert.family == "ort-transformers"
    assert {"num_heads", "hidden_size", "opt_level", "gelu_approximation"} <= set(bert.parameters)


def test_pipeline_strings_carry_parameters() -> None:
    bert, sim = parse_pipeline("ort-transformers:bert(num_heads=4, hidden_size=64), onnxsim")
    assert (bert.parameters["num_heads"], bert.parameters["hidden_size"], sim.name) == (4, 64, "onnxsim")
    with pytest.raises(PipelineSyntaxError, match="not key=value"):
        parse_pipeline("ort-transformers:bert(4)")
    with pytest.raises(PipelineSyntaxError, match="without"):
        parse_pipeline("ort-transformers:bert(num_heads=4")
    with pytest.raises(TypeError, match="no parameter"):
        parse_pipeline("ort-transformers:bert(heads=4)")


def test_bert_fuses_attention_skip_layer_norm_and_bias_gelu_per_layer() -> None:
    timeline = run_pipeline(
        zoo.build("transformer", **SMALL), "ort-transformers:bert(num_heads=4, hidden_size=64)"
    )
    step = timeline[1]
    assert step.error is None and step.changed
    assert step.max_abs_diff is not None and step.max_abs_diff < 1e-4
    ops = Counter((n.domain, n.op_type) for n in step.graph.model.graph.node)
    assert ops["com.microsoft", "Attention"] == LAYERS
    assert ops["com.microsoft", "SkipLayerNormalization"] == 2 * LAYERS
    assert ops["com.microsoft", "BiasGelu"] == LAYERS
    assert f"info: Fused Attention: {LAYERS}" in step.log
    patterns = Counter(f.pattern for f in timeline.diff(1).fusions)
    assert patterns["Add + Gelu -> com.microsoft::BiasGelu"] == LAYERS
    assert patterns["Add + Add + LayerNormalization -> com.microsoft::SkipLayerNormalization"] == 2 * LAYERS
    attention = [p for p in patterns.elements() if p.endswith("-> com.microsoft::Attention")]
    assert len(attention) == LAYERS and all(p.startswith("MatMul + Add + ") for p in attention)


def test_gelu_approximation_gives_fast_gelu_and_gpt2_finds_no_attention_here() -> None:
    model = zoo.build("transformer", **SMALL)
    timeline = run_pipeline(
        model, "ort-transformers:bert(num_heads=4, hidden_size=64, gelu_approximation=True)"
    )
    assert (
        Counter(f.pattern for f in timeline.diff(1).fusions)["Add + Gelu -> com.microsoft::FastGelu"]
        == LAYERS
    )
    assert timeline[1].max_abs_diff is not None and timeline[1].max_abs_diff < 1e-3  # tanh approximation
    gpt2 = run_pipeline(model, [("ort-transformers:gpt2", {"num_heads": 4, "hidden_size": 64})])[1]
    ops = Counter(n.op_type for n in gpt2.graph.model.graph.node)
    assert ops["Attention"] == 0 and ops["SkipLayerNormalization"] == 2 * LAYERS
    assert gpt2.max_abs_diff is not None and gpt2.max_abs_diff < 1e-4


def test_results_import_the_contrib_domain_and_cuda_only_fusions_stay_off() -> None:
    model = zoo.build("transformer", **SMALL)
    qwen3 = run_pipeline(model, "ort-transformers:qwen3(num_heads=4, hidden_size=64)")[1]  # opt_level 0
    assert "added the missing opset import com.microsoft v1" in qwen3.log
    assert {o.domain for o in qwen3.graph.model.opset_import} >= {"", "com.microsoft"}
    cnn = zoo.build("resnet18", width=8, image_size=64)
    unet = run_pipeline(cnn, "ort-transformers:unet")[1]
    assert any(line.startswith("CUDA-only fusions left off") for line in unet.log)
    assert unet.max_abs_diff is not None and unet.max_abs_diff < 1e-4
    on_gpu = run_pipeline(cnn, "ort-transformers:unet(gpu_fusions=True)")[1]
    assert (
        "no CPU kernel in this ONNX Runtime for: NhwcConv 20; the model runs only on a GPU build"
        in on_gpu.log
    )
    assert on_gpu.max_abs_diff == float("inf")
    phi = run_pipeline(model, "ort-transformers:phi")[1]
    assert phi.error is not None and "no model-local functions" in phi.error


@pytest.mark.parametrize("name", pass_names("ort-transformers"))
def test_each_model_type_runs_on_the_zoo_transformer_and_verifies_in_onnx_runtime(name: str) -> None:
    step = run_pipeline(zoo.build("transformer", layers=1, hidden=32, heads=2), [name])[1]
    if name == "ort-transformers:phi":  # it wants the dynamo exporter's function-per-module graph
        assert step.error is not None and "no model-local functions" in step.error
        return
    assert step.error is None, step.error
    if step.changed:
        onnx.checker.check_model(step.graph.model)
        assert step.max_abs_diff is not None and step.max_abs_diff < 1e-4, step.max_abs_diff


GPT2_PIPELINE = "onnxscript:optimize,ort-transformers:gpt2(num_heads=12,hidden_size=96)"


def test_the_gpt2_optimizers_crash_on_a_dynamo_export_says_where_why_and_what_to_try(
    gpt2_dynamo_export: object,
) -> None:
    """It ended "step 2 (ort-transformers:gpt2) failed: IndexError: list index out of range" (#39)."""
    failed = run_pipeline(gpt2_dynamo_export, GPT2_PIPELINE, verify=False)[2]
    assert failed.error.startswith(
        "ONNX Runtime's transformer optimizer (model type 'gpt2') crashed in "
        "onnxruntime.transformers.onnx_model_gpt2.postprocess (onnx_model_gpt2.py:"
    )
    assert "IndexError: list index out of range" in failed.error
    assert "8 of the model's 8 Gemm nodes have none" in failed.error
    assert (
        "instead try model type 'bert' (ort-transformers:bert(num_heads=12,hidden_size=96))" in failed.error
    )
    assert "onnx_model_gpt2.py" in failed.traceback and "IndexError" in failed.traceback
    bert = run_pipeline(gpt2_dynamo_export, GPT2_PIPELINE.replace(":gpt2", ":bert"), verify=False)[2]
    assert bert.error is None and bert.changed  # what it offers runs


def test_passes_reports_the_crash_on_one_line_and_debug_prints_the_steps_traceback(
    gpt2_dynamo_export: object,
) -> None:
    from tests.explorer.in_process import run_cli

    done = run_cli("passes", str(gpt2_dynamo_export), "--pipeline", GPT2_PIPELINE, "--no-verify")
    assert done.returncode == 2 and "Traceback" not in done.stderr and "internal error" not in done.stderr
    error = done.stderr.splitlines()[-1]
    assert error.startswith(
        f"onnx-explorer: error: {gpt2_dynamo_export}: step 2 (ort-transformers:gpt2) failed: "
    )
    assert "onnx_model_gpt2.postprocess" in error and "ort-transformers:bert(" in error
    debug = run_cli("--debug", "passes", str(gpt2_dynamo_export), "--pipeline", GPT2_PIPELINE, "--no-verify")
    assert debug.returncode == 2
    assert "traceback of step 2 (ort-transformers:gpt2):\nTraceback (most recent call last):" in debug.stderr
    assert 'onnx_model_gpt2.py", line' in debug.stderr and debug.stderr.splitlines()[-1] == error

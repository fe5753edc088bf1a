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

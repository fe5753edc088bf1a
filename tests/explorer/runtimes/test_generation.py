"""Prefill and decode timed as a decoder generates: the cache fed back, the figures, bad sizes refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from explorer import load, zoo
from explorer.cli import main
from explorer.core.errors import RuntimeUnsupportedError, UsageError
from explorer.onnx_adapter.inputs import random_feeds
from explorer.runtimes.bench import bench
from explorer.runtimes.generation import generation_benchmark, generation_plan
from explorer.runtimes.machine import measure_peak
from explorer.runtimes.ort_runtime import OrtRuntime

LLM_KEYS = {
    "prompt_tokens",
    "context",
    "prefill_ms",
    "prefill_tokens_per_s",
    "decode_ms_per_token",
    "decode_tokens_per_s",
    "kv_cache_bytes",
    "bandwidth_bound_tokens_per_s",
}


def test_the_loop_feeds_the_cache_back_as_an_application_does() -> None:
    graph = load("zoo:llama")
    run = generation_benchmark(graph, OrtRuntime(), prompt_tokens=6, context=24, decode_steps=3)
    # the same calls made by hand: the prompt, then the first decode step's inputs, then the tokens it chose
    session = ort.InferenceSession(graph.model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    prompt = random_feeds(graph.model, run.prefill_shapes, sequence=6, past=0)
    np.testing.assert_allclose(session.run(["logits"], prompt)[0][:, -1:], run.logits[0], atol=1e-5)
    feeds = random_feeds(graph.model, run.decode_shapes, seed=1, sequence=1, past=24 - 1 - 3)
    tokens = []
    for step in range(4):
        out = dict(zip(names, session.run(None, feeds), strict=True))
        if step == 0:
            np.testing.assert_allclose(out["logits"], run.logits[1], atol=1e-5)
        tokens.append(int(np.argmax(out["logits"][0, -1])))
        feeds["input_ids"] = np.array([[tokens[-1]]], dtype=np.int64)
        feeds["attention_mask"] = np.ones((1, feeds["attention_mask"].shape[1] + 1), np.int64)
        for layer in range(2):
            for kind in ("key", "value"):
                feeds[f"past_key_values.{layer}.{kind}"] = out[f"present.{layer}.{kind}"]
    assert run.tokens == tuple(tokens)
    assert feeds["attention_mask"].shape[1] == 24 + 1  # the last step ran at the full context (24)


def test_the_figures_follow_from_the_times_and_the_model() -> None:
    run = generation_benchmark(load("zoo:llama"), OrtRuntime(), prompt_tokens=8, context=32, decode_steps=4)
    t = run.timing
    assert len(run.decode_ms) == t.decode_steps == 4 and len(run.prefill_ms) == 3
    assert t.decode_ms_per_token == pytest.approx(float(np.median(run.decode_ms)))
    assert t.decode_tokens_per_s == pytest.approx(1e3 / t.decode_ms_per_token)
    assert t.prefill_tokens_per_s == pytest.approx(8 / t.prefill_ms * 1e3)
    spec_bytes = 2 * 2 * 2 * 8 * 4  # layers x (key, value) x kv heads x head size x float32
    assert t.kv_cache_bytes == spec_bytes * 32
    assert t.memory_gbps == pytest.approx(measure_peak().gbps)
    assert t.bandwidth_bound_tokens_per_s == pytest.approx(t.memory_gbps * 1e9 / t.bytes_per_decode_step)
    assert t.bytes_per_decode_step > t.kv_cache_bytes  # the weights too
    assert set(t.to_dict()) >= LLM_KEYS and t.cache == "grows"


@pytest.mark.parametrize(
    ("prompt", "context", "words"),
    [(8, 4096, "longer than"), (32, 32, "shorter than the context"), (8, 1, "at least")],
)
def test_sizes_the_model_cannot_take_are_refused(prompt: int, context: int, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        generation_plan(load("zoo:llama"), prompt, context)


def test_a_model_without_a_kv_cache_has_no_generation() -> None:
    with pytest.raises(UsageError, match="no decoder LLM"):
        bench(load("zoo:mlp"), ["ort"], generation=True)


def test_bench_times_a_decoder_as_it_generates(capsys: pytest.CaptureFixture[str]) -> None:
    words = ["bench", "zoo:llama", "--runtime", "ort", "--prompt-tokens", "16", "--context", "64"]
    assert main([*words, "--decode-steps", "4", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (row,) = report["results"]
    assert set(row["llm"]) >= LLM_KEYS and row["llm"]["context"] == 64 and row["runs"] == 4
    assert report["input_shapes"]["input_ids"] == [1, 1]
    assert report["llm"]["prefill_input_shapes"]["input_ids"] == [1, 16]
    assert report["llm"]["decoder"]["layers"] == 2
    assert main([*words, "--decode-steps", "2"]) == 0
    assert "prefill_ms" in capsys.readouterr().out
    # one call at the shapes given, as for any model
    assert main(["bench", "zoo:llama", "--runtime", "ort", "--single-call", "--min-runs", "2", "--json"]) == 0
    assert "llm" not in json.loads(capsys.readouterr().out)["results"][0]


def test_a_context_beyond_the_models_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "zoo:llama", "--runtime", "ort", "--context", "4096", "--json"]) == 2
    assert "longer than" in json.loads(capsys.readouterr().out)["error"]["message"]


def test_tvm_generates_the_same_tokens_as_onnx_runtime() -> None:
    graph = load(zoo.save("llama"))
    report = bench(graph, ["ort", "tvm"], prompt_tokens=8, context=32, decode_steps=3, fix=True)
    ort_row, tvm_row = report.results
    assert tvm_row.agrees, tvm_row.max_abs_err
    assert tvm_row.llm.cache == "window" and ort_row.llm.cache == "grows"
    assert "fix the input shapes and run onnxsim first" in tvm_row.info["fixes"]


@pytest.mark.slow
def test_tuned_tvm_tunes_both_calls_and_a_second_run_generates_from_their_records(tmp_path: Path) -> None:
    """The prompt's compile and the decode step's are two sets of tasks: both tuned (each says so),
    then a runtime with the same budget applies their records without tuning, and agrees."""
    from explorer.isolation import worker
    from explorer.runtimes.tvm_runtime import TvmRuntime

    graph, sizes = load(zoo.save("llama")), {"prompt_tokens": 8, "context": 32, "decode_steps": 2}
    tuned = TvmRuntime(tune_minutes=0.05, tuning_root=str(tmp_path))  # one batch a compile
    first = bench(graph, [tuned], **sizes, fix=True).results[0]
    for call in (first.info["prefill"], first.info):
        assert call["trials_run"] > 0 and call["tasks_with_records"] >= 1 and not call["tuned_before"]
    worker.shutdown()  # the sessions go: the next prepare compiles again
    _, again = bench(graph, ["ort", tuned], **sizes, fix=True).results
    for call in (again.info["prefill"], again.info):
        assert call["tuned_before"] and call["tune_s"] == 0 and call["tasks_with_records"] >= 1
    assert again.info["prefill"]["tasks_with_records"] == first.info["prefill"]["tasks_with_records"]
    assert not again.reused and again.tuned and again.agrees, again.max_abs_err


def test_onnxruntime_genai_generates_beside_our_loop(genai_decoder_int4: Path) -> None:
    report = bench(
        load(genai_decoder_int4), ["ort", "ort-genai"], prompt_tokens=16, context=64, decode_steps=4
    )
    ours, genai = report.results
    assert genai.runtime == "ort-genai" and genai.agrees, genai.max_abs_err  # the prompt's next-token logits
    assert genai.llm.cache == "shared buffer" and ours.llm.cache == "grows"
    assert genai.llm.decode_steps == 4 and genai.llm.prefill_tokens_per_s > 0
    # one call is not what it runs: skipped, with the reason
    single = bench(
        load(genai_decoder_int4), ["ort", "ort-genai"], generation=False, min_runs=2, min_seconds=0
    )
    assert [r.runtime for r in single.results] == ["ort"]
    assert single.skipped == (("ort-genai", "it times a decoder LLM's generation, not one call"),)


def test_onnxruntime_genai_needs_the_builders_config() -> None:
    with pytest.raises(RuntimeUnsupportedError, match=r"genai_config\.json"):
        bench(load("zoo:llama"), ["ort", "ort-genai"], prompt_tokens=4, context=16, decode_steps=2)


def test_bench_profiles_the_prompts_call_and_a_decode_step(capsys: pytest.CaptureFixture[str]) -> None:
    words = ["bench", "zoo:llama", "--runtime", "ort", "--prompt-tokens", "8", "--context", "32", "--profile"]
    assert main([*words, "--decode-steps", "2", "--json"]) == 0
    profiles = json.loads(capsys.readouterr().out)["profiles"]["ONNX Runtime CPU (all)"]
    assert set(profiles) == {"prefill", "decode"}
    assert (
        all(ms >= 0 for ms in profiles["decode"].values())
        and "/model/layers.1/self_attn/MatMul" in profiles["decode"]
    )


def test_pytorch_eager_generates_a_decoder_and_agrees() -> None:
    pytest.importorskip("torch")
    report = bench(load("zoo:llama"), ["ort", "torch-eager"], prompt_tokens=8, context=32, decode_steps=2)
    eager = report.results[1]
    assert eager.runtime == "torch-eager" and eager.agrees, eager.max_abs_err
    assert eager.llm.cache == "grows"  # it takes any shape, as ONNX Runtime does


def test_an_embedding_table_only_gathered_counts_one_row_a_decode_step() -> None:
    graph = load("zoo:llama")
    spec = graph.summary().llm
    assert spec["gathered_bytes"] == 128 * 32 * 4  # vocab x hidden x float32: untied, read by a Gather only
    run = generation_benchmark(graph, OrtRuntime(), prompt_tokens=4, context=16, decode_steps=1)
    assert (
        run.timing.bytes_per_decode_step
        == spec["weight_bytes"] - spec["gathered_bytes"] + run.timing.kv_cache_bytes
    )

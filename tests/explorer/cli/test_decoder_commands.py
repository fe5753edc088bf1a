"""Every command on the decoder LLMs people bring: exit 0, 2 or 3 (never 1), the model files untouched.

The forms: the zoo's standard-ONNX decoder, onnxruntime-genai's builder output at int4 and fp32
(contrib ops, external data, genai_config.json) and a ``torch.nn`` decoder exported by dynamo.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from explorer import zoo
from tests.explorer.in_process import run_cli

FAST = ("--prompt-tokens", "8", "--context", "32", "--decode-steps", "2")


def _digests(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()
    }


@pytest.fixture(params=["zoo", "genai-int4", "genai-fp32", "torch"])
def decoder(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A private copy of one decoder (its folder: external data and config beside it)."""
    if request.param == "zoo":
        return zoo.save("llama", tmp_path / "llama.onnx")
    fixture = {"genai-int4": "genai_decoder_int4", "genai-fp32": "genai_decoder_fp32"}
    source = request.getfixturevalue(fixture.get(request.param, "torch_kv_decoder"))
    copy = tmp_path / "model"
    shutil.copytree(source.parent, copy)
    return copy / source.name


def _ok(result: object, allowed: tuple[int, ...] = (0,)) -> None:
    assert result.returncode in allowed, (result.returncode, result.stderr[-2000:])
    assert (
        result.returncode != 1 and "internal error" not in result.stderr and "Traceback" not in result.stderr
    )


def test_every_command_runs_on_a_decoder(decoder: Path, tmp_path: Path) -> None:
    before = _digests(decoder.parent)
    info = run_cli("info", str(decoder), "--json")
    _ok(info)
    assert json.loads(info.stdout)["llm"]["layers"] == 2
    _ok(run_cli("passes", str(decoder), "--pipeline", "ort:extended,onnxsim", "-o", str(tmp_path / "p.onnx")))
    _ok(run_cli("diff", str(decoder), str(tmp_path / "p.onnx")))
    _ok(run_cli("report", str(decoder), "-o", str(tmp_path / "r.html")))
    _ok(run_cli("coverage", str(decoder), "--target", "qnn-htp"))
    bench = run_cli("bench", str(decoder), "--runtime", "ort", *FAST, "--json")
    _ok(bench)
    assert json.loads(bench.stdout)["results"][0]["llm"]["decode_tokens_per_s"] > 0
    # TVM takes each one once the contrib ops are rewritten and each call's shapes fixed, or says why (3)
    _ok(run_cli("lower", str(decoder), "--fix"), (0, 3))
    assert _digests(decoder.parent) == before


@pytest.fixture
def biased_decoder(tmp_path: Path) -> Path:
    """A builder-style GroupQueryAttention decoder whose head size only the QKV bias's width says (#39)."""
    import onnx

    from tests.explorer.quirk_models import biased_gqa_decoder

    path = tmp_path / "granite.onnx"
    onnx.save(biased_gqa_decoder(), path)
    return path


@pytest.mark.parametrize("words", [[*FAST], ["--single-call"]], ids=["generation", "single call"])
def test_bench_feeds_group_query_attention_the_head_size_it_needs(
    biased_decoder: Path, words: list[str]
) -> None:
    """kv_cache_dim was made 4096 (1/scale**2): ORT refused it, exit 3 (generation) or 1 (one call)."""
    done = run_cli("bench", str(biased_decoder), "--runtime", "ort", *words, "--json", "--min-runs", "1")
    _ok(done)
    document = json.loads(done.stdout)
    assert document["results"][0]["runtime"] == "ort"
    assert document["input_shapes"]["past_key_values.0.key"][-1] == 16


GQA_REFUSALS = {
    "a batch with a past": (
        ["input_ids=2,8"],
        "batch_size must be 1",
        "give a batch of 1 (--input-shape input_ids=1,8)",
    ),
    "another head size": (["past_key_values.0.key=1,2,7,8"], "got 8 expected 16", "the head size, 16, not 8"),
    "past the context": (["input_ids=1,300"], "cos_cache", "fit the model's context of 256 tokens"),
    "a mask shorter than the tokens": (
        ["input_ids=1,8", "attention_mask=1,5"],
        "total_sequence_length must be at least",
        "give attention_mask=1,8",
    ),
}
"""Shapes a user gives that ONNX Runtime's GroupQueryAttention refuses: its words, and what to give."""


@pytest.mark.parametrize("case", list(GQA_REFUSALS))
def test_shapes_group_query_attention_refuses_are_the_users_argument(biased_decoder: Path, case: str) -> None:
    """ORT's raw INVALID_ARGUMENT ended in an internal error (#39): now exit 2 naming the op, its node, why,
    and the shapes to give."""
    shapes, status, hint = GQA_REFUSALS[case]
    words = [w for shape in shapes for w in ("--input-shape", shape)]
    done = run_cli("bench", str(biased_decoder), "--runtime", "ort", *words, "--json", "--min-runs", "1")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["type"] == "UsageError" and error["exit_code"] == 2
    for words in (
        str(biased_decoder),
        "ONNX Runtime's GroupQueryAttention",
        "/attn/GroupQueryAttention",
        status,
        hint,
    ):
        assert words in done.stderr, (words, done.stderr)
    assert done.stderr.count("\n") == 1  # one line

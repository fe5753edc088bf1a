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

"""explorer.zoo.decoders: onnxruntime-genai's model builder on random Llama weights, run in ONNX Runtime.

The builder, transformers and ONNX Runtime are the real ones (no mocks); the decoders are the
session's small ones (tests/conftest.py: ``genai_decoder_int4``, ``genai_decoder_fp32`` and the
30-layer ``genai_decoder_deep``), and the tests that need them skip without the ``torch`` and ``llm``
extras.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from explorer.core.errors import MissingDependencyError, UsageError
from explorer.zoo import decoders
from explorer.zoo.decoders import DecoderBuildError, genai_decoder, llama_config

SMALL = llama_config("small")
LAYERS, KV_HEADS, HEAD = SMALL["num_hidden_layers"], SMALL["num_key_value_heads"], SMALL["head_dim"]
KV_NAMES = [f"past_key_values.{i}.{kind}" for kind in ("key", "value") for i in range(LAYERS)]
"""The builder's order: every layer's key, then every layer's value."""


def _dims(value: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


def _ops(path: Path) -> Counter[str]:
    return Counter(n.op_type for n in onnx.load(path, load_external_data=False).graph.node)


def _session(path: Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _run(
    session: ort.InferenceSession, ids: np.ndarray, past: dict[str, np.ndarray] | None
) -> list[np.ndarray]:
    """One call: ``ids`` after ``past`` (None: the prefill, past length 0)."""
    batch, new = ids.shape
    if past is None:
        past = {n: np.zeros((batch, KV_HEADS, 0, HEAD), np.float32) for n in KV_NAMES}
    total = new + next(iter(past.values())).shape[2]
    feeds = {"input_ids": ids, "attention_mask": np.ones((batch, total), np.int64), **past}
    return session.run(None, feeds)


def _presents_as_past(session: ort.InferenceSession, outputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    names = [o.name for o in session.get_outputs()]
    return {
        n.replace("present", "past_key_values"): v
        for n, v in zip(names, outputs, strict=True)
        if n != "logits"
    }


# --- without the extras -----------------------------------------------------------------------


def test_configs() -> None:
    full = llama_config("full")
    assert {k: full[k] for k in ("num_hidden_layers", "hidden_size", "intermediate_size", "vocab_size")} == {
        "num_hidden_layers": 30,
        "hidden_size": 576,
        "intermediate_size": 1536,
        "vocab_size": 49152,
    }
    assert (full["num_attention_heads"], full["num_key_value_heads"], full["head_dim"]) == (9, 3, 64)
    assert full["tie_word_embeddings"] and full["max_position_embeddings"] == 8192
    # the int4 blocks (32) divide every K of the small one
    assert SMALL["hidden_size"] % 32 == 0 and SMALL["intermediate_size"] % 32 == 0
    assert (LAYERS, KV_HEADS, HEAD, SMALL["vocab_size"]) == (2, 2, 16, 512)
    # deep: the full one's depth at the small one's widths
    deep = llama_config("deep")
    assert deep["num_hidden_layers"] == full["num_hidden_layers"] == 30
    assert {k: v for k, v in deep.items() if k != "num_hidden_layers"} == {
        k: v for k, v in SMALL.items() if k != "num_hidden_layers"
    }
    assert deep["num_key_value_heads"] < deep["num_attention_heads"]  # grouped-query attention
    assert decoders.SIZES == ("small", "deep", "full")


def test_wrong_arguments_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="int4, fp32"):
        genai_decoder(tmp_path, precision="int8")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="small, deep, full"):
        genai_decoder(tmp_path, size="tiny")  # type: ignore[arg-type]
    assert not list(tmp_path.iterdir())


def test_without_the_extra_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # what `import transformers` meets without it
    with pytest.raises(MissingDependencyError, match=r"onnx-graph-explorer\[torch,llm\]"):
        decoders.write_llama_checkpoint(tmp_path)

    def not_installed(package: str) -> str:
        raise decoders.PackageNotFoundError(package)

    monkeypatch.setattr(decoders, "version", not_installed)
    with pytest.raises(MissingDependencyError, match=r"onnx-graph-explorer\[torch,llm\]"):
        genai_decoder(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_failed_step_names_itself_and_its_last_lines() -> None:
    failing = [sys.executable, "-c", "print('first'); print('the last words'); raise SystemExit(3)"]
    with pytest.raises(DecoderBuildError, match=r"(?s)the step failed \(exit 3\).*the last words") as err:
        decoders._run_step("the step", failing, {})
    assert isinstance(err.value, RuntimeError)


# --- the builder's models ---------------------------------------------------------------------


@pytest.mark.torch
@pytest.mark.llm
def test_int4_holds_the_builders_contrib_ops(genai_decoder_int4: Path) -> None:
    ops = _ops(genai_decoder_int4)
    per_layer = {"GroupQueryAttention": 1, "SkipSimplifiedLayerNormalization": 2}
    assert {op: ops[op] for op in per_layer} == {op: n * LAYERS for op, n in per_layer.items()}
    assert ops["MatMulNBits"] == 5 * LAYERS + 1, "qkv, o, gate, up, down per layer, and the LM head"
    assert ops["GatherBlockQuantized"] == 1 and ops["SimplifiedLayerNormalization"] == 1
    assert "MatMul" not in ops
    model = onnx.load(genai_decoder_int4, load_external_data=False)
    assert {o.domain: o.version for o in model.opset_import}.get("com.microsoft") == 1
    nbits = next(n for n in model.graph.node if n.op_type == "MatMulNBits")
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in nbits.attribute}
    assert attrs["bits"] == 4 and attrs["block_size"] == 32


@pytest.mark.torch
@pytest.mark.llm
def test_fp32_has_float_matmuls(genai_decoder_fp32: Path) -> None:
    ops = _ops(genai_decoder_fp32)
    assert ops["MatMul"] == 5 * LAYERS + 1 and ops["GroupQueryAttention"] == LAYERS
    assert ops["SkipSimplifiedLayerNormalization"] == 2 * LAYERS
    assert not {"MatMulNBits", "GatherBlockQuantized"} & set(ops)


@pytest.mark.torch
@pytest.mark.llm
@pytest.mark.parametrize("precision", ["int4", "fp32"])
def test_files_inputs_outputs_and_config(precision: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue(f"genai_decoder_{precision}")
    folder = path.parent
    assert path.name == "model.onnx" and {p.name for p in folder.iterdir()} >= set(decoders.GENAI_FILES)
    model = onnx.load(path, load_external_data=False)
    assert all(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer if t.dims)
    kv = ["batch_size", KV_HEADS, "past_sequence_length", "kv_cache_dim"]
    assert {i.name: _dims(i) for i in model.graph.input} == {
        "input_ids": ["batch_size", "sequence_length"],
        "attention_mask": ["batch_size", "total_sequence_length"],
        **dict.fromkeys(KV_NAMES, kv),
    }
    present = ["batch_size", KV_HEADS, "total_sequence_length", "kv_cache_dim"]
    assert {o.name: _dims(o) for o in model.graph.output} == {
        "logits": ["batch_size", "sequence_length", SMALL["vocab_size"]],
        **{n.replace("past_key_values", "present"): present for n in KV_NAMES},
    }
    config = json.loads((folder / "genai_config.json").read_text())
    assert config["model"]["type"] == "llama"
    assert config["model"]["context_length"] == SMALL["max_position_embeddings"]
    assert config["model"]["vocab_size"] == SMALL["vocab_size"]
    decoder = config["model"]["decoder"]
    assert {k: decoder[k] for k in ("head_size", "hidden_size", "num_attention_heads")} == {
        "head_size": HEAD,
        "hidden_size": SMALL["hidden_size"],
        "num_attention_heads": SMALL["num_attention_heads"],
    }
    assert (decoder["num_key_value_heads"], decoder["num_hidden_layers"]) == (KV_HEADS, LAYERS)
    assert decoder["inputs"]["past_key_names"] == "past_key_values.%d.key"
    assert decoder["outputs"]["present_value_names"] == "present.%d.value"
    assert config["search"]["past_present_share_buffer"] is True


@pytest.mark.torch
@pytest.mark.llm
@pytest.mark.parametrize("precision", ["int4", "fp32"])
def test_prefill_then_one_decode_step_runs_in_onnxruntime(
    precision: str, request: pytest.FixtureRequest
) -> None:
    session = _session(request.getfixturevalue(f"genai_decoder_{precision}"))
    ids = np.random.default_rng(0).integers(3, SMALL["vocab_size"], (2, 7), dtype=np.int64)
    prefill = _run(session, ids[:, :6], None)
    assert prefill[0].shape == (2, 6, SMALL["vocab_size"]) and np.isfinite(prefill[0]).all()
    assert prefill[1].shape == (2, KV_HEADS, 6, HEAD)
    step = _run(session, ids[:, 6:], _presents_as_past(session, prefill))
    assert step[0].shape == (2, 1, SMALL["vocab_size"]) and step[1].shape == (2, KV_HEADS, 7, HEAD)
    whole = _run(session, ids, None)  # the cache changes nothing: the last token's logits agree
    np.testing.assert_allclose(step[0][:, -1], whole[0][:, -1], atol=1e-4)


@pytest.mark.torch
@pytest.mark.llm
def test_fp32_is_the_seeded_transformers_model(genai_decoder_fp32: Path) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)  # genai_decoder's default seed
    eager = transformers.LlamaForCausalLM(transformers.LlamaConfig(**SMALL)).eval()
    ids = np.random.default_rng(1).integers(3, SMALL["vocab_size"], (1, 9), dtype=np.int64)
    with torch.no_grad():
        expected = eager(torch.from_numpy(ids)).logits.numpy()
    np.testing.assert_allclose(_run(_session(genai_decoder_fp32), ids, None)[0], expected, atol=1e-4)


@pytest.mark.torch
@pytest.mark.llm
def test_a_second_call_reuses_a_complete_build(genai_decoder_int4: Path) -> None:
    folder, before = genai_decoder_int4.parent, genai_decoder_int4.stat().st_mtime_ns
    start = time.perf_counter()
    assert genai_decoder(folder, "int4") == genai_decoder_int4
    assert time.perf_counter() - start < 1 and genai_decoder_int4.stat().st_mtime_ns == before


@pytest.mark.torch
@pytest.mark.llm
def test_deep_has_the_full_models_30_layers_and_kv_cache(genai_decoder_deep: Path) -> None:
    deep = llama_config("deep")
    layers, kv_heads = deep["num_hidden_layers"], deep["num_key_value_heads"]
    ops = _ops(genai_decoder_deep)
    assert ops["GroupQueryAttention"] == layers == 30
    assert ops["SkipSimplifiedLayerNormalization"] == 2 * layers
    assert ops["MatMulNBits"] == 5 * layers + 1 and ops["GatherBlockQuantized"] == 1
    model = onnx.load(genai_decoder_deep, load_external_data=False)
    past = [i.name for i in model.graph.input if i.name.startswith("past_key_values.")]
    present = [o.name for o in model.graph.output if o.name.startswith("present.")]
    assert len(past) == len(present) == 60
    assert past == [f"past_key_values.{i}.{kind}" for kind in ("key", "value") for i in range(layers)]
    assert {_dims(i)[1] for i in model.graph.input if i.name in past} == {kv_heads}
    decoder = json.loads((genai_decoder_deep.parent / "genai_config.json").read_text())["model"]["decoder"]
    assert (decoder["num_hidden_layers"], decoder["num_key_value_heads"]) == (30, kv_heads)
    assert decoder["num_attention_heads"] == deep["num_attention_heads"] > kv_heads
    session = _session(genai_decoder_deep)  # and it runs: one prefill of 3 tokens
    feeds = {
        "input_ids": np.array([[5, 6, 7]], np.int64),
        "attention_mask": np.ones((1, 3), np.int64),
        **{n: np.zeros((1, kv_heads, 0, deep["head_dim"]), np.float32) for n in past},
    }
    logits = session.run(["logits"], feeds)[0]
    assert logits.shape == (1, 3, deep["vocab_size"]) and np.isfinite(logits).all()

"""explorer.zoo.torch_exports: real architectures in torch.nn, exported as the dynamo exporter writes them."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from explorer.core.errors import MissingDependencyError, UnknownNameError, UsageError
from explorer.zoo import torch_exports as torch_zoo


def _dims(value: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


def test_names_and_specs() -> None:
    assert torch_zoo.NAMES == ("bert_encoder", "gpt2_decoder", "convnext", "efficientnet", "llama_kv_decoder")
    bert = torch_zoo.spec("bert_encoder", "full")
    assert bert["config"] == {
        "layers": 12,
        "hidden": 768,
        "heads": 12,
        "ffn": 3072,
        "vocab": 30522,
        "positions": 512,
    }
    assert bert["inputs"] == {n: ("int64", ["batch", "sequence"]) for n in ("input_ids", "attention_mask")}
    assert torch_zoo.spec("gpt2_decoder", "full")["config"]["vocab"] == 50257
    assert torch_zoo.spec("convnext", "full")["config"]["dims"] == (96, 192, 384, 768)
    assert bert["outputs"] == ["last_hidden_state", "pooler_output"]
    kv = torch_zoo.spec("llama_kv_decoder", "full")
    assert {
        k: kv["config"][k] for k in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "positions")
    } == {
        "layers": 30,
        "hidden": 576,
        "heads": 9,
        "kv_heads": 3,
        "ffn": 1536,
        "vocab": 49152,
        "positions": 8192,
    }
    assert len(kv["inputs"]) == 2 + 60 and len(kv["outputs"]) == 1 + 60
    assert kv["inputs"]["past_key_values.29.value"] == ("float32", ["batch", 3, "past_sequence", 64])
    assert kv["example"]["attention_mask"] == [2, 32 + 128]


def test_unknown_name_and_size_are_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(UnknownNameError, match="bert_encoder"):
        torch_zoo.export("resnet", tmp_path)
    with pytest.raises(UsageError, match="small, full"):
        torch_zoo.spec("convnext", "huge")  # type: ignore[arg-type]
    assert not list(tmp_path.iterdir())


def test_without_torch_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # what `import torch` meets on the base install
    with pytest.raises(MissingDependencyError, match=r"onnx-graph-explorer\[torch\]"):
        torch_zoo.export("convnext", tmp_path)


@pytest.mark.torch
def test_the_dynamo_exporters_graphs(torch_exports: dict[str, Path]) -> None:
    for name, path in torch_exports.items():
        model = onnx.load(path)
        assert path.name == f"{name}-small.onnx" and path.stat().st_size < 4_000_000
        assert model.producer_name == "pytorch"
        assert {o.domain: o.version for o in model.opset_import}[""] >= 18
        assert all(n.name.startswith("node_") for n in model.graph.node)
        scopes = [
            p.value for n in model.graph.node for p in n.metadata_props if p.key.startswith("pkg.torch.onnx")
        ]
        assert scopes, f"{name}: no pkg.torch.onnx.* metadata"
        wanted = torch_zoo.spec(name)["inputs"]
        assert {i.name: _dims(i) for i in model.graph.input} == {k: v for k, (_, v) in wanted.items()}
    bert = onnx.load(torch_exports["bert_encoder"])
    assert {"IsNaN", "Where"} <= {n.op_type for n in bert.graph.node}, "the attention-mask pattern"
    assert any("encoder.layer.1" in p.value for n in bert.graph.node for p in n.metadata_props)


@pytest.mark.torch
def test_runs_on_other_shapes_and_the_mask_matters(torch_exports: dict[str, Path]) -> None:
    session = ort.InferenceSession(str(torch_exports["bert_encoder"]), providers=["CPUExecutionProvider"])
    ids = np.random.default_rng(0).integers(0, 1000, (3, 9), dtype=np.int64)
    full, half = np.ones((3, 9), np.int64), np.ones((3, 9), np.int64)
    half[:, 5:] = 0
    hidden, pooled = session.run(None, {"input_ids": ids, "attention_mask": full})
    assert hidden.shape == (3, 9, 64) and pooled.shape == (3, 64)
    masked = session.run(None, {"input_ids": ids, "attention_mask": half})[0]
    assert np.isfinite(masked).all() and not np.allclose(masked[:, :5], hidden[:, :5])


@pytest.mark.torch
def test_the_seed_sets_the_weights(torch_exports: dict[str, Path], tmp_path: Path) -> None:
    again = torch_zoo.export("convnext", tmp_path / "again.onnx")
    other = torch_zoo.export("convnext", tmp_path, seed=1)
    weights = [
        [numpy_helper.to_array(t) for t in onnx.load(p).graph.initializer]
        for p in (torch_exports["convnext"], again, other)
    ]
    assert all(np.array_equal(a, b) for a, b in zip(weights[0], weights[1], strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(weights[0], weights[2], strict=True))
    assert other.name == "convnext-small.onnx"


# --- the decoder with a KV cache ---------------------------------------------------------------

KV = torch_zoo.spec("llama_kv_decoder")
KV_SHAPE = KV["inputs"]["past_key_values.0.key"][1]


@pytest.mark.torch
def test_kv_decoder_names_its_cache_inputs_and_outputs(torch_kv_decoder: Path) -> None:
    model = onnx.load(torch_kv_decoder)
    layers, kv_heads, head = KV["config"]["layers"], KV_SHAPE[1], KV_SHAPE[3]
    past = {
        f"past_key_values.{i}.{kind}": ["batch", kv_heads, "past_sequence", head]
        for i in range(layers)
        for kind in ("key", "value")
    }
    assert {i.name: _dims(i) for i in model.graph.input} == {
        "input_ids": ["batch", "sequence"],
        "attention_mask": ["batch", "total_sequence"],
        **past,
    }
    assert [i.name for i in model.graph.input][2:4] == ["past_key_values.0.key", "past_key_values.0.value"]
    present = ["batch", kv_heads, "past_sequence + sequence", head]
    assert {o.name: _dims(o) for o in model.graph.output} == {
        "logits": ["batch", "sequence", KV["config"]["vocab"]],
        **{name.replace("past_key_values", "present"): present for name in past},
    }
    assert [o.name for o in model.graph.output] == KV["outputs"]
    assert not {n.domain for n in model.graph.node} - {""}, "plain ONNX: no contrib ops"


@pytest.mark.torch
def test_kv_decoder_prefill_then_decode_equals_eager(torch_kv_decoder: Path) -> None:
    torch = pytest.importorskip("torch")
    session = ort.InferenceSession(str(torch_kv_decoder), providers=["CPUExecutionProvider"])
    ids = np.random.default_rng(0).integers(0, KV["config"]["vocab"], (2, 7), dtype=np.int64)
    kv_heads, head = KV_SHAPE[1], KV_SHAPE[3]
    empty = {name: np.zeros((2, kv_heads, 0, head), np.float32) for name in list(KV["inputs"])[2:]}
    prefill = session.run(
        None, {"input_ids": ids[:, :6], "attention_mask": np.ones((2, 6), np.int64), **empty}
    )
    assert prefill[0].shape == (2, 6, KV["config"]["vocab"]) and prefill[1].shape == (2, kv_heads, 6, head)
    past = {name: value for name, value in zip(list(KV["inputs"])[2:], prefill[1:], strict=True)}
    step = session.run(None, {"input_ids": ids[:, 6:], "attention_mask": np.ones((2, 7), np.int64), **past})
    assert step[0].shape == (2, 1, KV["config"]["vocab"]) and step[1].shape == (2, kv_heads, 7, head)
    eager = torch_zoo.module("llama_kv_decoder")
    with torch.no_grad():
        nothing = [torch.from_numpy(v) for v in empty.values()]
        logits, *presents = eager(torch.from_numpy(ids), torch.ones(2, 7, dtype=torch.int64), nothing)
    np.testing.assert_allclose(step[0][:, -1], logits[:, -1].numpy(), atol=1e-4)
    np.testing.assert_allclose(step[1], presents[0].numpy(), atol=1e-4)


@pytest.mark.torch
def test_kv_decoder_mask_hides_padding(torch_kv_decoder: Path) -> None:
    session = ort.InferenceSession(str(torch_kv_decoder), providers=["CPUExecutionProvider"])
    ids = np.random.default_rng(1).integers(0, KV["config"]["vocab"], (1, 5), dtype=np.int64)
    empty = {name: np.zeros((1, KV_SHAPE[1], 0, KV_SHAPE[3]), np.float32) for name in list(KV["inputs"])[2:]}
    full = session.run(None, {"input_ids": ids, "attention_mask": np.ones((1, 5), np.int64), **empty})[0]
    masked = session.run(None, {"input_ids": ids, "attention_mask": np.array([[1, 0, 1, 1, 1]]), **empty})[0]
    np.testing.assert_allclose(masked[:, 0], full[:, 0], atol=1e-5)  # before the hidden token: the same
    assert not np.allclose(masked[:, -1], full[:, -1], atol=1e-4)


@pytest.mark.torch
@pytest.mark.llm
def test_kv_decoder_is_transformers_llama() -> None:
    """Same parameter names and the same logits as transformers' LlamaForCausalLM with its weights."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from explorer.zoo.decoders import llama_config

    ours = torch_zoo.module("llama_kv_decoder")
    theirs = transformers.LlamaForCausalLM(transformers.LlamaConfig(**llama_config("small"))).eval()
    theirs.load_state_dict(ours.state_dict(), strict=True)
    ids = torch.randint(0, KV["config"]["vocab"], (2, 9), generator=torch.Generator().manual_seed(0))
    empty = [torch.zeros(2, KV_SHAPE[1], 0, KV_SHAPE[3]) for _ in list(KV["inputs"])[2:]]
    with torch.no_grad():
        logits = ours(ids, torch.ones(2, 9, dtype=torch.int64), empty)[0]
        torch.testing.assert_close(logits, theirs(ids).logits, atol=1e-5, rtol=0)

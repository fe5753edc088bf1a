"""Decoder LLMs recognised by genai_config.json or their KV caches; their sizes read from the model."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from explorer import load, zoo
from explorer.onnx_adapter.decoder import GENAI_CONFIG, decoder_spec, decoder_symbols, read_genai_config
from explorer.onnx_adapter.inputs import concrete_input_shapes, random_feeds


def _session(path: Path | onnx.ModelProto) -> ort.InferenceSession:
    source = str(path) if isinstance(path, Path) else path.SerializeToString()
    return ort.InferenceSession(source, providers=["CPUExecutionProvider"])


def test_the_zoo_decoder_is_read_from_its_inputs_and_outputs() -> None:
    spec = decoder_spec(zoo.build("llama", layers=3, hidden=48, heads=6, kv_heads=3, vocab=200, context=64))
    assert spec is not None and spec.source == "inputs and outputs"
    assert (spec.layers, spec.heads, spec.kv_heads, spec.head_size) == (3, 6, 3, 8)
    assert (spec.hidden_size, spec.vocab_size, spec.context_length) == (48, 200, 64)
    assert spec.past_inputs[2] == ("past_key_values.2.key", "past_key_values.2.value")
    assert spec.present_outputs[0] == ("present.0.key", "present.0.value")
    assert spec.kv_bytes_per_token == 3 * 2 * 3 * 8 * 4  # layers x (key, value) x kv heads x head x float32
    assert spec.kv_bytes_at_context == spec.kv_bytes_per_token * 64
    assert spec.weight_dtype == "float32" and spec.weight_block_size is None
    assert spec.symbols == {
        "batch": "batch",
        "past_sequence_length": "past",
        "sequence_length": "sequence",
        "total_sequence_length": "total",
    }


@pytest.mark.parametrize("name", ["mlp", "transformer", "control_flow"])
def test_other_models_are_no_decoders(name: str) -> None:
    assert decoder_spec(zoo.build(name)) is None
    assert load(f"zoo:{name}").summary().llm is None


def test_symbols_follow_the_shapes_given() -> None:
    spec = decoder_spec(zoo.build("llama"))
    sizes = decoder_symbols(spec, {"total_sequence_length": 20, "sequence_length": 4})
    assert sizes["past_sequence_length"] == 16 and sizes["batch"] == 1
    sizes = decoder_symbols(spec, {"past_sequence_length": 9}, sequence=3)
    assert sizes["total_sequence_length"] == 12


def test_generated_inputs_are_one_consistent_call_the_model_runs() -> None:
    model = zoo.build("llama")
    shapes = concrete_input_shapes(model, {"input_ids": [2, 5]}, past=7)
    assert shapes["attention_mask"] == [2, 12] and shapes["past_key_values.1.value"] == [2, 2, 7, 8]
    feeds = random_feeds(model, {"input_ids": [2, 5]}, past=7)
    assert (feeds["attention_mask"] == 1).all()
    logits = _session(model).run(["logits"], feeds)[0]
    assert logits.shape == (2, 5, 128) and np.isfinite(logits).all()


def test_the_builders_int4_decoder_is_read_whole(genai_decoder_int4: Path) -> None:
    config = json.loads((genai_decoder_int4.parent / GENAI_CONFIG).read_text())["model"]
    model = onnx.load(genai_decoder_int4, load_external_data=False)
    spec = decoder_spec(model, genai_decoder_int4)
    assert spec.source == GENAI_CONFIG and spec.model_type == config["type"]
    decoder = config["decoder"]
    assert spec.layers == decoder["num_hidden_layers"] and spec.kv_heads == decoder["num_key_value_heads"]
    assert spec.head_size == decoder["head_size"] and spec.heads == decoder["num_attention_heads"]
    assert spec.context_length == config["context_length"] and spec.vocab_size == config["vocab_size"]
    # int4 blocks of 32 and their scales count as such; every initializer byte is counted once
    assert spec.weight_dtype == "int4" and spec.weight_block_size == 32
    assert set(spec.weight_bytes_by_dtype) == {"int4", "int4 scales (float32)", "float32"}
    on_disk = sum(t.ByteSize() for t in model.graph.initializer)  # a proto size, not the data: just >0
    assert spec.weight_bytes == sum(spec.weight_bytes_by_dtype.values()) and on_disk > 0
    data = (genai_decoder_int4.parent / "model.onnx.data").stat().st_size
    assert spec.weight_bytes <= data < spec.weight_bytes + 64 * len(model.graph.initializer)  # aligned
    # the graph alone says the same (GroupQueryAttention's attributes, the packed QKV width, the caches)
    alone = decoder_spec(model)
    assert alone.source == "inputs and outputs"
    assert (alone.layers, alone.heads, alone.kv_heads, alone.head_size) == (
        spec.layers,
        spec.heads,
        spec.kv_heads,
        spec.head_size,
    )
    assert (alone.vocab_size, alone.context_length, alone.hidden_size) == (
        spec.vocab_size,
        spec.context_length,
        spec.hidden_size,
    )
    assert spec.symbols["kv_cache_dim"] == "head_size"


def test_the_builders_decoder_runs_on_the_generated_inputs(genai_decoder_int4: Path) -> None:
    # the "internal error": kv_cache_dim defaulted to 32 where GroupQueryAttention needs the head size
    model = onnx.load(genai_decoder_int4, load_external_data=False)
    feeds = random_feeds(model)
    spec = decoder_spec(model)
    assert feeds["past_key_values.0.key"].shape[-1] == spec.head_size
    outputs = _session(genai_decoder_int4).run(None, feeds)
    assert all(np.isfinite(o).all() for o in outputs)


def test_a_biased_qkv_and_a_scale_not_one_over_root_head_size_give_the_head_size() -> None:
    """Granite's builder graph (#39): the packed QKV MatMul is followed by a bias Add, and
    GroupQueryAttention's scale is attention_multiplier (1/64), so the head size read from the scale was
    4096; the generated KV cache had kv_cache_dim 4096 and ONNX Runtime refused it ("should match the packed
    KV head dimension")."""
    from tests.explorer.quirk_models import biased_gqa_decoder

    model = biased_gqa_decoder()
    spec = decoder_spec(model)
    assert (spec.heads, spec.kv_heads, spec.head_size) == (
        4,
        2,
        16,
    )  # (heads + 2 kv heads) * 16 = the bias's 128
    assert concrete_input_shapes(model)["past_key_values.0.key"] == [1, 2, 32, 16]
    outputs = _session(model).run(None, random_feeds(model))
    assert outputs[0].shape == (1, 32, 32) and all(np.isfinite(o).all() for o in outputs)


def test_the_config_beside_the_model_sizes_what_the_graph_leaves_symbolic(tmp_path: Path) -> None:
    """A spec read with the model's file carries genai_config.json's head size into the shapes made."""
    from tests.explorer.quirk_models import biased_gqa_decoder

    model = biased_gqa_decoder()
    for node in model.graph.node:  # the graph no longer says the head size: no bias, no projection width
        if node.op_type == "GroupQueryAttention":
            node.input[0] = "hidden"
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    (tmp_path / GENAI_CONFIG).write_text(json.dumps({"model": {"decoder": {"head_size": 16}}}))
    spec = decoder_spec(model, path)
    assert (
        decoder_spec(model).head_size == 4096 and spec.head_size == 16
    )  # the scale misleads; the config wins
    assert concrete_input_shapes(model, spec=spec)["past_key_values.0.key"][-1] == 16
    assert random_feeds(model, spec=spec)["past_key_values.0.value"].shape == (1, 2, 32, 16)


def test_a_torch_export_is_recognised_with_its_expression_dims(torch_kv_decoder: Path) -> None:
    model = onnx.load(torch_kv_decoder, load_external_data=False)
    spec = decoder_spec(model)
    assert spec is not None and spec.layers == 2 and spec.kv_heads == 2 and spec.head_size == 16
    shapes = concrete_input_shapes(model, sequence=3, past=5)
    assert shapes["attention_mask"][-1] == 8
    outputs = dict(
        zip(
            [o.name for o in model.graph.output],
            _session(torch_kv_decoder).run(None, random_feeds(model, sequence=3, past=5)),
            strict=True,
        )
    )
    assert outputs["present.1.key"].shape[2] == 8


def test_genai_config_is_read_only_when_it_is_a_small_regular_file(tmp_path: Path) -> None:
    model_path = tmp_path / "model.onnx"
    (tmp_path / GENAI_CONFIG).write_text("[1, 2]")
    assert read_genai_config(model_path) is None  # not an object
    (tmp_path / GENAI_CONFIG).write_text("{" + " " * (2 << 20) + "}")
    assert read_genai_config(model_path) is None  # over 1 MiB: never read
    (tmp_path / GENAI_CONFIG).unlink()
    os.mkfifo(tmp_path / GENAI_CONFIG)
    assert read_genai_config(model_path) is None  # a FIFO would block a read: not a regular file


def test_a_config_with_its_own_names_is_followed(tmp_path: Path) -> None:
    model = zoo.build("llama", layers=2)
    renames = {f"past_key_values.{i}.{k}": f"cache_in_{k}_{i}" for i in range(2) for k in ("key", "value")}
    for value in model.graph.input:
        value.name = renames.get(value.name, value.name)
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            node.input[i] = renames.get(name, name)
    assert decoder_spec(model) is None  # no spelling we know
    onnx.save(model, tmp_path / "model.onnx")
    config = {
        "model": {
            "type": "llama",
            "context_length": 128,
            "decoder": {
                "inputs": {"past_key_names": "cache_in_key_%d", "past_value_names": "cache_in_value_%d"},
                "outputs": {"present_key_names": "present.%d.key", "present_value_names": "present.%d.value"},
            },
        }
    }
    (tmp_path / GENAI_CONFIG).write_text(json.dumps(config))
    spec = decoder_spec(model, tmp_path / "model.onnx")
    assert (
        spec is not None
        and spec.layers == 2
        and spec.past_inputs[1] == ("cache_in_key_1", "cache_in_value_1")
    )


def test_info_says_what_the_decoder_is(
    genai_decoder_int4: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from explorer.cli import main

    copy = tmp_path / "copy"
    shutil.copytree(genai_decoder_int4.parent, copy)
    assert main(["info", str(copy / "model.onnx"), "--json"]) == 0
    llm = json.loads(capsys.readouterr().out)["llm"]
    for key in ("layers", "heads", "kv_heads", "head_size", "hidden_size", "vocab_size", "context_length"):
        assert isinstance(llm[key], int), key
    assert (
        llm["weight_dtype"] == "int4"
        and llm["kv_bytes_at_context"] == llm["kv_bytes_per_token"] * llm["context_length"]
    )
    assert main(["info", str(copy / "model.onnx")]) == 0
    text = capsys.readouterr().out
    assert "llm        decoder:" in text and "in blocks of 32" in text

"""Shared fixtures: small models built in code, and helpers to prove inputs stay untouched."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


def tiny_model(opset: int = 17) -> onnx.ModelProto:
    """x[batch,4] -> MatMul(W) -> Add(b) -> Relu -> y: three nodes, two initializers."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "W")
    bias = numpy_helper.from_array(np.zeros(3, np.float32), "b")
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="/fc/MatMul"),
        helper.make_node("Add", ["h", "b"], ["z"], name="/fc/Add"),
        helper.make_node("Relu", ["z"], ["y"], name="/act/Relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [weight, bias],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="tests")


def digest(path: Path) -> tuple[str, int]:
    """Content hash and modification time of a file, to prove it was not written."""
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


@pytest.fixture
def tiny() -> onnx.ModelProto:
    return tiny_model()


@pytest.fixture
def tiny_path(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.onnx"
    onnx.save(tiny_model(), path)
    return path


@pytest.fixture(scope="session")
def torch_exports(tmp_path_factory: pytest.TempPathFactory, torch_kv_decoder: Path) -> dict[str, Path]:
    """:mod:`explorer.zoo.torch_exports`'s models, small, exported once per session (skipped without
    torch); the KV decoder is :func:`torch_kv_decoder`'s."""
    pytest.importorskip("torch")
    from explorer.zoo import torch_exports as torch_zoo

    folder = tmp_path_factory.mktemp("torch-exports")
    made = {"llama_kv_decoder": torch_kv_decoder}
    return {name: made.get(name) or torch_zoo.export(name, folder) for name in torch_zoo.NAMES}


@pytest.fixture(scope="session")
def torch_kv_decoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:mod:`explorer.zoo.torch_exports`'s ``llama_kv_decoder``, small: a Llama decoder whose KV cache is
    inputs (``past_key_values.N.key/value``) and outputs (``present.N.key/value``), exported once per
    session by ``torch.onnx.export(dynamo=True)`` (skipped without torch). Returns its model.onnx."""
    pytest.importorskip("torch")
    from explorer.zoo import torch_exports as torch_zoo

    return torch_zoo.export("llama_kv_decoder", tmp_path_factory.mktemp("torch-kv-decoder"))


@pytest.fixture(scope="session")
def gpt2_dynamo_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Hugging Face's ``GPT2LMHeadModel`` from ``GPT2Config(n_layer=2, n_head=12, n_embd=96)`` with random
    weights (vocab 100, 32 positions), exported once per session by ``torch.onnx.export(dynamo=True)``
    (about 15 s; skipped without torch and transformers). Its Gemm nodes have no bias (zeros, left out by
    the exporter), which ONNX Runtime's gpt2 optimizer crashes on. Returns its GPT2.onnx."""
    for module in ("torch", "transformers"):
        pytest.importorskip(module)
    import warnings

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_head=12, n_embd=96, vocab_size=100, n_positions=32, use_cache=False)
    model = GPT2LMHeadModel(config).eval()
    path = tmp_path_factory.mktemp("gpt2-dynamo") / "GPT2.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randint(0, 100, (1, 8)),), str(path), dynamo=True, verbose=False)
    return path


def _genai_decoder(tmp_path_factory: pytest.TempPathFactory, precision: str, size: str = "small") -> Path:
    for module in ("torch", "transformers", "onnxruntime_genai"):  # the torch and llm extras
        pytest.importorskip(module)
    from explorer.zoo.decoders import genai_decoder

    folder = tmp_path_factory.mktemp(f"genai-decoder-{size}-{precision}")
    return genai_decoder(folder, precision, size)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def genai_decoder_int4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:func:`explorer.zoo.decoders.genai_decoder`'s small int4 decoder (MatMulNBits, GroupQueryAttention,
    GatherBlockQuantized), built once per session by onnxruntime-genai's model builder (skipped
    without the torch and llm extras). Returns its model.onnx; beside it model.onnx.data and
    genai_config.json."""
    return _genai_decoder(tmp_path_factory, "int4")


@pytest.fixture(scope="session")
def genai_decoder_fp32(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same small decoder as :func:`genai_decoder_int4` at fp32 (float MatMuls and Gather), built once
    per session. Returns its model.onnx."""
    return _genai_decoder(tmp_path_factory, "fp32")


@pytest.fixture(scope="session")
def genai_decoder_deep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The int4 decoder at ``size="deep"``: SmolLM2-135M's 30 layers (60 KV inputs, 60 KV outputs)
    at the small one's widths, built once per session (about 17 s; skipped without the torch and
    llm extras). Returns its model.onnx."""
    return _genai_decoder(tmp_path_factory, "int4", "deep")

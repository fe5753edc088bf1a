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
    assert torch_zoo.NAMES == ("bert_encoder", "gpt2_decoder", "convnext", "efficientnet")
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

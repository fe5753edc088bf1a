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
def torch_exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """:mod:`explorer.zoo.torch_exports`'s models, small, exported once per session (skipped without
    torch)."""
    pytest.importorskip("torch")
    from explorer.zoo import torch_exports as torch_zoo

    folder = tmp_path_factory.mktemp("torch-exports")
    return {name: torch_zoo.export(name, folder) for name in torch_zoo.NAMES}

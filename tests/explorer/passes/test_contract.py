"""The pass contract: no registered pass modifies its input, in memory or on disk.

Every pass of the registry runs twice on a small zoo model: once on the ``ModelProto``
alone and once from the model's file (``model_path``, which the worker steps read
directly). The digest of the model's deterministic serialization, and of the file's
bytes, must be the same after the run as before it, whether the pass succeeded or
refused the model (a refusal is a recorded error, not a contract breach).
The whole module takes a few seconds (every pass is one warm-worker round trip).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from pathlib import Path

import onnx
import pytest

from explorer import zoo
from explorer.core.errors import ExplorerError
from explorer.passes import list_passes
from explorer.passes.base import FunctionPass

SMALL_TRANSFORMER = {"layers": 1, "hidden": 32, "heads": 2}
"""The model the onnxscript and ort-transformers tests run their passes on."""

FAMILIES_ON_THE_TRANSFORMER = {"onnxscript", "ort-transformers"}
"""Families whose passes look for attention / layer-norm patterns: they run on the zoo transformer."""


@functools.cache
def _model(name: str) -> bytes:
    kwargs = SMALL_TRANSFORMER if name == "transformer" else {}
    return zoo.build(name, **kwargs).SerializeToString(deterministic=True)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _model_for(found: FunctionPass) -> onnx.ModelProto:
    name = "transformer" if found.family in FAMILIES_ON_THE_TRANSFORMER else "mlp"
    return onnx.load_from_string(_model(name))


def _with_shapes(found: FunctionPass, model: onnx.ModelProto) -> FunctionPass:
    """Give ``ort-quant:fix_shapes`` the shapes it needs (the zoo models have symbolic batch sizes)."""
    if found.name != "ort-quant:fix_shapes":
        return found
    shapes = {v.name: [d.dim_value or 1 for d in v.type.tensor_type.shape.dim] for v in model.graph.input}
    return found.with_parameters(input_shapes=shapes)


def _run(found: FunctionPass, model: onnx.ModelProto, model_path: Path | None) -> None:
    # a pass may refuse this model (a typed error): its input must be untouched all the same
    with contextlib.suppress(ExplorerError, ValueError, RuntimeError, TypeError):
        found.run(model, model_path=model_path)


@pytest.mark.parametrize("found", list_passes(), ids=lambda p: p.name)
def test_a_pass_never_modifies_its_input_in_memory_or_on_disk(found: FunctionPass, tmp_path: Path) -> None:
    model = _model_for(found)
    found = _with_shapes(found, model)
    before = _digest(model.SerializeToString(deterministic=True))

    _run(found, model, None)
    assert _digest(model.SerializeToString(deterministic=True)) == before, f"{found.name} changed its input"

    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    file_before = _digest(path.read_bytes())
    _run(found, model, path)
    assert _digest(model.SerializeToString(deterministic=True)) == before, f"{found.name} changed its input"
    assert _digest(path.read_bytes()) == file_before, f"{found.name} changed its input file"
    beside = sorted(p.name for p in tmp_path.iterdir())
    assert beside == ["model.onnx"], f"{found.name} wrote beside its input"


def test_an_in_place_edit_by_an_in_process_runner_is_refused() -> None:
    def strip_last_node(model: onnx.ModelProto, params: object) -> tuple[onnx.ModelProto, list[str]]:
        del model.graph.node[-1]  # breaks the contract: edits the caller's model
        return model, []

    model = zoo.build("mlp")
    bad = FunctionPass("strip_last_node", "explorer", "Breaks the pass contract.", strip_last_node)
    with pytest.raises(RuntimeError, match="modified its input"):
        bad.run(model)

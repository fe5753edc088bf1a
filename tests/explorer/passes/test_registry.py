"""The pass registry: every pass listed, explained, runnable on every zoo model through the worker."""

from __future__ import annotations

import onnx
import onnxoptimizer
import pytest

from explorer import zoo
from explorer.onnx_adapter.protos import has_schema
from explorer.passes import FAMILIES, get_pass, list_passes, parse_pipeline, pass_names, passes_frame
from explorer.passes.base import Pass
from explorer.passes.pipeline import run_pipeline

SMALL = {
    "resnet18": {"width": 8, "image_size": 64},
    "mobilenetv2": {"width_mult": 0.25, "image_size": 64},
    "transformer": {"hidden": 32, "layers": 1},
    "yolov8": {"width": 4, "num_classes": 5, "image_size": 64},  # symbolic sizes: minutes of sympy here
}

# passes that are not optimisations: they change the model's interface or split it in two
INTERFACE_CHANGING = {"split_init", "split_predict", "rewrite_input_dtype"}


def test_every_onnxoptimizer_pass_is_registered_with_an_explanation() -> None:
    names = set(pass_names("onnxoptimizer"))
    assert set(onnxoptimizer.get_available_passes()) <= names
    assert "fuse_and_eliminate" in names
    for found in list_passes():
        assert isinstance(found, Pass)
        assert found.family in FAMILIES
        assert len(found.description) > 80, found.name
        assert not found.description.startswith("onnxoptimizer pass"), f"{found.name} has no real explanation"


def test_families_cover_onnxsim_ort_and_the_version_converter() -> None:
    assert {"onnxsim", "onnxsim:constant_folding", "onnxsim:shape_ops"} <= set(pass_names("onnxsim"))
    assert {"ort:basic", "ort:extended", "ort:all"} <= set(pass_names("ort"))
    assert "com.microsoft" in get_pass("ort:extended").description
    assert get_pass("opset:13").parameters["opset"] == 13


def test_unknown_pass_suggests_close_names() -> None:
    with pytest.raises(KeyError, match="fuse_bn_into_conv"):
        get_pass("fuse_bn_into_cnv")


def test_unknown_parameter_is_refused() -> None:
    with pytest.raises(TypeError, match="no parameter"):
        get_pass("onnxsim", colour="red")


def test_pipeline_parsing_shares_input_shapes() -> None:
    passes = parse_pipeline("onnxsim,fuse_bn_into_conv", input_shapes={"x": [1, 3]})
    assert passes[0].parameters["input_shapes"] == {"x": [1, 3]}
    assert "input_shapes" not in passes[1].parameters


def test_registry_as_a_table() -> None:
    frame = passes_frame()
    assert set(frame.family) == set(FAMILIES)
    assert len(frame) == len(list_passes())


def test_passes_never_modify_their_input() -> None:
    model = zoo.build("resnet18", **SMALL["resnet18"])
    before = model.SerializeToString()
    result = get_pass("fuse_bn_into_conv").run(model)
    assert model.SerializeToString() == before
    assert result.modified and result.model is not model


TRANSFORMER_TYPES_ON_EVERY_MODEL = {"ort-transformers:bert", "ort-transformers:gpt2"}
"""ONNX Runtime's transformer optimizer per model type is one optimizer with different fusion lists
(6-9 s a type on a CNN): every type runs on the zoo transformer, two on the other models."""


@pytest.mark.slow
@pytest.mark.parametrize("name", zoo.names())
def test_every_pass_runs_on_every_zoo_model(name: str) -> None:
    model = zoo.build(name, **SMALL.get(name, {}))
    chosen = [
        p
        for p in list_passes()
        if p.family != "ort-transformers"
        or name == "transformer"
        or p.name in TRANSFORMER_TYPES_ON_EVERY_MODEL
    ]
    for found in chosen:
        timeline = run_pipeline(model, [found], verify=True)
        step = timeline[1]
        # a pass may refuse a model (a typed error recorded on the step), but never take the process down
        if step.error is None and step.changed and found.name not in INTERFACE_CHANGING:
            # ONNX Runtime's levels may write its own ops in the default domain (SimplifiedLayerNormalization,
            # a decoder's RMS norm fused), which the checker cannot know: check models without them
            if all(has_schema(n.op_type, n.domain) for n in step.graph.model.graph.node if not n.domain):
                onnx.checker.check_model(step.graph.model)
            assert step.max_abs_diff is not None, f"{found.name} on {name}: not verified"

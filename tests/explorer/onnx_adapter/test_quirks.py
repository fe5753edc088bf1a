"""Exporter quirks seen in real models: each loads, simplifies with fixed input shapes and verifies.

One model per quirk (:mod:`tests.explorer.quirk_models`): paddle2onnx's ``dim_value: -1``,
weights listed among the graph inputs (IR < 4), unnamed dims, opsets 7-10, node names
repeated across subgraphs, and ``value_info`` that contradicts inference. Expectations
come from the ``ModelProto`` itself; the CLI's ``main`` runs in this process (its process
start is tested in test_cli), onnxsim and ONNX Runtime for real.
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from explorer import load
from explorer.core.errors import ModelLoadError
from explorer.core.tensors import format_shape
from explorer.onnx_adapter.input_shapes import fix_input_shapes
from explorer.onnx_adapter.inputs import random_feeds
from explorer.onnx_adapter.shape_inference import _merge, inference_view
from explorer.onnx_adapter.tensor_protos import shape_from_type
from explorer.passes.native_steps import _fixed_shapes
from explorer.passes.pipeline import run_pipeline
from tests.explorer import quirk_models as qm
from tests.explorer.bad_models import gathernd_negative_dim
from tests.explorer.in_process import run_cli

QUIRK_NAMES = sorted(qm.QUIRKS)


cli = run_cli  # in this process: a Python start and a worker per call would cost 16 of each


def real_inputs(model: onnx.ModelProto) -> list[str]:
    """Graph inputs that are not initializers, read straight from the proto."""
    weights = {t.name for t in model.graph.initializer}
    return [v.name for v in model.graph.input if v.name not in weights]


def declared_dims(value: onnx.ValueInfoProto) -> list[onnx.TensorShapeProto.Dimension]:
    return list(value.type.tensor_type.shape.dim)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("quirks")
    paths = {}
    for name, (build, _, _) in qm.QUIRKS.items():
        paths[name] = folder / f"{name}.onnx"
        onnx.save(build(), paths[name])
    return paths


# --------------------------------------------------------------------------------------
# Every quirk, end to end
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", QUIRK_NAMES)
def test_quirk_loads_with_the_right_summary(name: str, saved: dict[str, Path]) -> None:
    model = onnx.load(saved[name])
    summary = load(saved[name]).summary()
    assert [t.name for t in summary.inputs] == real_inputs(model)  # weights are not inputs
    declared = [v for v in model.graph.input if v.name in real_inputs(model)]
    for spec, value in zip(summary.inputs, declared, strict=True):
        for dim, proto in zip(spec.shape, declared_dims(value), strict=True):
            if proto.HasField("dim_value") and proto.dim_value > 0:
                assert dim == proto.dim_value
            else:  # named, unnamed or -1: dynamic, never a size
                assert not isinstance(dim, int)
                assert (dim if isinstance(dim, str) else "?") in summary.dynamic_dims
    assert summary.shapes_known > 0.5


@pytest.mark.parametrize("name", QUIRK_NAMES)
def test_quirk_goes_through_onnxsim_with_input_shape_and_verifies(
    name: str, saved: dict[str, Path], tmp_path: Path
) -> None:
    _, input_name, shape = qm.QUIRKS[name]
    info = cli("info", str(saved[name]), "--json")
    assert info.returncode == 0, info.stderr
    out = tmp_path / "simplified.onnx"
    spec = f"{input_name}={','.join(map(str, shape))}"
    done = cli(
        "passes", str(saved[name]), "--pipeline", "onnxsim", "--input-shape", spec, "--json", "-o", str(out)
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["original"]["max_abs_diff"] == 0.0, result["original"]["log"]
    (step,) = result["steps"]
    assert step["error"] is None
    assert isinstance(step["max_abs_diff"], float) and step["max_abs_diff"] < 1e-4, step
    simplified = onnx.load(out)
    (value,) = [v for v in simplified.graph.input if v.name == input_name]
    assert [d.dim_value for d in declared_dims(value)] == shape  # the fixed shape is in the result


# --------------------------------------------------------------------------------------
# paddle2onnx's dim_value: -1
# --------------------------------------------------------------------------------------


def relu_model(dims: list[int | str | None], **value_info: list[int | str | None]) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1] * len(dims))
    for dim, d in zip(x.type.tensor_type.shape.dim, dims, strict=True):
        dim.Clear()
        if isinstance(d, int):
            dim.dim_value = d
        elif isinstance(d, str):
            dim.dim_param = d
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    infos = [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in value_info.items()]
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])]
    return helper.make_model(
        helper.make_graph(nodes, "relu", [x], [y], value_info=infos),
        opset_imports=[helper.make_opsetid("", 17)],
    )


def test_minus_one_is_a_dynamic_dim_in_the_summary_and_the_drawn_shapes() -> None:
    graph = load(relu_model([-1, 3]))
    summary = graph.summary()
    assert summary.inputs[0].shape == (None, 3)
    assert "?" in summary.dynamic_dims  # the input's -1 (onnx names the output's dim unk__0)
    assert format_shape(summary.inputs[0].shape) == "[?, 3]"
    shapes = {k: d["shape"] for _, _, k, d in graph.nx.edges(keys=True, data=True)}
    assert set(shapes) == {"x", "r", "y"}
    assert all(len(s) == 2 and s[1] == 3 and not isinstance(s[0], int) for s in shapes.values()), shapes
    assert graph.model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == -1  # kept as written


def test_zero_is_dynamic_too() -> None:
    # keras2onnx and onnxmltools wrote dim_value 0 for unknown dims: non-positive is dynamic
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [0, 3])
    assert shape_from_type(x.type)[0] == (None, 3)
    model = relu_model([0, 3])
    fix_input_shapes(model, {"x": [2, 3]})
    assert [d.dim_value for d in declared_dims(model.graph.input[0])] == [2, 3]


def test_input_shapes_fix_a_minus_one_dim_but_not_a_real_size() -> None:
    model = relu_model([-1, 3])
    fix_input_shapes(model, {"x": [4, 3]})
    assert [d.dim_value for d in declared_dims(model.graph.input[0])] == [4, 3]
    with pytest.raises(ModelLoadError, match="dim 1 is fixed to 3"):
        fix_input_shapes(relu_model([-1, 3]), {"x": [4, 5]})
    assert load(relu_model([-1, 3]), input_shapes={"x": [4, 3]}).summary().outputs[0].shape == (4, 3)


def test_random_feeds_and_onnxsim_defaults_read_minus_one_as_dynamic() -> None:
    model = qm.paddle_minus_one()
    assert {k: v.shape for k, v in random_feeds(model).items()} == {"x": (32, 3, 48, 32)}
    shapes, log = _fixed_shapes(model, None)
    assert shapes == {"x": [32, 3, 48, 32]} and "dynamic dims fixed" in log[0]


def test_minus_one_model_simplifies_and_verifies_without_input_shapes(tmp_path: Path) -> None:
    path = tmp_path / "paddle.onnx"
    onnx.save(qm.paddle_minus_one(), path)
    timeline = run_pipeline(path, "onnxsim")
    assert timeline[1].changed and timeline[1].error is None
    assert timeline[1].max_abs_diff is not None and timeline[1].max_abs_diff < 1e-4  # was inf


def test_a_declared_minus_one_no_longer_crashes_onnx_inference() -> None:
    graph = load(gathernd_negative_dim())  # onnx's GatherND inference segfaulted on the -1
    assert not any("SIGSEGV" in note or "failed" in note for note in graph.notes), graph.notes
    assert graph.summary().inputs[1].shape == (None,)


# --------------------------------------------------------------------------------------
# Weights listed as graph inputs (IR < 4)
# --------------------------------------------------------------------------------------


def test_weights_as_inputs_are_not_inputs_for_shapes_or_feeds() -> None:
    model = qm.initializers_as_inputs()
    assert len(model.graph.input) == 9
    assert list(random_feeds(model)) == ["input.1"]
    assert list(_fixed_shapes(model, None)[0]) == ["input.1"]
    graph = load(model)
    assert [n for n in graph.nx if n.startswith("input:")] == ["input:input.1"]
    with pytest.raises(
        ModelLoadError,
        match=r"'conv1\.weight', which is a weight .* inputs are: input\.1 float32 \[batch, 3, 8, 8\]$",
    ):
        load(model, input_shapes={"conv1.weight": [4, 3, 3, 3]})


def test_input_shape_naming_a_weight_is_a_one_line_cli_error(tmp_path: Path) -> None:
    path = tmp_path / "old.onnx"
    onnx.save(qm.initializers_as_inputs(), path)
    done = cli("passes", str(path), "--pipeline", "onnxsim", "--input-shape", "fc.bias=5")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "'fc.bias', which is a weight" in done.stderr


# --------------------------------------------------------------------------------------
# value_info that contradicts inference
# --------------------------------------------------------------------------------------


def test_contradicting_value_info_loses_to_inference_with_a_note() -> None:
    graph = load(qm.stale_value_info())
    shapes = {k: d["shape"] for _, _, k, d in graph.nx.edges(keys=True, data=True)}
    assert shapes["conv_out"] == ("batch", 4, 8, 8)  # declared [batch, 4, 16, 16]
    assert shapes["relu_out"] == ("batch", 4, 8, 8)  # inferred from the stale one before
    assert shapes["pooled"] == ("batch", 4, 1, 1)  # declared with rank 2
    (note,) = [n for n in graph.notes if "contradicts" in n]
    assert "'conv_out' declared [batch, 4, 16, 16], inferred [batch, 4, 8, 8]" in note


def test_merge_refines_without_calling_it_a_contradiction() -> None:
    tables = {(): {"a": (("batch", 3), 1), "b": ((1, 3), 1), "c": ((None, 3), 1)}}
    notes = _merge(tables, {(): {"a": ((2, 3), 1), "b": (("n", 3), 1), "c": ((5, 3, 1), 1)}})
    assert tables[()] == {"a": ((2, 3), 1), "b": ((1, 3), 1), "c": ((5, 3, 1), 1)}
    assert len(notes) == 1 and "for 1 tensors" in notes[0] and "'c' declared [?, 3]" in notes[0]


def test_inference_view_puts_the_model_back_exactly() -> None:
    model = relu_model([-1, "n"], r=[7, 7], y=[-1, 2])
    before = model.SerializeToString()
    with inference_view(model) as (hidden, dynamic):
        assert (hidden, dynamic) == (2, 1)  # r and y are computed by Relu/Neg; x's -1
        assert len(model.graph.value_info) == 0
    assert model.SerializeToString() == before


def test_onnxsim_is_not_misled_by_a_stale_rank(tmp_path: Path) -> None:
    path = tmp_path / "stale.onnx"
    onnx.save(qm.stale_value_info(), path)
    timeline = run_pipeline(path, "onnxsim", input_shapes={"x": [2, 3, 16, 16]})
    assert timeline[1].error is None
    assert timeline[1].max_abs_diff == 0.0  # onnxsim dropped the Flatten, trusting the rank-2 pooled
    assert "Flatten" in timeline[1].graph.summary().ops


# --------------------------------------------------------------------------------------
# Node names repeated across subgraphs; old opsets
# --------------------------------------------------------------------------------------


def test_repeated_and_empty_names_across_subgraphs_give_unique_stable_ids() -> None:
    first, second = load(qm.subgraph_name_collisions()), load(qm.subgraph_name_collisions())
    assert len(set(first.op_nodes())) == len(first.op_nodes()) == 4  # Relu, ReduceSum, Greater, If
    assert list(first.nx) == list(second.nx)
    for (path, sub), (path2, sub2) in zip(first.iter_subgraphs(), second.iter_subgraphs(), strict=True):
        assert path == path2 and list(sub.nx) == list(sub2.nx)
        assert len(set(sub.op_nodes())) == 3
        assert {sub.nx.nodes[n]["name"] for n in sub.op_nodes()} == {"node", "Relu", ""}


@pytest.mark.parametrize("opset", [7, 8, 9, 10])
def test_old_opset_forms_infer_every_shape(opset: int) -> None:
    model = qm.old_opset(opset)
    graph = load(model)
    assert graph.summary().opsets == {"ai.onnx": opset}
    assert graph.summary().shapes_known == 1.0, graph.notes
    shapes = {k: d["shape"] for _, _, k, d in graph.nx.edges(keys=True, data=True)}
    assert shapes["up"][1:] == (4, 16, 16) and shapes["half"][1:] == (4, 4, 8)  # onnx loses "N" at Upsample
    assert list(random_feeds(model)) == ["data"]  # below IR 4 the weights are inputs too

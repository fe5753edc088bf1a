"""A target's partitions and fallback islands written as models, and run chained on ONNX Runtime."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from explorer import load, zoo
from explorer.core.compare import agreement
from explorer.core.errors import InvalidModelError, OutputPathError, UsageError
from explorer.onnx_adapter.inputs import random_feeds
from explorer.onnx_adapter.ort_run import run_onnxruntime
from explorer.onnx_adapter.tensor_protos import dtype_from_name
from explorer.targets import get_target, partition
from explorer.targets.split import (
    MANIFEST,
    check_split_folder,
    plan_pieces,
    read_split,
    run_split,
    split_partitions,
)

DETECTOR_SHAPES = {"images": [1, 3, 64, 64]}  # the HTP needs static shapes: fixed, it has fallback islands


@pytest.fixture(scope="module")
def detector_split(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, object, Path]:
    """zoo:yolov8 at 64x64, split for qnn-htp."""
    graph = load("zoo:yolov8", input_shapes=DETECTOR_SHAPES)
    out = tmp_path_factory.mktemp("detector") / "pieces"
    return graph, split_partitions(graph, "qnn-htp", out), out


def test_the_detectors_pieces_chained_give_the_models_outputs(detector_split: tuple) -> None:
    graph, result, out = detector_split
    assert result.count("fallback") >= 2 and result.count("supported") >= 2, result.summary
    feeds = random_feeds(graph.model, DETECTOR_SHAPES, seed=3)
    chained = run_split(out, feeds)
    whole = run_onnxruntime(graph.model, feeds)
    assert list(chained) == [o.name for o in graph.model.graph.output]
    found = agreement(whole, list(chained.values()))
    assert found.ok and found.max_abs_err < 1e-4, found


def test_every_piece_is_a_valid_model_with_typed_boundaries(detector_split: tuple) -> None:
    _, result, out = detector_split
    files = sorted(p.name for p in out.iterdir())
    assert files == sorted([MANIFEST, *(p.file for p in result.pieces)])
    for piece in result.pieces:
        path = out / piece.file
        onnx.checker.check_model(str(path), full_check=True)
        model = onnx.load(str(path))
        assert [v.name for v in model.graph.input] == [t.name for t in piece.inputs]
        assert [v.name for v in model.graph.output] == [t.name for t in piece.outputs]
        for value, tensor in zip(
            [*model.graph.input, *model.graph.output], [*piece.inputs, *piece.outputs], strict=True
        ):
            dims = [
                d.dim_value if d.HasField("dim_value") else d.dim_param
                for d in value.type.tensor_type.shape.dim
            ]
            elem = value.type.tensor_type.elem_type
            assert elem == dtype_from_name(tensor.dtype) != onnx.TensorProto.UNDEFINED and dims == list(
                tensor.shape
            )
            if piece.kind == "supported":  # the HTP takes static shapes only (islands may not have them)
                assert all(isinstance(d, int) for d in dims), (piece.file, value.name, dims)
        assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)


def test_the_pieces_cover_each_node_once_and_run_in_order(detector_split: tuple) -> None:
    graph, result, _ = detector_split
    p = partition(graph, get_target("qnn-htp"))
    nodes = [n for piece in result.pieces for n in piece.nodes]
    assert sorted(nodes) == sorted(graph.op_nodes()) and len(nodes) == len(set(nodes))
    supported = [piece for piece in result.pieces if piece.kind == "supported"]
    assert [set(piece.nodes) for piece in supported] == [set(g) for g in p.groups]  # the report's partitions
    assert {n for piece in result.pieces if piece.kind == "fallback" for n in piece.nodes} == set(
        p.fallback_nodes
    )
    known = set(result.inputs)
    for piece in result.pieces:  # each reads only the model's inputs and earlier pieces' outputs
        assert {t.name for t in piece.inputs} <= known, piece.file
        known |= {t.name for t in piece.outputs}
    assert set(result.outputs) <= known


def test_the_manifest_says_the_chain(detector_split: tuple) -> None:
    _, result, out = detector_split
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest == read_split(out) and manifest["target"] == "qnn-htp"
    assert [p["order"] for p in manifest["pieces"]] == list(range(1, len(result.pieces) + 1))
    first = manifest["pieces"][0]
    assert set(first) == {
        "order",
        "file",
        "kind",
        "placement",
        "device",
        "node_count",
        "nodes",
        "inputs",
        "outputs",
    }
    assert first["inputs"][0] == {"name": "images", "dtype": "float32", "shape": [1, 3, 64, 64]}
    assert manifest["outputs"] == ["output0"] and manifest["inputs"] == ["images"]
    assert result.to_frame()["nodes"].sum() == len(load("zoo:yolov8").op_nodes())


def test_control_flow_pieces_take_the_values_their_subgraphs_read(tmp_path: Path) -> None:
    graph = load("zoo:control_flow")
    result = split_partitions(graph, "qnn-htp", tmp_path / "pieces")
    assert result.count("fallback") >= 1 and len(result.pieces) >= 2
    feeds = random_feeds(graph.model)
    chained = run_split(tmp_path / "pieces", feeds)
    assert agreement(run_onnxruntime(graph.model, feeds), list(chained.values())).ok


def test_a_model_with_external_data_gives_pieces_that_stand_alone(tmp_path: Path) -> None:
    source = tmp_path / "in" / "mlp.onnx"
    source.parent.mkdir()
    onnx.save(zoo.build("mlp"), source, save_as_external_data=True, location="w.data", size_threshold=0)
    graph = load(str(source))
    result = split_partitions(graph, "coreml-mlprogram", tmp_path / "pieces")
    moved = tmp_path / "elsewhere"
    shutil.copytree(tmp_path / "pieces", moved)  # no piece points back at w.data
    feeds = random_feeds(graph.model)
    assert agreement(run_onnxruntime(str(source), feeds), list(run_split(moved, feeds).values())).ok
    assert sorted(os.listdir(source.parent)) == ["mlp.onnx", "w.data"] and result.pieces


def test_the_inputs_folder_holding_the_model_is_refused_before_any_work(tmp_path: Path) -> None:
    model = zoo.save("mlp", tmp_path)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(OutputPathError, match="holds the input model"):
        split_partitions(load(str(model)), "nnapi", tmp_path)
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize("where", ["a file", "the model", "a full folder", "a missing parent"])
def test_a_folder_that_cannot_take_the_split_is_refused_by_name(where: str, tmp_path: Path) -> None:
    model = zoo.save("mlp", tmp_path / "models")
    target = {
        "a file": tmp_path / "notes.txt",
        "the model": model,
        "a full folder": tmp_path / "full",
        "a missing parent": tmp_path / "no" / "pieces",
    }[where]
    if where == "a file":
        target.write_text("mine")
    elif where == "a full folder":
        target.mkdir()
        (target / "keep.txt").write_text("mine")
    says = {
        "a file": "is a file",
        "the model": "is the input model",
        "a full folder": "is not empty",
        "a missing parent": "does not exist",
    }[where]
    with pytest.raises(OutputPathError, match=says) as refused:
        check_split_folder(target, str(model))
    assert str(target) in str(refused.value)


def test_an_empty_folder_is_taken_and_nothing_is_staged_beside_it(tmp_path: Path) -> None:
    (tmp_path / "pieces").mkdir()
    result = split_partitions(load("zoo:detection_head"), "nnapi", tmp_path / "pieces")
    assert sorted(os.listdir(tmp_path)) == ["pieces"] and result.manifest.is_file()


def test_a_failed_split_leaves_nothing_behind(tmp_path: Path) -> None:
    """A Relu with an attribute it does not have: its piece fails the ONNX checker, as the model does."""
    from tests.explorer.cli.test_cli_matrix import bad_attribute_model

    with pytest.raises(InvalidModelError, match="does not pass the ONNX checker"):
        split_partitions(load(bad_attribute_model()), "qnn-htp", tmp_path / "pieces")
    assert os.listdir(tmp_path) == []


def test_a_report_of_several_targets_is_refused_and_of_one_is_split(tmp_path: Path) -> None:
    from explorer.targets import coverage

    graph = load("zoo:detection_head")
    with pytest.raises(UsageError, match="one target"):
        plan_pieces(graph, coverage(graph, ["nnapi", "ort-cpu"]))
    pieces = plan_pieces(graph, coverage(graph, ["nnapi"]))
    assert pieces == plan_pieces(graph, "nnapi") == plan_pieces(graph, partition(graph, get_target("nnapi")))


def test_running_a_folder_that_is_no_split_or_without_an_input_is_refused(detector_split: tuple) -> None:
    _, _, out = detector_split
    with pytest.raises(UsageError, match="not a split's folder"):
        run_split(out.parent.parent, {})
    with pytest.raises(UsageError, match="images"):
        run_split(out, {"other": np.zeros(1, np.float32)})

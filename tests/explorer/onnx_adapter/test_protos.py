"""Proto walks that need no graph model, and the light import they allow the worker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from explorer import zoo
from explorer.onnx_adapter.protos import constant_tensor, declared_types, iter_graph_paths, subgraph_attrs

ROOT = Path(__file__).resolve().parents[3]


def test_shape_inference_and_the_worker_import_without_networkx() -> None:
    script = (
        "import sys, explorer.isolation.worker, explorer.onnx_adapter.shape_inference;"
        "import explorer.onnx_adapter.load;"
        "print('networkx' in sys.modules);"
        "import explorer; explorer.ModelGraph;"
        "print('networkx' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["False", "True"]  # the graph model comes when it is asked for


def test_subgraph_paths_name_the_node_and_the_attribute() -> None:
    model = zoo.build("control_flow")
    paths = [path for path, _ in iter_graph_paths(model.graph)]
    assert paths[0] == ()
    for path in paths[1:]:
        index, key = path[-1]
        node = model.graph.node[index] if len(path) == 1 else None
        if node is not None:
            assert key.split("[")[0] in {a.name for a in node.attribute}
    branches = helper.make_attribute(
        "branches", [helper.make_graph([], "a", [], []), helper.make_graph([], "b", [], [])]
    )
    assert [key for key, _ in subgraph_attrs(branches)] == ["branches[0]", "branches[1]"]
    assert subgraph_attrs(helper.make_attribute("axis", 1)) == []


def test_declared_types_keep_the_initializer_dims_and_fill_unknown_shapes() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.zeros((3, 4), np.float32), "w")
    listed = helper.make_tensor_value_info("w", TensorProto.FLOAT, None)  # IR < 4 style
    graph = helper.make_graph([], "g", [x, listed], [], initializer=[w])
    graph.value_info.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "n"]))
    table = declared_types(graph)
    assert table["w"] == ((3, 4), TensorProto.FLOAT)
    assert table["x"] == ((2, "n"), TensorProto.FLOAT)  # the input had no shape; value_info has


@pytest.mark.parametrize(
    ("attribute", "value", "dims", "expected"),
    [
        ("value_float", 1.5, [], [1.5]),
        ("value_floats", [1.0, 2.0], [2], [1.0, 2.0]),
        ("value_int", 3, [], [3]),
        ("value_ints", [4, 5, 6], [3], [4, 5, 6]),
    ],
)
def test_constant_tensor_reads_every_scalar_and_list_form(
    attribute: str, value: object, dims: list[int], expected: list[float]
) -> None:
    node = helper.make_node("Constant", [], ["c"], **{attribute: value})
    tensor = constant_tensor(node)
    assert tensor is not None and tensor.name == "c" and list(tensor.dims) == dims
    assert numpy_helper.to_array(tensor).ravel().tolist() == expected


def test_constant_tensor_copies_a_tensor_value_and_skips_sparse_ones() -> None:
    value = numpy_helper.from_array(np.arange(4, dtype=np.int64), "original")
    node = helper.make_node("Constant", [], ["c"], value=value)
    tensor = constant_tensor(node)
    assert tensor is not None and tensor.name == "c" and value.name == "original"  # a copy
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.ones(1, np.float32), "v"),
        numpy_helper.from_array(np.zeros(1, np.int64), "i"),
        [4],
    )
    assert constant_tensor(helper.make_node("Constant", [], ["s"], sparse_value=sparse)) is None

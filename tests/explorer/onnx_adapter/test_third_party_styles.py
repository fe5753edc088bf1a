"""``onnx-explorer info --json`` on models in the styles of real third-party exporters.

The requirement: on exports from PyTorch (TorchScript and dynamo exporters),
Paddle (paddle2onnx) and Keras (tf2onnx), with dynamic dims, ``Constant``-heavy
graphs, second opset domains and control flow, the op histogram the CLI prints
is identical to the model's own node list, and the other facts (node count,
inputs and outputs, opsets, parameters, subgraphs) are right too.

Every expectation here is computed independently from the ``ModelProto`` (with
numpy for the parameter counts), never with the library's own helpers. The
CLI's ``main`` runs in this process (its process start is tested in test_cli); the
Python API is checked on the same models for stable, unique node ids, dtypes on
shaped edges and per-style name scopes.
"""

from __future__ import annotations

import ast
import json
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import AttributeProto, helper, numpy_helper

import explorer
from explorer import zoo
from tests.explorer import third_party_models as tpm
from tests.explorer.in_process import run_cli

# --------------------------------------------------------------------------------------
# Independent expectations from the ModelProto
# --------------------------------------------------------------------------------------


def subgraphs_of(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The graphs held by a node's attributes (``If`` branches, ``Loop``/``Scan`` bodies)."""
    found: list[onnx.GraphProto] = []
    for attr in node.attribute:
        if attr.type == AttributeProto.GRAPH:
            found.append(attr.g)
        elif attr.type == AttributeProto.GRAPHS:
            found.extend(attr.graphs)
    return found


def nested_graphs(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.GraphProto]:
    """Every graph nested (at any depth) in the given nodes."""
    for node in nodes:
        for graph in subgraphs_of(node):
            yield graph
            yield from nested_graphs(graph.node)


def constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    """The value of a ``Constant`` node as a numpy array (``None`` for a sparse value)."""
    for attr in node.attribute:
        if attr.name == "value":
            return numpy_helper.to_array(attr.t)
        if attr.name == "value_int":
            return np.array(attr.i, np.int64)
        if attr.name == "value_ints":
            return np.array(list(attr.ints), np.int64)
        if attr.name == "value_float":
            return np.array(attr.f, np.float32)
        if attr.name == "value_floats":
            return np.array(list(attr.floats), np.float32)
    return None


def expected_params(model: onnx.ModelProto) -> tuple[int, int]:
    """Elements and bytes of all initializers and ``Constant`` values, in every graph and function."""
    graphs = [model.graph, *nested_graphs(model.graph.node)]
    arrays = [numpy_helper.to_array(t) for g in graphs for t in g.initializer]
    nodes = [n for g in graphs for n in g.node]
    for function in model.functions:
        nodes.extend(function.node)
        nodes.extend(n for g in nested_graphs(function.node) for n in g.node)
    for node in nodes:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            value = constant_value(node)
            if value is not None:
                arrays.append(value)
    return sum(a.size for a in arrays), sum(a.nbytes for a in arrays)


def declared(value: onnx.ValueInfoProto) -> dict[str, Any]:
    """``{name, dtype, shape}`` as declared: dtype as numpy names it, symbolic dims as strings."""
    tensor_type = value.type.tensor_type
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)).name
    shape: list[Any] | None = None
    if tensor_type.HasField("shape"):
        shape = []
        for dim in tensor_type.shape.dim:
            kind = dim.WhichOneof("value")
            shape.append({"dim_value": dim.dim_value, "dim_param": dim.dim_param}.get(kind or ""))
    return {"name": value.name, "dtype": dtype, "shape": shape}


def assert_tensors(actual: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """Names and dtypes equal; every dimension the model declares (size or symbol) is reported as is."""
    assert [t["name"] for t in actual] == [t["name"] for t in expected]
    for got, want in zip(actual, expected, strict=True):
        assert got["dtype"] == want["dtype"], got
        if want["shape"] is None:
            continue  # rank not declared: whatever inference found is fine
        assert got["shape"] is not None and len(got["shape"]) == len(want["shape"]), (got, want)
        for got_dim, want_dim in zip(got["shape"], want["shape"], strict=True):
            if want_dim is not None:
                assert got_dim == want_dim, (got, want)
                assert type(got_dim) is type(want_dim), (got, want)


def assert_info(info: dict[str, Any], model: onnx.ModelProto) -> None:
    """Check the ``info --json`` object against the model it describes."""
    main = model.graph
    histogram = dict(Counter(n.op_type for n in main.node))
    assert info["ops"] == histogram
    assert info["nodes"] == len(main.node) == sum(info["ops"].values())
    assert info["opsets"] == {(o.domain or "ai.onnx"): o.version for o in model.opset_import}
    assert info["subgraphs"] == sum(1 for _ in nested_graphs(main.node))
    sub_histogram = Counter(n.op_type for g in nested_graphs(main.node) for n in g.node)
    assert info["ops_in_subgraphs"] == dict(sub_histogram)
    assert (info["params"], info["param_bytes"]) == expected_params(model)
    weights = {t.name for t in main.initializer}
    assert_tensors(info["inputs"], [declared(v) for v in main.input if v.name not in weights])
    assert_tensors(info["outputs"], [declared(v) for v in main.output])
    constants = sum(
        n.op_type == "Constant" for g in [main, *nested_graphs(main.node)] for n in g.node if n.domain == ""
    )
    assert info["constant_nodes"] == constants


def run_info(source: str | Path) -> dict[str, Any]:
    """``onnx-explorer info SOURCE --json``, parsed (run in this process: the command's own process
    start is tested in test_cli; here a Python start and a worker per model would cost minutes)."""
    done = run_cli("info", str(source), "--json")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout[:2000]
    return json.loads(lines[0])


# --------------------------------------------------------------------------------------
# Python API checks
# --------------------------------------------------------------------------------------


def all_model_graphs(graph: explorer.ModelGraph) -> list[tuple[tuple[str, ...], explorer.ModelGraph]]:
    """The graph and its nested subgraphs, with their paths."""
    return [((), graph), *graph.iter_subgraphs()]


def node_table(graph: explorer.ModelGraph) -> dict[tuple[str, ...], list[tuple[str, int, str]]]:
    """Path -> ``(node id, index, op_type)`` of every node, in insertion order."""
    return {
        path: [(n, d["index"], d["op_type"]) for n, d in g.nx.nodes(data=True)]
        for path, g in all_model_graphs(graph)
    }


def op_scopes(graph: explorer.ModelGraph) -> dict[str, tuple[str, ...]]:
    """Node name -> scope, for the main graph's operators."""
    return {d["name"]: d["scope"] for _, d in graph.nx.nodes(data=True) if d["kind"] == "op"}


def check_api(source: Any, model: onnx.ModelProto, info: dict[str, Any] | None = None) -> explorer.ModelGraph:
    """Load twice (and once with ``constants_as_nodes``) and check ids, folding and edge dtypes."""
    first = explorer.load(source)
    second = explorer.load(source)
    assert node_table(first) == node_table(second), "node ids are not stable across loads"
    full = explorer.load(source, constants_as_nodes=True)

    graphs = [model.graph, *nested_graphs(model.graph.node)]
    assert len(all_model_graphs(first)) == len(graphs)
    for folded, proto_indices in ((first, False), (full, True)):
        for path, g in all_model_graphs(folded):
            proto = g.proto
            ops = [d for _, d in g.nx.nodes(data=True) if d["kind"] == "op"]
            drawn = [i for i, n in enumerate(proto.node) if proto_indices or n.op_type != "Constant"]
            # one node per drawn operator: a clash of ids would merge two of them
            assert sorted(d["index"] for d in ops) == drawn, path
            for d in ops:
                node = proto.node[d["index"]]
                assert (d["op_type"], d["name"], d["domain"]) == (node.op_type, node.name, node.domain)
            has_constant_nodes = any(d["op_type"] == "Constant" for d in ops)
            assert has_constant_nodes == (proto_indices and any(n.op_type == "Constant" for n in proto.node))
            for u, v, key, data in g.nx.edges(keys=True, data=True):
                if data["shape"] is not None:
                    assert data["dtype"] not in (None, "undefined"), (path, u, v, key, data)
    if info is not None:
        api = first.summary().to_dict()
        assert {k: v for k, v in api.items() if k != "source"} == {
            k: v for k, v in info.items() if k != "source"
        }
    return first


def check_style(path: Path, model: onnx.ModelProto) -> tuple[dict[str, Any], explorer.ModelGraph]:
    """Save, run the CLI on the file, check its JSON and the Python API on the same file."""
    onnx.save(model, path)
    info = run_info(path)
    reloaded = onnx.load(path)
    assert_info(info, reloaded)
    return info, check_api(path, reloaded, info)


def run_ort(model: onnx.ModelProto | Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Run a model on ONNX Runtime's CPU provider."""
    source = str(model) if isinstance(model, Path) else model.SerializeToString()
    session = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def without_node_names(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy with every node name cleared (ONNX Runtime refuses duplicated names)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for node in copy.graph.node:
        node.name = ""
    return copy


# --------------------------------------------------------------------------------------
# The zoo
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", zoo.names())
def test_zoo_info_matches_node_list(name: str) -> None:
    model = zoo.build(name)
    info = run_info(f"zoo:{name}")
    assert_info(info, model)
    graph = check_api(f"zoo:{name}", model, info)
    # the zoo names nodes the way torch.onnx does: /scope/.../OpType
    for node_name, scope in op_scopes(graph).items():
        if node_name.startswith("/"):
            assert scope == tuple(node_name.strip("/").split("/")[:-1]), node_name


# --------------------------------------------------------------------------------------
# PyTorch
# --------------------------------------------------------------------------------------


def _export(module: Any, args: tuple[Any, ...], path: Path, **options: Any) -> onnx.ModelProto:
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(path), **options)
    model = onnx.load(path)
    onnx.checker.check_model(model)
    return model


def _assert_runs_like_torch(path: Path, module: Any, x: Any) -> None:
    import torch

    with torch.no_grad():
        want = module(x).numpy()
    (got,) = run_ort(path, {onnx.load(path).graph.input[0].name: x.numpy()})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.torch
def test_torch_legacy_cnn_with_dynamic_batch(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    module = tpm.torch_cnn()
    path = tmp_path / "cnn.onnx"
    model = _export(
        module,
        (torch.randn(2, 3, 16, 16),),
        path,
        dynamo=False,
        input_names=["image"],
        output_names=["logits"],
        dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
    )
    _assert_runs_like_torch(path, module, torch.randn(3, 3, 16, 16))  # another batch size

    info, graph = check_style(path, model)
    assert info["inputs"] == [{"name": "image", "dtype": "float32", "shape": ["batch", 3, 16, 16]}]
    assert info["outputs"] == [{"name": "logits", "dtype": "float32", "shape": ["batch", 5]}]
    assert info["ops"]["BatchNormalization"] == 1  # the one after a ReLU is not folded into a Conv
    assert info["dynamic_dims"] == ["batch"]
    scopes = op_scopes(graph)
    assert scopes["/features/features.0/Conv"] == ("features", "features.0")
    assert scopes["/features/features.5/BatchNormalization"] == ("features", "features.5")
    assert scopes["/fc/Gemm"] == ("fc",)


@pytest.mark.torch
def test_torch_legacy_transformer_is_constant_heavy(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    module = tpm.torch_encoder()
    path = tmp_path / "encoder.onnx"
    model = _export(
        module,
        (torch.randn(2, 5, 16),),
        path,
        dynamo=False,
        input_names=["tokens"],
        output_names=["scores"],
        dynamic_axes={"tokens": {0: "batch", 1: "seq"}, "scores": {0: "batch"}},
    )
    # another batch size; the seq length stays: the TorchScript exporter bakes it into
    # nn.MultiheadAttention's Reshape targets even with a dynamic "seq" axis
    _assert_runs_like_torch(path, module, torch.randn(3, 5, 16))

    info, graph = check_style(path, model)
    assert info["inputs"] == [{"name": "tokens", "dtype": "float32", "shape": ["batch", "seq", 16]}]
    assert info["outputs"][0]["shape"] == ["batch", 3]
    # the run-time shape arithmetic of the TorchScript exporter: counted, not folded away
    assert info["ops"]["Constant"] >= 20
    for op in ("Shape", "Gather", "Unsqueeze", "Concat", "Reshape"):
        assert info["ops"][op] >= 1, op
    assert not any(d["op_type"] == "Constant" for _, d in graph.nx.nodes(data=True))
    scopes = op_scopes(graph)
    attention = [n for n in scopes if n.startswith("/encoder/layers.0/self_attn/")]
    assert attention
    assert {scopes[n] for n in attention} == {("encoder", "layers.0", "self_attn")}
    assert scopes["/embed/MatMul"] == ("embed",)
    for name, scope in scopes.items():
        if name.startswith("/"):
            assert scope == tuple(name.strip("/").split("/")[:-1]), name
        elif "/" not in name and "." not in name:
            assert scope == (), name  # Constant_87, Identity_55...


@pytest.mark.torch
def test_torch_legacy_initializers_listed_as_inputs(tmp_path: Path) -> None:
    """Old exporters (and ``keep_initializers_as_inputs=True``) list every weight as a graph input."""
    torch = pytest.importorskip("torch")
    module = tpm.torch_cnn()
    path = tmp_path / "cnn_old.onnx"
    model = _export(
        module,
        (torch.randn(1, 3, 16, 16),),
        path,
        dynamo=False,
        opset_version=11,
        keep_initializers_as_inputs=True,
        input_names=["input.1"],
        dynamic_axes={"input.1": {0: "N"}},
    )
    assert len(model.graph.input) > 1
    _assert_runs_like_torch(path, module, torch.randn(2, 3, 16, 16))
    info, _ = check_style(path, model)
    assert [t["name"] for t in info["inputs"]] == ["input.1"]
    assert info["opsets"] == {"ai.onnx": 11}


@pytest.fixture(scope="module")
def dynamo_export(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """The MLP exported once by the dynamo exporter, with a dynamic batch."""
    torch = pytest.importorskip("torch")
    module = tpm.torch_mlp()
    path = tmp_path_factory.mktemp("dynamo") / "mlp.onnx"
    batch = torch.export.Dim("batch", min=1, max=64)
    _export(
        module,
        (torch.randn(4, 8),),
        path,
        dynamo=True,
        external_data=False,
        input_names=["features"],
        output_names=["out"],
        dynamic_shapes=({0: batch},),
    )
    return path, module


@pytest.mark.torch
def test_torch_dynamo_export(dynamo_export: tuple[Path, Any]) -> None:
    torch = pytest.importorskip("torch")
    path, module = dynamo_export
    _assert_runs_like_torch(path, module, torch.randn(5, 8))
    info, _ = check_style(path.with_name("copy.onnx"), onnx.load(path))
    assert info["inputs"] == [{"name": "features", "dtype": "float32", "shape": ["batch", 8]}]
    assert info["outputs"] == [{"name": "out", "dtype": "float32", "shape": ["batch", 4]}]
    assert info["opsets"]["ai.onnx"] >= 18


@pytest.mark.torch
def test_torch_dynamo_scopes_from_node_metadata(dynamo_export: tuple[Path, Any]) -> None:
    """Dynamo names nodes ``node_linear``; the module path is in ``pkg.torch.onnx.name_scopes`` metadata."""
    path, _ = dynamo_export
    model = onnx.load(path)
    graph = explorer.load(path)
    scopes = op_scopes(graph)
    checked = 0
    for node in model.graph.node:
        meta = {p.key: p.value for p in node.metadata_props}
        if "pkg.torch.onnx.name_scopes" not in meta:
            continue
        # "['', 'fc1', 'linear']": the root module, the submodules, then the aten op
        modules = tuple(ast.literal_eval(meta["pkg.torch.onnx.name_scopes"])[1:-1])
        if modules:
            checked += 1
            assert scopes[node.name] == modules, (node.name, meta["pkg.torch.onnx.name_scopes"])
    assert checked


@pytest.mark.torch
def test_load_torch_module_directly(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    module = tpm.torch_cnn()
    x = torch.randn(2, 3, 16, 16)
    graph = explorer.load(module, example_inputs=(x,))
    assert graph.model is not None
    summary = graph.summary()
    own = _export(module, (x,), tmp_path / "own.onnx", dynamo=False)
    histogram = dict(Counter(n.op_type for n in own.graph.node))
    assert summary.ops == histogram == dict(Counter(n.op_type for n in graph.model.graph.node))
    assert summary.nodes == len(own.graph.node)
    assert (summary.params, summary.param_bytes) == expected_params(own)
    assert summary.subgraphs == 0
    assert [t.shape for t in summary.inputs] == [(2, 3, 16, 16)]
    assert op_scopes(graph)["/features/features.0/Conv"] == ("features", "features.0")
    check_api(own.SerializeToString(), own)


@pytest.mark.torch
def test_load_torch_transformer_module_keeps_module_scopes() -> None:
    """``load(module)`` on an ``nn.TransformerEncoder`` gives the scopes the TorchScript export has."""
    torch = pytest.importorskip("torch")
    graph = explorer.load(tpm.torch_encoder(), example_inputs=(torch.randn(2, 5, 16),))
    summary = graph.summary()
    assert graph.model is not None
    assert summary.ops == dict(Counter(n.op_type for n in graph.model.graph.node))
    scopes = set(op_scopes(graph).values())
    names = [n.name for n in graph.model.graph.node[:3]]
    assert ("encoder", "layers.0", "self_attn") in scopes, f"scopes {sorted(scopes)} of nodes {names}..."


# --------------------------------------------------------------------------------------
# Paddle, Keras
# --------------------------------------------------------------------------------------


def test_paddle2onnx_style(tmp_path: Path) -> None:
    model = tpm.paddle_cnn()
    (out,) = run_ort(model, tpm.random_feeds(model, {"p2o.DynamicDimension.0": 3}))
    assert out.shape == (3, 10)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)

    info, graph = check_style(tmp_path / "paddle.onnx", model)
    assert info["inputs"] == [
        {"name": "x", "dtype": "float32", "shape": ["p2o.DynamicDimension.0", 3, 16, 16]}
    ]
    assert info["outputs"][0]["name"] == "softmax_0.tmp_0"
    assert info["opsets"] == {"ai.onnx": 11}
    assert info["ops"]["Constant"] == 4
    assert info["initializers"] == 7
    scopes = op_scopes(graph)
    assert scopes["p2o.Conv.0"] == ("conv2d_0",)
    assert scopes["p2o.BatchNormalization.0"] == ("batch_norm_0",)
    assert scopes["p2o.Relu.0"] == ("relu_0",)
    assert scopes["p2o.Reshape.0"] == ("flatten_0",)
    assert scopes["p2o.MatMul.0"] == scopes["p2o.Add.0"] == ("linear_0",)
    weights = {w.name for _, d in graph.nx.nodes(data=True) for w in d["weights"]}
    assert {"conv2d_0.w_0", "batch_norm_0.w_1", "linear_0.w_0"} <= weights
    reshape_target = graph.nx.nodes["p2o.Concat.0"]
    assert [w.values for w in reshape_target["weights"]] == [(-1,)]  # the Constant folded in


def test_paddle2onnx_helper_nodes_get_no_scope_of_their_own() -> None:
    """paddle2onnx names helper tensors like nodes (``p2o.Shape.1``): that is no module scope."""
    graph = explorer.load(tpm.paddle_cnn())
    scopes = op_scopes(graph)
    for name in ("p2o.Shape.0", "p2o.Slice.0", "p2o.Concat.0"):
        assert not any(part.startswith("p2o.") for part in scopes[name]), (name, scopes[name])


def test_tf2onnx_keras_style(tmp_path: Path) -> None:
    model = tpm.keras_cnn()
    (out,) = run_ort(model, tpm.random_feeds(model, {"unk__6": 3}))
    assert out.shape == (3, 10)

    info, graph = check_style(tmp_path / "keras.onnx", model)
    assert info["inputs"] == [{"name": "input_1", "dtype": "float32", "shape": ["unk__6", 10, 10, 1]}]
    assert info["outputs"] == [{"name": "Identity:0", "dtype": "float32", "shape": ["unk__7", 10]}]
    assert info["opsets"] == {"ai.onnx": 13, "ai.onnx.ml": 2}
    assert info["custom_domains"] == []  # ai.onnx.ml is a standard domain
    assert info["ops"]["Transpose"] == 2
    assert info["dynamic_dims"] == ["unk__6", "unk__7"]
    scopes = op_scopes(graph)
    prefix = ("StatefulPartitionedCall", "sequential")
    assert scopes["StatefulPartitionedCall/sequential/conv2d/Conv2D__6"] == (*prefix, "conv2d")
    assert scopes["StatefulPartitionedCall/sequential/conv2d/BiasAdd"] == (*prefix, "conv2d")
    assert scopes["StatefulPartitionedCall/sequential/max_pooling2d/MaxPool"] == (*prefix, "max_pooling2d")
    assert scopes["StatefulPartitionedCall/sequential/dense/MatMul"] == (*prefix, "dense")
    assert scopes["Identity"] == ()
    assert graph.nx.has_edge("Identity", "output:Identity:0")
    edge = graph.nx.edges["StatefulPartitionedCall/sequential/conv2d/Conv2D__6",
                          "StatefulPartitionedCall/sequential/conv2d/BiasAdd",
                          "StatefulPartitionedCall/sequential/conv2d/Conv2D__6:0"]  # fmt: skip
    assert (edge["shape"], edge["dtype"]) == (("unk__6", 1, 10, 10), "float32")


# --------------------------------------------------------------------------------------
# Constant-heavy, second domains
# --------------------------------------------------------------------------------------


def test_constant_heavy(tmp_path: Path) -> None:
    model = tpm.constant_heavy()
    y, mask = run_ort(model, tpm.random_feeds(model, {"batch": 3}))
    assert y.shape == (3, 6) and mask.shape == (3, 1) and mask.dtype == np.bool_

    info, graph = check_style(tmp_path / "constants.onnx", model)
    assert info["ops"]["Constant"] == info["constant_nodes"] == 12
    assert info["initializers"] == 0
    assert info["params"] == 1 + 1 + 2 + 1 + 3 + 3 + 2 + 36 + 1 + 1 + 1 + 1
    assert not any(d["op_type"] == "Constant" for _, d in graph.nx.nodes(data=True))
    # the value_float Constant is a weight of both Mul nodes that read it
    for mul in ("/Mul", "/Mul_2"):
        weights = graph.nx.nodes[mul]["weights"]
        assert [(w.name, w.values) for w in weights] == [("/Constant_3_output_0", (0.5,))]
    full = explorer.load(tmp_path / "constants.onnx", constants_as_nodes=True)
    constants = [n for n, d in full.nx.nodes(data=True) if d["op_type"] == "Constant"]
    assert len(constants) == 12
    assert full.nx.out_degree("/Constant_3") == 2
    assert full.summary().ops == info["ops"]


def test_contrib_ops_of_com_microsoft(tmp_path: Path) -> None:
    model = tpm.contrib_ops()
    (out,) = run_ort(model, tpm.random_feeds(model, {"batch": 2, "seq": 5}))
    assert out.shape == (2, 5, 16)

    info, graph = check_style(tmp_path / "contrib.onnx", model)
    assert info["opsets"] == {"ai.onnx": 17, "com.microsoft": 1}
    assert info["custom_domains"] == ["com.microsoft"]
    assert info["ops"] == {"FusedMatMul": 2, "BiasGelu": 1, "Add": 1, "Gelu": 1}
    # no onnx schema, but ONNX Runtime runs them (it just did)
    assert not any(onnx.defs.has(n.op_type, n.domain) for n in model.graph.node if n.domain)
    assert info["runtime_ops"] == [f"com.microsoft::{op}" for op in ("BiasGelu", "FusedMatMul", "Gelu")]
    assert info["unknown_ops"] == []
    assert graph.nx.nodes["/fc1/BiasGelu"]["domain"] == "com.microsoft"
    assert op_scopes(graph)["/fc2/FusedMatMul"] == ("fc2",)


def test_custom_domain_op_nobody_implements(tmp_path: Path) -> None:
    model = tpm.custom_op()
    with pytest.raises(Exception, match="MyOp"):
        run_ort(model, tpm.random_feeds(model))

    info, graph = check_style(tmp_path / "custom.onnx", model)
    assert info["unknown_ops"] == ["my.custom::MyOp"]
    assert info["runtime_ops"] == ["com.microsoft::Gelu"]
    assert info["custom_domains"] == ["com.microsoft", "my.custom"]
    assert info["opsets"] == {"ai.onnx": 17, "com.microsoft": 1, "my.custom": 1}
    assert info["ops"] == {"Relu": 1, "Gelu": 1, "MyOp": 1}
    node = graph.nx.nodes["/custom/MyOp"]
    assert (node["domain"], node["attributes"]) == ("my.custom", {"mode": "fast"})


# --------------------------------------------------------------------------------------
# Control flow
# --------------------------------------------------------------------------------------


def test_control_flow(tmp_path: Path) -> None:
    model = tpm.control_flow()
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    output, trace = run_ort(model, {"x": x})
    bias = np.linspace(-1, 1, 4).astype(np.float32)
    v = x + bias if x.sum() > 0 else x - bias
    means = []
    for i in range(3):
        v = v * 0.5 if i % 2 == 0 else v + x
        means.append(v.mean(axis=0))
    np.testing.assert_allclose(output, v, rtol=1e-6)
    np.testing.assert_allclose(trace, np.stack(means), rtol=1e-6)

    info, graph = check_style(tmp_path / "control_flow.onnx", model)
    assert info["subgraphs"] == tpm.CONTROL_FLOW_SUBGRAPHS
    assert info["max_depth"] == 2
    assert info["ops"] == {"ReduceSum": 1, "Constant": 3, "Greater": 1, "If": 1, "Loop": 1}
    assert info["ops_in_subgraphs"] == {
        "Add": 2, "Sub": 1, "Constant": 3, "Mod": 1, "Equal": 1, "If": 1, "Identity": 1, "ReduceMean": 1,
        "Mul": 1,
    }  # fmt: skip
    assert info["outputs"][1] == {"name": "trace", "dtype": "float32", "shape": ["steps", 4]}
    paths = {path for path, _ in graph.iter_subgraphs()}
    assert paths == {
        ("/branch/If", "then_branch"),
        ("/branch/If", "else_branch"),
        ("/loop/Loop", "body"),
        ("/loop/Loop", "body", "/loop/body/If", "then_branch"),
        ("/loop/Loop", "body", "/loop/body/If", "else_branch"),
    }
    # outer-scope reads: x by both branches and (two levels down) by the Loop body's else branch
    assert graph.nx.edges["input:x", "/loop/Loop", "x"]["implicit"]
    assert graph.nx.edges["input:x", "/branch/If", "x"]["implicit"]
    assert "bias" in {w.name for w in graph.nx.nodes["/branch/If"]["weights"]}
    body = graph.subgraphs["/loop/Loop"]["body"]
    assert body.nx.nodes["/loop/body/If"]["scope"] == ("loop", "body")
    inner_else = body.subgraphs["/loop/body/If"]["else_branch"]
    assert {"outer:x", "outer:v_in"} <= set(inner_else.nx.nodes)


def test_sibling_branches_reusing_a_tensor_name_keep_their_own_shapes(tmp_path: Path) -> None:
    model = tpm.branches_reusing_names(features=3)
    onnx.checker.check_model(model, full_check=True)
    for x, want in ((np.ones(3, np.float32), 6.0), (-np.ones(3, np.float32), -3.0)):
        np.testing.assert_allclose(run_ort(model, {"x": x})[0], [want])

    _, graph = check_style(tmp_path / "branches.onnx", model)
    branches = graph.subgraphs["/If"]
    then_tmp = branches["then_branch"].nx.edges["/then/Concat", "/then/ReduceSum", "tmp"]
    else_tmp = branches["else_branch"].nx.edges["/else/Identity", "/else/ReduceSum", "tmp"]
    assert then_tmp["shape"] == (6,)
    assert else_tmp["shape"] == (3,), "the else branch's tmp got the then branch's shape"


# --------------------------------------------------------------------------------------
# Missing and repeated node names
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("build", [tpm.unnamed_nodes, tpm.duplicate_names], ids=["unnamed", "duplicated"])
def test_node_names_missing_or_repeated(tmp_path: Path, build: Any) -> None:
    model = build()
    x = np.array([[-1.0, 0.5, 2.0]], np.float32)
    (y,) = run_ort(without_node_names(model), {"x": x})
    relu = np.maximum(x, 0)
    added = np.maximum((-relu + relu) * np.array([1, 2, 3], np.float32) + 1.5, 0)
    np.testing.assert_allclose(y, 1 / (1 + np.exp(-added)), rtol=1e-6)

    info, graph = check_style(tmp_path / "names.onnx", model)
    ids = graph.op_nodes()
    assert len(ids) == len(set(ids)) == 7  # 8 nodes, the Constant folded
    assert graph.nx.number_of_nodes() == len(ids) + 2  # and input:x, output:y: nothing merged
    op_types = [graph.nx.nodes[i]["op_type"] for i in ids]
    assert op_types == ["Relu", "Neg", "Add", "Mul", "Add", "Relu", "Sigmoid"]
    assert info["ops"] == {"Relu": 2, "Neg": 1, "Add": 2, "Mul": 1, "Constant": 1, "Sigmoid": 1}


@pytest.mark.parametrize("build", [tpm.unnamed_nodes, tpm.duplicate_names], ids=["unnamed", "duplicated"])
def test_node_ids_do_not_depend_on_constant_folding(build: Any) -> None:
    """The id of an operator is the same whether ``Constant`` nodes are drawn or folded."""
    model = build()
    folded = explorer.load(model)
    drawn = explorer.load(model, constants_as_nodes=True)
    by_index = {drawn.nx.nodes[n]["index"]: n for n in drawn.op_nodes()}
    for node_id in folded.op_nodes():
        index = folded.nx.nodes[node_id]["index"]
        assert by_index[index] == node_id, (index, node_id, by_index[index])

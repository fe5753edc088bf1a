"""Weights stay where they are until something needs their values; locations are checked as strictly."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from explorer import load, zoo
from explorer.core.errors import (
    ExternalDataError,
    InvalidModelError,
    MissingExternalDataError,
    ModelTooLargeError,
    UnsafeExternalDataError,
)
from explorer.core.tensors import array_stats, chunk_stats
from explorer.onnx_adapter.weights import (
    LAZY_EXTERNAL_BYTES,
    STRIP_KEEP_BYTES,
    check_declared_sizes,
    check_stored_sizes,
    external_span,
    model_bytes,
    stripped_copy,
    tensor_array,
    tensor_digest,
    tensor_stats,
)
from explorer.passes import get_pass
from explorer.passes.pipeline import run_pipeline
from explorer.views.details import node_details, weight_stats

GIB = 1 << 30


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def chain_3gib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three 1 GiB MatMul weights in one external file (sparse: no disk space, instant)."""
    return zoo.write_external_chain(tmp_path_factory.mktemp("chain3g"))


def _rewrite_location(path: Path, **fields: str) -> None:
    model = onnx.load(path, load_external_data=False)
    for entry in model.graph.initializer[0].external_data:
        if entry.key in fields:
            entry.value = fields[entry.key]
    path.write_bytes(model.SerializeToString())


def test_3gib_external_model_loads_structure_and_shapes_without_reading_weights(chain_3gib: Path) -> None:
    # in a fresh process, so its peak memory says whether the 3 GiB were read
    script = (
        "import json, sys\n"
        "from explorer import load\n"
        "def peak_mb():  # VmHWM: this process's own high-water mark (ru_maxrss keeps the forking parent's)\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM:'):\n"
        "            return int(line.split()[1]) / 1024\n"
        "if __name__ == '__main__':\n"
        "    g = load(sys.argv[1])\n"
        "    s = g.summary()\n"
        "    print(json.dumps({'rss_mb': peak_mb(),\n"
        "        'param_bytes': s.param_bytes, 'external': s.external_tensors, 'notes': g.notes,\n"
        "        'shapes': [list(e[2]) if e[2] else None for e in g.nx.edges(data='shape')]}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(chain_3gib)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    assert facts["param_bytes"] == 3 * GIB
    assert facts["external"] == 3
    assert facts["shapes"] == [["batch", 16384]] * 4  # shape inference worked above 2 GiB
    assert not any("shape inference" in note for note in facts["notes"]), facts["notes"]
    assert any("read on demand" in note for note in facts["notes"])
    assert facts["rss_mb"] < 1024, "loading read the weights"


def test_info_on_the_3gib_model(chain_3gib: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "explorer.cli", "info", str(chain_3gib), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["param_bytes"] == 3 * GIB and info["ops"] == {"MatMul": 3}


def test_weight_statistics_are_read_when_asked(chain_3gib: Path) -> None:
    graph = load(chain_3gib)
    weight = graph.node("/layers.1/MatMul")["weights"][0]
    assert weight.loaded and weight.external and weight.nbytes == GIB
    # the details panel does not read a 1 GiB weight by itself ...
    assert node_details(graph, "/layers.1/MatMul").weights[0]["stats"] is None
    # ... but asking reads it (weight 1 starts with 2.0 and ends with -2.0, zeros between)
    stats = weight_stats(graph, "layers.1.weight")
    assert stats is not None
    assert (stats["min"], stats["max"]) == (-2.0, 2.0)
    assert stats["mean"] == pytest.approx(0.0, abs=1e-12)
    assert stats["std"] == pytest.approx(np.sqrt(8 / 16384**2))


def test_external_weights_are_memory_mapped(chain_3gib: Path) -> None:
    graph = load(chain_3gib)
    array = tensor_array(graph.model.graph.initializer[2], graph.weights_dir)
    assert isinstance(array, np.memmap) and array.shape == (16384, 16384)
    assert (float(array[0, 0]), float(array[-1, -1])) == (3.0, -3.0)


def test_without_external_data_the_values_are_not_available(chain_3gib: Path) -> None:
    graph = load(chain_3gib, external_data=False)
    assert not graph.node("/layers.0/MatMul")["weights"][0].loaded
    assert weight_stats(graph, "layers.0.weight") is None


def test_a_pass_that_cannot_take_2gib_refuses_before_starting(chain_3gib: Path) -> None:
    graph = load(chain_3gib)
    assert model_bytes(graph.model) > 3 * GIB
    with pytest.raises(ModelTooLargeError, match=r"2 GiB.*3\.0 GiB.*ort:basic"):
        get_pass("opset:18").run(graph.model, model_path=graph.model_path)


@pytest.mark.slow
def test_onnx_runtime_levels_work_above_2gib_through_external_data(chain_3gib: Path) -> None:
    timeline = run_pipeline(load(chain_3gib), "opset:18,ort:basic", verify=False)
    assert timeline[1].error.startswith("ModelTooLargeError")  # recorded on its step, pipeline goes on
    assert timeline[2].error is None
    after = timeline[2].graph
    assert after.summary().param_bytes == 3 * GIB
    assert after.model_path is not None and (after.model_path.parent / "model.onnx.data").is_file()
    assert weight_stats(after, "layers.2.weight")["max"] == 3.0  # read from the pass's own external file


@pytest.fixture
def lazy_model(tmp_path: Path) -> Path:
    """Two 4 MiB weights in an external file: above LAZY_EXTERNAL_BYTES, so they stay on disk."""
    path = zoo.write_external_chain(tmp_path / "m", hidden=1024, layers=2)
    assert LAZY_EXTERNAL_BYTES <= 1024 * 1024 * 4
    return path


def test_lazy_external_data_loads_nothing_and_leaves_the_files_alone(lazy_model: Path) -> None:
    data = lazy_model.with_name("model.onnx.data")
    before = _digest(lazy_model), _digest(data)
    graph = load(lazy_model)
    assert graph.summary().external_tensors == 2
    assert graph.model_path == lazy_model.resolve() and graph.weights_dir == lazy_model.parent.resolve()
    assert all(t.data_location == TensorProto.EXTERNAL for t in graph.model.graph.initializer)
    assert (_digest(lazy_model), _digest(data)) == before


@pytest.mark.parametrize("location", ["../model.onnx.data", "/etc/passwd"])
def test_lazy_external_data_is_checked_as_strictly(lazy_model: Path, location: str) -> None:
    _rewrite_location(lazy_model, location=location)
    with pytest.raises(UnsafeExternalDataError, match="refused, nothing was read"):
        load(lazy_model)


def test_lazy_external_data_symlink_escaping_is_refused(lazy_model: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.bin"
    outside.write_bytes(lazy_model.with_name("model.onnx.data").read_bytes())
    (lazy_model.parent / "link.bin").symlink_to(outside)
    _rewrite_location(lazy_model, location="link.bin")
    with pytest.raises(UnsafeExternalDataError, match="symlink"):
        load(lazy_model)


def test_lazy_external_data_past_the_end_is_refused(lazy_model: Path) -> None:
    _rewrite_location(lazy_model, offset=str(5 << 20))
    with pytest.raises(MissingExternalDataError, match="past the end"):
        load(lazy_model)


def test_input_shapes_on_lazy_weights_still_run_in_onnx_runtime(lazy_model: Path) -> None:
    graph = load(lazy_model, input_shapes={"input": [2, 1024]})
    assert graph.model_path is None  # the model now differs from the file
    timeline = run_pipeline(graph, "ort:basic")
    assert timeline[0].max_abs_diff == 0.0 and timeline[1].error is None
    assert timeline[1].max_abs_diff is not None and timeline[1].max_abs_diff < 1e-5


def test_stripped_copy_keeps_dims_and_small_values_and_leaves_the_input_alone() -> None:
    model = zoo.build("transformer", layers=1, hidden=256, heads=4)
    before = model.SerializeToString()
    copy = stripped_copy(model)
    assert model.SerializeToString() == before
    assert copy.ByteSize() < model.ByteSize() / 10
    for original, kept in zip(model.graph.initializer, copy.graph.initializer, strict=True):
        assert (kept.name, list(kept.dims), kept.data_type) == (
            original.name,
            list(original.dims),
            original.data_type,
        )
        small = len(original.raw_data) <= STRIP_KEEP_BYTES
        assert kept.raw_data == original.raw_data if small else not kept.HasField("raw_data")
    assert [n.SerializeToString() for n in copy.graph.node] == [
        n.SerializeToString() for n in model.graph.node
    ]


def test_digests_of_external_tensors_follow_their_content(lazy_model: Path, tmp_path: Path) -> None:
    twin = zoo.write_external_chain(tmp_path / "twin", hidden=1024, layers=2)
    a, b = load(lazy_model), load(twin)
    first = [tensor_digest(t, a.weights_dir) for t in a.model.graph.initializer]
    second = [tensor_digest(t, b.weights_dir) for t in b.model.graph.initializer]
    assert first == second and first[0] != first[1]


def test_chunked_statistics_match_numpy() -> None:
    values = np.random.default_rng(0).standard_normal(10_001).astype(np.float32) * 3 + 1
    stats = chunk_stats(np.array_split(values, 7))
    assert stats == pytest.approx(
        {"min": values.min(), "max": values.max(), "mean": values.mean(), "std": values.std()}, rel=1e-5
    )
    assert array_stats(values) == pytest.approx(stats)
    assert chunk_stats([np.arange(3)]) is None


def test_tensor_stats_of_in_memory_and_external_tensors_agree(lazy_model: Path) -> None:
    graph = load(lazy_model)
    tensor = graph.model.graph.initializer[0]
    inline = onnx.load(lazy_model).graph.initializer[0]  # onnx reads the bytes into the proto
    assert tensor_stats(tensor, graph.weights_dir) == pytest.approx(tensor_stats(inline, None))


def test_passes_output_of_a_model_with_external_weights_keeps_its_weights(
    lazy_model: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out" / "optimized.onnx"
    out.parent.mkdir()  # an output in a missing folder is refused
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "explorer.cli",
            "passes",
            str(lazy_model),
            "--pipeline",
            "ort:basic",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    saved = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(out).graph.initializer}
    original = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(lazy_model).graph.initializer}
    assert sorted(saved) == sorted(original)
    assert all(np.array_equal(saved[name], original[name]) for name in original)


# --- declared sizes against the source's length ------------------------------------------------


def _with_tensor(tensor: TensorProto, where: str = "initializer") -> onnx.ModelProto:
    """A model holding ``tensor``: an initializer, a Constant's value, a TENSORS attribute, in a function."""
    from onnx import helper

    graph = helper.make_graph([], "g", [], [])
    model = helper.make_model(graph)
    if where == "initializer":
        graph.initializer.append(tensor)
    elif where == "constant":
        graph.node.append(helper.make_node("Constant", [], ["c"], value=tensor))
    elif where == "tensors":
        node = helper.make_node("Custom", [], ["c"], domain="acme")
        node.attribute.append(helper.make_attribute("values", [tensor]))
        graph.node.append(node)
    elif where == "function":
        constant = helper.make_node("Constant", [], ["c"], value=tensor)
        model.functions.append(helper.make_function("acme", "f", [], ["c"], [constant], []))
    model.graph.CopyFrom(graph)
    return model


@pytest.mark.parametrize("where", ["initializer", "constant", "tensors", "function"])
def test_a_declared_shape_past_the_source_is_refused_wherever_the_tensor_is(where: str) -> None:
    tensor = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[1000, 1000], raw_data=bytes(16))
    with pytest.raises(InvalidModelError, match=r"m\.onnx: tensor 'W' declares shape \[1000, 1000\]"):
        check_declared_sizes(_with_tensor(tensor, where), 10_000, "m.onnx")


@pytest.mark.parametrize(
    ("tensor", "source_bytes"),
    [
        # each value takes at least a byte (here: varints of 0 in int32_data for float16, 2 bytes each)
        (TensorProto(name="h", data_type=TensorProto.FLOAT16, dims=[100], int32_data=[0] * 100), 110),
        # 4-bit values: two to a byte
        (TensorProto(name="q", data_type=TensorProto.INT4, dims=[200], raw_data=bytes(100)), 110),
        (TensorProto(name="s", data_type=TensorProto.STRING, dims=[3], string_data=[b"a", b"b", b"c"]), 20),
        (TensorProto(name="shape_only", data_type=TensorProto.FLOAT, dims=[10**6, 10**6]), 20),
        (TensorProto(name="empty", data_type=TensorProto.FLOAT, dims=[0, 10**9], raw_data=b""), 20),
        (TensorProto(name="corrupt_dims", data_type=TensorProto.INT64, dims=[-1], raw_data=bytes(8)), 20),
    ],
    ids=lambda value: getattr(value, "name", str(value)),
)
def test_tensors_that_can_be_in_the_source_pass(tensor: TensorProto, source_bytes: int) -> None:
    check_declared_sizes(_with_tensor(tensor), source_bytes)


def test_external_tensors_are_left_to_their_span_check() -> None:
    tensor = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[10**6, 10**6])
    tensor.data_location = TensorProto.EXTERNAL
    check_declared_sizes(_with_tensor(tensor), 20)  # external_span checks it against its data file


def _float_w(**values: object) -> TensorProto:
    return TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[4], **values)


@pytest.mark.parametrize(
    ("tensor", "says"),
    [
        (
            _float_w(raw_data=bytes(12)),
            "holds 12 bytes of values (raw_data) but its shape [4] of float32 needs 16",
        ),
        (
            _float_w(raw_data=bytes(20)),
            "holds 20 bytes of values (raw_data) but its shape [4] of float32 needs 16",
        ),
        (_float_w(float_data=[1.0] * 3), "holds 3 values in float_data but its shape [4] of float32 needs 4"),
        (TensorProto(name="W", data_type=TensorProto.INT4, dims=[5], int32_data=[0] * 2), "int32_data"),
        (TensorProto(name="W", data_type=TensorProto.COMPLEX64, dims=[2], float_data=[0.0] * 2), "needs 4"),
        (TensorProto(name="W", data_type=TensorProto.STRING, dims=[2], string_data=[b"a"]), "string_data"),
    ],
    ids=["raw short", "raw long", "float_data", "int4 packed", "complex64", "strings"],
)
@pytest.mark.parametrize("where", ["initializer", "constant", "function"])
def test_values_that_disagree_with_their_shape_are_refused_naming_the_tensor(
    tensor: TensorProto, says: str, where: str
) -> None:
    """ONNX Runtime refused them with a bare FAIL (an internal error), IREE read past the values (#39)."""
    with pytest.raises(InvalidModelError, match=r"m\.onnx: tensor 'W' holds ") as raised:
        check_stored_sizes(_with_tensor(tensor, where), "m.onnx")
    assert says in str(raised.value) and "re-export it" in str(raised.value)


@pytest.mark.parametrize(
    "tensor",
    [
        _float_w(raw_data=bytes(16)),
        _float_w(float_data=[1.0] * 4),
        _float_w(),  # stripped: no values to compare
        TensorProto(name="q", data_type=TensorProto.INT4, dims=[5], raw_data=bytes(3)),
        TensorProto(name="q", data_type=TensorProto.UINT4, dims=[5], int32_data=[0] * 3),
        TensorProto(name="c", data_type=TensorProto.COMPLEX64, dims=[2], float_data=[0.0] * 4),
        TensorProto(name="h", data_type=TensorProto.FLOAT16, dims=[3], int32_data=[0] * 3),
        TensorProto(name="s", data_type=TensorProto.STRING, dims=[2], string_data=[b"a", b"b"]),
        TensorProto(name="scalar", data_type=TensorProto.INT64, dims=[], int64_data=[7]),
        TensorProto(name="empty", data_type=TensorProto.FLOAT, dims=[0, 3], raw_data=b""),
        TensorProto(name="corrupt_dims", data_type=TensorProto.INT64, dims=[-1], raw_data=bytes(8)),
    ],
    ids=lambda t: f"{t.name}-{t.data_type}",
)
def test_values_that_match_their_shape_pass(tensor: TensorProto) -> None:
    check_stored_sizes(_with_tensor(tensor))


def test_a_model_file_whose_values_disagree_with_a_shape_is_refused_at_load(tmp_path: Path) -> None:
    from tests.explorer.bad_models import stored_values_mismatch

    path = tmp_path / "short.onnx"
    onnx.save(stored_values_mismatch(), path)
    with pytest.raises(InvalidModelError, match=r"short\.onnx: tensor 'W' holds 12 bytes"):
        load(path)
    with pytest.raises(InvalidModelError, match=r"tensor 'W' holds 3 values in float_data"):
        load(stored_values_mismatch("float_data"))


def test_every_zoo_model_holds_the_values_its_shapes_need() -> None:
    for name in zoo.names():
        check_stored_sizes(zoo.build(name), name)


def test_a_zoo_model_saved_passes() -> None:
    path = zoo.save("resnet18")
    check_declared_sizes(onnx.load(path), path.stat().st_size, str(path))


def test_an_external_data_file_that_is_not_a_file_is_refused(tmp_path: Path) -> None:
    tensor = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[4])
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "weights.bin"
    os.mkfifo(tmp_path / "weights.bin")
    with pytest.raises(ExternalDataError, match=r"is a FIFO \(named pipe\), not a data file"):
        external_span(tensor, tmp_path, "m.onnx")

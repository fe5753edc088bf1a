"""explorer.onnx_adapter.load: every source kind, input shapes, and every kind of bad input."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from explorer import load
from explorer.core.errors import (
    DanglingInputError,
    EmptyModelError,
    ExternalDataError,
    GraphCycleError,
    InvalidModelError,
    MissingExternalDataError,
    ModelLoadError,
    ModelNotFoundError,
    ModelParseError,
    UnsafeExternalDataError,
    UnsupportedOpsetError,
)
from tests.conftest import digest, tiny_model
from tests.explorer import bad_models
from tests.explorer.capped import load_capped


def test_loads_path_bytes_and_modelproto_alike(tiny_path: Path) -> None:
    from_path = load(tiny_path)
    from_bytes = load(tiny_path.read_bytes())
    from_proto = load(onnx.load(tiny_path))
    for graph in (from_path, from_bytes, from_proto):
        assert sorted(graph.nx.nodes) == ["/act/Relu", "/fc/Add", "/fc/MatMul", "input:x", "output:y"]
    assert from_path.source == str(tiny_path)
    assert from_bytes.source == from_proto.source == "tiny"  # in memory: the graph's name


def test_a_model_made_in_memory_reads_by_its_graph_name_not_its_type() -> None:
    from explorer import zoo

    assert load(zoo.build("resnet18")).source == "resnet18"
    unnamed = tiny_model()
    unnamed.graph.name = ""
    assert load(unnamed).source == "<ModelProto>"
    assert load(unnamed.SerializeToString()).source == "<bytes>"
    assert load(tiny_model(), name="my model").source == "my model"


def test_a_name_does_not_replace_the_file_workers_read(tmp_path: Path) -> None:
    path = tmp_path / "tiny.onnx"
    onnx.save(tiny_model(), path)
    graph = load(onnx.load(path), model_path=path, name="tiny after a pass")
    assert graph.source == "tiny after a pass" and graph.model_path == path.resolve()
    from explorer.onnx_adapter.model_files import worker_source

    assert worker_source(graph) == str(path.resolve())


def test_modelproto_given_is_never_mutated() -> None:
    model = tiny_model()
    before = model.SerializeToString()
    graph = load(model, input_shapes={"x": [2, 4]})
    assert model.SerializeToString() == before
    assert graph.model is not model


def test_input_file_is_never_written(tiny_path: Path) -> None:
    before = digest(tiny_path)
    load(tiny_path, input_shapes={"x": [8, 4]})
    assert digest(tiny_path) == before


def test_input_shapes_fix_dims_and_propagate() -> None:
    graph = load(tiny_model(), input_shapes={"x": [5, 4]})
    assert graph.summary().inputs[0].shape == (5, 4)
    assert graph.nx.edges["/act/Relu", "output:y", "y"]["shape"] == (5, 3)
    assert graph.nx.edges["/act/Relu", "output:y", "y"]["bytes"] == 5 * 3 * 4


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        ({"nope": [1, 4]}, "model's inputs are: x"),
        ({"x": [1, 4, 4]}, "rank 2"),
        ({"x": [1, 5]}, "fixed to 4"),
        ({"x": [0, 4]}, "positive"),
    ],
)
def test_bad_input_shapes_are_named(shapes: dict, message: str) -> None:
    with pytest.raises(ModelLoadError, match=message):
        load(tiny_model(), input_shapes=shapes)


def test_zoo_source() -> None:
    assert load("zoo:mlp").source == "zoo:mlp"
    with pytest.raises(ModelNotFoundError, match="zoo:nope"):
        load("zoo:nope")


def test_while_inferring_runs_once_before_the_inferred_shapes_arrive(tmp_path: Path) -> None:
    from explorer import zoo

    path = tmp_path / "mlp.onnx"
    onnx.save(zoo.build("mlp"), path)
    seen: list[str] = []
    graph = load(path, while_inferring=lambda: seen.append("called"))
    assert seen == ["called"]
    assert graph.nx.edges["/fc1/Gemm", "/relu1/Relu", "/fc1/Gemm_output_0"]["shape"] == ("batch", 256)
    load("zoo:mlp", while_inferring=lambda: seen.append("no worker"), isolate=False)
    assert seen == ["called", "no worker"]  # called also when nothing runs in the background


def test_unsupported_source_type() -> None:
    with pytest.raises(TypeError, match="not int"):
        load(42)


# --- bad files -------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "missing.onnx"
    with pytest.raises(ModelNotFoundError) as info:
        load(path)
    assert str(path) in str(info.value) and "no such file" in str(info.value)


def test_folder_is_not_a_model(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="is a folder"):
        load(tmp_path)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    with pytest.raises(EmptyModelError, match=r"empty\.onnx: the file is empty"):
        load(path)


@pytest.mark.parametrize("seed", range(4))
def test_random_bytes(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "random.onnx"
    path.write_bytes(np.random.default_rng(seed).bytes(4096))
    with pytest.raises(ModelParseError, match=r"random\.onnx: not (a valid ONNX protobuf|an ONNX model)"):
        load(path)


def test_text_file_is_not_a_model(tmp_path: Path) -> None:
    path = tmp_path / "notes.onnx"
    path.write_text("this is not a model\n")
    with pytest.raises(ModelParseError, match=r"notes\.onnx"):
        load(path)


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9, 0.999])
def test_truncated_protobuf(tmp_path: Path, keep: float) -> None:
    data = tiny_model().SerializeToString()
    path = tmp_path / "truncated.onnx"
    path.write_bytes(data[: max(1, int(len(data) * keep))])
    with pytest.raises(ModelLoadError, match=r"truncated\.onnx") as info:
        load(path)
    assert isinstance(info.value, (ModelParseError, InvalidModelError))


# --- not a regular file, or sizes past the file: refused before anything is read ---------------
# Each in a fresh process capped at 2 GiB of address space and a minute (tests.explorer.capped): a
# regression reads /dev/zero into a MemoryError or blocks on the FIFO, and fails here instead of
# taking the machine down.


def _special_file(kind: str, folder: Path) -> Path:
    """A path of ``kind``: a device, a FIFO or a socket named like a model, or a link to /dev/zero."""
    if kind.startswith("/dev/"):
        return Path(kind)
    path = folder / "model.onnx"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(path))  # the file stays after the socket closes
    elif kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    return path


SPECIAL_FILES = {
    "/dev/zero": "is a character device, not an ONNX model file",
    "/dev/urandom": "is a character device, not an ONNX model file",
    "fifo": "is a FIFO (named pipe), not an ONNX model file",
    "socket": "is a socket, not an ONNX model file",
    "link to /dev/zero": "is a character device (a link to /dev/zero), not an ONNX model file",
}


@pytest.mark.parametrize("kind", list(SPECIAL_FILES))
def test_a_device_fifo_or_socket_is_refused_before_it_is_opened(kind: str, tmp_path: Path) -> None:
    path = _special_file(kind, tmp_path)
    outcome = load_capped(path)
    assert outcome["type"] == "ModelNotFoundError", outcome
    assert outcome["message"] == f"{path}: {SPECIAL_FILES[kind]}"


def test_a_fifo_is_refused_in_this_process_too(tmp_path: Path) -> None:
    """As a notebook calls it. The FIFO has no writer: opening it would block until one came. (Only
    the FIFO here: a device read without end in the test process would take the machine down.)"""
    path = _special_file("fifo", tmp_path)
    outcome: list[BaseException] = []

    def attempt() -> None:
        try:
            load(path)
        except BaseException as err:
            outcome.append(err)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(timeout=30)
    if thread.is_alive():  # unblock the reader a regression left waiting, then fail
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"load({str(path)!r}) did not return in 30 s")
    assert len(outcome) == 1 and isinstance(outcome[0], ModelNotFoundError), outcome
    assert str(outcome[0]) == f"{path}: {SPECIAL_FILES['fifo']}"


@pytest.mark.parametrize("where", ["initializer", "float_data", "constant"])
def test_a_tensor_declaring_more_values_than_the_file_holds_is_refused(where: str, tmp_path: Path) -> None:
    path = tmp_path / "declared.onnx"
    path.write_bytes(bad_models.declared_shape_past_file(where).SerializeToString())
    outcome = load_capped(path)
    assert outcome["type"] == "InvalidModelError" and "ModelLoadError" in outcome["mro"], outcome
    size = path.stat().st_size
    assert outcome["message"] == (
        f"{path}: tensor 'W' declares shape [1000000, 1000000] (float32, 3725.3 GiB) but the whole model "
        f"is {size} B: its values cannot be in it (a corrupt or hand-edited model)"
    )
    with pytest.raises(InvalidModelError, match="declares shape"):
        load(path.read_bytes())  # the bytes given are the bound too


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (bad_models.external_data_past_eof, "offset 1,000,000 + length 16 bytes points past the end"),
        (bad_models.external_data_huge_length, "length 1,000,000,000,000,000 bytes points past the end"),
    ],
    ids=["offset past the end", "length past the end"],
)
def test_external_data_past_the_data_file_is_refused_under_a_cap(build, says: str, tmp_path: Path) -> None:
    outcome = load_capped(build(tmp_path / "model"))
    assert outcome["type"] == "MissingExternalDataError", outcome
    assert says in outcome["message"] and "of the 16-byte file" in outcome["message"]


def test_an_external_data_file_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    path = _external_model(tmp_path, write=False)
    os.mkfifo(tmp_path / "weights.bin")
    with pytest.raises(
        ExternalDataError, match=r"weights\.bin'\): is a FIFO \(named pipe\), not a data file"
    ):
        load(path)


def test_well_formed_tensors_are_not_refused(tmp_path: Path) -> None:
    """The bound is a floor (a value takes at least a byte, 4-bit ones half): real models pass it, and so
    do shape-only tensors (no values at all), which loading a weightless copy has."""
    from explorer import zoo
    from explorer.onnx_adapter.weights import stripped_copy

    path = tmp_path / "resnet.onnx"
    onnx.save(zoo.build("resnet18"), path)
    assert load(path).summary().initializers > 0
    stripped = tmp_path / "stripped.onnx"
    onnx.save(stripped_copy(zoo.build("resnet18")), stripped)
    assert load(stripped).summary().params > stripped.stat().st_size


def _graph(nodes, inputs=("x",), outputs=("y",), initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in outputs],
        list(initializers),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_graph_with_a_cycle(tmp_path: Path) -> None:
    model = _graph(
        [
            helper.make_node("Add", ["x", "c"], ["a"], name="first"),
            helper.make_node("Relu", ["a"], ["b"], name="second"),
            helper.make_node("Neg", ["b"], ["c"], name="third"),
            helper.make_node("Identity", ["b"], ["y"], name="out"),
        ]
    )
    path = tmp_path / "cycle.onnx"
    onnx.save(model, path)
    with pytest.raises(GraphCycleError, match=r"cycle\.onnx: the graph has a cycle") as info:
        load(path)
    assert all(name in str(info.value) for name in ("'first'", "'second'", "'third'"))


def test_node_reading_a_tensor_nothing_produces(tmp_path: Path) -> None:
    model = _graph([helper.make_node("Add", ["x", "ghost"], ["y"], name="adder")])
    path = tmp_path / "dangling.onnx"
    onnx.save(model, path)
    with pytest.raises(
        DanglingInputError, match=r"dangling\.onnx: node 'adder' \[Add\] reads tensor 'ghost'"
    ):
        load(path)


def test_graph_output_nothing_produces() -> None:
    model = _graph([helper.make_node("Relu", ["x"], ["z"])], outputs=("y",))
    with pytest.raises(DanglingInputError, match="graph output 'y'"):
        load(model)


def test_tensor_produced_twice() -> None:
    model = _graph(
        [helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Neg", ["x"], ["y"], name="b")]
    )
    with pytest.raises(InvalidModelError, match="produced twice"):
        load(model)


def test_subgraph_reading_unknown_outer_tensor() -> None:
    branch = helper.make_graph(
        [helper.make_node("Identity", ["nowhere"], ["o"])],
        "then",
        [],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, [2])],
    )
    cond = helper.make_node("Constant", [], ["cond"], value=numpy_helper.from_array(np.array(True)))
    model = _graph(
        [cond, helper.make_node("If", ["cond"], ["y"], name="if", then_branch=branch, else_branch=branch)]
    )
    with pytest.raises(DanglingInputError, match="'nowhere'"):
        load(model)


def test_opset_newer_than_installed_onnx(tmp_path: Path) -> None:
    model = tiny_model()
    model.opset_import[0].version = onnx.defs.onnx_opset_version() + 5
    path = tmp_path / "future.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(UnsupportedOpsetError, match=r"future\.onnx: opset \d+ of domain 'ai.onnx' is newer"):
        load(path)


def test_ir_version_newer_than_installed_onnx() -> None:
    model = tiny_model()
    model.ir_version = onnx.IR_VERSION + 1
    with pytest.raises(UnsupportedOpsetError, match="IR version"):
        load(model.SerializeToString())


def test_unknown_ops_and_custom_domains_load_and_are_flagged() -> None:
    model = _graph(
        [
            helper.make_node("Frobnicate", ["x"], ["t"], domain="my.custom", name="custom"),
            helper.make_node("Relu", ["t"], ["y"], name="relu"),
        ]
    )
    model.opset_import.append(helper.make_opsetid("my.custom", 1))
    summary = load(model).summary()
    assert summary.unknown_ops == ("my.custom::Frobnicate",)
    assert summary.custom_domains == ("my.custom",)
    assert summary.ops == {"Frobnicate": 1, "Relu": 1}


# --- external data ---------------------------------------------------------------------------


def _external_model(folder: Path, location: str = "weights.bin", write: bool = True) -> Path:
    """Save tiny_model with W stored externally at LOCATION (relative to FOLDER)."""
    model = tiny_model()
    weight = model.graph.initializer[0]
    data = numpy_helper.to_array(weight).tobytes()
    if write:
        target = folder / location
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    weight.ClearField("raw_data")
    weight.ClearField("float_data")
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(len(data)))):
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def test_external_data_loads(tmp_path: Path) -> None:
    path = _external_model(tmp_path)
    before = digest(path), digest(tmp_path / "weights.bin")
    graph = load(path)
    weight = graph.node("/fc/MatMul")["weights"][0]
    assert weight.name == "W" and weight.loaded and weight.shape == (4, 3)
    assert graph.summary().external_tensors == 0  # loaded into memory
    assert (digest(path), digest(tmp_path / "weights.bin")) == before


def test_external_data_in_a_subfolder_is_fine(tmp_path: Path) -> None:
    assert load(_external_model(tmp_path, "data/weights.bin")).node("/fc/MatMul")["weights"][0].loaded


@pytest.mark.parametrize("location", ["../weights.bin", "data/../../weights.bin"])
def test_external_data_escaping_with_dotdot_is_refused(tmp_path: Path, location: str) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "weights.bin").write_bytes(b"\0" * 48)
    path = _external_model(folder, location, write=False)
    with pytest.raises(UnsafeExternalDataError, match=r"model\.onnx: external data of tensor 'W'.*'\.\.'"):
        load(path)


def test_external_data_absolute_path_is_refused(tmp_path: Path) -> None:
    path = _external_model(tmp_path, "/etc/passwd", write=False)
    with pytest.raises(UnsafeExternalDataError, match="absolute path '/etc/passwd'"):
        load(path)


def test_external_data_symlink_escaping_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"\0" * 48)
    folder = tmp_path / "model"
    folder.mkdir()
    os.symlink(outside, folder / "weights.bin")
    path = _external_model(folder, "weights.bin", write=False)
    with pytest.raises(UnsafeExternalDataError, match="symlink that escapes"):
        load(path)


def test_missing_external_file_names_tensor_and_path(tmp_path: Path) -> None:
    path = _external_model(tmp_path, "gone.bin", write=False)
    with pytest.raises(
        MissingExternalDataError, match=r"tensor 'W' \('.*gone\.bin'\): the file does not exist"
    ):
        load(path)


def test_external_data_false_loads_the_structure(tmp_path: Path) -> None:
    path = _external_model(tmp_path, "gone.bin", write=False)
    graph = load(path, external_data=False)
    weight = graph.node("/fc/MatMul")["weights"][0]
    assert weight.shape == (4, 3) and not weight.loaded and weight.external
    summary = graph.summary()
    assert summary.external_tensors == 1 and summary.params == 4 * 3 + 3
    assert any("not loaded" in note for note in summary.notes)


def test_external_data_false_never_reads_an_unsafe_location(tmp_path: Path) -> None:
    graph = load(_external_model(tmp_path, "/etc/shadow", write=False), external_data=False)
    assert not graph.node("/fc/MatMul")["weights"][0].loaded


def test_external_data_from_bytes_explains_what_to_do(tmp_path: Path) -> None:
    data = _external_model(tmp_path).read_bytes()
    with pytest.raises(ExternalDataError, match="external_data=False"):
        load(data)
    assert load(data, external_data=False).summary().external_tensors == 1


@pytest.mark.parametrize(("offset", "length"), [("40", "48"), ("0", str(10**15)), ("1000000", "48")])
def test_external_data_past_the_end(tmp_path: Path, offset: str, length: str) -> None:
    path = _external_model(tmp_path)
    model = onnx.load(path, load_external_data=False)
    fields = {e.key: e for e in model.graph.initializer[0].external_data}
    fields["offset"].value, fields["length"].value = offset, length
    path.write_bytes(model.SerializeToString())
    with pytest.raises(MissingExternalDataError, match="points past the end of the 48-byte file"):
        load(path)


def test_external_data_length_not_matching_shape(tmp_path: Path) -> None:
    path = _external_model(tmp_path)
    (tmp_path / "weights.bin").write_bytes(b"\0" * 100)
    model = onnx.load(path, load_external_data=False)
    {e.key: e for e in model.graph.initializer[0].external_data}["length"].value = "100"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ExternalDataError, match="100 bytes stored but shape"):
        load(path)


# --- native crashes during loading -------------------------------------------------------------


def test_a_model_that_crashes_onnx_shape_inference_still_loads(tmp_path: Path) -> None:
    from tests.explorer.bad_models import gathernd_negative_initializer_dim

    path = tmp_path / "gathernd.onnx"
    onnx.save(gathernd_negative_initializer_dim(), path)
    before = digest(path)
    graph = load(path)  # onnx's inference segfaults on it: in the worker, that is a note
    assert graph.summary().ops == {"GatherND": 1}
    assert any("shape inference failed in the worker (SIGSEGV)" in note for note in graph.notes)
    assert digest(path) == before
    assert load("zoo:mlp").summary().nodes == 6  # and the next model loads

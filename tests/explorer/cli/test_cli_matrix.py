"""The command-line contract as a table: every command x every class of bad input or argument.

Each cell runs ``onnx-explorer COMMAND ...`` in-process (:func:`tests.explorer.in_process.run_cli`)
and checks the contract: the expected exit code (0 where the command legitimately works on that
input, else 2, or 3 for a model that does not import or lower), never 1 or "internal error", no
traceback, stderr naming the problem and the file, the input files byte-identical afterwards, no
partial or temp file beside the output, and a ``--json`` stdout that parses (with an ``"error"``
whose exit code is the process's on failure). Cells for a read-only output folder run in a forked
child that drops to an unprivileged user (root writes through any mode bits). Cells whose input,
mishandled, reads without end or blocks forever (a device, a FIFO, a socket, sizes past the file)
run in a fresh process capped at 2 GiB of address space and a minute
(:mod:`tests.explorer.capped`), so a regression fails its cell instead of taking the machine down.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from explorer import zoo
from explorer.cli import main
from tests.conftest import tiny_model
from tests.explorer import bad_models
from tests.explorer.capped import run_cli_capped

COMMANDS = ("info", "passes", "diff", "report", "lower", "bench", "coverage", "prepare", "overlay", "split")
COMMANDS += ("quant-error",)  # MODEL as the float model, against tiny.onnx quantised (tiny_qdq.onnx)
WITH_OUTPUT = ("passes", "report", "prepare", "split")  # split: coverage --split FOLDER
WITH_SHAPES = tuple(c for c in COMMANDS if c not in ("diff", "overlay"))
NODE_DATA = {"main_graph": {"results": {"/fc/Add": {"value": 1.0}}}}  # overlay's FILE, in the models folder
OUTPUT_NAME = {"passes": "out.onnx", "report": "out.html", "prepare": "out.onnx", "split": "pieces"}
NOBODY = 65534
FAST_BENCH = ("--min-runs", "1", "--min-seconds", "0", "--warmup", "0")


def unknown_op_model() -> onnx.ModelProto:
    """``Relu`` then ``com.acme::Frobnicate``: an op in a domain no runtime or compiler knows."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [
        helper.make_node("Relu", ["x"], ["h"], name="relu"),
        helper.make_node("Frobnicate", ["h"], ["y"], domain="com.acme", name="frobnicate"),
    ]
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.acme", 1)]
    model = helper.make_model(helper.make_graph(nodes, "acme", [x], [y]), opset_imports=opsets)
    model.ir_version = 8
    return model


def string_model() -> onnx.ModelProto:
    """A string input passed through (``Identity``) beside a float ``Relu``."""
    s = helper.make_tensor_value_info("s", TensorProto.STRING, [1, 2])
    t = helper.make_tensor_value_info("t", TensorProto.STRING, [1, 2])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [helper.make_node("Identity", ["s"], ["t"], name="ident"), helper.make_node("Relu", ["x"], ["y"])]
    model = helper.make_model(
        helper.make_graph(nodes, "strings", [s, x], [t, y]), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    return model


def bad_attribute_model() -> onnx.ModelProto:
    """A ``Relu`` with an attribute ``Relu`` does not have: the checker, onnxsim and ONNX Runtime refuse
    it, so every step of ``prepare`` fails, while the partitioner (op types) sees a graph the HTP runs."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu", bogus=1)]
    model = helper.make_model(
        helper.make_graph(nodes, "bad_attribute", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    return model


@dataclass(frozen=True)
class Case:
    """One row of the table: an input class, run through every command it applies to."""

    name: str
    model: str  # a file of the models fixture, missing / folder / fifo / socket / zero-link, or /dev/NAME
    expect: int | Mapping[str, int]  # the exit code, or per command (others: the "*" entry)
    says: str | Mapping[str, str] = ""  # in stderr when the command fails (or per command)
    shape: str | None = None  # --input-shape
    output: str = "fresh"  # fresh, input, hardlink, symlink, missing-folder, read-only
    force: bool = False
    commands: tuple[str, ...] = COMMANDS
    xfail: Mapping[str, str] = field(default_factory=dict)  # command -> the bug, for strict xfail
    beside: tuple[str, ...] = ()  # files of the models fixture copied beside the model (its external data)
    capped: bool = False  # run in a fresh process under a memory cap and a time limit

    def code(self, command: str) -> int:
        if isinstance(self.expect, int):
            return self.expect
        return self.expect.get(command, self.expect["*"])

    def message(self, command: str) -> str:
        return self.says if isinstance(self.says, str) else self.says[command]


CASES = (
    Case("not a file", "missing", 2, "no such file"),
    Case("a folder", "folder", 2, "is a folder"),
    Case("/dev/zero", "/dev/zero", 2, "is a character device, not an ONNX model file", capped=True),
    Case("/dev/urandom", "/dev/urandom", 2, "is a character device, not an ONNX model file", capped=True),
    Case("a link to /dev/zero", "zero-link", 2, "is a character device (a link to /dev/zero)", capped=True),
    Case("a FIFO", "fifo", 2, "is a FIFO (named pipe), not an ONNX model file", capped=True),
    Case("a socket", "socket", 2, "is a socket, not an ONNX model file", capped=True),
    Case(
        "a shape past the file",
        "declared.onnx",
        2,
        "tensor 'W' declares shape [1000000, 1000000] (float32, 3725.3 GiB) but the whole model is",
        capped=True,
    ),
    Case(
        "external data past the file",
        "past_eof.onnx",
        2,
        "offset 1,000,000 + length 16 bytes points past the end of the 16-byte file",
        beside=("weights.bin",),
        capped=True,
    ),
    # issue #39: values their shape disagrees with reached ONNX Runtime, whose bare FAIL was an internal error
    Case(
        "raw_data shorter than its shape",
        "short_raw.onnx",
        2,
        "tensor 'W' holds 12 bytes of values (raw_data) but its shape [4] of float32 needs 16",
    ),
    Case(
        "float_data fewer than its shape",
        "short_float.onnx",
        2,
        "tensor 'W' holds 3 values in float_data but its shape [4] of float32 needs 4",
    ),
    Case(
        "external data length not its shape's",
        "wrong_length.onnx",
        2,
        "external data of tensor 'W'",
        beside=("weights.bin",),
    ),
    Case("empty file", "empty.onnx", 2, "empty"),
    Case("text file", "text.onnx", 2, "not a valid ONNX protobuf"),
    Case("truncated protobuf", "truncated.onnx", 2, "not a valid ONNX protobuf"),
    Case(  # prepare: its QNN steps fail on the op (issue #39)
        "unknown op in a custom domain",
        "acme.onnx",
        {"*": 0, "lower": 3, "bench": 3, "prepare": 3, "quant-error": 2},
        "Frobnicate",
    ),
    Case(
        "string tensors",
        "strings.onnx",
        {"*": 0, "lower": 3, "bench": 3, "prepare": 2, "quant-error": 2},
        {
            "quant-error": "do not correspond",
            "lower": "does not import into TVM Relax",
            "bench": "does not import into TVM Relax",
            "prepare": "input 's' is a string tensor; qnn-htp cannot take string tensors",
        },
    ),
    Case(
        "If and Loop",
        "control_flow.onnx",
        {"*": 0, "lower": 3, "bench": 3, "quant-error": 2},
        "/loop/Loop [Loop]",
    ),
    Case("dynamic dims, no --input-shape", "tiny.onnx", 0),
    Case(
        "wrong input name",
        "tiny.onnx",
        2,
        "'nosuch', which is not an input; the model's inputs are: x float32 [batch, 4]",
        shape="nosuch=1,4",
        commands=WITH_SHAPES,
    ),
    Case("wrong rank", "tiny.onnx", 2, "has rank 2", shape="x=1,4,4", commands=WITH_SHAPES),
    Case("conflicts with a fixed dim", "tiny.onnx", 2, "fixed to 4", shape="x=2,5", commands=WITH_SHAPES),
    Case("zero dim", "tiny.onnx", 2, "--input-shape", shape="x=0,4", commands=WITH_SHAPES),
    Case("negative dim", "tiny.onnx", 2, "--input-shape", shape="x=-3,4", commands=WITH_SHAPES),
    Case(
        "huge shape",
        "tiny.onnx",
        2,
        "would take 14901.2 GiB (16,000,000,000,000 bytes)",
        shape="x=1000000000000,4",
        commands=WITH_SHAPES,
    ),
    Case("output is the input", "tiny.onnx", 2, "is the input model", output="input", commands=WITH_OUTPUT),
    Case(
        "output is a hard link", "tiny.onnx", 2, "(through a link)", output="hardlink", commands=WITH_OUTPUT
    ),
    Case("output is a symlink", "tiny.onnx", 2, "(through a link)", output="symlink", commands=WITH_OUTPUT),
    Case(
        "output is the input, --force",
        "tiny.onnx",
        0,
        output="input",
        force=True,
        commands=("passes", "prepare"),
    ),
    Case(
        "output in a missing folder",
        "tiny.onnx",
        2,
        "does not exist",
        output="missing-folder",
        commands=WITH_OUTPUT,
    ),
    Case(
        "output in a read-only folder",
        "tiny.onnx",
        2,
        "cannot write",
        output="read-only",
        commands=WITH_OUTPUT,
    ),
    Case(
        "every prepare step fails",
        "bad_attribute.onnx",
        3,
        "every step failed, nothing was prepared; ort-quant:fix_shapes: ValidationError: Unrecognized",
        commands=("prepare",),
    ),
)


def tiny_qdq_model(folder: Path) -> None:
    """``folder/tiny.onnx`` quantised (ONNX Runtime's ``quantize_static``, QDQ) as ``tiny_qdq.onnx``."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(0)
            self.items = iter([{"x": rng.standard_normal((1, 4)).astype(np.float32)} for _ in range(4)])

        def get_next(self) -> dict | None:
            return next(self.items, None)

    quantize_static(folder / "tiny.onnx", folder / "tiny_qdq.onnx", Reader(), quant_format=QuantFormat.QDQ)


@pytest.fixture(scope="module")
def models() -> Iterator[Path]:
    """The input files, in a folder any user may read (the read-only cells run as ``nobody``)."""
    folder = Path(tempfile.mkdtemp(prefix="cli-matrix-models-"))
    folder.chmod(0o755)
    try:
        onnx.save(tiny_model(), folder / "tiny.onnx")
        onnx.save(unknown_op_model(), folder / "acme.onnx")
        onnx.save(string_model(), folder / "strings.onnx")
        onnx.save(zoo.build("control_flow"), folder / "control_flow.onnx")
        onnx.save(bad_attribute_model(), folder / "bad_attribute.onnx")
        (folder / "empty.onnx").write_bytes(b"")
        (folder / "text.onnx").write_text("a text file, not a model\n")
        data = (folder / "tiny.onnx").read_bytes()
        (folder / "truncated.onnx").write_bytes(data[: len(data) // 2])
        (folder / "folder.onnx").mkdir()
        (folder / "declared.onnx").write_bytes(bad_models.declared_shape_past_file().SerializeToString())
        bad_models.external_data_past_eof(folder)  # past_eof.onnx and weights.bin
        bad_models.external_data_wrong_length(folder)  # wrong_length.onnx, beside the same weights.bin
        (folder / "short_raw.onnx").write_bytes(bad_models.stored_values_mismatch().SerializeToString())
        (folder / "short_float.onnx").write_bytes(
            bad_models.stored_values_mismatch("float_data").SerializeToString()
        )
        (folder / "node_data.json").write_text(json.dumps(NODE_DATA))
        tiny_qdq_model(folder)  # quant-error's QDQ_MODEL
        for item in folder.iterdir():
            item.chmod(0o755 if item.is_dir() else 0o644)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def argv(command: str, model: str, output: str, case: Case, reference: str) -> list[str]:
    """The command line of one cell (``--json`` wherever the command has it)."""
    words = {
        "info": ["info", model, "--json"],
        "passes": ["passes", model, "--pipeline", "eliminate_identity", "--json", "-o", output],
        "diff": ["diff", model, reference, "--json"],
        "report": ["report", model, "-o", output],
        "lower": ["lower", model, "--json"],
        "bench": ["bench", model, "--json", *FAST_BENCH],
        "coverage": ["coverage", model, "--json"],
        "prepare": ["prepare", model, "--json", "--samples", "1", "--output", output],
        "overlay": ["overlay", model, str(Path(reference).with_name("node_data.json")), "--json"],
        "split": ["coverage", model, "--target", "nnapi", "--split", output, "--json"],
        "quant-error": [
            "quant-error",
            model,
            str(Path(reference).with_name("tiny_qdq.onnx")),
            "--samples",
            "1",
            "--json",
        ],
    }[command]
    if case.shape:
        words += ["--input-shape", case.shape]
    if case.force:
        words.append("--force")
    return words


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """``onnx-explorer ARGS`` in this process; argparse's refusals (SystemExit) become exit codes."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit_:
            code = int(exit_.code or 0)
    return subprocess.CompletedProcess(["onnx-explorer", *args], code, out.getvalue(), err.getvalue())


def run_as_nobody(*args: str) -> subprocess.CompletedProcess[str]:
    """:func:`run` in a forked child that first drops to the unprivileged user ``nobody``.

    Forked, not executed: the interpreter lives under /root, which ``nobody`` cannot read; the
    modules the refusal needs are imported before the fork.
    """
    import explorer.core.timeline  # noqa: F401

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            done = run(*args)
            payload = [done.returncode, done.stdout, done.stderr]
        except BaseException as err:
            payload = [99, "", f"child failed: {err!r}"]
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(json.dumps(payload).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        code, stdout, stderr = json.loads(pipe.read().decode() or '[98, "", "no answer"]')
    os.waitpid(pid, 0)
    return subprocess.CompletedProcess(["onnx-explorer", *args], code, stdout, stderr)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else f"not a file: {path}"


def cells() -> Iterator[object]:
    for case in CASES:
        for command in case.commands:
            marks = []
            if command in case.xfail:
                marks.append(pytest.mark.xfail(strict=True, reason=case.xfail[command]))
            yield pytest.param(case, command, id=f"{command}-{case.name}", marks=marks)


@pytest.mark.parametrize(("case", "command"), list(cells()))
def test_cell(case: Case, command: str, models: Path, tmp_path: Path) -> None:
    if case.output != "read-only":
        check_cell(case, command, models, tmp_path)
        return
    base = Path(tempfile.mkdtemp(prefix="cli-matrix-cell-"))  # pytest's tmp_path: root's only
    try:
        base.chmod(0o755)
        check_cell(case, command, models, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def check_cell(case: Case, command: str, models: Path, base: Path) -> None:
    """Run one cell in ``base`` and check the contract."""
    inputs = base / "in"
    outputs = base / "out"
    inputs.mkdir()
    outputs.mkdir()
    for folder in (inputs, outputs):
        folder.chmod(0o755)  # readable by the unprivileged user of the read-only cells
    if case.model == "missing":
        model = inputs / "missing.onnx"
    elif case.model == "folder":
        model = inputs / "folder.onnx"
        model.mkdir()
    elif case.model.startswith("/dev/"):
        model = Path(case.model)
    elif case.model in ("fifo", "socket", "zero-link"):
        model = inputs / "model.onnx"
        if case.model == "fifo":
            os.mkfifo(model)
        elif case.model == "socket":
            with socket.socket(socket.AF_UNIX) as server:
                server.bind(str(model))  # the file stays after the socket closes
        else:
            model.symlink_to("/dev/zero")
    else:
        model = inputs / case.model
        for name in (case.model, *case.beside):
            shutil.copyfile(models / name, inputs / name)
            (inputs / name).chmod(0o644)
    reference = models / "tiny.onnx"
    output = outputs / OUTPUT_NAME.get(command, "unused")
    runner = run_cli_capped if case.capped else run
    if case.output == "input":
        output = model
    elif case.output == "hardlink":
        os.link(model, output)
    elif case.output == "symlink":
        output.symlink_to(model)
    elif case.output == "missing-folder":
        output = outputs / "no-such-folder" / output.name
    elif case.output == "read-only":
        if os.geteuid() == 0:
            runner = run_as_nobody
        outputs.chmod(0o555)
    before = {p: digest(p) for p in (model, reference)}
    listed = sorted(os.listdir(outputs))

    done = runner(*argv(command, str(model), str(output), case, str(reference)))

    outputs.chmod(0o755)
    expected = case.code(command)
    where = f"{command} {case.name}: exit {done.returncode}\n{done.stderr[-2000:]}"
    if case.output == "read-only" and runner is run and done.returncode == 0:
        pytest.skip("this user writes into a folder of mode 0555 (neither root nor unprivileged)")
    assert done.returncode == expected, where
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, where
    if "--json" in argv(command, "m", "o", case, "r"):
        document = json.loads(done.stdout)  # one JSON document, whatever happened
        if expected:
            assert document["error"]["exit_code"] == expected, done.stdout[:2000]
    if expected:
        assert case.message(command) in done.stderr, where
        if case.output in ("input", "hardlink", "symlink", "missing-folder", "read-only"):
            named = str(output)
        elif case.message(command) == "--input-shape":
            named = case.shape
        else:
            named = str(model)
        assert named in done.stderr, where
    if not case.force:
        assert {p: digest(p) for p in before} == before, "an input file changed"
    # nothing partial or temporary beside the output (or the input, when it is the output)
    left = sorted(os.listdir(outputs))
    made = [output.name] if expected == 0 and command in WITH_OUTPUT and output.parent == outputs else []
    assert left == sorted({*listed, *made}), left
    placed = [model.name, *case.beside] if model.parent == inputs and model.exists() else []
    assert sorted(os.listdir(inputs)) == sorted(placed), os.listdir(inputs)
    if expected == 0 and command in ("passes", "prepare"):
        onnx.checker.check_model(onnx.load(output))  # a whole model where it was asked for
    if expected == 0 and command == "split":  # every piece a whole model, as the manifest lists them
        pieces = json.loads((output / "partitions.json").read_text())["pieces"]
        assert sorted(os.listdir(output)) == sorted(["partitions.json", *(p["file"] for p in pieces)])
        for piece in pieces:
            onnx.checker.check_model(str(output / piece["file"]), full_check=True)


OVERLAY_FILES = {
    "missing": ("no such file", None),
    "folder": ("is a folder, not a profile or overlay file", None),
    "/dev/zero": ("is a character device, not a profile or overlay file", None),
    "fifo": ("is a FIFO (named pipe), not a profile or overlay file", None),
    "empty": ("the file is empty, not a profile or overlay file", b""),
    "text": ("not valid JSON (Expecting value at line 1, column 1)", b"a text file\n"),
    "truncated JSON": ("not valid JSON (Expecting", json.dumps(NODE_DATA).encode()[:-9]),
    "another JSON": ("not a format the explorer reads; it reads: ort-profile", b'{"layers": [1, 2]}'),
    "a malformed profile": ("execution_detail[0] is not a layer with a 'name'", b'{"execution_detail": [3]}'),
}
"""``overlay``'s FILE, bad in each way: what stderr says, and the file's bytes (None: made in the test)."""


@pytest.mark.parametrize("kind", list(OVERLAY_FILES))
def test_overlay_refuses_a_bad_file_naming_it(kind: str, models: Path, tmp_path: Path) -> None:
    says, content = OVERLAY_FILES[kind]
    path = tmp_path / "overlay.json"
    if kind == "/dev/zero":
        path = Path(kind)
    elif kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif content is not None:
        path.write_bytes(content)
    runner = run_cli_capped if kind in ("/dev/zero", "fifo") else run
    done = runner("overlay", str(models / "tiny.onnx"), str(path), "--json")
    where = f"{kind}: exit {done.returncode}\n{done.stderr[-2000:]}"
    assert done.returncode == 2, where
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, where
    assert says in done.stderr and str(path) in done.stderr, where
    assert json.loads(done.stdout)["error"]["exit_code"] == 2


@pytest.mark.parametrize("second", ["/dev/zero", "fifo"])
def test_diff_refuses_a_device_or_a_fifo_as_its_second_model(second: str, tmp_path: Path) -> None:
    """``diff zoo:mlp /dev/zero`` read without end once the first model had loaded."""
    if second == "fifo":
        second = str(tmp_path / "after.onnx")
        os.mkfifo(second)
    done = run_cli_capped("diff", "zoo:mlp", second, "--json")
    what = "a character device" if second == "/dev/zero" else "a FIFO (named pipe)"
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr == f"onnx-explorer: error: {second}: is {what}, not an ONNX model file\n"
    error = json.loads(done.stdout)["error"]
    assert error["type"] == "ModelNotFoundError" and error["path"] == second and error["exit_code"] == 2


@pytest.mark.parametrize(
    "words",
    [
        ["bench", "zoo:mlp", "--tune-trials", "-5"],
        ["bench", "zoo:mlp", "--threads", "-1"],
        ["bench", "zoo:mlp", "--warmup", "-1"],
        ["bench", "zoo:mlp", "--min-runs", "0"],
        ["bench", "zoo:mlp", "--min-runs", "-2"],
        ["bench", "zoo:mlp", "--min-seconds", "-1"],
        ["bench", "zoo:mlp", "--max-seconds", "-1"],
        ["bench", "zoo:mlp", "--tune-minutes", "-1"],
        ["bench", "zoo:mlp", "--min-seconds", "nan"],
        ["prepare", "zoo:mlp", "--samples", "0"],
        ["prepare", "zoo:mlp", "--samples", "-1"],
    ],
    ids=" ".join,
)
def test_numeric_arguments_out_of_range_are_usage_errors(words: list[str]) -> None:
    done = run(*words, "--json")
    assert done.returncode == 2
    assert "usage: onnx-explorer" in done.stderr and f"argument {words[2]}" in done.stderr
    assert f"got '{words[3]}'" in done.stderr and "Traceback" not in done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["type"] == "UsageError" and error["exit_code"] == 2 and words[2] in error["message"]


def test_every_task_without_a_tuning_budget_is_refused_naming_the_flags() -> None:
    done = run("bench", "zoo:mlp", "--runtime", "tvm", "--tune-every-task", "--json")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    message = json.loads(done.stdout)["error"]["message"]
    assert "--tune-every-task" in message and "--tune-trials" in message and "--tune-minutes" in message


def printing_reshape_model() -> onnx.ModelProto:
    """``Reshape(x, [3, 4] + int(0 * sum(x)))``: ONNX Runtime runs it; TVM's importer cannot take a shape
    computed at run time and ``print``s "Error converting operator Reshape, ..." to stdout as it fails."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
        helper.make_node("Mul", ["total", "zero"], ["nothing"]),
        helper.make_node("Cast", ["nothing"], ["offset"], to=TensorProto.INT64),
        helper.make_node("Add", ["target", "offset"], ["shape"]),
        helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape"),
    ]
    constants = [
        helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
        helper.make_tensor("target", TensorProto.INT64, [2], [3, 4]),
    ]
    graph = helper.make_graph(nodes, "printing_reshape", [x], [y], initializer=constants)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("command", ["lower", "bench"])
def test_json_stdout_is_one_document_whatever_tvm_prints(command: str, tmp_path: Path) -> None:
    path = tmp_path / "reshape.onnx"
    onnx.save(printing_reshape_model(), path)
    words = [command, str(path), "--json", *(FAST_BENCH if command == "bench" else ())]
    in_process = run(*words)
    script = Path(os.sys.executable).with_name("onnx-explorer")
    if not script.exists():
        pytest.skip("project not installed as a package in this interpreter")
    real = subprocess.run([str(script), *words], capture_output=True, text=True, timeout=300)
    for done in (in_process, real):
        assert done.returncode == 3, done.stderr  # the import fails (in TVM's importer, which prints)
        document = json.loads(done.stdout)  # and nothing else on stdout
        assert document["error"]["exit_code"] == 3 and "Reshape" in document["error"]["message"]
        assert "Error converting operator" not in done.stdout and "Traceback" not in done.stderr


# The exit contract beyond bad input files (#39): exit 0 only when what was asked for happened; 2 for the
# user's arguments and environment variables; 3 when nothing could run or be prepared; 130 for Ctrl-C.


def check_refused(done: subprocess.CompletedProcess[str], code: int, *says: str) -> dict:
    """``done`` exited ``code`` naming each of ``says`` on stderr, without a traceback, and its stdout is
    one JSON document whose error has that code; return the document."""
    where = f"exit {done.returncode}\n{done.stderr[-3000:]}"
    assert done.returncode == code, where
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, where
    for words in says:
        assert words in done.stderr, where
    document = json.loads(done.stdout)
    assert document["error"]["exit_code"] == code, done.stdout[:2000]
    return document


def tvm_bench(*words: str) -> subprocess.CompletedProcess[str]:
    return run("bench", "zoo:mlp", "--runtime", "tvm", *words, "--json", *FAST_BENCH)


@pytest.mark.parametrize("key", [["--rpc-key", "board"], []], ids=["with a key", "without a key"])
def test_an_rpc_tracker_without_a_port_is_a_usage_error(key: list[str]) -> None:
    done = tvm_bench("--rpc-tracker", "localhost", *key)
    check_refused(done, 2, "HOST:PORT", "'localhost'")


@pytest.mark.parametrize("where", ["a regular file", "under a regular file", "a read-only folder"])
def test_a_cache_variable_that_cannot_be_written_is_a_usage_error(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "cache-file"
    file.write_text("not a folder\n")
    cache = {"a regular file": file, "under a regular file": file / "cache"}.get(where, tmp_path / "ro")
    if where == "a read-only folder":
        cache.mkdir()
        cache.chmod(0o555)
        if os.access(cache, os.W_OK):
            pytest.skip("this user (root) writes into a folder of mode 0555")
    monkeypatch.setenv("ONNX_EXPLORER_CACHE", str(cache))
    why = {
        "a regular file": "is a regular file, not a folder",
        "under a regular file": "a part of the path is not a folder",
        "a read-only folder": "Permission denied",
    }[where]
    check_refused(tvm_bench(), 2, f"ONNX_EXPLORER_CACHE={cache}: ", why)
    assert file.read_text() == "not a folder\n"


def test_an_unknown_cpu_in_the_tvm_target_is_refused_listing_those_llvm_knows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from explorer.runtimes.ort_runtime import OrtRuntime

    prepared: list[str] = []  # ONNX Runtime, named first, must not run before the refusal (issue #39)
    real_prepare = OrtRuntime.prepare

    def recorded(self: OrtRuntime, *args: object, **kwargs: object) -> object:
        prepared.append(self.label)
        return real_prepare(self, *args, **kwargs)

    monkeypatch.setattr(OrtRuntime, "prepare", recorded)
    done = run(
        "bench", "zoo:mlp", "--runtime", "ort", "--runtime", "tvm", "--tvm-target", "llvm -mcpu=notacpu",
        "--json", *FAST_BENCH,
    )  # fmt: skip
    document = check_refused(done, 2, "-mcpu=notacpu", "is no CPU LLVM knows for", "it knows: ")
    assert document["error"]["type"] == "UsageError"
    assert prepared == [] and "results" not in document and "ONNX Runtime" not in done.stdout, done.stdout
    known = done.stderr.rpartition("it knows: ")[2].split(", ")
    assert len(known) > 10 and "generic" in known, known[:20]


def _foreign_triple() -> str:
    import platform

    return "x86_64-linux-gnu" if platform.machine() in ("aarch64", "arm64") else "aarch64-linux-gnu"


@pytest.mark.parametrize("asked", ["ort-cuda", "tvm for another architecture"])
def test_a_bench_where_no_runtime_can_run_exits_3_naming_each_and_why(asked: str) -> None:
    from explorer.runtimes.ort_runtime import OrtRuntime

    if asked == "ort-cuda":
        if OrtRuntime("CUDAExecutionProvider").available():
            pytest.skip("CUDA runs here")
        words, name, why = ["--runtime", "ort-cuda"], "ort-cuda", "has no CUDAExecutionProvider"
    else:
        target = f"llvm -mtriple={_foreign_triple()}"
        words, name, why = ["--runtime", "tvm", "--tvm-target", target], f"tvm-{target}", "it is built for"
    done = run("bench", "zoo:mlp", *words, "--json", *FAST_BENCH)
    document = check_refused(done, 3, name, why, "nothing was timed", "zoo:mlp")
    assert document["results"] == [] and [s["runtime"] for s in document["skipped"]] == [name]
    assert why in document["skipped"][0]["why"] and why in document["error"]["message"]
    assert document["error"]["type"] == "RuntimeUnsupportedError" and document["error"]["runtime"] == name


@pytest.mark.parametrize("json_flag", [["--json"], []], ids=["json", "text"])
def test_a_named_runtime_that_was_skipped_exits_3_after_the_others_results(json_flag: list[str]) -> None:
    target = f"llvm -mtriple={_foreign_triple()}"
    words = ["--runtime", "ort", "--runtime", "tvm", "--tvm-target", target]
    done = run("bench", "zoo:mlp", *words, *json_flag, *FAST_BENCH)
    assert done.returncode == 3, done.stderr[-3000:]
    assert f"tvm-{target}" in done.stderr and "only ONNX Runtime CPU" in done.stderr
    if json_flag:
        document = json.loads(done.stdout)
        assert [r["runtime"] for r in document["results"]] == ["ort"]
        assert document["error"]["type"] == "RuntimeUnsupportedError"
        assert "it is built for" in document["error"]["message"]
    else:
        assert done.stdout.splitlines()[-1].startswith(f"tvm-{target}: skipped")


def test_a_prepare_whose_every_step_failed_writes_nothing_and_claims_no_placement(tmp_path: Path) -> None:
    path, out = tmp_path / "bad_attribute.onnx", tmp_path / "out.onnx"
    onnx.save(bad_attribute_model(), path)
    done = run("prepare", str(path), "--samples", "1", "--output", str(out))
    assert done.returncode == 3, done.stderr[-3000:]
    steps = ("ort-quant:fix_shapes", "onnxsim", "ort-quant:qnn_preprocess", "ort-quant:qnn_qdq")
    assert all(f"; {step}: " in done.stderr for step in steps), done.stderr  # each step's reason
    assert f"nothing was written for --output {out}" in done.stderr and not out.exists()
    assert "runs on" not in done.stdout + done.stderr and "wrote" not in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad_attribute.onnx"]


@pytest.mark.parametrize("json_flag", [["--json"], []], ids=["json", "text"])
def test_a_prepare_whose_qnn_steps_failed_exits_3_writes_nothing_and_claims_no_placement(
    json_flag: list[str], tmp_path: Path
) -> None:
    """Issue #39: the shapes are fixed and onnxsim runs, but ONNX Runtime (QNN preprocessing, QDQ
    calibration) cannot load the custom op: the model was not made ready for the HTP."""
    path, out = tmp_path / "acme.onnx", tmp_path / "out.onnx"
    onnx.save(unknown_op_model(), path)
    done = run("prepare", str(path), "--samples", "1", "--output", str(out), *json_flag)
    assert done.returncode == 3, done.stderr[-3000:]
    assert "2 of 4 steps failed, the model is not ready for qnn-htp" in done.stderr, done.stderr
    for step in ("ort-quant:qnn_preprocess", "ort-quant:qnn_qdq"):  # each failed step's reason
        assert f"; {step}: " in done.stderr and "Frobnicate" in done.stderr, done.stderr
    for step in ("ort-quant:fix_shapes", "onnxsim"):  # the steps that worked are not called failed
        assert f"; {step}: " not in done.stderr, done.stderr
    assert f"nothing was written for --output {out}" in done.stderr and not out.exists()
    assert "runs on" not in done.stdout + done.stderr and "wrote" not in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["acme.onnx"]
    if json_flag:
        document = json.loads(done.stdout)
        error = document["error"]
        assert set(document) == {"error"} and error["type"] == "LoweringError"
        assert error["exit_code"] == 3 and error["pass_name"] == "ort-quant:qnn_preprocess"
    else:
        assert done.stdout == ""


@pytest.mark.parametrize("json_flag", [["--json"], []], ids=["json", "text"])
def test_ctrl_c_exits_130_with_one_json_document(
    json_flag: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("explorer.cli.info.load", interrupted)
    done = run("info", "zoo:mlp", *json_flag)
    assert done.returncode == 130 and done.stderr == "onnx-explorer: interrupted\n"
    if not json_flag:
        assert done.stdout == ""
        return
    assert json.loads(done.stdout) == {
        "error": {"type": "interrupted", "message": "interrupted (Ctrl-C)", "exit_code": 130}
    }


@pytest.mark.parametrize(
    ("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o027, 0o640)], ids=["022", "077", "027"]
)
def test_written_files_get_the_mode_the_umask_gives(umask: int, mode: int, tmp_path: Path) -> None:
    """``report -o`` and ``zoo.save`` (written here) and ``passes -o`` (written by the worker, whose umask was
    set when it started) all get ``0666 & ~umask``, as any file the user writes."""
    before = os.umask(umask)
    try:
        assert run("report", "zoo:mlp", "-o", str(tmp_path / "r.html")).returncode == 0
        words = ["passes", "zoo:mlp", "--pipeline", "eliminate_identity", "--no-verify", "-o"]
        assert run(*words, str(tmp_path / "p.onnx")).returncode == 0
        zoo.save("mlp", tmp_path)
    finally:
        os.umask(before)
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in tmp_path.iterdir()}
    assert modes == {name: oct(mode) for name in ("r.html", "p.onnx", "mlp.onnx")}


class _ClosedPipe(io.StringIO):
    """A stdout whose reader went away (``onnx-explorer info MODEL | head -1``)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_closed_pipe_on_stdout_ends_quietly_with_141_not_an_internal_error() -> None:
    err = io.StringIO()
    with contextlib.redirect_stdout(_ClosedPipe()), contextlib.redirect_stderr(err):
        code = main(["info", "zoo:mlp"])
    assert code == 141 and err.getvalue() == ""

"""The onnx-explorer command line, run as a user runs it (a subprocess) and in-process."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import onnx
import pytest

from explorer.cli import build_parser, main
from tests.conftest import tiny_model


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "explorer.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_info_json_of_a_file(tmp_path: Path) -> None:
    path = tmp_path / "tiny.onnx"
    onnx.save(tiny_model(), path)
    done = run_cli("info", str(path), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["nodes"] == 3
    assert data["ops"] == dict(Counter(n.op_type for n in onnx.load(path).graph.node))
    assert data["inputs"] == [{"name": "x", "dtype": "float32", "shape": ["batch", 4]}]
    assert data["outputs"] == [{"name": "y", "dtype": "float32", "shape": ["batch", 3]}]
    assert data["params"] == 15 and data["param_bytes"] == 60
    assert data["opsets"] == {"ai.onnx": 17}
    assert data["subgraphs"] == 0


def test_info_text_of_a_zoo_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "zoo:resnet18"]) == 0
    out = capsys.readouterr().out
    assert "Conv" in out and "69 in the main graph" in out and "[batch, 3, 224, 224]" in out


def test_input_shape_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "zoo:resnet18", "--json", "--input-shape", "input=2,3,224,224"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["inputs"][0]["shape"] == [2, 3, 224, 224]
    assert data["outputs"][0]["shape"] == [2, 1000]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        (b"", "the file is empty"),
        (b"\x08\x07garbage\xff\xff\xff", "not a valid ONNX protobuf"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "bad.onnx"
    if content is not None:
        path.write_bytes(content)
    done = run_cli("info", str(path))
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(path) in lines[0] and message in lines[0]
    assert "Traceback" not in done.stderr


def test_bad_input_shape_argument_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["info", "zoo:mlp", "--input-shape", "input=1,a"])
    assert info.value.code == 2
    assert "integers" in capsys.readouterr().err


def test_unknown_input_name_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "zoo:mlp", "--input-shape", "nope=1,2"]) == 2
    assert "model's inputs are: input" in capsys.readouterr().err


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).with_name("onnx-explorer")
    if not script.exists():
        pytest.skip("project not installed as a package in this interpreter")
    done = subprocess.run(
        [str(script), "info", "zoo:mlp", "--json"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and json.loads(done.stdout)["nodes"] == 6


def test_info_of_a_model_that_crashes_native_code(tmp_path: Path) -> None:
    from tests.explorer.bad_models import gathernd_negative_initializer_dim

    path = tmp_path / "gathernd.onnx"
    onnx.save(gathernd_negative_initializer_dim(), path)
    done = run_cli("info", str(path), "--json")
    assert done.returncode == 0, done.stderr
    assert any("SIGSEGV" in note for note in json.loads(done.stdout)["notes"])


def test_passes_step_crashing_natively_is_a_one_line_error_exit_2(tmp_path: Path) -> None:
    from tests.explorer.bad_models import squeeze_without_input

    path = tmp_path / "squeeze.onnx"
    onnx.save(squeeze_without_input(), path)
    done = run_cli("passes", str(path), "--pipeline", "fuse_consecutive_squeezes", "--no-verify")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("onnx-explorer: error")]
    assert len(errors) == 1 and "WorkerCrashed" in errors[0] and "SIGSEGV" in errors[0]


def test_passes_json_contract_and_output_file(tmp_path: Path) -> None:
    out = tmp_path / "optimized.onnx"
    done = run_cli(
        "passes", "zoo:resnet18", "--pipeline", "fuse_bn_into_conv,ort:basic", "--json", "-o", str(out)
    )
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout)["steps"]
    assert [s["pass"] for s in steps] == ["fuse_bn_into_conv", "ort:basic"]
    first = steps[0]
    assert first["changed"] is True and first["nodes_before"] == 69 and first["nodes_after"] == 49
    assert first["op_deltas"] == {"BatchNormalization": -20}
    assert first["removed"] == 20 and first["modified"] == 20 and first["added"] == 0
    assert 0 <= first["max_abs_diff"] < 1e-3
    assert onnx.load(out).graph.node  # written, and a valid model
    assert not list(tmp_path.glob(".optimized.onnx.*"))  # no temp file left behind


def test_passes_text_and_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["passes", "--list"]) == 0
    listing = capsys.readouterr().out
    assert "fuse_bn_into_conv" in listing and "ort:extended" in listing and "onnxsim" in listing
    assert main(["passes", "zoo:mlp", "--pipeline", "eliminate_identity", "--no-verify"]) == 0
    assert "eliminate_identity" in capsys.readouterr().out


def test_passes_unknown_pass_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["passes", "zoo:mlp", "--pipeline", "fuse_bn_into_cnv"]) == 2
    assert "did you mean fuse_bn_into_conv" in capsys.readouterr().err


def test_diff_two_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    assert (
        main(["passes", "zoo:resnet18", "--pipeline", "fuse_bn_into_conv", "--no-verify", "-o", str(b)]) == 0
    )
    from explorer import zoo

    onnx.save(zoo.build("resnet18"), a)
    done = run_cli("diff", str(a), str(b), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["removed"] == 20 and data["modified"] == 20 and data["added"] == 0
    assert data["op_deltas"] == {"BatchNormalization": -20}
    assert len(data["fusions"]) == 20 and data["fusions"][0]["pattern"] == "Conv + BatchNormalization -> Conv"


def test_lower_json_contract_per_step(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lower", "zoo:resnet18", "--input-shape", "input=1,3,224,224", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    steps = data["steps"]
    zero = ["LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR"]
    names = [s["pass"] for s in steps]  # by default the target's default pipeline
    assert [n for n in names if n in zero] == zero and names[-1] == "AttachGlobalSymbol"
    for step in steps:
        assert {"pass", "changed", "elapsed_ms", "bindings", "prim_funcs", "fused"} <= set(step)
    by_name = {s["pass"]: s for s in steps}
    assert (
        by_name["FuseOps"]["fused"] > 0
        and by_name["FuseTIR"]["prim_funcs"] < by_name["LegalizeOps"]["prim_funcs"]
    )
    assert (
        0
        < by_name["StaticPlanBlockMemory"]["storages"]
        < by_name["StaticPlanBlockMemory"]["tensor_allocations"]
    )
    assert data["import"]["bindings"] == 131
    assert main(["lower", "zoo:mlp", "--passes", "zero", "--json"]) == 0
    assert [s["pass"] for s in json.loads(capsys.readouterr().out)["steps"]] == zero


def test_lower_names_the_failing_ops_exits_3_and_simplify_fixes_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["lower", "zoo:transformer"]) == 3
    err = capsys.readouterr().err
    assert "/encoder/layers.0/self_attn/Gather [Gather]" in err and "--simplify" in err
    assert main(["lower", "zoo:transformer", "--simplify", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["steps"][-1]["pass"] == "AttachGlobalSymbol"
    assert main(["lower", "zoo:custom_domain", "--json"]) == 3
    failed = json.loads(capsys.readouterr().out)
    assert {f["op_type"] for f in failed["failures"]} == {"FusedMatMul", "Swish"}
    assert failed["fix_pipeline"] == ["onnxscript:inline", "explorer:decompose_contrib"]
    assert main(["lower", "zoo:control_flow"]) == 3
    assert (
        "fix: unroll the loops with a constant trip count (explorer:unroll_loops)" in capsys.readouterr().err
    )
    assert main(["lower", "zoo:control_flow", "--fix"]) == 0
    out = capsys.readouterr().out
    assert "fixed before the import: unroll the loops" in out and "FuseTIR" in out


def test_passes_with_a_failed_step_writes_no_output(tmp_path: Path) -> None:
    from tests.explorer.cli.test_cli_matrix import unknown_op_model
    from tests.explorer.in_process import run_cli as run_here

    path, out = tmp_path / "acme.onnx", tmp_path / "out.onnx"
    onnx.save(unknown_op_model(), path)
    done = run_here("passes", str(path), "--pipeline", "ort:basic", "--no-verify", "--json", "-o", str(out))
    assert (
        done.returncode == 2
        and not out.exists()
        and sorted(p.name for p in tmp_path.iterdir()) == ["acme.onnx"]
    )
    error = json.loads(done.stdout)["error"]
    assert "step 1 (ort:basic) failed" in error["message"] and f"{out} was not written" in error["message"]


def test_prepare_a_model_with_a_string_output(tmp_path: Path) -> None:
    from onnx import TensorProto, helper

    from tests.explorer.in_process import run_cli as run_here

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    label = helper.make_tensor_value_info("label", TensorProto.STRING, [1])
    nodes = [
        helper.make_node("Relu", ["x"], ["y"]),
        helper.make_node(
            "Constant", [], ["label"], value=helper.make_tensor("c", TensorProto.STRING, [1], [b"cat"])
        ),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "labelled", [x], [y, label]), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    path = tmp_path / "labelled.onnx"
    onnx.save(model, path)
    done = run_here("prepare", str(path), "--samples", "1", "--json")  # the accuracy check skips the strings
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["steps"][-1]["pass"] == "ort-quant:qnn_qdq"


@pytest.mark.parametrize(
    ("words", "code", "error"),
    [
        (["info", "missing.onnx", "--json"], 2, "ModelNotFoundError"),
        (["coverage", "zoo:mlp", "--target", "nope", "--json"], 2, "ExplorerError"),
        (["info", "zoo:mlp", "--json", "--input-shape", "input=1,a"], 2, "UsageError"),
        (["lower", "zoo:custom_domain", "--json"], 3, "RelaxImportFailed"),
    ],
)
def test_json_failures_print_one_error_document(words: list[str], code: int, error: str) -> None:
    from tests.explorer.cli.test_cli_matrix import run

    done = run(*words)
    assert done.returncode == code
    document = json.loads(done.stdout)
    assert document["error"]["type"] == error and document["error"]["exit_code"] == code
    last = done.stderr.strip().splitlines()[-1]  # argparse names the sub-command: "onnx-explorer info: error"
    assert last.startswith("onnx-explorer") and ": error: " in last


def test_one_module_per_command_in_the_order_help_lists_them() -> None:
    from explorer.cli.app import COMMANDS

    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    names = [module.__name__.rpartition(".")[2].replace("_", "-") for module in COMMANDS]  # quant_error.py
    assert list(commands.choices) == names
    for module, name in zip(COMMANDS, names, strict=True):
        assert commands.choices[name].get_default("handler") is module.run


def test_shared_options_are_the_same_in_every_command() -> None:
    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    shapes = {
        name: [a for a in sub._actions if a.dest == "input_shape"] for name, sub in commands.choices.items()
    }
    # overlay's --input-shape is the shapes the other tool ran the model at (AI Hub compiles static ones)
    assert [name for name, found in shapes.items() if not found] == ["diff"]
    for name, (shape,) in ((n, f) for n, f in shapes.items() if f):
        assert shape.option_strings == ["--input-shape"] and shape.default == [], name
        assert shape.metavar == "NAME=D1,D2,..." and shape.type.__name__ == "parse_input_shape", name
    for name, sub in commands.choices.items():
        flags = {flag for a in sub._actions for flag in a.option_strings}
        assert "--json" in flags or name == "report", name
        assert ("--force" in flags) == ("--output" in flags), name


def test_python_dash_m_is_the_same_program() -> None:
    done = run_cli("--version")
    assert done.returncode == 0 and done.stdout.startswith("onnx-explorer ")

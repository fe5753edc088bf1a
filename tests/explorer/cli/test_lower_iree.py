"""``onnx-explorer lower MODEL --compiler iree``: the step contract, failures in words, bad arguments."""

from __future__ import annotations

import json

import pytest

from explorer.cli import main

pytest.importorskip("iree.compiler")


def test_lower_iree_json_has_the_tvm_step_fields_plus_dialects(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lower", "zoo:mlp", "--compiler", "iree", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["compiler"] == "iree" and data["import"]["pass"] == "torch import"
    assert data["import"]["dialects"]["torch"] > 0
    names = [s["pass"] for s in data["steps"]]
    assert names[0] == "input" and names[-1] == "vm" and "flow" in names
    for step in data["steps"]:
        assert {"pass", "changed", "elapsed_ms", "bindings", "prim_funcs", "fused", "log", "dialects"} <= set(
            step
        )
        assert {"ops", "dispatches", "executables"} <= set(step)
    flow = data["steps"][names.index("flow")]
    assert flow["dispatches"] == 3 and flow["dialects"]["flow"] > 0
    assert set(data["steps"][-1]["dialects"]) == {"vm"}


def test_lower_iree_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lower", "zoo:mlp", "--compiler", "iree"]) == 0
    out = capsys.readouterr().out
    assert "dispatch-creation" in out and "torch" in out and "vm 1" not in out.splitlines()[1]


def test_an_op_iree_cannot_lower_exits_3_naming_phase_pass_op_and_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["lower", "zoo:control_flow", "--compiler", "iree", "--json"]) == 3
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["type"] == "LoweringError"
    assert (
        "IREE phase input" in error["message"] and "onnx.Loop (from ONNX node /loop/Loop)" in error["message"]
    )
    assert "internal error" not in error["message"]


def test_flags_of_the_other_compiler_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lower", "zoo:mlp", "--compiler", "iree", "--passes", "zero"]) == 2
    assert "--detail" in capsys.readouterr().err
    assert main(["lower", "zoo:mlp", "--detail", "passes"]) == 2
    assert "--compiler iree" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["lower", "zoo:mlp", "--compiler", "gcc"])
    assert exited.value.code == 2 and "invalid choice: 'gcc'" in capsys.readouterr().err


def test_fix_rewrites_what_iree_cannot_lower_into_standard_onnx(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lower", "zoo:control_flow", "--compiler", "iree"]) == 3
    assert "fix: unroll the loops with a constant trip count" in capsys.readouterr().err
    assert main(["lower", "zoo:control_flow", "--compiler", "iree", "--fix", "--json"]) == 0
    fixed = json.loads(capsys.readouterr().out)
    assert fixed["fixes"] == ["unroll the loops with a constant trip count (explorer:unroll_loops)"]
    assert fixed["steps"][-1]["pass"] == "vm"
    # a contrib op, then an op of no type downstream of a model-local function: both rewritten
    assert main(["lower", "zoo:custom_domain", "--compiler", "iree", "--fix", "--json"]) == 0
    fixes = json.loads(capsys.readouterr().out)["fixes"]
    assert any("onnxscript:inline" in f for f in fixes) and any("decompose_contrib" in f for f in fixes)

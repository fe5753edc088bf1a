"""IREE: the whole model compiled first, then each distinct node alone (side by side while they compile)."""

from __future__ import annotations

import json

import pytest

from explorer import load
from explorer.cli import main
from explorer.core.errors import UsageError
from explorer.isolation import worker
from explorer.targets import TARGET_NAMES, coverage, get_target, registry


@pytest.fixture
def iree() -> None:
    pytest.importorskip("iree.compiler")


def test_a_model_that_compiles_is_supported_whole(iree: None) -> None:
    target = get_target("iree-llvm-cpu")
    assert target.unavailable is None and target.source.kind == "measured"
    support = target.support(load("zoo:mlp"))
    assert len(support) == 6 and all(s.supported and not s.reasons for s in support.values())


def test_the_loop_is_not_legalized_and_the_rest_compiles(iree: None, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = load("zoo:control_flow")
    support = get_target("iree-llvm-cpu").support(graph)
    loop = support.pop("/loop/Loop")
    assert not loop.supported and loop.blocking[0].kind == "compile failed"
    assert "legalize" in loop.blocking[0].text and "onnx.Loop" in loop.blocking[0].text
    assert support and all(s.supported for s in support.values()), support  # the If included

    def no_compiling(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled again")

    # the same graph: its verdicts are kept; another load of it: the one-node results are
    assert get_target("iree-llvm-cpu").support(graph)["/loop/Loop"] == loop
    monkeypatch.setattr(worker, "run", no_compiling)
    again = get_target("iree-llvm-cpu").support(load("zoo:control_flow"))
    assert again["/loop/Loop"] == loop


def test_contrib_and_custom_ops_are_refused(iree: None) -> None:
    support = get_target("iree-llvm-cpu").support(load("zoo:custom_domain"))
    refused = {node for node, s in support.items() if not s.supported}
    assert {"/fc1/FusedMatMul", "/head/FusedMatMul", "/fc1/BiasGelu", "/act/Swish"} <= refused
    fused = support["/fc1/FusedMatMul"].blocking[0]
    # FusedMatMul has a conversion, but ONNX's shape inference leaves its output untyped
    assert fused.kind == "import failed" and "no type" in fused.text and "alone it compiles" in fused.text
    assert support["/fc1/BiasGelu"].blocking[0].kind == "op missing"
    assert support["/fc2/MatMul"].supported


def test_a_conv_fails_at_the_shapes_of_the_whole_model(iree: None) -> None:
    # the backbone's last stride-2 Conv meets a 2x2 input (the inputs fixed at 32x32): IREE's unit-dim
    # folding breaks on it, alone too, while the other Convs of its kind compile
    support = get_target("iree-llvm-cpu").support(load("zoo:detection_head"))
    refused = {node: s.blocking[0] for node, s in support.items() if not s.supported}
    assert list(refused) == ["/backbone/layer5/layer5.0/Conv"]
    reason = refused["/backbone/layer5/layer5.0/Conv"]
    assert reason.kind == "compile failed" and "FoldUnitExtentDims" in reason.text


def test_registry_coverage_and_cli(iree: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert "iree-llvm-cpu" in TARGET_NAMES
    report = coverage(load("zoo:control_flow"), ["iree-llvm-cpu"])
    row = report.get("iree-llvm-cpu")
    assert (row.supported_nodes, row.total_nodes) == (3, 4)
    assert row.verdict.startswith("IREE cannot compile the model") and "Loop" in row.fallback_ops
    assert main(["coverage", "zoo:mlp", "--target", "iree-llvm-cpu", "--json"]) == 0
    (only,) = json.loads(capsys.readouterr().out)["targets"]
    assert only["target"] == "iree-llvm-cpu" and only["coverage"] == 1.0


def test_without_iree_the_target_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(registry, "iree_missing", lambda: "IREE is not installed: pip install ...")
    get_target.cache_clear()
    try:
        target = get_target("iree-llvm-cpu")
        assert target.unavailable and target.to_dict()["unavailable"].startswith("IREE is not installed")
        graph = load("zoo:mlp")
        with pytest.raises(UsageError, match="iree-llvm-cpu: IREE is not installed"):
            target.support(graph)
        with pytest.raises(UsageError, match="IREE is not installed"):
            coverage(graph, ["iree-llvm-cpu"])
        assert main(["coverage", "zoo:mlp", "--target", "iree-llvm-cpu"]) == 2
        assert "IREE is not installed" in capsys.readouterr().err
    finally:
        get_target.cache_clear()

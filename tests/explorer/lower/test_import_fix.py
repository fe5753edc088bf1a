"""A TVM pass failing on a model is a typed lowering error, and `lower` and `bench` share one fix path.

The YOLOv8-style detector (zoo:yolov8, ultralytics' dynamic-shape post-processing) imports into
Relax, but its anchors, made from the feature maps' run-time sizes, leave tensors whose shape TVM
does not know: FoldConstant's legalization stops on them. Fixed shapes and onnxsim (``--simplify``,
or ``--fix`` once the pass failed) make those computations constants.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from explorer import load
from explorer.core.errors import LoweringError, UsageError
from explorer.isolation import worker
from explorer.lower import FIX, RelaxImportFailed, relax_import, relax_pipeline
from explorer.lower.import_fix import lower_with_fixes
from explorer.lower.relax_pipeline import check_passes
from explorer.lower.relax_tuning import compile_tuned
from explorer.onnx_adapter.model_files import worker_source
from tests.explorer.in_process import run_cli

SHAPE = "images=1,3,64,64"  # small where size is not the point: the failure is the same at 320x320
SHAPES = {"images": [1, 3, 64, 64]}
QUICK = ("--warmup", "1", "--min-runs", "2", "--min-seconds", "0")


def test_a_failing_pass_names_itself_the_binding_its_onnx_nodes_and_the_fix(tmp_path: Path) -> None:
    graph = load("zoo:yolov8")
    with pytest.raises(LoweringError) as info:
        relax_pipeline(graph, SHAPES, "zero")
    err = info.value
    assert err.pass_name == "FoldConstant" and err.path == "zoo:yolov8" and err.fix == FIX
    assert "emit_te now only supports Tensor that has ShapeExpr shape" in err.reason
    assert "shape TVM does not know" in err.reason
    imported = relax_import(graph, SHAPES).graph  # the binding is one of the imported module's
    assert imported.nx.has_node(err.binding) and imported.nx.nodes[err.binding]["op_type"] == "add"
    assert err.onnx_nodes and all(graph.nx.has_node(node) for node in err.onnx_nodes)
    assert {graph.nx.nodes[node]["op_type"] for node in err.onnx_nodes} <= {"Add", "Sub"}  # dist2bbox
    assert str(pickle.loads(pickle.dumps(err))) == str(err)  # it crossed the worker's pipe typed
    # the tuning path's passes (pretuned records, no search) say the same
    with pytest.raises(LoweringError, match="FoldConstant"):
        options = {"trials": 0, "minutes": None, "work_dir": str(tmp_path), "key": "yolo"}
        worker.run_on_model(compile_tuned, worker_source(graph), SHAPES, "llvm", **options)


def test_simplify_comes_first_and_fix_applies_every_fix_the_import_offers() -> None:
    graph, fixes = lower_with_fixes(load("zoo:yolov8"), SHAPES, lambda g, s: g, simplify=True)
    assert fixes == (FIX,) and not {"Range", "ConstantOfShape"} & set(graph.summary().ops)  # now constants
    seen: list[str] = []

    def lowered_ops(g: Any, s: Any) -> Any:
        relax_pipeline(g, s, ["LegalizeOps"])
        return g.summary().ops

    ops, fixes = lower_with_fixes(load("zoo:control_flow"), None, lowered_ops, fix=True, progress=seen.append)
    assert "Loop" not in ops and fixes == tuple(seen) and "explorer:unroll_loops" in fixes[0]
    with pytest.raises(RelaxImportFailed):  # without --fix: refused, nothing applied silently
        lower_with_fixes(load("zoo:control_flow"), None, lowered_ops)


def test_lower_exits_3_on_a_failing_pass_and_fix_or_simplify_lowers_it() -> None:
    failed = run_cli("lower", "zoo:yolov8", "--input-shape", SHAPE, "--passes", "zero")
    assert failed.returncode == 3 and "internal error" not in failed.stderr
    assert (
        "TVM pass FoldConstant failed at lv" in failed.stderr
        and "(from ONNX node /model.22/" in failed.stderr
    )
    assert "--simplify, or --fix" in failed.stderr and failed.stderr.count("\n") == 1
    for flag in ("--fix", "--simplify"):
        done = run_cli("lower", "zoo:yolov8", "--input-shape", SHAPE, flag, "--passes", "zero", "--json")
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        assert data["fixes"] == [FIX] and data["steps"][-1]["pass"] == "FuseTIR"


@pytest.mark.parametrize("flag", ["--fix", "--simplify"])
def test_bench_runs_the_detector_on_both_runtimes_with_fix_or_simplify_and_they_agree(flag: str) -> None:
    args = ("bench", "zoo:yolov8", "--runtime", "ort", "--runtime", "tvm", "--input-shape", SHAPE, flag)
    done = run_cli(*args, *QUICK, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["fixes"] == [FIX] and [r["runtime"] for r in report["results"]] == ["ort", "tvm"]
    assert all(r["agrees"] for r in report["results"]), report["results"][1]["max_abs_err"]
    assert report["results"][1]["max_abs_err"] < 1e-3
    assert report["input_shapes"] == SHAPES  # every runtime ran the fixed model at the shapes given


def test_an_unknown_pass_is_a_usage_error_listing_the_passes_before_anything_runs() -> None:
    done = run_cli("lower", "zoo:control_flow", "--passes", "LegalizeOps,NoSuchPass")
    assert done.returncode == 2 and "internal error" not in done.stderr
    assert "'NoSuchPass'" in done.stderr and "the pipelines are default, zero" in done.stderr
    assert all(name in done.stderr for name in ("LegalizeOps", "FuseOps", "DispatchSortScan", "FastGelu"))
    with pytest.raises(UsageError, match="NoSuchPass"):  # not the import's failure: checked first
        relax_pipeline(load("zoo:control_flow"), None, ["NoSuchPass"])
    with pytest.raises(RelaxImportFailed):
        relax_pipeline(load("zoo:control_flow"), None, ["LegalizeOps"])
    assert check_passes("zero") == "zero" and check_passes(" FuseOps ,FuseTIR") == ["FuseOps", "FuseTIR"]

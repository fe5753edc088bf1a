"""``--export-overlay`` on bench and coverage, ``lower --export-mapping`` and ``report --overlay``: our
results written as Model Explorer node data and sync mappings, in-process."""

from __future__ import annotations

import json
from pathlib import Path

from tests.explorer.in_process import run_cli


def test_bench_profile_exports_each_runtimes_time_per_node(tmp_path: Path) -> None:
    out = tmp_path / "time.json"
    words = ["bench", "zoo:mlp", "--runtime", "ort", "--min-runs", "1", "--min-seconds", "0", "--warmup", "0"]
    done = run_cli(*words, "--export-overlay", str(out), "--json")  # implies --profile
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["exported_overlays"] == [str(out)] and "profiles" in document
    data = json.loads(out.read_text())["mlp"]  # Model Explorer's graph id: the ONNX graph's name
    (times,) = document["profiles"].values()
    assert set(data["results"]) == set(times["run"]) and data["name"].startswith("time on ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["time.json"]  # atomic: no temp file left


def test_coverage_exports_placement_and_fallback_reasons(tmp_path: Path) -> None:
    out = tmp_path / "cov.json"
    done = run_cli("coverage", "zoo:resnet18", "--target", "coreml-mlprogram", "--export-overlay", str(out))
    assert done.returncode == 0, done.stderr
    reasons = tmp_path / "cov.fallback-reason-on-coreml-mlprogram.json"
    assert f"wrote {out} (Model Explorer node data)" in done.stdout and f"wrote {reasons}" in done.stdout
    placement = json.loads(out.read_text())["resnet18"]["results"]
    assert placement["/bn1/BatchNormalization"] == {"value": "CPU", "bgColor": "#b4b4b4"}
    assert (
        "op missing"
        in json.loads(reasons.read_text())["resnet18"]["results"]["/bn1/BatchNormalization"]["value"]
    )


def test_an_export_path_in_a_missing_folder_is_refused_before_the_work(tmp_path: Path) -> None:
    out = tmp_path / "no" / "such" / "cov.json"
    done = run_cli("coverage", "zoo:mlp", "--target", "ort-cpu", "--export-overlay", str(out))
    assert done.returncode == 2 and "cov.json" in done.stderr


def test_lower_exports_the_sync_mapping_of_tvms_kernels(tmp_path: Path) -> None:
    out = tmp_path / "mapping.json"
    done = run_cli("lower", "zoo:mlp", "--passes", "zero", "--export-mapping", str(out), "--json")
    assert done.returncode == 0, done.stderr
    about = json.loads(done.stdout)["mapping"]
    assert about["step"] == "FuseTIR" and about["entries"] == 4
    assert about["onnx_nodes_without_lowered_node"] == [
        "/relu1/Relu",
        "/relu2/Relu",
    ]  # no origin after FuseOps
    mapping = json.loads(out.read_text())
    assert mapping["mappingEntries"][1] == {"leftNodeIds": ["/fc1/Gemm"], "rightNodeIds": ["lv#2"]}
    step = run_cli(
        "lower", "zoo:mlp", "--passes", "zero", "--export-mapping", str(out), "--mapping-step", "x"
    )
    assert step.returncode == 2 and "no step 'x' in the lowering" in step.stderr
    alone = run_cli("lower", "zoo:mlp", "--mapping-step", "FuseTIR")
    assert alone.returncode == 2 and "give --export-mapping" in alone.stderr


def test_report_draws_an_overlay_with_its_top_nodes_and_unmapped_names(tmp_path: Path) -> None:
    data = tmp_path / "node_data.json"
    data.write_text(
        json.dumps(
            {"mlp": {"results": {"/fc1/Gemm": {"value": 3.0}, "nothing": {"value": 1.0}}, "name": "err"}}
        )
    )
    out = tmp_path / "r.html"
    done = run_cli("report", "zoo:mlp", "--overlay", str(data), "-o", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "<h2>Overlay</h2>" in text and 'class="oge-overlay-top"' in text and "oge-overlay-graph" in text
    assert "no node or tensor of the model is named &#x27;nothing&#x27;" in text
    missing = run_cli("report", "zoo:mlp", "--overlay", str(tmp_path / "none.json"), "-o", str(out))
    assert missing.returncode == 2

"""``onnx-explorer overlay MODEL FILE``: another tool's results on the model's nodes, in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from explorer import zoo
from tests.explorer.in_process import run_cli
from tests.explorer.overlays.test_ort_profile import profile_file
from tests.explorer.overlays.test_tensorrt import LAYER_INFO, PROFILE


def test_an_ort_profile_of_resnet18_at_the_extended_level_maps_all_of_its_time(tmp_path: Path) -> None:
    model = zoo.save("resnet18", tmp_path)
    profile = profile_file(model, "extended", tmp_path)
    done = run_cli("overlay", str(model), str(profile), "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["format"] == "ort-profile" and document["source"] == str(profile)
    assert document["mapped_nodes"] == 69 == document["total_nodes"]
    assert document["unmapped"] == [] and document["time_share_mapped"] == 1.0
    assert document["about"]["level"] == "extended"
    text = run_cli("overlay", str(model), str(profile), "--ort-level", "extended", "--split", "anchor")
    assert text.returncode == 0, text.stderr
    assert (
        "time_share_mapped  100.0%" in text.stdout
        and "format             ort-profile (extended level" in text.stdout
    )
    assert "slowest nodes" in text.stdout and "CPUExecutionProvider" in text.stdout


def test_node_data_lists_what_did_not_map_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "node_data.json"
    path.write_text(
        json.dumps({"main_graph": {"results": {"/fc1/Gemm": {"value": 2}, "nothing": {"value": 1}}}})
    )
    done = run_cli("overlay", "zoo:mlp", str(path))
    assert done.returncode == 0, done.stderr
    assert "mapped_nodes       1 of 6" in done.stdout
    assert "  nothing: no node or tensor of the model is named 'nothing'" in done.stdout
    assert "time_share_mapped" not in done.stdout  # no times in node data
    document = json.loads(run_cli("overlay", "zoo:mlp", str(path), "--json").stdout)
    assert document["time_share_mapped"] is None
    assert document["unmapped"] == [
        {"name": "nothing", "reason": "no node or tensor of the model is named 'nothing'", "time_ms": None}
    ]


def test_tensorrt_takes_its_layer_info_as_a_second_file(tmp_path: Path) -> None:
    profile, layers = tmp_path / "profile.json", tmp_path / "layers.json"
    profile.write_text(json.dumps(PROFILE))
    layers.write_text(json.dumps(LAYER_INFO))
    alone = json.loads(run_cli("overlay", "zoo:resnet18", str(profile), "--json").stdout)
    both = json.loads(run_cli("overlay", "zoo:resnet18", str(profile), str(layers), "--json").stdout)
    assert both["format"] == alone["format"] == "tensorrt-profile"
    assert both["mapped_nodes"] > alone["mapped_nodes"]
    assert both["time_share_mapped"] > alone["time_share_mapped"]
    assert both["source"] == f"{profile}, {layers}"


@pytest.mark.parametrize(
    ("words", "says"),
    [
        (["--ort-level", "extended"], "the model-explorer reader has no option level"),
        (["--format", "ai-hub-profile"], "not a Qualcomm AI Hub profile"),
    ],
)
def test_an_option_that_does_not_fit_the_file_exits_2(words: list[str], says: str, tmp_path: Path) -> None:
    path = tmp_path / "node_data.json"
    path.write_text(json.dumps({"main_graph": {"results": {}}}))
    done = run_cli("overlay", "zoo:mlp", str(path), *words, "--json")
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr
    assert json.loads(done.stdout)["error"]["exit_code"] == 2


def test_an_ai_hub_profile_is_compared_with_the_qnn_htp_prediction(tmp_path: Path) -> None:
    from tests.explorer.overlays.test_agreement import PROFILE as HUB

    path = tmp_path / "hub.json"
    path.write_text(json.dumps(HUB))
    done = run_cli("overlay", "zoo:control_flow", str(path), "--input-shape", "x=2,16", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["format"] == "ai-hub-profile" and document["mapped_nodes"] == 4  # the keys kept
    compared = document["placement_vs_predicted"]
    assert compared["target"] == "qnn-htp" and compared["share_agreeing"] == 0.25
    assert compared["predicted_npu_measured_elsewhere"] == ["/Greater", "/branch/If"]
    assert compared["measured_npu_predicted_elsewhere"] == ["/loop/Loop"]
    text = run_cli("overlay", "zoo:control_flow", str(path))
    assert text.returncode == 0, text.stderr
    assert "qnn-htp predicted vs measured: 1 of 4 nodes agree (25.0%)" in text.stdout
    assert "  /loop/Loop  Loop  predicted CPU, measured NPU" in text.stdout
    other = tmp_path / "node_data.json"
    other.write_text(json.dumps({"main_graph": {"results": {"/fc1/Gemm": {"value": 2}}}}))
    assert "placement_vs_predicted" not in json.loads(
        run_cli("overlay", "zoo:mlp", str(other), "--json").stdout
    )

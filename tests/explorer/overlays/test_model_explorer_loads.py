"""Our exported node data, read by Model Explorer's own Python packages: its node-data dataclasses
take every field (strictly: no key they do not know), its config accepts the files beside the model,
and every result's key is the id of a node in the graph Model Explorer's ONNX adapter
(``model-explorer-onnx``) builds from the same model, under that graph's id."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from explorer import load, zoo
from explorer.overlays.export import export_overlays
from explorer.overlays.ours import fallback_overlay, placement_overlay, profile_overlay
from explorer.runtimes import OrtRuntime, random_feeds
from explorer.runtimes.profile import profile
from explorer.targets import get_target, partition

dacite = pytest.importorskip("dacite")
node_data_builder = pytest.importorskip("model_explorer.node_data_builder")
model_explorer = pytest.importorskip("model_explorer")
onnx_adapter = pytest.importorskip("model_explorer_onnx.main")


def model_explorer_graphs(path: Path) -> dict[str, set[str]]:
    """Graph id -> node ids, as Model Explorer's ONNX adapter converts the file."""
    graphs = onnx_adapter.ONNXAdapter().convert(str(path), {})["graphs"]
    return {g.id: {n.id for n in g.nodes} for g in graphs}


def loaded_by_model_explorer(path: Path) -> dict[str, object]:
    """The file parsed into Model Explorer's ``ModelNodeData`` (unknown keys refused), and back."""
    data = json.loads(path.read_text())
    strict = dacite.Config(strict=True, check_types=False)  # values may be strings: categories
    model = node_data_builder.ModelNodeData(
        graphsData={
            gid: dacite.from_dict(node_data_builder.GraphNodeData, body, config=strict)
            for gid, body in data.items()
        }
    )
    return json.loads(model.to_json_string())


@pytest.fixture(scope="module")
def resnet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    folder = tmp_path_factory.mktemp("me")
    path = folder / "resnet18.onnx"
    onnx.save(zoo.build("resnet18"), path)
    return path, load(str(path))


def test_placement_and_fallback_load_as_model_explorer_node_data(resnet: tuple[Path, object]) -> None:
    path, graph = resnet
    p = partition(graph, get_target("coreml-mlprogram"))
    written = export_overlays(
        [placement_overlay(p, graph), fallback_overlay(p, graph)], path.with_name("cov.json"), graph
    )
    assert [w.name for w in written] == ["cov.json", "cov.fallback-reason-on-coreml-mlprogram.json"]
    graphs = model_explorer_graphs(path)
    for file in written:
        data = json.loads(file.read_text())
        assert list(data) == list(graphs) == ["resnet18"]  # Model Explorer's id: the ONNX graph's name
        assert set(data["resnet18"]["results"]) <= graphs["resnet18"]  # every key is one of its nodes
        back = loaded_by_model_explorer(file)["resnet18"]
        assert {k: back[k] for k in data["resnet18"]} == data["resnet18"]  # nothing lost or changed
    placement = json.loads(written[0].read_text())["resnet18"]
    assert placement["results"]["/bn1/BatchNormalization"] == {"value": "CPU", "bgColor": "#b4b4b4"}
    assert placement["results"]["/conv1/Conv"] == {"value": "partition 1", "bgColor": "#2e7d32"}
    assert (
        placement["name"] == "placement on coreml-mlprogram" and placement["showExpandedSummaryOnGroupNode"]
    )
    config = model_explorer.config().add_model_from_path(str(path))
    for file in written:
        config.add_node_data_from_path(str(file))
    assert config.node_data_sources == [str(f) for f in written]  # what its server hands the page


def test_an_ort_profile_loads_as_model_explorer_node_data_with_the_time_gradient(
    resnet: tuple[Path, object],
) -> None:
    path, graph = resnet
    prof = profile(OrtRuntime(optimization="disable").prepare(graph), random_feeds(graph.model), runs=2)
    (written,) = export_overlays([profile_overlay(prof, graph)], path.with_name("time.json"), graph)
    data = json.loads(written.read_text())["resnet18"]
    assert set(data["results"]) == set(prof.node_ms) <= model_explorer_graphs(path)["resnet18"]
    assert all(isinstance(r["value"], float) and "bgColor" not in r for r in data["results"].values())
    assert [g["stop"] for g in data["gradient"]][::9] == [0.0, 1.0]  # Model Explorer needs stops 0 and 1
    back = loaded_by_model_explorer(written)["resnet18"]
    assert back["results"] == data["results"] and back["gradient"] == data["gradient"]

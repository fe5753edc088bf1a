"""TensorRT's ``--exportProfile`` and ``--exportLayerInfo`` JSON, written in the test to their schemas."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from explorer import load
from explorer.core.errors import UsageError
from explorer.overlays import read
from explorer.overlays.tensorrt import METADATA_SEPARATOR

FUSED = "/layer1/layer1.0/conv1/Conv + /layer1/layer1.0/relu/Relu"
MYELIN = "{ForeignNode[/avgpool/GlobalAveragePool.../fc/Gemm]}"
REFORMAT = "Reformatting CopyNode for Input Tensor 0 to /conv1/Conv"

PROFILE = [
    {"count": 50},
    {"name": REFORMAT, "timeMs": 5.0, "averageMs": 0.1, "medianMs": 0.1, "percentage": 5.0},
    {"name": "/conv1/Conv", "timeMs": 25.0, "averageMs": 0.5, "medianMs": 0.5, "percentage": 25.0},
    {"name": FUSED, "timeMs": 30.0, "averageMs": 0.6, "medianMs": 0.6, "percentage": 30.0},
    {"name": "PWN(/layer1/layer1.0/Add, /layer1/layer1.0/relu/Relu_1)", "averageMs": 0.2, "percentage": 10.0},
    {"name": MYELIN, "timeMs": 20.0, "averageMs": 0.4, "medianMs": 0.4, "percentage": 20.0},
    {"name": "/not/a/node/Conv", "averageMs": 0.2, "percentage": 10.0},
]


def metadata(*nodes: str) -> str:
    return METADATA_SEPARATOR.join(f"[ONNX Layer: {n}]" for n in nodes)


LAYER_INFO = {
    "Layers": [
        {"Name": REFORMAT, "LayerType": "Reformat", "Metadata": ""},
        {
            "Name": "/conv1/Conv",
            "LayerType": "CaskConvolution",
            "Metadata": metadata("/conv1/Conv", "/bn1/BatchNormalization", "/relu/Relu"),
        },
        {
            "Name": FUSED,
            "LayerType": "CaskConvolution",
            "Metadata": metadata(
                "/layer1/layer1.0/conv1/Conv",
                "/layer1/layer1.0/bn1/BatchNormalization",
                "/layer1/layer1.0/relu/Relu",
            ),
        },
        {
            "Name": MYELIN,
            "LayerType": "Myelin",
            "Metadata": metadata("/avgpool/GlobalAveragePool", "/Flatten", "/fc/Gemm", "/gone/Node"),
        },
    ],
    "Bindings": ["input", "logits"],
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tensorrt")
    (folder / "profile.json").write_text(json.dumps(PROFILE))
    (folder / "layers.json").write_text(json.dumps(LAYER_INFO))
    return folder / "profile.json", folder / "layers.json"


def test_the_profile_alone_maps_layers_by_their_names(files: tuple[Path, Path]) -> None:
    profile, _ = files
    graph = load("zoo:resnet18")
    overlay = read(profile, graph)
    assert overlay.format == "tensorrt-profile" and overlay.about["runs"] == 50
    assert overlay.values["/layer1/layer1.0/relu/Relu"].time_ms == pytest.approx(0.3)  # half of FUSED
    assert overlay.values["/layer1/layer1.0/Add"].entries[0].startswith("PWN(")
    reasons = {u.name: u.reason for u in overlay.unmapped}
    assert "a reformat layer TensorRT added" in reasons[REFORMAT]
    assert "a Myelin region" in reasons[MYELIN] and "--exportLayerInfo" in reasons[MYELIN]
    assert (
        "no node of the model is named as its name says ('/not/a/node/Conv')" in reasons["/not/a/node/Conv"]
    )
    assert overlay.total_ms == pytest.approx(2.0)
    assert overlay.time_share_mapped == pytest.approx((0.5 + 0.6 + 0.2) / 2.0)


@pytest.mark.parametrize("how", ["two paths", "dict of paths", "layer_info option", "parsed"])
def test_with_the_layer_info_every_fused_onnx_node_gets_its_share(files: tuple[Path, Path], how: str) -> None:
    profile, layers = files
    graph = load("zoo:resnet18")
    if how == "two paths":
        overlay = read([str(layers), str(profile)], graph)  # in either order
    elif how == "dict of paths":
        overlay = read({"profile": profile, "layers": layers}, graph)
    elif how == "layer_info option":
        overlay = read(profile, graph, layer_info=str(layers))
    else:
        overlay = read({"profile": PROFILE, "layers": LAYER_INFO}, graph)
    assert overlay.about["layer_info"] is True
    bn = overlay.values["/bn1/BatchNormalization"]
    assert bn.time_ms == pytest.approx(0.5 / 3) and bn.op == "CaskConvolution"
    assert set(bn.shared_with) == {"/conv1/Conv", "/relu/Relu"}
    assert overlay.values["/fc/Gemm"].time_ms == pytest.approx(0.4 / 3)  # the Myelin region's nodes
    reasons = {u.name: u.reason for u in overlay.unmapped}
    assert (
        reasons["/gone/Node"]
        == f"named by TensorRT layer {MYELIN!r} (its metadata); no node of the model has that name"
    )
    assert MYELIN not in reasons and REFORMAT in reasons
    assert overlay.time_share_mapped == pytest.approx((2.0 - 0.1 - 0.2) / 2.0)
    if how != "parsed":
        assert str(profile) in (overlay.source or "") and str(layers) in (overlay.source or "")


def test_the_layer_info_alone_gives_the_layer_types() -> None:
    overlay = read(LAYER_INFO, load("zoo:resnet18"))
    assert overlay.total_ms is None and overlay.time_share_mapped is None
    assert (
        overlay.values["/relu/Relu"].op == "CaskConvolution" and overlay.values["/relu/Relu"].time_ms is None
    )


def test_names_only_layer_info_and_timeMs_without_averageMs() -> None:
    profile = [{"count": 4}, {"name": "/conv1/Conv", "timeMs": 2.0}]
    overlay = read({"profile": profile, "layers": {"Layers": ["/conv1/Conv"]}}, load("zoo:resnet18"))
    assert overlay.values["/conv1/Conv"].time_ms == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("profile", "says"),
    [
        ([{"count": 1}, {"name": "a", "averageMs": -1.0}], "layer 'a' has averageMs -1.0, not a time >= 0"),
        ([{"name": "a", "averageMs": 1.0}, {"averageMs": 1.0}], "profile entry 1 is not a layer with 'name'"),
    ],
)
def test_a_malformed_profile_is_refused_naming_the_file(profile: list, says: str, tmp_path: Path) -> None:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile))
    with pytest.raises(UsageError, match=f"^{path}: ") as info:
        read(path, load("zoo:mlp"), format="tensorrt-profile")
    assert says in str(info.value)

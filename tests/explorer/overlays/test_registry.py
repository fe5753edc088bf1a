"""The readers' registry: each format recognised from its content, bad files and options refused by name."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from explorer import load
from explorer.core.errors import ModelNotFoundError, UsageError
from explorer.overlays import READERS, Overlay, read
from explorer.overlays.registry import detect

SAMPLES = {
    "ort-profile": [{"cat": "Node", "name": "/fc1/Gemm_kernel_time", "ph": "X", "dur": 100, "args": {}}],
    "model-explorer": {"main_graph": {"results": {"/fc1/Gemm": {"value": 1}}}},
    "ai-hub-profile": {"execution_detail": [{"name": "/fc1/Gemm", "execution_time": 100}]},
    "tensorrt-profile": [{"count": 1}, {"name": "/fc1/Gemm", "averageMs": 0.1}],
}


def test_every_format_has_a_sample_and_is_recognised() -> None:
    assert set(SAMPLES) == set(READERS)
    for name, data in SAMPLES.items():
        assert detect(data) == name
        assert [r.name for r in READERS.values() if r.sniff(data)] == [name], name


@pytest.mark.parametrize("name", list(SAMPLES))
def test_each_format_reads_from_a_file_onto_the_graph(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(SAMPLES[name]))
    overlay = read(path, load("zoo:mlp"), **({"level": "disable"} if name == "ort-profile" else {}))
    assert isinstance(overlay, Overlay) and overlay.format == name and overlay.source == str(path)
    assert list(overlay.values) == ["/fc1/Gemm"] and overlay.unmapped == ()
    document = json.loads(json.dumps(overlay.to_dict()))  # JSON-ready
    assert document["mapped_nodes"] == 1 and document["unmapped"] == [] and document["format"] == name
    assert overlay.to_frame()["node"].tolist() == ["/fc1/Gemm"]


def test_a_file_in_no_known_format_is_refused_listing_the_formats(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"layers": [1, 2, 3]}))
    with pytest.raises(UsageError) as info:
        read(path, load("zoo:mlp"))
    message = str(info.value)
    assert message.startswith(f"{path}: not a format the explorer reads; it reads: ")
    assert all(name in message for name in READERS)


@pytest.mark.parametrize(
    ("make", "error", "says"),
    [
        (lambda d: d / "missing.json", ModelNotFoundError, "no such file"),
        (lambda d: d, ModelNotFoundError, "is a folder, not a profile or overlay file"),
        (
            lambda d: Path(os.devnull),
            ModelNotFoundError,
            "is a character device, not a profile or overlay file",
        ),
    ],
    ids=["missing", "folder", "device"],
)
def test_a_path_that_is_not_a_regular_file_is_refused(
    make: Callable[[Path], Path], error: type[Exception], says: str, tmp_path: Path
) -> None:
    with pytest.raises(error, match=says):
        read(make(tmp_path))


def test_options_and_formats_are_checked() -> None:
    with pytest.raises(UsageError, match="no overlay format 'netron'; the formats are: ort-profile"):
        read(SAMPLES["model-explorer"], format="netron")
    with pytest.raises(UsageError, match="the model-explorer reader has no option level; it takes: graph_id"):
        read(SAMPLES["model-explorer"], level="extended")
    with pytest.raises(UsageError, match="not an ONNX Runtime profile"):
        read(SAMPLES["model-explorer"], format="ort-profile")
    with pytest.raises(UsageError, match="from a path, a dict or a list"):
        read(42)  # type: ignore[arg-type]

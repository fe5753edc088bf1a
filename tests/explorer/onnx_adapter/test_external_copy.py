"""A model with external weights is copied file to file: any size, in the memory of its graph."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from explorer import zoo
from explorer.core.errors import UnsafeExternalDataError
from explorer.onnx_adapter.external_copy import ALIGNMENT, copy_external_model
from explorer.onnx_adapter.weights import tensor_array


def _values(path: Path) -> list[np.ndarray]:
    model = onnx.load(os.fspath(path), load_external_data=False)
    return [np.array(tensor_array(t, path.parent)) for t in model.graph.initializer]


def test_a_copy_holds_the_same_weights_page_aligned_and_the_source_is_untouched(tmp_path: Path) -> None:
    source = zoo.write_external_chain(tmp_path / "src", hidden=40, layers=3, fill="random")
    before = {p.name: p.read_bytes() for p in source.parent.iterdir()}
    out = copy_external_model(source, tmp_path / "out" / "copy.onnx")
    assert sorted(os.listdir(out.parent)) == ["copy.onnx", "copy.onnx.data"]
    for a, b in zip(_values(source), _values(out), strict=True):
        assert np.array_equal(a, b)
    offsets = [
        int(next(e.value for e in t.external_data if e.key == "offset"))
        for t in onnx.load(os.fspath(out), load_external_data=False).graph.initializer
    ]
    assert offsets == sorted(offsets) and all(o % ALIGNMENT == 0 for o in offsets)
    assert {p.name: p.read_bytes() for p in source.parent.iterdir()} == before
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no temp file left


def test_a_location_outside_the_folder_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    source = zoo.write_external_chain(tmp_path / "src", hidden=8, layers=1)
    model = onnx.load(os.fspath(source), load_external_data=False)
    next(e for e in model.graph.initializer[0].external_data if e.key == "location").value = "../x.data"
    (tmp_path / "x.data").write_bytes(b"\0" * 256)
    onnx.save(model, os.fspath(source))
    with pytest.raises(UnsafeExternalDataError):
        copy_external_model(source, tmp_path / "out" / "m.onnx")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_a_3_gib_model_is_resaved_under_a_1_gib_cap_and_stays_sparse(tmp_path: Path) -> None:
    """The path ``passes -o`` and ``prepare --output`` take: it read every weight and failed with
    protobuf's EncodeError at 6 GB before."""
    source = zoo.write_external_chain(tmp_path / "src")  # 3 GiB, sparse
    out = tmp_path / "out" / "model.onnx"
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, resource.RLIM_INFINITY))\n"
        "from explorer.onnx_adapter.files import resave\n"
        "resave(sys.argv[1], out_path=sys.argv[2])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, os.fspath(source), os.fspath(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    data = out.with_name("model.onnx.data")
    assert data.stat().st_size == 3 * 2**30
    assert data.stat().st_blocks * 512 < 2**20  # the holes stayed holes
    model = onnx.load(os.fspath(out), load_external_data=False)
    for i, tensor in enumerate(model.graph.initializer):
        values = tensor_array(tensor, out.parent).reshape(-1)
        assert (values[0], values[-1]) == (i + 1, -(i + 1))


def test_a_model_without_external_data_is_resaved_whole(tmp_path: Path) -> None:
    from explorer.onnx_adapter.files import resave

    source = zoo.save("mlp", tmp_path)
    resave(source, out_path=tmp_path / "copy.onnx")
    a, b = onnx.load(os.fspath(source)), onnx.load(os.fspath(tmp_path / "copy.onnx"))
    assert [numpy_helper.to_array(t).tobytes() for t in a.graph.initializer] == [
        numpy_helper.to_array(t).tobytes() for t in b.graph.initializer
    ]
    assert not (tmp_path / "copy.onnx.data").exists()

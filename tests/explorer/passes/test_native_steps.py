"""The native steps: onnxoptimizer and onnxsim take a model over 2 GiB through external data; the
version converter, which takes one protobuf message, is refused before it starts."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from explorer import load, zoo
from explorer.core.errors import ModelTooLargeError
from explorer.core.tensors import PROTOBUF_LIMIT
from explorer.onnx_adapter.weights import model_bytes, tensor_array
from explorer.passes import get_pass, native_steps

GIB = 1 << 30


@pytest.fixture
def external_resnet(tmp_path: Path) -> Path:
    """A narrow ResNet-18 with every weight in an external-data file."""
    path = tmp_path / "src" / "resnet.onnx"
    path.parent.mkdir()
    model = zoo.build("resnet18", width=8, image_size=32, num_classes=10)
    onnx.save_model(model, path, save_as_external_data=True, location="resnet.onnx.data", size_threshold=0)
    return path


def _outputs(path: Path) -> np.ndarray:
    feeds = {"input": np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def test_over_the_limit_onnxoptimizer_reads_and_writes_files(
    external_resnet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the file route, taken here by a small model (the limit lowered): the graph the in-memory route gives
    in_memory, from_path = tmp_path / "a" / "model.onnx", tmp_path / "b" / "model.onnx"
    for out in (in_memory, from_path):
        out.parent.mkdir()
    step = native_steps.onnxoptimizer_step
    step(str(external_resnet), ["fuse_bn_into_conv"], fold=False, out_path=str(in_memory))
    monkeypatch.setattr(native_steps, "PROTOBUF_LIMIT", 1)
    log = step(str(external_resnet), ["fuse_bn_into_conv"], out_path=str(from_path))
    assert any("optimize_from_path" in line for line in log), log
    assert any("folding after the pass skipped" in line for line in log), log
    assert sorted(p.name for p in from_path.parent.iterdir()) == ["model.onnx", "model.onnx.data"]
    ops = [
        [n.op_type for n in onnx.load(p, load_external_data=False).graph.node] for p in (in_memory, from_path)
    ]
    assert ops[0] == ops[1] and "BatchNormalization" not in ops[1]
    assert not onnx.load(from_path, load_external_data=False).graph.value_info  # none before, none after
    np.testing.assert_allclose(_outputs(from_path), _outputs(external_resnet), rtol=1e-4, atol=1e-5)


def test_onnxsim_reads_the_weights_from_the_file(external_resnet: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "model.onnx"
    out.parent.mkdir()
    summary = native_steps.simplify(str(external_resnet), out)
    assert summary["nodes_after"] < summary["nodes_before"]  # BatchNormalization fused into Conv
    np.testing.assert_allclose(_outputs(out), _outputs(external_resnet), rtol=1e-4, atol=1e-5)


@pytest.fixture(scope="module")
def chain_3gib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three 1 GiB MatMul weights in one sparse external file: instant, and nothing read here."""
    return zoo.write_external_chain(tmp_path_factory.mktemp("chain3g"))


@pytest.mark.parametrize("name", ["onnxsim", "onnxsim:shape_ops", "fuse_and_eliminate", "fuse_bn_into_conv"])
def test_onnxsim_and_onnxoptimizer_take_a_model_over_2gib(chain_3gib: Path, name: str) -> None:
    model = load(chain_3gib).model
    assert model_bytes(model) > 3 * GIB
    get_pass(name).check_size(model)  # no ModelTooLargeError


def test_the_version_converter_is_refused_over_2gib_with_the_reason(chain_3gib: Path) -> None:
    graph = load(chain_3gib)
    with pytest.raises(ModelTooLargeError, match=r"one protobuf message.*2 GiB.*3\.0 GiB.*onnxsim"):
        get_pass("opset:18").run(graph.model, model_path=graph.model_path)


def _available_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


@pytest.mark.slow
def test_onnxsim_and_onnxoptimizer_run_on_a_model_over_2gib(tmp_path: Path) -> None:
    # two 1 GiB weights in a sparse file: 2 GiB and the protobuf, over the limit. Both libraries hold
    # every weight in memory (onnxoptimizer's file route about four copies), so this needs free RAM.
    if os.environ.get("OGE_LARGE_TESTS") != "1":  # 146 s and 8 GiB here: kept out of the README's suite
        pytest.skip("writes and reads 2 GiB twice: run with OGE_LARGE_TESTS=1")
    if _available_bytes() < 10 * GIB:
        pytest.skip("needs about 10 GiB of free memory: onnxoptimizer holds 4 copies of 2 GiB of weights")
    graph = load(zoo.write_external_chain(tmp_path, layers=2))
    assert model_bytes(graph.model) > PROTOBUF_LIMIT
    for name in ("onnxsim", "eliminate_identity"):
        result = get_pass(name).run(graph.model, model_path=graph.model_path)
        assert result.path is not None
        try:
            written = sum(p.stat().st_size for p in result.path.parent.iterdir())
            assert written > 2 * GIB, name  # the weights written again, into the pass's own folder
            weights = {t.name: t for t in result.model.graph.initializer}
            assert [n.op_type for n in result.model.graph.node] == ["MatMul", "MatMul"], name
            last = tensor_array(weights["layers.1.weight"], result.path.parent)
            assert (float(last[0, 0]), float(last[-1, -1])) == (2.0, -2.0), name
        finally:
            shutil.rmtree(result.path.parent, ignore_errors=True)
        if name == "eliminate_identity":
            assert any("optimize_from_path" in line for line in result.log), result.log

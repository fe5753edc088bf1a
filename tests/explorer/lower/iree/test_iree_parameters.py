"""IREE with its weights as a parameter archive: the module names the large initializers, the encoder
``iree-compile`` splits out packs them one at a time from the external-data file (or the model's own
bytes) into the archive, and the module run with its archive agrees with ONNX Runtime, in the runtime
and in the profiling tools, with the profile's dispatches on the same ONNX nodes as the inline build."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest

from explorer import zoo
from explorer.core.errors import UnsafeExternalDataError
from explorer.onnx_adapter.files import save_model

rt = pytest.importorskip("iree.runtime")
pytest.importorskip("iree.compiler")

from explorer.lower.iree.iree_compile import CPU_FLAGS, build_vmfb, import_onnx  # noqa: E402
from explorer.lower.iree.iree_parameters import (  # noqa: E402
    MIN_PARAMETER_ELEMENTS,
    PARAMETERS_FROM_BYTES,
    parameters_path,
    write_parameter_archive,
)
from explorer.runtimes.iree_dispatches import dispatch_sites, dispatch_times, profile_dispatches  # noqa: E402
from explorer.runtimes.iree_vm import bind_iree_inputs, iree_outputs, load_iree_function  # noqa: E402

HIDDEN = 96  # 9216 elements per weight: over MIN_PARAMETER_ELEMENTS, so each becomes a parameter


def _archive_keys(path: str) -> dict[str, int]:
    index = rt.ParameterIndex()
    index.load(path)
    return {key: entry.length for key, entry in index.items()}


def _onnx_runtime(path: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    return ort.InferenceSession(os.fspath(path), providers=["CPUExecutionProvider"]).run(None, {"input": x})[
        0
    ]


@pytest.fixture(scope="module")
def external_chain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return zoo.write_external_chain(tmp_path_factory.mktemp("chain"), hidden=HIDDEN, layers=2, fill="random")


def test_external_weights_go_to_the_archive_and_the_module_agrees_with_onnx_runtime(
    external_chain: Path, tmp_path: Path
) -> None:
    assert HIDDEN * HIDDEN >= MIN_PARAMETER_ELEMENTS
    built = build_vmfb(
        os.fspath(external_chain), {"input": [2, HIDDEN]}, os.fspath(tmp_path / "m.vmfb"),
        extra_flags=CPU_FLAGS, parameters_from=0,
    )  # fmt: skip
    assert built["parameters"] == parameters_path(built["vmfb"]) == os.fspath(tmp_path / "m.irpa")
    model = onnx.load(os.fspath(external_chain), load_external_data=False)
    weights = {t.name: int(np.prod(t.dims)) * 4 for t in model.graph.initializer}
    assert sum(_archive_keys(built["parameters"]).values()) >= sum(weights.values())  # every weight, packed
    assert os.path.getsize(built["vmfb"]) < sum(weights.values())  # not inside the module
    x = np.random.default_rng(0).standard_normal((2, HIDDEN)).astype(np.float32)
    call, device = load_iree_function(built["vmfb"], built["function"], "local-sync")
    got = iree_outputs(call(*bind_iree_inputs(device, {"input": x})))[0]
    np.testing.assert_allclose(got, _onnx_runtime(external_chain, x), rtol=1e-4, atol=1e-4)
    runs = dispatch_times(built["vmfb"], built["function"], [x], 1, driver="local-sync")  # --parameters
    assert runs and runs[0]


def test_the_profile_puts_dispatches_on_the_same_onnx_nodes_with_parameters_as_inline(tmp_path: Path) -> None:
    path = tmp_path / "mlp.onnx"
    save_model(zoo.build("mlp"), path)
    x = np.ones((1, 1, 28, 28), np.float32)
    nodes = {}
    for name, threshold in (("inline", PARAMETERS_FROM_BYTES), ("parameters", 0)):
        built = build_vmfb(
            os.fspath(path), None, os.fspath(tmp_path / f"{name}.vmfb"), extra_flags=CPU_FLAGS,
            parameters_from=threshold,
        )  # fmt: skip
        assert (built["parameters"] is not None) == (name == "parameters")
        sites = dispatch_sites(os.fspath(path), None, extra_flags=CPU_FLAGS, parameters_from=threshold)
        records = profile_dispatches(
            os.fspath(path), built["vmfb"], built["function"], None, [x], 1, driver="local-sync", sites=sites
        )
        nodes[name] = sorted(n for r in records for n in r["onnx_nodes"])
    assert nodes["parameters"] == nodes["inline"] and "/fc1/Gemm" in nodes["inline"]


def test_in_memory_weights_go_to_the_archive_too_and_a_stale_archive_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "mlp.onnx"
    save_model(zoo.build("mlp"), path)
    out = tmp_path / "mlp.vmfb"
    built = build_vmfb(os.fspath(path), None, os.fspath(out), parameters_from=0)
    # 256x784 and 128x256 are parameters (packed for the data-tiled kernels: at least their size)
    assert sum(_archive_keys(built["parameters"]).values()) >= (256 * 784 + 128 * 256) * 4
    x = np.ones((1, 1, 28, 28), np.float32)
    call, device = load_iree_function(built["vmfb"], built["function"], "local-sync")
    got = iree_outputs(call(*bind_iree_inputs(device, {"input": x})))[0]
    np.testing.assert_allclose(got, _onnx_runtime(path, x), rtol=1e-4, atol=1e-4)
    del call, device
    inline = build_vmfb(os.fspath(path), None, os.fspath(out))  # small: the weights inside the module
    assert inline["parameters"] is None and not os.path.exists(parameters_path(out))


def test_the_import_only_names_the_parameters_and_reads_none(external_chain: Path, tmp_path: Path) -> None:
    out = import_onnx(os.fspath(external_chain), None, os.fspath(tmp_path / "m.mlirbc"), parameters_from=0)
    assert [key for key, _ in out["parameters"]] == ["layers.0.weight", "layers.1.weight"]
    assert all(t.data_location == onnx.TensorProto.EXTERNAL for _, t in out["parameters"])  # not loaded
    assert '#stream.parameter.named<"model"::"layers.0.weight">' in out["text"]
    assert os.listdir(tmp_path) == ["m.mlirbc"]  # no archive: compiling needs none


def test_an_external_location_outside_the_model_folder_is_refused(tmp_path: Path) -> None:
    tensor = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=[4])
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value="../outside.bin")
    with pytest.raises(UnsafeExternalDataError):
        write_parameter_archive([("w", tensor)], tmp_path, tmp_path / "w.irpa", "m.onnx")
    assert not (tmp_path / "w.irpa").exists()

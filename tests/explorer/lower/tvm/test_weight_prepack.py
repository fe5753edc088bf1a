"""TVM's constants over external weights are the mapped file itself, and a build repacks them one at a
time, handing each original's pages back: the values stay right (read again from the file), and the
build with its packed weights agrees with ONNX Runtime."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest

from explorer import zoo
from explorer.onnx_adapter.weights import tensor_array

tvm = pytest.importorskip("tvm")

from explorer.lower.tvm.relax_frontend import constant_tensor, release_constant, run_importer  # noqa: E402
from explorer.lower.tvm.relax_target import cpu_target  # noqa: E402
from explorer.lower.tvm.relax_tuning import PREPACKED_SUFFIX, compile_tuned, finish_tuned, tuning_module  # noqa: E402
from explorer.lower.tvm.weight_prepack import PREPACK_SUFFIX  # noqa: E402

HIDDEN = 64


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return zoo.write_external_chain(tmp_path_factory.mktemp("chain"), hidden=HIDDEN, layers=2, fill="random")


def _mapped_rss(array: np.ndarray) -> int:
    """This process's resident bytes in the mapping that holds ``array`` (``/proc/self/smaps``)."""
    address, inside = array.ctypes.data, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and ":" not in head:
            low, high = (int(part, 16) for part in head.split("-"))
            inside = low <= address < high
        elif inside and head == "Rss:":
            return int(line.split()[1]) * 1024
    raise AssertionError("no mapping holds the array")


def test_an_external_weight_becomes_a_constant_over_its_mapped_file_and_is_handed_back(chain: Path) -> None:
    model = onnx.load(os.fspath(chain), load_external_data=False)
    weight = model.graph.initializer[0]
    mapped = tensor_array(weight, chain.parent, mode="c")
    expected = np.array(mapped)
    constant = constant_tensor(mapped)
    assert np.from_dlpack(constant).ctypes.data == mapped.ctypes.data  # no copy: the mapping itself
    assert _mapped_rss(mapped) > 0
    assert release_constant(constant)
    assert _mapped_rss(mapped) == 0  # its pages handed back
    np.testing.assert_array_equal(constant.numpy(), expected)  # read again from the file
    assert not release_constant(constant_tensor(expected))  # an in-memory copy: nothing to hand back


def test_the_build_repacks_each_weight_and_agrees_with_onnx_runtime(chain: Path) -> None:
    import onnxruntime as ort

    target = cpu_target()
    imported = run_importer(os.fspath(chain), {"input": [1, HIDDEN]})
    module = tuning_module(imported["module"], target, fast_math=False)
    compiled = compile_tuned(
        os.fspath(chain), {"input": [1, HIDDEN]}, "llvm", trials=0, minutes=None, work_dir=None,
        key="untuned", fast_math=False,
    )  # fmt: skip
    assert compiled["ok"], compiled
    x = np.random.default_rng(1).standard_normal((1, HIDDEN)).astype(np.float32)
    vm = tvm.relax.VirtualMachine(compiled["executable"], tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
    want = ort.InferenceSession(os.fspath(chain), providers=["CPUExecutionProvider"]).run(None, {"input": x})[
        0
    ]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    from tvm.s_tir import meta_schedule as ms

    from explorer.lower.tvm.default_schedules import default_database

    tasks = ms.relax_integration.extract_tasks(module, target)
    with default_database(tasks, target).database:
        finished = finish_tuned(module, target, "")
    names = [gv.name_hint for gv in finished.functions]
    assert any(n.endswith(PREPACKED_SUFFIX) for n in names)  # the kernels take packed weights
    main = finished["main"].script(show_meta=False)
    assert PREPACK_SUFFIX not in main  # every repack folded into a constant

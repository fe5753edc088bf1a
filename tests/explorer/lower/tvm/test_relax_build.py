"""Compiling with TVM Relax (real TVM, CPU, in the worker): outputs match ONNX Runtime on every zoo model."""

from __future__ import annotations

import numpy as np
import pytest

from explorer import load, zoo
from explorer.lower import RelaxImportFailed, relax_build
from explorer.lower.import_fix import lower_with_fixes
from explorer.onnx_adapter.inputs import concrete_input_shapes, random_feeds
from explorer.passes.verification import ort_runner
from tests.explorer.lower.tvm.test_relax_import import IMPORTER_LACKS, NEED_THE_FIX, _celu_model

#: Zoo models that import, but one of whose lowering passes needs static shapes and onnxsim first.
NEED_FIXED_SHAPES = {"yolov8"}


@pytest.mark.parametrize("name", zoo.names())
def test_the_compiled_module_matches_onnx_runtime(name: str) -> None:
    original = load(f"zoo:{name}")
    shapes = concrete_input_shapes(original.model)
    built, fixes = lower_with_fixes(original, shapes, relax_build, fix=True)  # the fixes offered, if any
    assert bool(fixes) == (name in NEED_THE_FIX or name in IMPORTER_LACKS or name in NEED_FIXED_SHAPES)
    assert built.library.is_file() and built.compile_s > 0
    assert [o.shape for o in built.outputs] == [r.shape for r in built.reference]
    scale = max(1.0, max(float(np.abs(r).max()) for r in built.reference))
    assert built.max_abs_diff <= 1e-3 * scale, (name, built.max_abs_diff)
    if fixes:  # and the rewritten model computes what the original did
        feeds = random_feeds(original.model, shapes)
        for got, want in zip(built.run(feeds), ort_runner(original, feeds), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * scale)


def test_the_library_runs_again_on_new_inputs_and_an_unimportable_model_is_refused() -> None:
    built = relax_build(load("zoo:mlp"))
    ones = {"input": np.ones((1, 1, 28, 28), np.float32)}
    again = built.run(ones)
    assert again[0].shape == (1, 10) and not np.allclose(again[0], built.outputs[0])
    with pytest.raises(RelaxImportFailed, match="Celu"):
        relax_build(load(_celu_model()))

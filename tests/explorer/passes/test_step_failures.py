"""A step's failure in words: a library's crash named by where it happened, the traceback kept (#39)."""

from __future__ import annotations

import numpy as np
import onnx

from explorer import zoo
from explorer.passes.base import FunctionPass
from explorer.passes.pipeline import run_pipeline
from explorer.passes.step_failures import StepCrashed, crash_site, step_traceback


def _reshape_in_numpy(model: onnx.ModelProto, params: dict) -> tuple[onnx.ModelProto, list[str]]:
    np.reshape(np.zeros(3), (2,))  # raises inside numpy
    return model, []


def test_a_librarys_crash_in_a_step_names_the_library_and_where_and_keeps_the_traceback() -> None:
    step = FunctionPass("numpy_step", "demo", "Reshapes wrongly.", _reshape_in_numpy)
    failed = run_pipeline(zoo.build("mlp"), [step], verify=False)[1]
    assert failed.error.startswith("ValueError: cannot reshape array of size 3 into shape (2,)")
    assert "(raised in numpy: numpy." in failed.error and ".py:" in failed.error
    assert failed.traceback.startswith("Traceback (most recent call last):")
    assert "_reshape_in_numpy" in failed.traceback and failed.traceback.endswith("into shape (2,)")


def test_a_crash_the_step_worded_is_recorded_as_it_is() -> None:
    def crashes(model: onnx.ModelProto, params: dict) -> tuple[onnx.ModelProto, list[str]]:
        raise StepCrashed("the library crashed in x.y (y.py:1): KeyError: 'a'; instead try z")

    failed = run_pipeline(zoo.build("mlp"), [FunctionPass("worded", "demo", "", crashes)], verify=False)[1]
    assert failed.error == "the library crashed in x.y (y.py:1): KeyError: 'a'; instead try z"


def test_the_innermost_installed_frame_is_the_site_and_the_worker_note_the_traceback() -> None:
    text = (
        'File "/v/site-packages/onnxscript/ir/_core.py", line 5, in outer\n'
        'File "/v/site-packages/onnxscript/optimizer/_fold.py", line 9, in fold\n'
        'File "/work/explorer/passes/onnxscript_steps.py", line 3, in optimizer_step\n'
        'File "/usr/lib/python3.11/copy.py", line 1, in deepcopy\n'
    )
    site = crash_site(text)
    assert (site.library, site.module, site.line, site.function) == (
        "onnxscript",
        "onnxscript.optimizer._fold",
        9,
        "fold",
    )
    assert crash_site(text, within="onnxscript.ir").function == "outer"
    err = IndexError("list index out of range")
    err.add_note("Raised in worker process 12 while running step 'x':\nTraceback ...\nIndexError: boom")
    assert step_traceback(err) == "Traceback ...\nIndexError: boom"

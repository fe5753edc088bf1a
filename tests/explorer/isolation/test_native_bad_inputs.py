"""Bad-input matrix: hostile models through every native step, each in the worker.

For every (model, step) pair the step must end in a typed error (an ExplorerError such as
WorkerCrashed, or the library's own exception with a clear message) or succeed; the input
files must be unchanged; and the parent must go on to run a healthy model through the worker.
Pairs are ordered by step so that a warm worker keeps its library imported between pairs.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from explorer.core.errors import (
    WorkerCrashed,
    WorkerError,
    WorkerOutOfMemory,
    WorkerTimeout,
)
from explorer.isolation import worker
from explorer.lower.tvm.relax_frontend import import_relax
from explorer.onnx_adapter.files import check_model
from explorer.onnx_adapter.ort_run import create_ort_session, run_ort
from explorer.onnx_adapter.shape_inference import infer_shapes
from explorer.passes.native_steps import optimize, simplify
from tests.explorer import bad_models

pytestmark = pytest.mark.slow

CAP_MB = 2048

CRASH = "crash"  # WorkerCrashed by a signal (or, once fixed upstream, a typed error)
OOM = "oom"  # WorkerOutOfMemory
TIMEOUT = "timeout"  # WorkerTimeout
ERROR = "error"  # a typed error, never success
ANY = "any"  # success or a typed error

STEPS: dict[str, Callable[..., Any]] = {
    "check": check_model,
    "infer": infer_shapes,
    "optimizer": optimize,
    "ort_session": create_ort_session,
    "ort_run": run_ort,
    "onnxsim": simplify,
    "tvm": import_relax,  # explorer.lower's own import step: a failed conversion is data, a bad file raises
}


@dataclasses.dataclass(frozen=True)
class Case:
    model: str
    step: str
    expect: str
    timeout: float = 60.0

    @property
    def id(self) -> str:
        return f"{self.step}-{self.model}"


MATRIX = [
    # onnx checker (full_check runs shape inference)
    Case("squeeze_without_input", "check", ERROR),
    Case("terabyte_constant_of_shape", "check", ANY),
    Case("nested_if", "check", ERROR),
    Case("nested_loop", "check", ERROR),
    Case("long_chain", "check", ANY, timeout=20),
    Case("endless_loop", "check", ANY),
    Case("nested_if_31", "check", ANY),
    Case("nested_loop_31", "check", ANY),
    Case("external_past_eof", "check", ANY),
    Case("external_huge_length", "check", ANY),
    Case("gathernd_negative_dim", "check", CRASH),
    # onnx shape inference
    Case("nested_if", "infer", ERROR),
    Case("long_chain", "infer", ANY, timeout=20),
    Case("gathernd_negative_dim", "infer", CRASH),
    # onnxoptimizer
    Case("gathernd_negative_dim", "optimizer", ANY),
    Case("nested_if", "optimizer", ERROR),
    Case("external_past_eof", "optimizer", ERROR),
    Case("external_huge_length", "optimizer", ERROR),
    Case("long_chain", "optimizer", ANY, timeout=3),
    Case("squeeze_without_input", "optimizer", CRASH),
    # ONNX Runtime: session creation, then a run
    Case("gathernd_negative_dim", "ort_session", ANY),
    Case("squeeze_without_input", "ort_session", ERROR),
    Case("terabyte_constant_of_shape", "ort_session", ANY),
    Case("nested_if", "ort_session", ERROR),
    Case("nested_loop", "ort_session", ERROR),
    Case("external_past_eof", "ort_session", ERROR),
    Case("external_huge_length", "ort_session", ERROR),
    Case("long_chain", "ort_session", ANY, timeout=3),
    Case("terabyte_constant_of_shape", "ort_run", OOM),
    Case("terabyte_expand", "ort_run", OOM),
    Case("gigabyte_constant_of_shape", "ort_run", OOM),
    Case("nested_if_31", "ort_run", ANY),
    Case("nested_loop_31", "ort_run", ANY),
    Case("endless_loop", "ort_run", TIMEOUT, timeout=3),
    # onnxsim (bundles onnx shape inference, onnxoptimizer and ONNX Runtime)
    Case("terabyte_constant_of_shape", "onnxsim", ANY),
    Case("terabyte_expand", "onnxsim", ANY),
    Case("endless_loop", "onnxsim", ANY, timeout=20),
    Case("nested_if", "onnxsim", ERROR),
    Case("nested_loop", "onnxsim", ERROR),
    Case("nested_if_31", "onnxsim", ANY),
    Case("nested_loop_31", "onnxsim", ANY),
    Case("external_past_eof", "onnxsim", ERROR),
    Case("external_huge_length", "onnxsim", ERROR),
    Case("long_chain", "onnxsim", ANY, timeout=3),
    Case("gathernd_negative_dim", "onnxsim", CRASH),
    # TVM Relax importer
    Case("terabyte_constant_of_shape", "tvm", ANY),
    Case("nested_if", "tvm", ERROR),
    Case("nested_if_31", "tvm", ANY),
    Case("endless_loop", "tvm", ANY),
    Case("external_past_eof", "tvm", ERROR),
    Case("external_huge_length", "tvm", ERROR),
    Case("gathernd_negative_dim", "tvm", ANY),
    Case("long_chain", "tvm", ANY, timeout=20),
]


def _write(folder: Path, name: str, model: Any) -> Path:
    """Write ``model`` alone in its own folder, so a step could only touch what we hash."""
    (folder / name).mkdir()
    path = folder / name / f"{name}.onnx"
    path.write_bytes(model if isinstance(model, bytes) else model.SerializeToString())
    return path


@pytest.fixture(scope="module")
def model_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every bad model, written once, by name."""
    folder = tmp_path_factory.mktemp("bad_models")
    built = {
        "gathernd_negative_dim": bad_models.gathernd_negative_dim(),
        "squeeze_without_input": bad_models.squeeze_without_input(),
        "terabyte_constant_of_shape": bad_models.terabyte_constant_of_shape(),
        "terabyte_expand": bad_models.terabyte_expand(),
        "gigabyte_constant_of_shape": bad_models.gigabyte_constant_of_shape(),
        "nested_if": bad_models.nested_if(300),
        "nested_loop": bad_models.nested_loop(300),
        # the deepest nesting Python's protobuf still parses: reaches the libraries' graph walkers
        "nested_if_31": bad_models.nested_if(31),
        "nested_loop_31": bad_models.nested_loop(31),
        "long_chain": bad_models.long_chain(100_000),
        "endless_loop": bad_models.endless_loop(),
    }
    files = {name: _write(folder, name, model) for name, model in built.items()}
    files["external_past_eof"] = bad_models.external_data_past_eof(folder / "past_eof")
    files["external_huge_length"] = bad_models.external_data_huge_length(folder / "huge_length")
    return files


@pytest.fixture(scope="module", autouse=True)
def _close_warm_workers():
    yield
    worker.shutdown()


def _digests(path: Path) -> dict[str, str]:
    """Hashes of the model file and every file beside it (external data)."""
    files = sorted(p for p in path.parent.iterdir() if p.is_file())
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def _outcome(case: Case, path: Path) -> BaseException | None:
    try:
        worker.run_on_model(STEPS[case.step], path, timeout=case.timeout, memory_mb=CAP_MB)
    except Exception as exc:
        return exc
    return None


def _assert_expected(case: Case, error: BaseException | None) -> None:
    if error is not None:
        assert not isinstance(error, RecursionError), f"{case.id}: RecursionError: {error}"
        assert str(error).strip(), f"{case.id}: {type(error).__name__} without a message"
    if case.expect == ANY:
        return
    if case.expect == ERROR:
        assert error is not None, f"{case.id}: expected an error, the step succeeded"
        assert not isinstance(error, WorkerError), f"{case.id}: expected a library error, got {error!r}"
    elif case.expect == CRASH:
        assert error is not None, f"{case.id}: expected a crash, the step succeeded"
        if isinstance(error, WorkerCrashed):
            assert error.signal_name in {"SIGSEGV", "SIGBUS", "SIGABRT"}, error
            assert error.step == STEPS[case.step].__module__ + "." + STEPS[case.step].__qualname__
            assert "Fatal Python error" in error.stderr_tail
    elif case.expect == OOM:
        assert isinstance(error, WorkerOutOfMemory), f"{case.id}: {error!r}"
        assert error.memory_mb == CAP_MB
    elif case.expect == TIMEOUT:
        assert isinstance(error, WorkerTimeout), f"{case.id}: {error!r}"
        assert error.timeout == case.timeout


def _assert_healthy() -> None:
    """The parent is alive and the worker runs a good model right after."""
    model = bad_models.tiny_valid_model()
    assert worker.run_on_model(check_model, model, memory_mb=CAP_MB)["valid"]
    feeds = {"x": np.array([[-1.0, 2.0, -3.0, 4.0]], np.float32)}
    outputs = worker.run_on_model(run_ort, model, feeds, memory_mb=CAP_MB)
    assert outputs["y"].tolist() == [[0.0, 2.0, 0.0, 4.0]]


@pytest.mark.parametrize("case", MATRIX, ids=[case.id for case in MATRIX])
def test_bad_model(case: Case, model_files: dict[str, Path]) -> None:
    path = model_files[case.model]
    before = _digests(path)
    error = _outcome(case, path)
    _assert_expected(case, error)
    assert _digests(path) == before, f"{case.id}: the input files changed"
    _assert_healthy()


def test_real_native_crashes_are_contained(model_files: dict[str, Path]) -> None:
    """The two real reproducers crash the installed native libraries (if not, they got fixed)."""
    crashes = {}
    for model, step in (("gathernd_negative_dim", "check"), ("squeeze_without_input", "optimizer")):
        error = _outcome(Case(model, step, CRASH), model_files[model])
        crashes[f"{step}-{model}"] = getattr(error, "signal_name", None)
    if not any(crashes.values()):
        pytest.skip(f"no longer crashes with the installed libraries: {crashes}")
    _assert_healthy()

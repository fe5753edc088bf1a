"""The crash-proof worker: results, errors, signals, limits, progress, reuse, cleanup, cancel.

The step functions below are top-level so that the spawned child can import them by name.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import onnx
import psutil
import pytest
from onnx import TensorProto, helper

from explorer.core.errors import (
    ModelNotFoundError,
    WorkerCrashed,
    WorkerFailed,
    WorkerOutOfMemory,
    WorkerTimeout,
)
from explorer.isolation import worker
from explorer.isolation.io import move_atomic
from explorer.onnx_adapter.files import check_model
from explorer.onnx_adapter.ort_run import create_ort_session
from explorer.onnx_adapter.shape_inference import infer_shapes
from explorer.passes.native_steps import optimize, simplify

# --------------------------------------------------------------------------- steps run in the child


class StepError(Exception):
    """A picklable exception raised by a step."""


class TwoArgError(Exception):
    """Cannot be rebuilt from its pickled args (its __init__ needs two)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def raise_step_error(message: str) -> None:
    raise StepError(message)


def raise_two_arg_error() -> None:
    raise TwoArgError("cannot rebuild me", 7)


def segfault() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def read_null_pointer() -> bytes:
    return ctypes.string_at(0)


def abort() -> None:
    os.abort()


def exit_with(code: int) -> None:
    os._exit(code)


def write_native_stderr_then_segfault(text: str) -> None:
    os.write(2, text.encode() + b"\n")  # fd 2 directly, like a C++ library would
    segfault()


def fake_uncaught_bad_alloc() -> None:
    os.write(
        2, b"terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc\n"
    )
    os.abort()


def allocate(nbytes: int) -> int:
    return len(bytearray(nbytes))


def sleep_with_grandchild(pid_file: str) -> None:
    child = subprocess.Popen(["sleep", "1000"])
    Path(pid_file).write_text(str(child.pid))
    time.sleep(1000)


def crash_on_model(path: str) -> None:
    assert Path(path).is_file()
    segfault()


def sleep_on_model(path: str, seconds: float) -> None:
    assert Path(path).is_file()
    time.sleep(seconds)


def report_three_times() -> str:
    for i in range(3):
        worker.report(i / 2, f"part {i}")
    worker.report("done")
    return "finished"


def address_space_limit() -> int:
    return resource.getrlimit(resource.RLIMIT_AS)[0]


def make_lock() -> threading.Lock:
    return threading.Lock()


# --------------------------------------------------------------------------- helpers


@pytest.fixture(autouse=True)
def _restore_defaults():
    saved = {name: getattr(worker.defaults, name) for name in vars(worker.defaults)}
    yield
    worker.configure(**saved)


@pytest.fixture(scope="module", autouse=True)
def _close_warm_workers():
    yield
    worker.shutdown()


def is_gone(pid: int, wait_s: float = 5.0) -> bool:
    """True once ``pid`` has exited (a zombie waiting for its reaper counts as gone)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def tiny_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [helper.make_node("Identity", ["x"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    graph = helper.make_graph(nodes, "tiny", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def warm_pid() -> int:
    return worker.run(os.getpid)


# --------------------------------------------------------------------------- results and exceptions


def test_result_round_trip():
    assert worker.run(divmod, 7, 2) == (3, 1)
    assert worker.run(int, "ff", base=16) == 255
    array = worker.run(np.arange, 5, dtype=np.int32)
    np.testing.assert_array_equal(array, np.arange(5, dtype=np.int32))


def test_notebook_style_function_is_shipped_by_value():
    offset = 40
    assert worker.run(lambda x: x + offset, 2) == 42


def test_exception_comes_back_as_itself_with_child_traceback():
    with pytest.raises(StepError, match="bad input") as info:
        worker.run(raise_step_error, "bad input")
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "Traceback" in notes
    assert "raise_step_error" in notes
    assert "test_worker" in notes


def test_builtin_exception_type_preserved():
    with pytest.raises(ValueError, match="invalid literal"):
        worker.run(int, "not a number")


def test_exception_that_cannot_be_rebuilt_becomes_worker_failed():
    with pytest.raises(WorkerFailed) as info:
        worker.run(raise_two_arg_error)
    assert info.value.exc_type.endswith("TwoArgError")
    assert "cannot rebuild me" in str(info.value)
    assert "raise_two_arg_error" in info.value.traceback_text


def test_unpicklable_result_becomes_worker_failed():
    with pytest.raises(WorkerFailed, match="could not be sent back"):
        worker.run(make_lock)


def test_unpicklable_argument_fails_in_the_parent_and_keeps_the_worker():
    pid = warm_pid()
    with pytest.raises(TypeError):
        worker.run(id, threading.Lock())
    assert warm_pid() == pid


# --------------------------------------------------------------------------- crashes


def test_sigsegv_is_reported_with_faulthandler_dump():
    # a fresh worker: one that imported TVM earlier (a lowering test) has TVM's own SIGSEGV handler,
    # which prints a native backtrace instead of faulthandler's dump
    with pytest.raises(WorkerCrashed) as info:
        worker.run(segfault, reuse=False)
    err = info.value
    assert err.signal_name == "SIGSEGV"
    assert err.exitcode == -signal.SIGSEGV
    assert err.step.endswith("segfault")
    assert "Fatal Python error" in err.stderr_tail
    assert "SIGSEGV" in str(err)


def test_native_null_pointer_read_is_a_crash():
    with pytest.raises(WorkerCrashed) as info:
        worker.run(read_null_pointer, reuse=False)  # a fresh worker: faulthandler's dump (see above)
    assert info.value.signal_name == "SIGSEGV"
    assert "string_at" in info.value.stderr_tail


def test_sigabrt_is_reported():
    with pytest.raises(WorkerCrashed) as info:
        worker.run(abort, step="my abort step")
    assert info.value.signal_name == "SIGABRT"
    assert info.value.step == "my abort step"


def test_plain_exit_is_a_crash_without_signal():
    with pytest.raises(WorkerCrashed) as info:
        worker.run(exit_with, 3)
    assert info.value.signal_name is None
    assert info.value.exitcode == 3


def test_native_stderr_is_captured():
    with pytest.raises(WorkerCrashed) as info:
        worker.run(write_native_stderr_then_segfault, "libfoo: about to dereference null")
    tail = info.value.stderr_tail
    assert "libfoo: about to dereference null" in tail
    assert len(tail.splitlines()) <= worker.defaults.tail_lines + 2


def test_warm_worker_is_reused_and_replaced_after_a_crash():
    first = warm_pid()
    assert warm_pid() == first
    with pytest.raises(WorkerCrashed):
        worker.run(segfault)
    assert is_gone(first)
    fresh = warm_pid()
    assert fresh != first
    assert warm_pid() == fresh


def test_reuse_false_uses_a_fresh_process():
    assert worker.run(os.getpid, reuse=False) != worker.run(os.getpid, reuse=False)


def imported(name: str) -> bool:
    return name in sys.modules


def test_prestart_is_idempotent_and_the_next_call_gets_its_warm_worker():
    worker.shutdown()
    thread = worker.prestart(imports=("onnx",))
    assert worker.prestart(imports=("onnx",)) is thread  # a second call starts nothing
    first = worker.run(os.getpid)  # made while the worker may still be starting: it waits for it
    thread.join()
    assert worker.run(imported, "onnx")  # imported there by prestart, not by this call
    assert worker.run(os.getpid) == first
    assert len([p for p in psutil.Process().children() if p.pid == first]) == 1
    assert worker.prestart() is thread  # still alive: nothing new


def test_prestart_after_shutdown_starts_a_new_worker_and_without_reuse_nothing():
    worker.shutdown()
    thread = worker.prestart()
    thread.join()
    old = worker.run(os.getpid)
    worker.shutdown()
    assert is_gone(old)
    again = worker.prestart()
    assert again is not thread
    again.join()
    assert worker.run(os.getpid) != old
    worker.configure(reuse=False)
    assert worker.prestart() is None


# --------------------------------------------------------------------------- limits


@pytest.mark.slow
def test_timeout_kills_the_whole_process_group(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    started = time.monotonic()
    with pytest.raises(WorkerTimeout) as info:
        worker.run(sleep_with_grandchild, str(pid_file), timeout=1.5)
    assert time.monotonic() - started < 10
    assert info.value.timeout == 1.5
    assert info.value.step.endswith("sleep_with_grandchild")
    assert is_gone(int(pid_file.read_text()))


@pytest.mark.slow
def test_worker_dies_with_its_parent(tmp_path):
    """A killed kernel must not leave its worker (or the worker's children) running."""
    pid_file = tmp_path / "grandchild.pid"
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path[:0] = {sys.path!r}
            from explorer.isolation import worker
            from {__name__} import sleep_with_grandchild
            if __name__ == "__main__":
                worker.run(sleep_with_grandchild, {str(pid_file)!r})
            """
        )
    )
    parent = subprocess.Popen([sys.executable, str(script)])
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()):
            assert time.monotonic() < deadline and parent.poll() is None
            time.sleep(0.05)
        grandchild = int(pid_file.read_text())
        worker_pid = psutil.Process(grandchild).ppid()
    finally:
        parent.kill()
        parent.wait()
    assert is_gone(worker_pid)
    assert is_gone(grandchild)


def test_memory_cap_gives_worker_out_of_memory():
    with pytest.raises(WorkerOutOfMemory) as info:
        worker.run(allocate, 4 * 2**30, memory_mb=1024)
    assert info.value.memory_mb == 1024
    assert worker.run(allocate, 2**20, memory_mb=1024) == 2**20


def test_uncaught_bad_alloc_abort_is_out_of_memory():
    with pytest.raises(WorkerOutOfMemory) as info:
        worker.run(fake_uncaught_bad_alloc, memory_mb=1024)
    assert "bad_alloc" in info.value.stderr_tail


def test_each_cap_gets_its_own_worker_with_that_limit():
    assert worker.run(address_space_limit, memory_mb=1024) == 1024 * 2**20
    assert worker.run(address_space_limit, memory_mb=1536) == 1536 * 2**20
    assert worker.run(os.getpid, memory_mb=1024) != worker.run(os.getpid, memory_mb=1536)


def test_gpu_runs_have_no_memory_cap():
    assert worker.run(address_space_limit, memory_mb=1024, gpu=True) == resource.RLIM_INFINITY


def test_configure_sets_defaults_and_rejects_unknown_names():
    before = worker.defaults.memory_mb
    old = worker.configure(timeout=42, memory_mb=1024)
    assert old["memory_mb"] == before
    assert worker.defaults.timeout == 42
    assert worker.run(address_space_limit) == 1024 * 2**20
    worker.configure(**old)
    assert worker.defaults.memory_mb == before
    with pytest.raises(TypeError, match="unknown worker setting"):
        worker.configure(timout=1)


def test_default_memory_cap_is_a_share_of_ram():
    total_mb = psutil.virtual_memory().total // 2**20
    assert 0 < worker.default_memory_mb() <= total_mb


# --------------------------------------------------------------------------- progress and cancel


def test_progress_events_reach_the_parent():
    events: list[worker.ProgressEvent] = []
    assert worker.run(report_three_times, progress=events.append) == "finished"
    assert [e.fraction for e in events] == [0.0, 0.5, 1.0, None]
    assert [e.message for e in events] == ["part 0", "part 1", "part 2", "done"]
    assert all(e.step.endswith("report_three_times") for e in events)


def test_report_outside_a_worker_is_a_no_op():
    assert report_three_times() == "finished"


def test_failing_progress_callback_cancels_the_step():
    pid = warm_pid()

    def stop(event: worker.ProgressEvent) -> None:
        raise RuntimeError("user pressed stop")

    with pytest.raises(RuntimeError, match="user pressed stop"):
        worker.run(report_three_times, progress=stop)
    assert is_gone(pid)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_keyboard_interrupt_kills_the_child_and_propagates():
    pid = warm_pid()
    # Python's own handler, as in a notebook kernel: an earlier test's library (in the full suite)
    # can leave another one installed in this process, which would swallow the interrupt
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            worker.run(time.sleep, 30)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert is_gone(pid)
    assert warm_pid() != pid


# --------------------------------------------------------------------------- models as files


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("explorer-call-"))


def _run_with_outcome(outcome: str, model: onnx.ModelProto) -> None:
    if outcome == "success":
        assert worker.run_on_model(check_model, model)["valid"]
    elif outcome == "exception":
        with pytest.raises(ValueError, match="unknown onnxoptimizer pass"):
            worker.run_on_model(optimize, model, passes=["no_such_pass"])
    elif outcome == "crash":
        with pytest.raises(WorkerCrashed):
            worker.run_on_model(crash_on_model, model)
    else:
        with pytest.raises(WorkerTimeout):
            worker.run_on_model(sleep_on_model, model, 30, timeout=0.5)


@pytest.mark.parametrize("outcome", ["success", "exception", "crash", "timeout"])
def test_temp_folder_removed_in_every_outcome(tmp_path, outcome):
    worker.configure(tmp_dir=str(tmp_path))
    _run_with_outcome(outcome, tiny_model())
    assert _leftovers(tmp_path) == []


def test_worker_folder_removed_on_shutdown(tmp_path):
    worker.configure(tmp_dir=str(tmp_path))
    with worker.Worker() as w:
        w.call(os.getpid)
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("explorer-worker-")]
    assert list(tmp_path.iterdir()) == []


def test_output_is_moved_to_the_destination(tmp_path):
    worker.configure(tmp_dir=str(tmp_path / "scratch"))
    (tmp_path / "scratch").mkdir()
    out = tmp_path / "results" / "optimized.onnx"
    summary = worker.run_on_model(optimize, tiny_model(), output=out, passes=["eliminate_identity"])
    assert (summary["nodes_before"], summary["nodes_after"]) == (2, 1)
    assert [n.op_type for n in onnx.load(out).graph.node] == ["Relu"]
    assert _leftovers(tmp_path / "scratch") == []


def test_model_path_is_used_as_is_and_left_untouched(tmp_path):
    path = tmp_path / "tiny.onnx"
    onnx.save(tiny_model(), path)
    before = path.read_bytes()
    assert worker.run_on_model(infer_shapes, path)["value_info"] == 1
    assert worker.run_on_model(simplify, str(path))["nodes_after"] == 1
    assert path.read_bytes() == before


def test_relative_model_path_survives_a_chdir(tmp_path, monkeypatch):
    warm_pid()  # the warm worker keeps the working directory it started in
    monkeypatch.chdir(tmp_path)
    onnx.save(tiny_model(), "relative.onnx")
    assert worker.run_on_model(check_model, "relative.onnx")["valid"]


def test_model_as_bytes():
    info = worker.run_on_model(create_ort_session, tiny_model().SerializeToString())
    assert info["inputs"] == [{"name": "x", "shape": [1, 4], "type": "tensor(float)"}]


def test_missing_model_file_is_a_typed_error(tmp_path):
    with pytest.raises(ModelNotFoundError, match=r"missing\.onnx"):
        worker.run_on_model(check_model, tmp_path / "missing.onnx")


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_a_device_never_reaches_the_worker(tmp_path, kind):
    """Refused in the parent by its stat: the worker would wait on the FIFO, or read /dev/zero to its cap."""
    path = tmp_path / "model.onnx"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    what = "a FIFO (named pipe)" if kind == "fifo" else "a character device (a link to /dev/zero)"
    with pytest.raises(ModelNotFoundError) as info:  # a regression: a worker out of memory or time, soon
        worker.run_on_model(check_model, path, memory_mb=1024, timeout=60)
    assert str(info.value) == f"{path}: is {what}, not an ONNX model file"


def test_move_atomic_copies_across_file_systems(tmp_path, monkeypatch):
    """When a rename cannot cross file systems, the output is copied beside its target, then renamed."""
    real_replace = os.replace
    renames = []

    def cross_device_once(source, target):
        renames.append(Path(target).name)
        if len(renames) == 1:
            raise OSError(18, "Invalid cross-device link")
        real_replace(source, target)

    (tmp_path / "staged").mkdir()
    (tmp_path / "out").mkdir()
    source = tmp_path / "staged" / "m.onnx"
    source.write_bytes(b"new")
    (tmp_path / "out" / "m.onnx").write_bytes(b"old")
    monkeypatch.setattr(os, "replace", cross_device_once)
    assert move_atomic(source, tmp_path / "out" / "m.onnx").read_bytes() == b"new"
    assert renames[0] == "m.onnx" and renames[1] == "m.onnx"  # the second renames the copy into place
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["m.onnx"]
    assert not source.exists()


WORKER_STEP_MODULES = (
    "explorer.onnx_adapter.shape_inference",
    "explorer.onnx_adapter.files",
    "explorer.passes.native_steps",
    "explorer.onnx_adapter.ort_run",
    "explorer.targets.assignment",
)


def test_worker_step_modules_stay_light():
    """A worker that infers shapes, runs onnxsim or ONNX Runtime unpickles its step from these
    modules: importing them (and their packages) must not import networkx, plotly or pandas."""
    code = (
        f"import importlib, sys\nfor name in {WORKER_STEP_MODULES!r}: importlib.import_module(name)\n"
        "print(sorted(m for m in ('networkx', 'plotly', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_explicit_worker_serves_calls_sequentially():
    with worker.Worker(memory_mb=2048) as w:
        assert w.call(os.getpid) == w.pid
        assert w.call(address_space_limit) == 2048 * 2**20
        with pytest.raises(WorkerCrashed):
            w.call(segfault)
        assert not w.alive
        assert w.call(pow, 2, 5) == 32
    assert not w.alive


# --------------------------------------------------------------------------- a script without the guard

UNGUARDED_SCRIPT = """\
import sys
sys.path[:0] = {path!r}
import explorer
from explorer.isolation import worker
{patch}
with open({side!r}, "a") as side:
    side.write(__name__ + "\\n")
graph = explorer.load({source!r})
print("loaded", graph.source)
"""
GUARD = 'if __name__ == "__main__":'


def run_script(tmp_path: Path, source: str, *, patch: str = "", guarded: bool = False) -> tuple:
    """``python script.py`` where the script's top level writes a line (its ``__name__``) to a file and
    loads ``source`` ("zoo": ``zoo:mlp``, "file": a model file, inferred from a thread); return the
    finished process and the lines written."""
    from explorer import zoo

    model = "zoo:mlp" if source == "zoo" else str(zoo.save("mlp", tmp_path))
    side = tmp_path / "side_effects.txt"
    text = UNGUARDED_SCRIPT.format(path=sys.path, patch=patch, side=str(side), source=model)
    if guarded:
        head, _, body = text.partition("with open(")
        text = head + GUARD + "\n" + textwrap.indent("with open(" + body, "    ")
    script = tmp_path / "script.py"
    script.write_text(text)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=180
    )
    return done, side.read_text().splitlines() if side.exists() else []


@pytest.mark.parametrize("source", ["zoo", "file"])
def test_a_script_loading_at_import_time_fails_once_naming_the_guard(source: str, tmp_path: Path) -> None:
    """Issue #39: spawn imports the main script again in the worker; unguarded, its top level would
    run twice. The parent refuses before the worker starts: the side effect happened once."""
    done, side_effects = run_script(tmp_path, source)
    assert done.returncode == 1, done.stderr[-3000:]
    assert side_effects == ["__main__"]
    assert "loaded" not in done.stdout
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith("explorer.core.errors.UnguardedMainError: ") and GUARD in said, done.stderr
    assert f"{tmp_path / 'script.py'}, line 8, starts the explorer's worker process at import time" in said


def test_a_guarded_script_loads_once(tmp_path: Path) -> None:
    done, side_effects = run_script(tmp_path, "file", guarded=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert side_effects == ["__main__"] and done.stdout.count("loaded") == 1
    assert "UnguardedMainError" not in done.stderr


def test_a_worker_whose_start_up_import_of_the_script_starts_a_worker_exits_and_the_parent_says_why(
    tmp_path: Path,
) -> None:
    """Where the parent cannot tell (here: told it cannot), the worker, still starting, finds the script
    it imports again starting a worker: it exits there, and the parent raises the same typed error at
    once (no hang, no second load)."""
    patch = "from explorer.isolation.worker import main_guard\nmain_guard._unguarded_main_line = lambda: None"
    started = time.monotonic()
    done, side_effects = run_script(tmp_path, "file", patch=patch)
    assert done.returncode == 1 and time.monotonic() - started < 60, done.stderr[-3000:]
    assert side_effects == ["__main__", "__mp_main__"]  # the lines above the call ran in the worker
    assert "loaded" not in done.stdout
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith("explorer.core.errors.UnguardedMainError: ") and GUARD in said, done.stderr
    assert f"imported {tmp_path / 'script.py'} again (spawn does, as __mp_main__)" in said

"""TVM's CPU thread pool: one thread per physical core in the worker, as ONNX Runtime, unless chosen."""

from __future__ import annotations

import os

from explorer.isolation import worker
from explorer.isolation.cpu_cores import physical_cores, size_tvm_thread_pool, tvm_threads


def _pool_in_this_process() -> tuple[str | None, int]:
    return os.environ.get("TVM_NUM_THREADS"), tvm_threads()


def test_the_worker_runs_tvm_on_every_physical_core() -> None:
    # TVM alone would take half of the logical CPUs on x86: one core of a 2-vCPU machine
    expected = size_tvm_thread_pool(dict(os.environ))  # physical_cores(), unless this shell chose
    with worker.Worker() as child:
        variable, threads = child.call(_pool_in_this_process)
    assert variable is not None and threads == expected


def test_a_thread_count_the_user_chose_is_kept() -> None:
    assert size_tvm_thread_pool({"TVM_NUM_THREADS": "3"}) == 3
    assert size_tvm_thread_pool({"OMP_NUM_THREADS": "5"}) == 5
    chosen = {"TVM_NUM_THREADS": "0"}  # not a count: TVM itself would treat it as 1
    assert size_tvm_thread_pool(chosen) == physical_cores() == int(chosen["TVM_NUM_THREADS"])


def test_the_tvm_session_reports_the_threads_it_runs_on() -> None:
    from explorer import load
    from explorer.runtimes import OrtRuntime, TvmRuntime

    graph = load("zoo:mlp")
    assert TvmRuntime().prepare(graph).info["threads"] == size_tvm_thread_pool(dict(os.environ))
    assert OrtRuntime().prepare(graph).info["threads"] == physical_cores()

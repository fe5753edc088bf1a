"""The process-tree memory sampler: sums over children and grandchildren, keeps the peak."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from explorer.isolation.process_memory import MemoryPeak, ProcessTreeSampler, TreeMemory, tree_memory

MIB = 2**20

# A process that holds MIB MiB and, if more sizes follow, starts a child holding the next one; each
# prints "ready" once its descendants are ready, and waits for its stdin to close.
HOLD = textwrap.dedent(
    """
    import subprocess, sys
    held = bytearray(int(sys.argv[1]) * 2**20)
    if len(sys.argv) > 2:
        code = f"{__doc__!r}\\n{__doc__}"  # itself again, with its docstring
        child = subprocess.Popen([sys.executable, "-c", code, *sys.argv[2:]], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        child.stdout.readline()
    print("ready", flush=True)
    sys.stdin.read()
    """
)
HOLD = f"{HOLD!r}\n{HOLD}"  # the code is its own docstring, to start its child with


@pytest.fixture
def tree() -> Iterator[subprocess.Popen[str]]:
    """A child holding 80 MiB and its grandchild holding 120 MiB."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, "80", "120"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        yield process
    finally:
        assert process.stdin is not None
        process.stdin.close()  # the grandchild's stdin is the child's pipe: both end
        process.wait(timeout=30)


def test_tree_memory_sums_the_child_and_its_grandchild(tree: subprocess.Popen[str]) -> None:
    whole = tree_memory(tree.pid)
    assert whole.processes == 2
    assert whole.rss_bytes >= 200 * MIB
    below = tree_memory(tree.pid, include_root=False)
    assert below.processes == 1
    assert 120 * MIB <= below.rss_bytes < whole.rss_bytes


def test_this_process_tree_counts_the_children(tree: subprocess.Popen[str]) -> None:
    children = tree_memory(include_root=False)
    assert children.processes >= 2 and children.rss_bytes >= 200 * MIB


def test_a_gone_process_reads_as_zero() -> None:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    assert tree_memory(process.pid) == TreeMemory(process.pid, 0, 0)


def test_the_sampler_keeps_the_peak_of_a_tree_that_grew_and_shrank() -> None:
    code = "import time; b = bytearray(150 * 2**20); time.sleep(0.6); del b; time.sleep(0.6)"
    process = subprocess.Popen([sys.executable, "-c", code])
    sampler = ProcessTreeSampler(process.pid, interval_s=0.05).start()
    process.wait(timeout=30)
    peak = sampler.stop()
    assert peak.peak_rss_bytes >= 150 * MIB
    assert peak.processes_at_peak == peak.max_processes == 1
    assert peak.samples >= 5 and peak.duration_s > 0.5
    assert sampler.stop() is peak  # stopping again returns the same result
    assert tree_memory(process.pid).rss_bytes == 0


def test_the_sampler_takes_a_pid_known_only_later(tree: subprocess.Popen[str]) -> None:
    sampler = ProcessTreeSampler(interval_s=0.05)
    sampler.start(tree.pid)
    time.sleep(0.15)
    assert sampler.peak.peak_rss_bytes >= 200 * MIB  # readable while it runs
    peak = sampler.stop()
    assert peak.root_pid == tree.pid and peak.max_processes == 2
    # the root (80 MiB) and its child (120 MiB) each have their own peak, whose sum bounds the whole
    assert 80 * MIB <= peak.peak_root_pss_bytes < 120 * MIB <= peak.peak_children_pss_bytes
    assert peak.peak_pss_bytes <= peak.peak_root_pss_bytes + peak.peak_children_pss_bytes


def test_the_sampler_as_a_context_manager_reads_this_process() -> None:
    with ProcessTreeSampler(interval_s=0.01) as sampler:
        block = bytearray(64 * MIB)
        time.sleep(0.05)
    del block
    assert sampler.result.peak_rss_bytes >= 64 * MIB


def test_misuse_is_refused() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        ProcessTreeSampler(interval_s=0)
    sampler = ProcessTreeSampler(interval_s=0.01)
    with pytest.raises(RuntimeError, match="not been stopped"):
        sampler.result  # noqa: B018
    sampler.start()
    with pytest.raises(RuntimeError, match="already started"):
        sampler.start()
    sampler.stop()


def test_results_are_frozen_and_convert() -> None:
    peak = MemoryPeak(1, 3 * MIB, 2, 3, 4, 0.1, 0.3, 2 * MIB)
    with pytest.raises(AttributeError):
        peak.samples = 5  # type: ignore[misc]
    assert peak.to_dict() == {
        "root_pid": 1,
        "peak_rss_bytes": 3 * MIB,
        "processes_at_peak": 2,
        "max_processes": 3,
        "samples": 4,
        "interval_s": 0.1,
        "duration_s": 0.3,
        "peak_pss_bytes": 2 * MIB,
        "peak_root_pss_bytes": 0,
        "peak_children_pss_bytes": 0,
        "peak_mib": 3.0,
        "peak_pss_mib": 2.0,
    }
    assert peak.to_frame().iloc[0]["peak_mib"] == 3.0
    assert TreeMemory(1, MIB, 1).to_frame().iloc[0]["rss_mib"] == 1.0


def test_pss_counts_pages_shared_with_a_forked_child_once() -> None:
    """A forked child shares its parent's pages: the RSS sum counts them twice, the PSS sum once."""
    import multiprocessing

    block = bytearray(os.urandom(1)) * (200 * MIB)  # touched: resident in this process
    context = multiprocessing.get_context("fork")
    gate = context.Event()
    child = context.Process(target=gate.wait, daemon=True)
    child.start()
    try:
        both = tree_memory()
        assert both.processes >= 2
        assert both.rss_bytes - both.pss_bytes >= 150 * MIB
    finally:
        gate.set()
        child.join(10)
    del block

"""IREE beside ONNX Runtime: compiled in the worker, timed like the others, agreeing, profiled per dispatch,
and a model it cannot lower refused with the ONNX node named."""

from __future__ import annotations

import json

import pytest

from explorer import load, zoo
from explorer.core.errors import LoweringError, MissingDependencyError
from explorer.isolation.cpu_cores import physical_cores
from explorer.runtimes import IreeRuntime, bench, get_runtime, random_feeds
from explorer.runtimes.base import session_key
from explorer.runtimes.bench import RUNTIME_NAMES
from explorer.runtimes.profile import profile
from tests.explorer.in_process import run_cli

QUICK = {"warmup": 1, "min_runs": 3, "min_seconds": 0.0}


@pytest.fixture
def iree() -> None:
    """IREE's runtime (and compiler) installed: the ``iree`` extra; the test is skipped without it."""
    pytest.importorskip("iree.runtime")
    pytest.importorskip("iree.compiler")


def test_iree_is_a_runtime_by_name_with_its_threads_in_the_key() -> None:
    assert "iree" in RUNTIME_NAMES
    runtime = get_runtime("iree", threads=1)
    assert isinstance(runtime, IreeRuntime) and runtime.name == "iree" and not runtime.tuned
    assert runtime.label == "IREE llvm-cpu (1 thread)" and IreeRuntime().label == "IREE llvm-cpu"
    graph = load("zoo:mlp")
    assert session_key(IreeRuntime(), graph, None) != session_key(IreeRuntime(threads=1), graph, None)
    with pytest.raises(ValueError, match="no IREE target"):
        IreeRuntime(target="vulkan-spirv")


def test_without_the_iree_extra_the_runtime_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from explorer.runtimes import iree_runtime

    monkeypatch.setattr(iree_runtime, "_find", lambda module: False)
    runtime = IreeRuntime()
    assert not runtime.available()
    with pytest.raises(MissingDependencyError, match=r"onnx-graph-explorer\[iree\]"):
        runtime.prepare(load("zoo:mlp"))
    report = bench(load("zoo:mlp"), ["ort", runtime], **QUICK)
    assert [r.runtime for r in report.results] == ["ort"]
    ((name, why),) = report.skipped
    assert name == "iree" and "onnx-graph-explorer[iree]" in why


def test_mlp_runs_on_iree_in_the_worker_and_agrees_with_onnx_runtime(iree: None) -> None:
    graph = load("zoo:mlp")
    report = bench(graph, ["ort", "iree"], **QUICK)
    ort, result = report.results
    assert result.runtime == "iree" and result.runs >= 3 and len(result.times_ms) == result.runs
    assert result.agrees, f"IREE differs from ONNX Runtime by {result.max_abs_err}"
    assert result.max_abs_err < 1e-4
    assert result.threads == physical_cores() == ort.threads
    info = result.info
    assert info["function"] == "mlp" and info["version"].startswith("3.") and info["compile_s"] > 0
    assert info["driver"] == ("local-sync" if physical_cores() == 1 else "local-task")
    again = IreeRuntime().prepare(graph, {"input": [1, 1, 28, 28]})
    assert again.info["reused"] and again.key == IreeRuntime().prepare(graph).key


def test_cnn_dispatches_are_timed_by_iree_and_put_on_their_onnx_nodes(iree: None) -> None:
    graph = load(zoo.build("resnet18", width=16, image_size=64))
    report = bench(graph, ["ort", IreeRuntime(threads=1)], **QUICK)
    result = report.results[1]
    assert result.agrees and result.threads == 1 and result.info["driver"] == "local-sync"
    # iree-compile's defaults: every dispatch exists by the flow phase, so each has its call site (data
    # tiling's operand packing, with the CPU flags, is made later and has none: unmapped, as it should)
    session = IreeRuntime(threads=1, flags="default").prepare(graph)
    timed = profile(session, random_feeds(graph.model), runs=2)
    assert timed.runtime == "iree-default" and timed.runs == 2
    assert timed.coverage == 1.0 and not timed.unmapped
    ops = {n: d["op_type"] for n, d in graph.nx.nodes(data=True) if d["kind"] == "op"}
    assert set(timed.node_ms) <= set(ops)
    assert sum(op == "Conv" for op in ops.values()) == sum(ops[n] == "Conv" for n in timed.node_ms)
    assert timed.launches == len(timed.kernels) and timed.launches < len(ops)  # fused: fewer dispatches
    assert timed.written_bytes is not None and timed.written_bytes > 0
    assert all(k.name.startswith("dispatch_") and k.ms >= 0 for k in timed.kernels)


@pytest.mark.parametrize(
    ("name", "op", "node"),
    [("custom_domain", "FusedMatMul", "/fc1/FusedMatMul"), ("control_flow", "Loop", "/loop/Loop")],
)
def test_a_model_iree_cannot_lower_is_a_lowering_error_naming_its_node(
    iree: None, name: str, op: str, node: str
) -> None:
    with pytest.raises(LoweringError) as caught:
        IreeRuntime().prepare(load(f"zoo:{name}"))
    err = caught.value
    assert err.compiler == "IREE" and err.path == f"zoo:{name}"
    assert node in err.onnx_nodes and f"onnx.{op}" in str(err)
    assert str(err).startswith(f"zoo:{name}: IREE ")


def test_bench_cli_takes_iree(iree: None) -> None:
    words = ["bench", "zoo:mlp", "--runtime", "ort", "--runtime", "iree", "--threads", "1"]
    done = run_cli(*words, "--min-runs", "3", "--min-seconds", "0", "--warmup", "1", "--json")
    assert done.returncode == 0, done.stderr
    _, result = json.loads(done.stdout)["results"]
    assert result["runtime"] == "iree" and result["label"] == "IREE llvm-cpu (1 thread)"
    assert result["agrees"] and result["runs"] >= 3 and result["threads"] == 1
    refused = run_cli("bench", "zoo:control_flow", "--runtime", "iree", "--json")
    assert refused.returncode == 3 and "internal error" not in refused.stderr
    error = json.loads(refused.stdout)["error"]
    assert error["type"] == "LoweringError" and error["exit_code"] == 3
    assert "/loop/Loop" in error["onnx_nodes"] and "zoo:control_flow" in refused.stderr

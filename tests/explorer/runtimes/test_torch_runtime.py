"""PyTorch eager beside ONNX Runtime: each zoo model runs and agrees, or is refused by its op."""

from __future__ import annotations

import json

import pytest

from explorer import load, zoo
from explorer.cli import main
from explorer.core.errors import RuntimeUnsupportedError
from explorer.onnx_adapter.inputs import concrete_input_shapes
from explorer.runtimes import bench, get_runtime
from explorer.runtimes.torch_eager import unsupported_nodes
from explorer.runtimes.torch_runtime import TorchEagerRuntime

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

QUICK = {"warmup": 1, "min_runs": 3, "min_seconds": 0.0}


@pytest.mark.parametrize("name", zoo.names())
def test_every_zoo_model_runs_eager_and_agrees_or_is_refused_by_op(name: str) -> None:
    graph = load(f"zoo:{name}")
    missing = unsupported_nodes(graph.model)
    if missing:
        with pytest.raises(RuntimeUnsupportedError, match=missing[0][0]) as err:
            TorchEagerRuntime().prepare(graph)
        assert err.value.op_type == missing[0][0] and "PyTorch" in str(err.value)
        return
    shapes = concrete_input_shapes(graph.model)
    report = bench(graph, ["ort", TorchEagerRuntime(threads=1)], input_shapes=shapes, **QUICK)
    _, eager = report.results
    assert eager.runtime == "torch-eager" and eager.info["threads"] == 1
    assert eager.agrees, f"{name}: PyTorch eager differs from ONNX Runtime by {eager.max_abs_err}"


def test_bench_cli_takes_torch_eager(capsys: pytest.CaptureFixture[str]) -> None:
    assert get_runtime("torch-eager", threads=2).label == "PyTorch eager (2 threads)"
    words = ["bench", "zoo:mlp", "--runtime", "ort", "--runtime", "torch-eager", "--threads", "1"]
    assert main([*words, "--min-runs", "3", "--min-seconds", "0", "--json"]) == 0
    _, eager = json.loads(capsys.readouterr().out)["results"]
    assert eager["runtime"] == "torch-eager" and eager["agrees"] and eager["runs"] >= 3
    assert main(["bench", "zoo:qdq_cnn", "--runtime", "torch-eager"]) != 0
    err = capsys.readouterr().err
    assert "QuantizeLinear" in err and "internal error" not in err.lower()


def test_eager_profile_times_every_node_by_its_onnx_name() -> None:
    from explorer.runtimes import random_feeds
    from explorer.runtimes.profile import profile

    graph = load("zoo:resnet18")
    timed = profile(TorchEagerRuntime().prepare(graph), random_feeds(graph.model), runs=2)
    assert timed.launches == len(graph.model.graph.node)  # one call per node: nothing fused
    assert set(timed.node_ms) == {n.name for n in graph.model.graph.node}
    assert all(ms >= 0 for ms in timed.node_ms.values())

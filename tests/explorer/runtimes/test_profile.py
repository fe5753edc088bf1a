"""Where the time goes (real ONNX Runtime profiler and TVM VM instrument), mapped onto the ONNX graph."""

from __future__ import annotations

import pytest

from explorer import load
from explorer.core.op_categories import category_of
from explorer.runtimes import OrtRuntime, TvmRuntime, random_feeds
from explorer.runtimes.profile import profile


@pytest.mark.parametrize("runtime", [OrtRuntime(), TvmRuntime()], ids=["ort", "tvm"])
def test_kernel_times_cover_the_graph_and_land_on_the_nodes_doing_the_work(runtime: object) -> None:
    graph = load("zoo:resnet18")
    result = profile(runtime.prepare(graph), random_feeds(graph.model), runs=2)
    assert result.runs == 2 and result.run_ms > 0
    assert result.coverage >= 0.95, result.unmapped  # the overlay holds (nearly) all of the time
    assert all(graph.nx.nodes[n]["kind"] == "op" for n in result.node_ms)
    convs = sum(ms for n, ms in result.node_ms.items() if category_of(graph.nx.nodes[n]) == "conv")
    assert convs > 0.5 * sum(result.node_ms.values())  # a CNN's time is in its convolutions
    frame = result.to_frame()
    assert list(frame.columns) == ["name", "op", "ms", "node", "share"]
    assert frame["ms"].is_monotonic_decreasing and abs(frame["share"].sum() - 1.0) < 1e-9
    assert result.to_dict()["coverage"] == result.coverage


def test_fused_ort_nodes_and_tvm_runtime_functions_are_named() -> None:
    graph = load("zoo:mlp")
    feeds = random_feeds(graph.model)
    fused = profile(OrtRuntime().prepare(graph), feeds, runs=2)  # ORT fuses Gemm + Relu: "fused /fc1/Gemm"
    assert fused.coverage == 1.0 and set(fused.node_ms) <= set(graph.nx.nodes)
    tvm = profile(TvmRuntime().prepare(graph), feeds, runs=2)
    assert {"/fc1/Gemm", "/fc2/Gemm", "/fc3/Gemm"} <= set(tvm.node_ms) and tvm.coverage == 1.0
    # the VM's own calls (allocations, tuples) go on the node of the kernel they prepare, named so
    builtins = [k for k in tvm.kernels if k.op.startswith("vm.builtin.")]
    assert builtins and all(k.node in tvm.node_ms and k.name.startswith(f"{k.op} (") for k in builtins)


def test_ort_contrib_fusions_and_the_vm_overhead_land_on_the_transformer_nodes() -> None:
    from explorer.lower.tvm.relax_import import relax_import
    from explorer.onnx_adapter.inputs import concrete_input_shapes

    graph = load("zoo:transformer")
    shapes = concrete_input_shapes(graph.model)
    graph = relax_import(graph, shapes).fixed().source
    feeds = random_feeds(graph.model, shapes)
    ort = profile(OrtRuntime().prepare(graph), feeds, runs=2)
    fused = {k.op: k.node for k in ort.kernels if k.op in ("SkipLayerNormalization", "FusedMatMul")}
    assert fused.keys() == {"SkipLayerNormalization", "FusedMatMul"}, [k.op for k in ort.kernels]
    # named after no graph node: the final Add + LayerNormalization, by order; the scaled Q.K^T by name
    assert graph.nx.nodes[fused["SkipLayerNormalization"]]["op_type"] == "LayerNormalization"
    assert graph.nx.nodes[fused["FusedMatMul"]]["op_type"] == "MatMul"
    assert ort.coverage >= 0.95, ort.unmapped
    tvm = profile(TvmRuntime().prepare(graph), feeds, runs=2)
    assert tvm.coverage >= 0.95, tvm.unmapped

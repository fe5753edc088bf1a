"""Lowering through TVM Relax pass by pass (real TVM, in the worker): snapshots, fused groups, counts."""

from __future__ import annotations

import dataclasses

import networkx as nx
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from explorer import load, zoo
from explorer.core.timeline import Snapshot
from explorer.lower import ZERO_PIPELINE, RelaxImportFailed, lowering_counts, relax_pipeline
from explorer.lower.import_fix import lower_with_fixes
from explorer.onnx_adapter.inputs import concrete_input_shapes
from explorer.views.layout import layered


def _conv_add_relu() -> object:
    """A model whose fusion is known: Conv + Add + Relu become one PrimFunc."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="/conv/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c", "b"], ["a"], name="/add/Add"),
        helper.make_node("Relu", ["a"], ["y"], name="/relu/Relu"),
    ]
    inits = [
        numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal((1, 8, 1, 1)).astype(np.float32), "b"),
    ]
    graph = helper.make_graph(nodes, "conv_add_relu", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_snapshot_per_module_level_pass_and_the_known_fusion() -> None:
    timeline = relax_pipeline(load(_conv_add_relu()), pipeline="zero")
    assert [s.name for s in timeline.snapshots] == ["relax import", *ZERO_PIPELINE]
    by_name = {s.name: s for s in timeline.snapshots}
    assert by_name["LegalizeOps"].changed and not by_name["FoldConstant"].changed
    legal = by_name["LegalizeOps"].graph
    assert sorted(legal.op_counts) == ["add", "conv2d", "relu"]  # one call_tir per operator
    fused = by_name["FuseOps"].graph
    members = {n: d for n, d in fused.nx.nodes(data=True) if d["kind"] == "op"}
    assert {d["scope"] for d in members.values()} == {("fused_conv2d_add_relu",)}
    assert sorted(d["op_type"] for d in members.values()) == ["add", "conv2d", "relu"]
    boxed = layered(fused, collapse=1)
    assert "scope:fused_conv2d_add_relu" in boxed.positions  # the group collapses into one box
    final = by_name["FuseTIR"].graph
    assert final.op_counts == {"fused_conv2d_add_relu": 1}  # one kernel
    assert lowering_counts(legal) == {"kernels": 3, "intermediates": 2}
    assert lowering_counts(final) == {"kernels": 1, "intermediates": 0}
    assert "PrimFuncs 3 -> 1" in by_name["FuseTIR"].log[0]
    grouped = timeline.diff(4)  # FuseOps moves bindings into a function: a change of group, drawn as such
    assert sorted(c.op_type for c in grouped.changed) == ["add", "conv2d", "relu"]
    assert all(c.what == ("group",) for c in grouped.changed) and not grouped.added and not grouped.removed
    assert timeline.diff(5).op_deltas == {"add": -1, "conv2d": -1, "fused_conv2d_add_relu": 1, "relu": -1}
    from explorer.core.op_categories import category_of

    assert category_of(final.nx.nodes[next(iter(final.op_nodes()))]) == "conv"  # drawn as a convolution
    assert {category_of(d) for _, d in members.items()} == {"conv", "math", "activation"}


def test_step_observers_see_each_pass_start_and_every_snapshot() -> None:
    """The same StepObserver protocol as the ONNX passes: pass starts live, then each snapshot."""
    started: list[tuple[int, int, str]] = []
    seen: list[str] = []

    class Recorder:
        def before_step(self, index: int, total: int, name: str) -> None:
            started.append((index, total, name))

        def after_step(self, snapshot: Snapshot) -> None:
            seen.append(snapshot.name)

    class Marker:
        def annotate(self, snapshot: Snapshot) -> Snapshot:
            return dataclasses.replace(snapshot, log=(*snapshot.log, "seen"))

    events: list[str | None] = []
    timeline = relax_pipeline(
        load(_conv_add_relu()),
        pipeline="zero",
        progress=lambda event: events.append(event.message),
        observers=[Recorder()],
        annotators=[Marker()],
    )
    total = len(ZERO_PIPELINE)
    assert started == [(i, total, name) for i, name in enumerate(ZERO_PIPELINE, start=1)]
    assert seen == ["relax import", *ZERO_PIPELINE]
    assert all(s.log[-1] == "seen" for s in timeline.snapshots)
    assert len(events) >= total  # the caller's progress callback still gets every event


@pytest.mark.parametrize("name", [n for n in zoo.names() if n != "resnet18"])  # resnet18: the next test
def test_every_zoo_model_lowers_with_a_snapshot_per_pass_after_the_import_fixes(name: str) -> None:
    graph = load(f"zoo:{name}")  # the target's default pipeline, after the fixes offered (if any)
    timeline, _ = lower_with_fixes(graph, concrete_input_shapes(graph.model), relax_pipeline, fix=True)
    names = [s.name for s in timeline.snapshots]
    assert [n for n in names if n in ZERO_PIPELINE] == list(ZERO_PIPELINE)
    assert names.index("FuseTIR") < names.index("CallTIRRewrite") < names.index("StaticPlanBlockMemory")
    assert all(s.error is None for s in timeline.snapshots)
    legal, final = timeline[timeline.index("LegalizeOps")].metrics, timeline[-1].metrics
    assert final["kernels"] <= legal["kernels"] and final["intermediates"] <= legal["intermediates"]
    assert final["storages"] <= final["tensor_allocations"]


def test_every_step_of_resnet18_lowers_and_counts_shrink() -> None:
    source = load("zoo:resnet18")
    timeline = relax_pipeline(source, {"input": [1, 3, 224, 224]}, "zero")
    # each binding links back to the ONNX nodes it came from (origin), as far as it can be traced
    imported = [d for _, d in timeline[0].graph.nx.nodes(data=True) if d["kind"] == "op"]
    assert all(d["origin"] and all(source.nx.has_node(o) for o in d["origin"]) for d in imported)
    convs = {d["origin"][0] for d in imported if d["op_type"] == "nn.conv2d"}
    assert {source.nx.nodes[o]["op_type"] for o in convs} == {"Conv"} and len(convs) == 20
    kernels = [d for _, d in timeline[-1].graph.nx.nodes(data=True) if d["kind"] == "op"]
    assert sum(1 for d in kernels if d["origin"]) >= 0.9 * len(kernels)
    before = lowering_counts(timeline[1].graph)  # after LegalizeOps: one kernel per operator
    after = lowering_counts(timeline[-1].graph)
    assert after["kernels"] < before["kernels"] and after["intermediates"] < before["intermediates"]
    assert all(s.error is None for s in timeline.snapshots)
    # Relax variables share name hints (many are called lv): every one still gets its own node
    assert all(nx.is_directed_acyclic_graph(s.graph.nx) for s in timeline.snapshots)
    assert timeline[-1].metrics["kernels"] < timeline[1].metrics["kernels"]
    assert timeline.to_dict()["steps"][3]["pass"] == "FuseOps"


def test_the_default_pipeline_makes_memory_explicit_and_plans_it() -> None:
    timeline = relax_pipeline(load("zoo:resnet18"), {"input": [1, 3, 224, 224]})
    rewrite = timeline[timeline.index("CallTIRRewrite")]
    assert rewrite.graph.op_counts["builtin.alloc_tensor"] == rewrite.metrics["tensor_allocations"] == 40
    fused = timeline[timeline.index("FuseTIR")].metrics
    assert rewrite.metrics["kernels"] == fused["kernels"] - 1  # RewriteDataflowReshape: the flatten is a view
    assert rewrite.metrics["intermediates"] == fused["intermediates"] - 1  # now counted as allocations
    planned = timeline[timeline.index("StaticPlanBlockMemory")].metrics
    assert 0 < planned["storages"] < planned["tensor_allocations"] // 4  # lifetimes that do not overlap share
    assert 0 < planned["storage_bytes"] < planned["tensor_bytes"] / 2
    assert "storages 0 -> 6" in timeline[timeline.index("StaticPlanBlockMemory")].log[0]
    final = timeline[-1].graph
    assert any(op.startswith("vm.") for op in final.op_counts)  # the VM's runtime functions
    assert all(nx.is_directed_acyclic_graph(s.graph.nx) for s in timeline.snapshots)
    with pytest.raises(ValueError, match="the pipelines are default, zero"):
        relax_pipeline(load("zoo:mlp"), pipeline="fast")


def test_an_import_failure_stops_the_pipeline_with_the_failing_nodes() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    model = helper.make_model(
        helper.make_graph([helper.make_node("Celu", ["x"], ["y"], name="/celu")], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    with pytest.raises(RelaxImportFailed, match=r"/celu \[Celu\]") as caught:
        relax_pipeline(load(model))
    assert caught.value.result.failures[0].node == "/celu"


def test_the_tir_of_each_step_its_diff_and_its_loops() -> None:
    timeline = relax_pipeline(load(_conv_add_relu()), pipeline="zero")
    assert timeline.prim_funcs(0) == []  # Relax only, before LegalizeOps
    assert timeline.prim_funcs(1) == ["add", "conv2d", "relu"]
    assert timeline.prim_funcs(5) == ["fused_conv2d_add_relu"]
    diff = timeline.tir_diff(5, "fused_conv2d_add_relu")
    assert diff.startswith("--- fused_conv2d_add_relu (before)") and "+@T.prim_func" in diff
    conv = timeline.loop_stats(1).set_index("prim_func").loc["conv2d"]
    assert conv["loops"] >= 7 and conv["parallel"] == 0  # untuned: serial loops, no schedule yet
    fused = timeline.loop_stats(5).set_index("prim_func").loc["fused_conv2d_add_relu"]
    assert fused["allocations"] >= 2  # the tensors between conv2d, add and relu, now inside one kernel

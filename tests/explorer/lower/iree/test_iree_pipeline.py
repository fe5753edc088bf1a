"""Lowering through IREE phase by phase (real IREE in the worker): dialects, dispatches, origins, failures."""

from __future__ import annotations

import pytest

pytest.importorskip("iree.compiler")

from explorer import load
from explorer.core.errors import LoweringError, UsageError
from explorer.core.op_categories import category_of
from explorer.lower.iree.iree_compile import PHASES
from explorer.lower.iree.iree_pipeline import MlirTimeline, dispatch_count, iree_pipeline
from explorer.views.layout import layered


@pytest.fixture(scope="module")
def resnet() -> MlirTimeline:
    return iree_pipeline(load("zoo:resnet18"))


def test_a_snapshot_per_phase_from_torch_ops_to_vm_bytecode(resnet: MlirTimeline) -> None:
    assert [s.name for s in resnet.snapshots] == ["torch import", *PHASES]
    first, last = resnet.dialects[0], resnet.dialects[-1]
    assert set(first) == {"torch", "func"}
    assert set(last) == {"vm"}
    assert "linalg" in resnet.dialects[resnet.index("input")]
    assert "llvm" in resnet.dialects[resnet.index("executable-targets")]  # kernels in machine-level IR
    assert all(s.graph.ir == "mlir" for s in resnet.snapshots)
    assert resnet[resnet.index("abi")].changed is False or resnet.dialects[1] == resnet.dialects[2]


def test_the_import_has_one_torch_op_per_onnx_node_traced_by_location(resnet: MlirTimeline) -> None:
    onnx = load("zoo:resnet18")
    onnx_ops = {n for n, d in onnx.nx.nodes(data=True) if d["kind"] == "op"}
    ops = [d for _, d in resnet[0].graph.nx.nodes(data=True) if d["kind"] == "op"]
    assert len(ops) == len(onnx_ops)
    assert {o for d in ops for o in d["origin"]} == onnx_ops
    assert {d["op"] for d in ops} >= {"torch.onnx.Conv", "torch.onnx.Relu", "torch.onnx.Add"}
    assert all(category_of(d) == "mlir_torch" for d in ops)  # coloured by dialect


def test_dispatch_regions_are_groups_then_dispatches_traced_to_onnx_nodes(resnet: MlirTimeline) -> None:
    regions = resnet[resnet.index("dispatch-creation")].graph
    scopes = {d["scope"][0] for _, d in regions.nx.nodes(data=True) if d["scope"]}
    assert scopes and all(s.startswith("dispatch_") for s in scopes)
    flow = resnet[resnet.index("flow")]
    dispatches = [d for _, d in flow.graph.nx.nodes(data=True) if d["op"] == "flow.dispatch"]
    assert flow.metrics["dispatches"] == len(dispatches) == len(scopes) == dispatch_count(flow.graph)
    convs = [d for d in dispatches if "conv_64x56x56x64" in d["name"]]
    assert convs and all(any(o.endswith("/Conv") for o in d["origin"]) for d in convs)
    # a fused dispatch comes from several ONNX nodes: the convolution and its ReLU (global optimisation
    # folded the batch norm into the convolution's weights), and never from another block's nodes
    assert any({o.rsplit("/", 1)[-1] for o in d["origin"]} == {"Conv", "Relu"} for d in convs)
    for d in convs:
        assert len({o.rsplit("/", 2)[0] for o in d["origin"]}) == 1, d["origin"]


def test_the_text_by_symbol_and_its_diff(resnet: MlirTimeline) -> None:
    flow = resnet.index("flow")
    symbols = list(resnet.tir[flow])
    assert any(name.startswith("flow.executable") for name in symbols)
    assert "dense_resource<__elided__>" in resnet.mlir_text(flow) or "util.global" in resnet.mlir_text(flow)
    diff = resnet.mlir_diff(flow)
    assert diff.startswith("--- dispatch-creation") and "+" in diff
    assert "flow" in resnet.code_summary(flow, next(n for n in symbols if n.startswith("flow.executable")))
    frame = resnet.dialect_frame()
    assert list(frame.index) == [s.name for s in resnet.snapshots]
    assert frame.loc["torch import", "torch"] > 0 and frame.loc["vm", "torch"] == 0


def test_every_step_lays_out(resnet: MlirTimeline) -> None:
    for name in ("torch import", "dispatch-creation", "stream", "vm"):
        layout = layered(resnet[resnet.index(name)].graph)
        assert layout.positions


def test_passes_detail_gives_a_step_per_changed_module_level_pass() -> None:
    timeline = iree_pipeline(load("zoo:mlp"), detail="passes")
    names = [s.name for s in timeline.snapshots]
    assert len(names) > 40
    assert "iree-flow-outline-dispatch-regions" in names
    assert all(s.changed or s.error is None for s in timeline.snapshots)


def test_a_failing_op_is_named_with_its_phase_pass_and_onnx_node() -> None:
    with pytest.raises(LoweringError) as caught:
        iree_pipeline(load("zoo:control_flow"))
    err = caught.value
    assert err.compiler == "IREE"
    assert err.pass_name.startswith("phase input")
    assert err.binding == "onnx.Loop" and err.onnx_nodes == ("/loop/Loop",)
    assert "legalize" in err.reason and "internal error" not in str(err)
    assert str(err).startswith("zoo:control_flow: IREE phase input")


def test_bad_arguments_are_refused_before_anything_runs() -> None:
    with pytest.raises(UsageError, match="no IREE target 'cuda'"):
        iree_pipeline(load("zoo:mlp"), "cuda")
    with pytest.raises(UsageError, match="detail must be one of phases, passes"):
        iree_pipeline(load("zoo:mlp"), detail="everything")


def test_the_runtimes_flags_show_convolutions_as_im2col_and_matmul(resnet: MlirTimeline) -> None:
    fast = iree_pipeline(load("zoo:resnet18"), flags="fast")  # what bench --runtime iree compiles
    phase = "global-optimization"  # each convolution: a gather (im2col, tensor ops) and a matmul
    assert fast.dialects[fast.index(phase)]["tensor"] > resnet.dialects[resnet.index(phase)]["tensor"]
    assert fast.dialects[fast.index(phase)]["linalg"] > resnet.dialects[resnet.index(phase)]["linalg"]
    assert fast[fast.index("flow")].metrics["dispatches"] > resnet[resnet.index("flow")].metrics["dispatches"]
    assert fast[fast.index("vm")].metrics["dispatches"] > 0  # the VM's branches are read too
    with pytest.raises(UsageError, match="flags must be one of default, fast"):
        iree_pipeline(load("zoo:mlp"), flags="turbo")

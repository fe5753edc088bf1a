"""Explorer: one model in five tabs, computed when opened, one selection across IRs."""

from __future__ import annotations

import html
import threading
import time
from datetime import datetime, timezone

import pytest

from explorer import zoo
from explorer.core.errors import ModelLoadError
from widgets import Explorer
from widgets.explorer_app import TABS


def _wait(app: Explorer, timeout: float = 300.0) -> None:
    thread = app._running
    if thread is not None:
        thread.join(timeout)
        assert not thread.is_alive(), "the background work did not finish"


def test_only_the_graph_tab_is_built_with_the_model() -> None:
    app = Explorer("zoo:mlp")
    assert list(app.panels) == ["Graph"]
    assert [app.tabs.get_title(i) for i in range(len(TABS))] == list(TABS)
    assert "computed when this tab is opened" in app.tabs.children[2].children[0].value


def test_a_selection_reaches_every_computed_tab_across_irs() -> None:
    app = Explorer("zoo:mlp", pipeline="fuse_matmul_add_bias_into_gemm,eliminate_identity")
    for tab in ("Passes", "Lowering", "Runtimes", "Targets"):
        assert app.compute(tab) is app.panels[tab]
    app.select("/fc1/Gemm")
    assert app.graph_view.selected == "/fc1/Gemm"
    # Passes: the same node, followed through each step
    assert "kept through all 2 steps" in app.selection.value
    assert app.panels["Passes"].stepping.followed == "/fc1/Gemm"
    # Lowering: the Relax bindings whose origin is that node, ringed in the stepper's graphs
    lowering = app.panels["Lowering"]
    assert "Relax bindings at import" in app.selection.value
    assert "lowered from it at this step" in lowering.follow_note.value
    # Runtimes and Targets: ringed in their graphs, with its time and its placement per target
    assert app.panels["Runtimes"].view.selected == "/fc1/Gemm"
    assert " ms" in app.selection.value
    assert app.panels["Targets"].view.selected == "/fc1/Gemm"
    assert "qnn-htp" in app.selection.value


def test_a_click_in_the_targets_graph_selects_everywhere() -> None:
    app = Explorer("zoo:mlp")
    panel = app.compute("Targets")
    panel.view.select("/fc2/Gemm")
    assert app.selected == "/fc2/Gemm" and app.graph_view.selected == "/fc2/Gemm"


def test_a_model_the_importer_needs_fixed_is_lowered_through_the_fix_and_says_so() -> None:
    app = Explorer("zoo:transformer")
    stepper = app.compute("Lowering")
    assert stepper.timeline[0].graph.ir == "relax"
    assert "needed the model rewritten" in app.lowered_note


def test_opening_a_tab_computes_it_in_the_background_and_stop_stops_it() -> None:
    app = Explorer("zoo:resnet18", lowering="default")
    app.tabs.selected_index = TABS.index("Lowering")
    deadline = time.monotonic() + 120
    while "pass" not in app.status.value and time.monotonic() < deadline:
        time.sleep(0.1)  # the lowering reports each pass as it starts
    app.stop()
    _wait(app)
    assert "stopped" in app.status.value
    assert "Lowering" not in app.panels
    assert app.tabs.selected_index == 0


def test_an_upload_is_opened_from_a_private_file() -> None:
    app = Explorer(None)
    data = zoo.build("mlp").SerializeToString()
    app.upload.value = (
        {
            "name": "my-mlp.onnx",
            "type": "",
            "size": len(data),
            "content": memoryview(data),
            "last_modified": datetime.now(timezone.utc),
        },
    )
    _wait(app)
    assert app.graph is not None and app.graph.source.endswith("my-mlp.onnx")
    assert app.upload.value == ()


def test_the_sample_menu_opens_a_sample() -> None:
    app = Explorer(None)
    app.zoo_menu.value = "mlp"
    _wait(app)
    assert app.graph.source == "zoo:mlp"


def test_a_bad_path_says_what_is_wrong_and_keeps_the_model(tmp_path) -> None:
    app = Explorer("zoo:mlp")
    missing = tmp_path / "nope.onnx"
    with pytest.raises(ModelLoadError):
        app.load(str(missing))
    assert "could not open" in app.status.value and "nope.onnx" in app.status.value
    assert app.graph.source == "zoo:mlp"


def test_shapes_naming_no_input_are_refused_with_the_inputs() -> None:
    app = Explorer("zoo:mlp")
    app.shapes.value = "nosuch=1,2"
    _wait(app)
    said = html.unescape(app.status.value)
    assert "'nosuch', which is not an input" in said and "inputs are: input" in said
    assert app.graph.source == "zoo:mlp"  # the model shown stays


def test_shapes_load_the_model_again_with_them_for_every_tab() -> None:
    app = Explorer("zoo:resnet18")
    assert app.graph.nx.nodes["input:input"]["shape"][0] == "batch"
    app.shapes.value = "input=2,3,224,224"
    _wait(app)
    assert app.graph.nx.nodes["input:input"]["shape"] == (2, 3, 224, 224)
    assert app.concrete_shapes() == {"input": [2, 3, 224, 224]}
    targets = app.compute("Targets")
    assert targets.report.get("qnn-htp").coverage == 1.0  # static shapes: the HTP takes every node


def test_a_tab_opened_while_another_computes_is_computed_next() -> None:
    app = Explorer("zoo:mlp", pipeline="eliminate_identity")
    gate = threading.Event()
    app._run_in_background(gate.wait)
    app.tabs.selected_index = TABS.index("Passes")  # busy: it cannot start now
    assert "busy" in app.status.value and "Passes" not in app.panels
    gate.set()
    _wait(app)
    assert "Passes" in app.panels


def test_the_lowering_tab_steps_iree_phases_and_selects_the_dispatches_of_a_node() -> None:
    pytest.importorskip("iree.compiler")
    app = Explorer("zoo:mlp", compiler="iree")
    stepper = app.compute("Lowering")
    assert stepper.timeline.snapshots[0].name == "torch import"
    assert stepper.tir_menu.description == "MLIR symbol"
    assert app.compiler_menu in app.tabs.children[TABS.index("Lowering")].children
    app.select("/fc1/Gemm")
    assert "1 MLIR op at import (<code>torch.onnx.Gemm</code>)" in app.selection.value
    flow = stepper.timeline.index("flow")
    dispatches = [
        n
        for n, d in stepper.timeline[flow].graph.nx.nodes(data=True)
        if d["op"] == "flow.dispatch" and "/fc1/Gemm" in d["origin"]
    ]
    assert len(dispatches) == 1  # the Gemm's dispatch, traced through the executable's locations
    app.compiler_menu.value = "tvm"  # another compiler: the tab starts over with it
    assert "Lowering" not in app.panels
    assert app.compute("Lowering").timeline.snapshots[0].name == "relax import"

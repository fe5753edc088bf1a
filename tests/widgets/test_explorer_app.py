"""Explorer: one model in five tabs, computed when opened, one selection across IRs."""

from __future__ import annotations

import html
import json
import threading
import time
from datetime import datetime, timezone

import pytest

from explorer import zoo
from explorer.core.errors import ModelLoadError
from widgets import Explorer
from widgets.explorer_app import NO_OVERLAY, TABS


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


def _upload(widget: object, name: str, data: bytes) -> None:
    widget.value = (
        {
            "name": name,
            "type": "application/json",
            "size": len(data),
            "content": memoryview(data),
            "last_modified": datetime.now(timezone.utc),
        },
    )


def test_the_overlay_menu_colours_the_graph_by_an_ort_profile_and_by_none(tmp_path) -> None:
    from tests.explorer.overlays.test_ort_profile import profile_file

    model = zoo.save("mlp", tmp_path)
    profile = profile_file(model, "extended", tmp_path)  # a real ONNX Runtime run
    app = Explorer(str(model))
    app.overlay_path.value = str(profile)
    app.overlay_button.click()
    _wait(app)
    key = f"ort-profile ({profile.name})"
    assert list(app.overlay_menu.options) == [NO_OVERLAY, key] and app.overlay_menu.value == key
    view = app.graph_view
    assert view.overlay is app.overlays[key] and view.overlay.format == "ort-profile"
    assert view.color_menu.value == "ort-profile: time_ms" and set(
        view.overlays["ort-profile: time_ms"]
    ) == set(app.graph.op_nodes())
    assert "6 of 6 nodes mapped" in app.overlay_note.value
    app.select("/fc1/Gemm")
    assert 'class="oge-overlay"' in view.details.value and "CPUExecutionProvider" in view.details.value
    app.overlay_menu.value = NO_OVERLAY
    assert view.overlay is None and view.color_menu.value == "op_type"
    assert "ort-profile: time_ms" not in view.color_menu.options
    assert 'class="oge-overlay"' not in view.details.value and app.overlay_note.value == ""
    app.overlay_menu.value = key  # back again
    assert view.overlay is app.overlays[key] and 'class="oge-overlay"' in view.details.value
    app.load("zoo:resnet18")  # another model: the overlays read onto the one before are closed
    assert list(app.overlay_menu.options) == [NO_OVERLAY] and app.graph_view.overlay is None


def test_an_ai_hub_upload_adds_its_placement_against_the_qnn_htp_prediction() -> None:
    from tests.explorer.overlays.test_agreement import PROFILE as HUB

    app = Explorer("zoo:control_flow")
    _upload(app.overlay_upload, "hub.json", json.dumps(HUB).encode())
    _wait(app)
    assert app.overlay_upload.value == ()
    compared = "qnn-htp: predicted vs measured (hub.json)"
    assert list(app.overlay_menu.options) == [NO_OVERLAY, "ai-hub-profile (hub.json)", compared]
    assert app.graph_view.overlay.format == "ai-hub-profile"
    app.overlay_menu.value = compared
    view = app.graph_view
    assert view.color_menu.value == "qnn-htp: predicted vs measured"
    assert view.overlays[view.color_menu.value]["/loop/Loop"] == "predicted CPU, measured NPU"
    assert app.agreements[compared].share_agreeing == 0.25
    assert "1 of 4 nodes agree (25.0%)" in app.overlay_note.value
    assert "<td><code>/Greater</code></td>" in app.overlay_note.value  # the disagreeing nodes' table
    app.select("/Greater")
    assert "predicted NPU, measured CPU" in view.details.value
    targets = app.compute("Targets")  # built after the upload: it compares the same profile
    assert targets.agreement is not None and targets.agreement.share_agreeing == 0.25
    assert "1 of 4 nodes agree (25.0%)" in targets.measured_table.value


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{not json", "not valid JSON (Expecting property name"),
        (b'{"something": "else"}', "not a format the explorer reads"),
        (b'{"execution_detail": [3]}', "execution_detail[0] is not a layer with a 'name'"),
    ],
)
def test_a_bad_overlay_file_is_named_with_the_reason_and_nothing_changes(
    content: bytes, says: str, tmp_path
) -> None:
    app = Explorer("zoo:mlp")
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    app.overlay_path.value = str(path)
    app.overlay_button.click()  # no traceback: the message is in the app
    _wait(app)
    said = html.unescape(app.overlay_note.value)
    assert said.startswith(f"<b>could not read</b> {path}: ")
    assert says in said and "Traceback" not in said
    _upload(app.overlay_upload, "mine.json", content)
    _wait(app)
    said = html.unescape(app.overlay_note.value)
    assert "<b>could not read</b> mine.json: " in said and says in said
    assert "overlay-" not in said  # the private copy's path is not shown, the user's file name is
    assert list(app.overlay_menu.options) == [NO_OVERLAY] and app.graph_view.overlay is None


def test_a_missing_overlay_file_is_named_and_a_good_one_stays_shown(tmp_path) -> None:
    app = Explorer("zoo:mlp")
    good = app.open_overlay({"main_graph": {"results": {"/fc1/Gemm": {"value": 2}}}}, "ours.json")
    app.overlay_path.value = str(tmp_path / "nope.json")
    app.overlay_button.click()
    _wait(app)
    said = html.unescape(app.overlay_note.value)
    assert said.startswith(f"<b>could not read</b> {tmp_path / 'nope.json'}: ") and said.endswith(
        ": no such file"
    )
    assert app.graph_view.overlay is good and app.overlay_menu.value == "model-explorer (ours.json)"

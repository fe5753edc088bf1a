"""PassStepper in Python: running, stepping, skipping unchanged steps, the table and the highlights."""

from __future__ import annotations

import pytest

from explorer.views.figures import DIFF_COLORS
from widgets import PassStepper


def test_runs_and_shows_the_first_changed_step() -> None:
    stepper = PassStepper("zoo:resnet18", "eliminate_identity,fuse_bn_into_conv", verify=False)
    assert stepper.step == 2 and stepper.slider.value == 2
    assert "fuse_bn_into_conv" in stepper.step_title.value
    assert "Conv + BatchNormalization -&gt; Conv" in stepper.fusions.value
    assert stepper.table.value.count("<tr") == 3  # header + 2 steps


def test_skipping_unchanged_steps() -> None:
    stepper = PassStepper(
        "zoo:resnet18", "fuse_bn_into_conv,eliminate_identity,eliminate_nop_pad", verify=False
    )
    stepper.hide_unchanged.value = True
    assert stepper.visible_steps() == [0, 1]
    stepper.show(0)
    stepper.move(+1)
    assert stepper.step == 1
    stepper.move(+1)
    assert stepper.step == 1  # nothing after it changed anything


def test_highlights_are_the_diff() -> None:
    stepper = PassStepper("zoo:resnet18", "fuse_bn_into_conv", verify=False)
    statuses = {color: status for status, color in DIFF_COLORS.items()}
    before = {k: statuses[v] for k, v in stepper.highlighted("before").items()}
    after = {k: statuses[v] for k, v in stepper.highlighted("after").items()}
    assert before == {k: v for k, v in stepper.diff.status_before().items() if v != "kept"}
    assert after == {k: v for k, v in stepper.diff.status_after().items() if v != "kept"}


def test_picking_passes_builds_the_pipeline() -> None:
    stepper = PassStepper("zoo:mlp", verify=False)
    assert stepper.timeline is None
    stepper.family.value = "ort"
    assert stepper.pass_menu.options[0] == "ort:basic"
    assert "com.microsoft" in stepper.explanation.value or "ONNX Runtime" in stepper.explanation.value
    stepper.add_button.click()
    assert stepper.pipeline_text.value == "ort:basic"
    stepper.run_button.click()
    assert len(stepper.timeline) == 2 and stepper.progress.value == stepper.progress.max


def test_unknown_pass_is_reported() -> None:
    stepper = PassStepper("zoo:mlp", verify=False)
    with pytest.raises(KeyError):
        stepper.run("fuse_bn_into_cnv")
    assert "did you mean" in stepper.message.value


def test_the_new_families_are_picked_like_the_others_and_the_step_log_is_shown() -> None:
    stepper = PassStepper("zoo:transformer", verify=False)
    assert {"onnxscript", "ort-transformers"} <= set(stepper.family.options)
    stepper.family.value = "onnxscript"
    assert "onnxscript:fuse_sdpa" in stepper.pass_menu.options
    stepper.pass_menu.value = "onnxscript:fuse_mha2"
    assert "MultiHeadAttention" in stepper.explanation.value
    stepper.add_button.click()
    stepper.family.value = "ort-transformers"
    stepper.pass_menu.value = "ort-transformers:bert"
    stepper.add_button.click()
    assert stepper.pipeline_text.value == "onnxscript:fuse_mha2,ort-transformers:bert"
    stepper.pipeline_text.value = "onnxscript:fuse_mha2,ort-transformers:bert(num_heads=4, hidden_size=256)"
    stepper.run_button.click()
    assert stepper.progress.max == 2 and len(stepper.timeline) == 3
    stepper.show(1)  # fuse_mha2 finds no SDPA to start from: the log says why, in the title
    assert "fuse_mha2 matched nothing" in stepper.step_title.value
    stepper.show(2)
    assert "com.microsoft::Attention" in stepper.fusions.value


def test_a_step_looks_the_same_whichever_steps_were_visited_before() -> None:
    from explorer.views.layout import clear_cache, layout_digest

    pipeline = "fuse_bn_into_conv,eliminate_identity"
    clear_cache()
    direct = PassStepper("zoo:resnet18", pipeline, verify=False)  # opens at step 2, the first change
    jumped = layout_digest(direct.stepping._layout(2))
    clear_cache()
    walked = PassStepper("zoo:resnet18", pipeline, verify=False)
    walked.stepping._layouts.clear()
    for step in (0, 1, 2):
        walked.show(step)
    assert layout_digest(walked.stepping._layout(2)) == jumped
    assert sorted(direct.stepping._layouts) == [0, 1, 2]  # step 2 was laid out after steps 0 and 1


def test_the_stepping_is_a_timeline_stepper_any_producer_can_feed() -> None:
    from explorer.core.timeline import Snapshot, Timeline
    from explorer.passes.pipeline import run_pipeline
    from widgets import TimelineStepper

    fused = run_pipeline("zoo:resnet18", "fuse_bn_into_conv", verify=False)

    class Lowering:  # not an ONNX pass
        name, family, description = "FuseOps", "relax", "Groups operators into fused functions."

    handmade = Timeline(
        (
            Snapshot.original(fused[0].graph),
            Snapshot.after(1, Lowering(), fused[1].graph, changed=True, elapsed=0.01),
        ),
        "handmade",
    )
    stepper = TimelineStepper(handmade)
    assert stepper.step == 1 and "FuseOps" in stepper.step_title.value
    assert stepper.diff.op_deltas == {"BatchNormalization": -20}
    assert "<td>FuseOps</td>" in stepper.table.value
    picker = PassStepper("zoo:resnet18", "fuse_bn_into_conv", verify=False)
    assert isinstance(picker.stepping, TimelineStepper) and picker.stepping.timeline is picker.timeline


def test_a_lowering_timeline_shows_the_tir_of_the_step() -> None:
    from explorer import load
    from explorer.lower import relax_pipeline
    from tests.explorer.lower.tvm.test_relax_pipeline import _conv_add_relu
    from widgets import TimelineStepper

    stepper = TimelineStepper(relax_pipeline(load(_conv_add_relu()), pipeline="zero"))
    assert stepper.step == 1 and stepper.tir_panel.layout.display == ""
    assert set(stepper.tir_menu.options) == {"add", "conv2d", "relu"}
    assert "changed by this step" in stepper.tir_text.value and "+@T.prim_func" in stepper.tir_text.value
    stepper.show(5)
    assert list(stepper.tir_menu.options) == ["fused_conv2d_add_relu"]
    assert "allocations" in stepper.tir_text.value
    onnx_steps = PassStepper("zoo:mlp", "eliminate_identity", verify=False)
    assert onnx_steps.stepping.tir_panel.layout.display == "none"

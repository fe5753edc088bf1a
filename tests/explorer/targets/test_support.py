"""Node facts: what the support rules read about each node."""

from __future__ import annotations

from explorer import load, zoo
from explorer.targets.support import NodeSupport, Reason, node_facts

from .models import reshape_from_shape


def test_facts_carry_opset_schema_version_constness_and_defaults() -> None:
    facts = node_facts(load(zoo.build("resnet18")))
    conv = facts["/conv1/Conv"]
    assert conv.opset == 17 and conv.since_version == 11
    assert [t.constant for t in conv.inputs] == [False, True]
    assert conv.attribute("auto_pad") == "NOTSET"  # the schema's default, not set on the node
    assert conv.outputs[0].dtype == "float32"


def test_a_computed_input_is_not_constant_and_symbolic_dims_are_not_static() -> None:
    facts = node_facts(load(reshape_from_shape()))
    reshape = facts["reshape"]
    assert reshape.inputs[1].constant is False and reshape.inputs[1].dtype == "int64"
    dynamic = node_facts(load(zoo.build("mlp")))["/fc1/Gemm"]
    assert not dynamic.inputs[0].static and dynamic.inputs[1].static


def test_judge_keeps_notes_after_blocking_reasons() -> None:
    facts = node_facts(load(zoo.build("mlp")))["/fc1/Gemm"]
    judged = NodeSupport.judge(facts, [Reason("note", "watch"), Reason("dtype", "int8")])
    assert not judged.supported and [r.kind for r in judged.reasons] == ["dtype", "note"]

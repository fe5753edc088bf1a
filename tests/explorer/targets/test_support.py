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


def _sequence_model(opset: int = 17) -> object:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [
        helper.make_node("SequenceConstruct", ["x", "x"], ["s"], name="construct"),
        helper.make_node("Identity", ["s"], ["t"], name="identity"),
        helper.make_node("Optional", ["t"], ["o"], name="optional"),
        helper.make_node("OptionalGetElement", ["o"], ["u"], name="get"),
        helper.make_node("SequenceAt", ["u", "i"], ["y"], name="at"),
    ]
    i = helper.make_tensor("i", TensorProto.INT64, [], [0])
    graph = helper.make_graph(nodes, "g", [x], [y], [i])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_sequence_and_optional_values_keep_their_kind() -> None:
    facts = node_facts(load(_sequence_model()))
    assert facts["construct"].outputs[0].type_string == "seq(tensor(float))"
    assert facts["identity"].outputs[0].kind == "seq(tensor)"  # Identity passes its input's kind on
    assert facts["optional"].outputs[0].type_string == "optional(seq(tensor(float)))"
    assert facts["get"].outputs[0].kind == "seq(tensor)"
    assert facts["at"].outputs[0].type_string == "tensor(float)" and facts["at"].inputs[1].kind == "tensor"

"""ONNX Runtime's kernel registry as a support check: op, opset and dtype, installed or from a table."""

from __future__ import annotations

from explorer import load, zoo
from explorer.onnx_adapter.ort_registry import OrtKernel, installed_kernels
from explorer.targets import get_target
from explorer.targets.ort_kernels import kernel_reasons, table_kernels, table_source
from explorer.targets.support import NodeFacts, TensorFact, node_facts


def test_opset_out_of_range_and_dtype_are_told_apart() -> None:
    only_old = {("ai.onnx", "Relu"): (OrtKernel("ai.onnx", "Relu", 6, 12, {"T": ("tensor(float)",)}),)}
    x = TensorFact("x", "float32", (4,), False)
    new = NodeFacts("r", "Relu", "", 17, 14, (x,), (x,), {})
    (reason,) = kernel_reasons(new, only_old, "toy")
    assert reason.kind == "opset out of range" and "6-12" in reason.text and "14" in reason.text
    half = TensorFact("x", "float16", (4,), False)
    old_half = NodeFacts("r", "Relu", "", 11, 6, (half,), (half,), {})
    assert kernel_reasons(old_half, only_old, "toy")[0].kind == "dtype"
    missing = NodeFacts("n", "NoSuchOp", "", 17, None, (x,), (), {})
    assert kernel_reasons(missing, only_old, "toy")[0].kind == "op missing"


def test_contrib_ops_are_checked_against_their_domain() -> None:
    graph = load(zoo.build("custom_domain"))
    support = get_target("ort-cpu").support(graph)
    by_op = {s.op: s for s in support.values()}
    assert by_op["com.microsoft::FusedMatMul"].supported
    swish = by_op["zoo.local::Swish"]  # a model-local function: ONNX Runtime inlines it
    assert swish.supported and "Sigmoid, Mul" in swish.reasons[0].text
    assert node_facts(graph)["/act/Swish"].function_body == (
        ("ai.onnx", "Sigmoid", 13),
        ("ai.onnx", "Mul", 14),
    )


def test_the_cuda_table_is_read_with_its_source() -> None:
    cuda = table_kernels("ort_cuda_kernels.csv")
    assert ("ai.onnx", "Conv") in cuda and ("com.microsoft", "Attention") in cuda
    assert table_source("ort_cuda_kernels.csv")["commit"]
    target = get_target("ort-cuda")
    assert target.fallback == "CPU" and target.source.kind in ("table", "measured")


def test_sequence_and_optional_types_match_as_onnx_runtime_matches_them() -> None:
    from .test_support import _sequence_model

    support = get_target("ort-cpu").support(load(_sequence_model()))
    assert all(s.supported for s in support.values()), [s.to_dict() for s in support.values()]
    kernels = installed_kernels("CPUExecutionProvider")
    bare = TensorFact("s", "float32", None, False)  # a sequence taken for a tensor: no kernel takes it
    facts = NodeFacts("n", "SequenceLength", "", 17, 11, (bare,), (TensorFact("n", "int64", (), False),), {})
    assert kernel_reasons(facts, kernels, "CPU")[0].kind == "dtype"
    seq = TensorFact("s", "float32", None, False, "seq(tensor)")
    facts = NodeFacts("n", "SequenceLength", "", 17, 11, (seq,), (TensorFact("n", "int64", (), False),), {})
    assert kernel_reasons(facts, kernels, "CPU") == []


def test_string_normalizer_needs_its_locale_on_this_machine() -> None:
    from explorer.targets.ort_kernels import locale_available, machine_reasons

    def normalizer(**attributes: object) -> NodeFacts:
        defaults = {"case_change_action": "NONE", "is_case_sensitive": 0, "locale": "no_SUCH.locale"}
        return NodeFacts("n", "StringNormalizer", "", 10, 10, (), (), attributes, defaults)

    assert not locale_available("no_SUCH.locale") and locale_available("C")
    (reason,) = machine_reasons(normalizer(case_change_action="UPPER", is_case_sensitive=1))
    assert reason.kind == "attribute value" and "no_SUCH.locale" in reason.text
    assert machine_reasons(normalizer(is_case_sensitive=0))  # case-insensitive compare builds it too
    assert machine_reasons(normalizer(is_case_sensitive=1)) == []  # neither: no locale needed
    assert machine_reasons(normalizer(is_case_sensitive=0, locale="C")) == []

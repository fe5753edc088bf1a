"""NNAPI and CoreML: the tables ONNX Runtime ships, their notes turned into rules or kept as notes."""

from __future__ import annotations

from explorer import load
from explorer.targets import get_target, partition
from explorer.targets.mobile_tables import mobile_table, note_rules

from .models import chain, conv_transpose


def test_the_tables_come_from_the_installed_package() -> None:
    for name in ("nnapi", "coreml-mlprogram", "coreml-nn"):
        table = mobile_table(name)
        assert table.path.is_file() and "onnxruntime" in str(table.path)
        assert "ai.onnx:Conv" in table.ops


def test_an_op_missing_on_nnapi_falls_back_and_splits_the_graph() -> None:
    assert "ai.onnx:Erf" not in mobile_table("nnapi").ops
    p = partition(load(chain("Erf")), get_target("nnapi"))
    assert p.fallback_nodes == ("middle",)
    assert p.support["middle"].blocking[0].kind == "op missing"
    assert p.groups == (("first",), ("last",))
    # a -> Erf (to the CPU) and b -> the second partition: two copies of 1x16 floats (graph I/O aside)
    assert {(t.tensor, t.destination) for t in p.transitions} == {("a", "CPU"), ("b", "partition 2")}
    assert p.transition_bytes == 2 * 16 * 4
    assert p.verdict.startswith("2 partitions on Android NNAPI") and "Erf (op missing)" in p.verdict


def test_a_coreml_attribute_note_is_checked() -> None:
    note = mobile_table("coreml-mlprogram").ops["ai.onnx:ConvTranspose"].note
    assert "SAME_UPPER" in note
    target = get_target("coreml-mlprogram")
    (same,) = target.support(load(conv_transpose("SAME_UPPER"))).values()
    assert not same.supported and same.blocking[0].kind == "attribute value"
    assert "auto_pad=SAME_UPPER" in same.blocking[0].text
    (valid,) = target.support(load(conv_transpose("NOTSET"))).values()
    assert valid.supported


def test_notes_no_rule_can_check_are_kept_as_notes() -> None:
    rules = note_rules("Resize", "ai.onnx", "See resize_op_builder.cc. There are too many permutations.")
    assert rules.notes and not rules.attributes and not rules.ranks
    rules = note_rules(
        "Conv", "ai.onnx", "Only 1D/2D Conv is supported.<br/>Bias if provided must be constant."
    )
    assert rules.ranks == (3, 4) and rules.constant_names == ("B",) and not rules.notes


def test_nnapi_needs_static_shapes_and_coreml_does_not() -> None:
    dynamic = load(chain("Relu", batch="n"))
    assert not any(s.supported for s in get_target("nnapi").support(dynamic).values())
    assert all(s.supported for s in get_target("coreml-mlprogram").support(dynamic).values())

"""Shapes as people read them: one rule for every place, symbolic sizes that are expressions unambiguous."""

from __future__ import annotations

import math

import pytest

from explorer.core.tensors import format_shape

SYMPY = "floor(height/2 - 1/2) + 1"  # onnxsim / ONNX Runtime's symbolic shape inference
DYNAMO = "(((height - 1)//2)) + 1"  # torch.onnx.export(..., dynamo=True)


@pytest.mark.parametrize(
    ("shape", "drawn", "listed"),
    [
        (
            ("batch", 16, SYMPY, "floor(width/2 - 1/2) + 1"),
            "batch×16×(floor(height/2 - 1/2) + 1)×(floor(width/2 - 1/2) + 1)",
            "[batch, 16, floor(height/2 - 1/2) + 1, floor(width/2 - 1/2) + 1]",
        ),
        (("batch", 16, DYNAMO), "batch×16×((height - 1)//2 + 1)", "[batch, 16, (height - 1)//2 + 1]"),
        (
            ("batch", "2*(((height - 1)//8)) + 2"),
            "batch×(2*((height - 1)//8) + 2)",
            "[batch, 2*((height - 1)//8) + 2]",
        ),
        (("batch", "floor(h/2)", "s0*s1"), "batch×floor(h/2)×(s0*s1)", "[batch, floor(h/2), s0*s1]"),
        (
            ("batch", "seq_len", "p2o.DynamicDimension.0"),
            "batch×seq_len×p2o.DynamicDimension.0",
            "[batch, seq_len, p2o.DynamicDimension.0]",
        ),
        (("seq-len", "batch size"), "(seq-len)×(batch size)", "[seq-len, batch size]"),  # names, not sums
        (("unk__3", None, 7), "?×?×7", "[unk__3, ?, 7]"),
        ((), "scalar", "[]"),
        (None, "?", "?"),
    ],
)
def test_one_rule_for_drawn_and_listed_shapes(shape: tuple | None, drawn: str, listed: str) -> None:
    assert format_shape(shape, compact=True) == drawn
    assert format_shape(shape) == listed


@pytest.mark.parametrize(
    "expression",
    [
        SYMPY,
        DYNAMO,
        "2*(((height - 1)//8)) + 2",
        "a - (b - c)",
        "a + (b - c)",
        "a*(b//c)",
        "a//(b*c)",
        "(a - b)*c",
        "a**b**c",
        "(a**b)**c",
        "-(a + b)*c",
        "(a*b)//c % d",
        "floor(floor(height/2 - 1/2)/2) + 1",
    ],
)
def test_expressions_are_reprinted_with_their_value(expression: str) -> None:
    printed = format_shape((expression,))[1:-1]
    names = {"floor": math.floor}
    for values in [(3, 5, 2, 7), (224, 17, 3, 2), (641, 2, 5, 11)]:
        env = dict(names, height=values[0], a=values[0], b=values[1], c=values[2], d=values[3])
        assert eval(printed, env) == eval(expression, env), (expression, printed)


def test_long_expressions_are_drawn_short_and_listed_in_full() -> None:
    area = "(floor(floor(height/2 - 1/2)/2) + 1)*(floor(floor(width/2 - 1/2)/2) + 1)"
    assert format_shape(("batch", 64, area), compact=True) == "batch×64×(…)"
    assert format_shape(("batch", 64, area)) == f"[batch, 64, {area}]"
    long_name = "a_dimension_named_at_length_by_its_exporter_for_no_reason"
    assert format_shape((long_name,), compact=True) == long_name  # a plain name is never shortened

"""The rules every target shares, and the attribute-rule language."""

from __future__ import annotations

import pytest

from explorer.targets.rules import attribute_rule_failure, input_count_reasons, static_shape_reasons
from explorer.targets.support import NodeFacts, TensorFact


def _facts(**attributes: object) -> NodeFacts:
    x = TensorFact("x", "float32", (1, 4, 8, 8), False)
    return NodeFacts("n", "Conv", "", 17, 11, (x,), (), attributes, {"auto_pad": "NOTSET", "group": 1})


@pytest.mark.parametrize(
    ("rule", "attributes", "fails"),
    [
        ("dilations=1", {"dilations": [1, 1]}, False),
        ("dilations=1", {"dilations": [2, 1]}, True),
        ("auto_pad in NOTSET|VALID", {}, False),  # the default is checked when the node sets nothing
        ("auto_pad!=SAME_UPPER", {"auto_pad": b"SAME_UPPER"}, True),
        ("group=1", {"group": 2}, True),
        ("alpha=1.0", {}, False),  # neither set nor defaulted: nothing to check
    ],
)
def test_attribute_rules(rule: str, attributes: dict, fails: bool) -> None:
    assert (attribute_rule_failure(_facts(**attributes), rule) is not None) == fails


def test_a_malformed_rule_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="not 'name=value'"):
        attribute_rule_failure(_facts(), "dilations")


def test_static_shapes_and_input_counts() -> None:
    many = tuple(TensorFact(f"t{i}", "float32", ("n", 4), False) for i in range(4))
    facts = NodeFacts("s", "Sum", "", 17, 13, many, (), {})
    (reason,) = static_shape_reasons(facts)  # one reason for many tensors
    assert reason.kind == "dynamic shape" and "4 tensors" in reason.text
    assert input_count_reasons(facts, 2, 2)[0].text == "Sum has 4 inputs (takes 2)"
    assert input_count_reasons(facts, 2) == []

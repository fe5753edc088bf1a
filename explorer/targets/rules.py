"""Support rules every target shares: static shapes, constant inputs, ranks, input counts, attributes.

Each rule reads a node's :class:`~explorer.targets.support.NodeFacts` and returns the
:class:`~explorer.targets.support.Reason` list of what failed (empty when it holds), so a
target's check is these rules applied with its own table's values. Attribute rules are one
small language shared by every support table: ``name=value``, ``name!=value`` and
``name in A|B|C``; an ints attribute equals a value when every element does, and an
attribute the node does not set takes the schema's default.

Examples
--------
>>> from explorer.targets.support import NodeFacts, TensorFact
>>> x = TensorFact("x", "float32", ("batch", 3, 8, 8), False)
>>> f = NodeFacts("c", "Conv", "", 17, 11, (x,), (), {"dilations": [1, 1]})
>>> [str(r) for r in static_shape_reasons(f)]
["dynamic shape: x is ['batch', 3, 8, 8]"]
>>> attribute_reasons(f, ["dilations=1"]), rank_reasons(f, [4])
([], [])
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from explorer.core.errors import UsageError
from explorer.targets.support import (
    ATTRIBUTE,
    CONSTANT_INPUT,
    DYNAMIC_SHAPE,
    INPUT_COUNT,
    OP_MISSING,
    RANK,
    NodeFacts,
    Reason,
)

__all__ = [
    "static_shape_reasons",
    "constant_input_reasons",
    "rank_reasons",
    "input_count_reasons",
    "attribute_reasons",
    "attribute_rule_failure",
    "local_function_reasons",
]


def static_shape_reasons(facts: NodeFacts) -> list[Reason]:
    """A reason per input or output whose shape is not fully fixed (one for all when many).

    Examples
    --------
    >>> from explorer.targets.support import NodeFacts, TensorFact
    >>> y = TensorFact("y", "float32", None, False)
    >>> static_shape_reasons(NodeFacts("n", "Relu", "", 17, 14, (y,), (), {}))[0].text
    'y has no known shape'
    """
    dynamic = [t for t in facts.tensors() if not t.static]
    if len(dynamic) > 2:
        names = ", ".join(t.name for t in dynamic)
        return [Reason(DYNAMIC_SHAPE, f"{len(dynamic)} tensors without fixed shapes ({names})")]
    return [
        Reason(
            DYNAMIC_SHAPE,
            f"{t.name} has no known shape" if t.shape is None else f"{t.name} is {list(t.shape)}",
        )
        for t in dynamic
    ]


def constant_input_reasons(facts: NodeFacts, positions: Iterable[int], names: Any = None) -> list[Reason]:
    """A reason per input at ``positions`` that is present and computed at run time.

    Examples
    --------
    >>> from explorer.targets.support import NodeFacts, TensorFact
    >>> shape = TensorFact("s", "int64", (2,), False)
    >>> constant_input_reasons(NodeFacts("r", "Reshape", "", 17, 14, (None, shape), (), {}), [1])[0].text
    'input 1 (s) is computed at run time; it must be a constant'
    """
    reasons = []
    for i in positions:
        tensor = facts.inputs[i] if i < len(facts.inputs) else None
        if tensor is not None and not tensor.constant:
            reasons.append(
                Reason(
                    CONSTANT_INPUT,
                    f"input {i} ({tensor.name}) is computed at run time; it must be a constant",
                )
            )
    return reasons


def rank_reasons(facts: NodeFacts, ranks: Iterable[int], max_rank: int | None = None) -> list[Reason]:
    """A reason when the first input's rank is not in ``ranks`` (or any input's is above ``max_rank``).

    Examples
    --------
    >>> from explorer.targets.support import NodeFacts, TensorFact
    >>> x = TensorFact("x", "float32", (1, 3, 4, 8, 8), False)
    >>> rank_reasons(NodeFacts("p", "MaxPool", "", 17, 12, (x,), (), {}), [3, 4])[0].text
    'x has rank 5 (takes 3, 4)'
    """
    allowed = sorted(set(ranks))
    reasons = []
    first = facts.inputs[0] if facts.inputs else None
    if allowed and first is not None and first.rank is not None and first.rank not in allowed:
        reasons.append(
            Reason(RANK, f"{first.name} has rank {first.rank} (takes {', '.join(map(str, allowed))})")
        )
    if max_rank is not None:
        for tensor in facts.inputs:
            if tensor is not None and tensor.rank is not None and tensor.rank > max_rank:
                reasons.append(Reason(RANK, f"{tensor.name} has rank {tensor.rank} (at most {max_rank})"))
                break
    return reasons


def input_count_reasons(
    facts: NodeFacts, minimum: int | None = None, maximum: int | None = None
) -> list[Reason]:
    """A reason when the node has fewer than ``minimum`` or more than ``maximum`` inputs.

    Examples
    --------
    >>> from explorer.targets.support import NodeFacts, TensorFact
    >>> t = TensorFact("a", "float32", (2,), False)
    >>> input_count_reasons(NodeFacts("s", "Sum", "", 17, 13, (t, t, t), (), {}), 2, 2)[0].text
    'Sum has 3 inputs (takes 2)'
    """
    count = sum(1 for t in facts.inputs if t is not None)
    low = minimum if minimum is not None else 0
    high = maximum if maximum is not None else count
    if low <= count <= high:
        return []
    takes = str(low) if low == high else (f"at least {low}" if maximum is None else f"{low} to {high}")
    return [Reason(INPUT_COUNT, f"{facts.op} has {count} inputs (takes {takes})")]


def local_function_reasons(facts: NodeFacts, table: str) -> list[Reason]:
    """For a call of a model-local function, on a target judged from a table of ops: the table
    cannot tell (ONNX Runtime inlines the function before placing its nodes), so say how to see.

    Examples
    --------
    >>> from explorer.targets.support import NodeFacts
    >>> f = NodeFacts("s", "Swish", "local", 17, 1, (), (), {}, {}, (("ai.onnx", "Sigmoid", 13),))
    >>> local_function_reasons(f, "NNAPI")[0].kind
    'op missing'
    """
    if facts.function_body is None:
        return []
    ops = ", ".join(dict.fromkeys(op for _, op, _ in facts.function_body))
    return [
        Reason(
            OP_MISSING,
            f"{facts.qualified_op} is a model-local function ({ops}); ONNX Runtime inlines it before the "
            f"{table} provider sees it: inline it first (pass onnxscript:inline) to judge its nodes",
        )
    ]


def attribute_reasons(facts: NodeFacts, rules: Iterable[str]) -> list[Reason]:
    """A reason per attribute rule that fails (see :func:`attribute_rule_failure`).

    Examples
    --------
    >>> from explorer.targets.support import NodeFacts
    >>> f = NodeFacts("g", "Gemm", "", 17, 13, (), (), {"alpha": 2.0}, {"beta": 1.0})
    >>> [r.text for r in attribute_reasons(f, ["alpha=1.0", "beta=1.0"])]
    ['alpha=2.0 (needs alpha=1.0)']
    """
    reasons = []
    for rule in rules:
        failure = attribute_rule_failure(facts, rule)
        if failure is not None:
            reasons.append(Reason(ATTRIBUTE, failure))
    return reasons


def _parse_value(text: str) -> Any:
    text = text.strip()
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _equals(value: Any, expected: Any) -> bool:
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, (list, tuple)):
        return all(_equals(v, expected) for v in value)
    if isinstance(value, (int, float)) and isinstance(expected, (int, float)):
        return float(value) == float(expected)
    return str(value) == str(expected)


def attribute_rule_failure(facts: NodeFacts, rule: str) -> str | None:
    """Check one attribute rule on a node: None when it holds, else what failed, in words.

    Parameters
    ----------
    facts : NodeFacts
        The node.
    rule : str
        ``name=value``, ``name!=value`` or ``name in A|B|C``. An attribute the node does not
        set takes the schema's default; one with neither passes (nothing to check).

    Examples
    --------
    >>> f = NodeFacts("n", "Mod", "", 17, 13, (), (), {"fmod": 1}, {})
    >>> attribute_rule_failure(f, "fmod=0")
    'fmod=1 (needs fmod=0)'
    >>> attribute_rule_failure(NodeFacts("d", "DepthToSpace", "", 17, 13, (), (), {"mode": "CRD"}),
    ...                        "mode in DCR")
    'mode=CRD (needs mode in DCR)'
    """
    rule = rule.strip()
    if " in " in rule:
        name, _, options = rule.partition(" in ")
        allowed = [_parse_value(o) for o in options.split("|")]
        check = lambda v: any(_equals(v, a) for a in allowed)  # noqa: E731
    elif "!=" in rule:
        name, _, expected = rule.partition("!=")
        check = lambda v: not _equals(v, _parse_value(expected))  # noqa: E731
    elif "=" in rule:
        name, _, expected = rule.partition("=")
        check = lambda v: _equals(v, _parse_value(expected))  # noqa: E731
    else:
        raise UsageError(f"attribute rule {rule!r} is not 'name=value', 'name!=value' or 'name in A|B'")
    name = name.strip()
    value = facts.attribute(name)
    if value is None or check(value):
        return None
    if isinstance(value, bytes):
        value = value.decode()
    shown = list(value) if isinstance(value, tuple) else value
    return f"{name}={shown} (needs {rule})"

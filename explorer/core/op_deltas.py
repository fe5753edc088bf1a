"""How operator counts changed between two versions of a model, computed and written one way everywhere.

The diff, the onnxscript pass log, the CLI's step table, the timeline's frame and the
stepper all show op-count changes; they all use these two functions.

Examples
--------
>>> from collections import Counter
>>> deltas = op_deltas(Counter(Conv=2, Relu=2), Counter(Conv=2, FusedConvRelu=0, Add=1))
>>> deltas, format_op_deltas(deltas)
({'Add': 1, 'Relu': -2}, 'Add +1, Relu -2')
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["op_deltas", "format_op_deltas"]


def op_deltas(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """``after - before`` per op type, sorted by op, only the ops whose count changed.

    Examples
    --------
    >>> op_deltas({"Gemm": 1}, {"MatMul": 1, "Add": 1})
    {'Add': 1, 'Gemm': -1, 'MatMul': 1}
    """
    ops = sorted(set(before) | set(after))
    return {op: after.get(op, 0) - before.get(op, 0) for op in ops if after.get(op, 0) != before.get(op, 0)}


def format_op_deltas(deltas: Mapping[str, int], empty: str = "") -> str:
    """``"Add +1, Relu -2"``: each op with its signed change, in the mapping's order; ``empty`` if none.

    Examples
    --------
    >>> format_op_deltas({"Shape": -3}), format_op_deltas({}, empty="-")
    ('Shape -3', '-')
    """
    return ", ".join(f"{op} {n:+d}" for op, n in deltas.items()) or empty

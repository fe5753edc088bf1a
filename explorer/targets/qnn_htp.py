"""Qualcomm HTP through ONNX Runtime's QNN execution provider, from the project's data files.

``explorer/data/targets/qnn_htp_ops.csv`` lists, per ONNX op, whether the QNN EP places it
on the HTP (``yes``, ``partial``, ``no``), the inputs that must be constants, attribute
rules, input counts and ranks, the constraints in words and the sources;
``qnn_htp.json`` holds the sources with their versions and dates and the global HTP
constraints. Both were built from ``shared/data/qnn-htp-ops.md`` (read from the EP's op
builders and Qualcomm's docs, never checked on a device). On top of the table, the HTP
needs every shape fixed, takes quantised 8- and 16-bit types best, runs float32 at FP16
precision (Hexagon v73 and later), and never takes doubles or strings.

Examples
--------
>>> table = qnn_table()
>>> table.ops[("ai.onnx", "Reshape")].constant_inputs, table.ops[("ai.onnx", "ReduceProd")].htp
((1,), 'no')
>>> table.date
'2026-11-12'
"""

from __future__ import annotations

import csv
import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from explorer.targets.rules import (
    attribute_reasons,
    constant_input_reasons,
    input_count_reasons,
    local_function_reasons,
    rank_reasons,
)
from explorer.targets.support import DTYPE, NOTE, OP_MISSING, NodeFacts, Reason

__all__ = ["QnnOp", "QnnTable", "qnn_table", "qnn_reasons", "HTP_REJECTED_DTYPES"]

HTP_REJECTED_DTYPES = frozenset({"float64", "string", "complex64", "complex128"})
"""Element types the HTP never takes (the EP maps none of them to a QNN type)."""
_FLOAT = frozenset({"float32", "float16", "bfloat16"})


@dataclass(frozen=True)
class QnnOp:
    """One row of the HTP op table.

    Attributes
    ----------
    op, domain, qnn_op : str
        The ONNX op, its domain, and the QNN op(s) it becomes.
    htp : {"yes", "partial", "no", "unknown"}
        Whether the EP places it on the HTP (``partial``: with the constraints).
    plugin_since : str
        The QNN plugin EP version that added it (empty: in ONNX Runtime's built-in EP).
    constant_inputs : tuple of int
        Input positions that must be initializers.
    attributes : tuple of str
        Attribute rules.
    min_inputs, max_inputs : int or None
        Input counts.
    ranks : tuple of int
        Ranks the first input may have (empty: any).
    constraints, sources : str
        The constraints in words, and the source keys (see ``qnn_htp.json``).
    """

    op: str
    domain: str
    qnn_op: str
    htp: str
    plugin_since: str
    constant_inputs: tuple[int, ...]
    attributes: tuple[str, ...]
    min_inputs: int | None
    max_inputs: int | None
    ranks: tuple[int, ...]
    constraints: str
    sources: str


@dataclass(frozen=True)
class QnnTable:
    """The HTP op table and what is known about where it comes from.

    Attributes
    ----------
    ops : dict
        (domain, op) -> :class:`QnnOp`.
    date : str
        The date of the newest source (ISO).
    info : dict
        ``qnn_htp.json``: sources, global constraints, dtypes.
    """

    ops: dict[tuple[str, str], QnnOp]
    date: str
    info: dict[str, Any]

    def sources_text(self) -> str:
        """The sources in one line each: key, what, version, date."""
        return "\n".join(
            f"{s['key']}: {s['source']} ({s.get('version') or '-'}; {s.get('date') or 'undated'})"
            for s in self.info.get("sources", ())
        )


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(";") if x.strip())


def _int(text: str) -> int | None:
    return int(text) if text.strip() else None


@functools.cache
def qnn_table() -> QnnTable:
    """Read the HTP op table and its sources from ``explorer/data/targets``.

    Examples
    --------
    >>> len(qnn_table().ops) > 100
    True
    """
    folder = resources.files("explorer").joinpath("data", "targets")
    info = json.loads(folder.joinpath("qnn_htp.json").read_text(encoding="utf-8"))
    ops = {}
    with folder.joinpath("qnn_htp_ops.csv").open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            op = QnnOp(
                op=row["op"],
                domain=row["domain"] or "ai.onnx",
                qnn_op=row["qnn_op"],
                htp=row["htp"],
                plugin_since=row["plugin_since"],
                constant_inputs=_ints(row["constant_inputs"]),
                attributes=tuple(r for r in row["attributes"].split(";") if r.strip()),
                min_inputs=_int(row["min_inputs"]),
                max_inputs=_int(row["max_inputs"]),
                ranks=_ints(row["rank"]),
                constraints=row["constraints"],
                sources=row["sources"],
            )
            ops[(op.domain, op.op)] = op
    return QnnTable(ops, info["table_date"], info)


def _dtype_reasons(facts: NodeFacts) -> list[Reason]:
    reasons = []
    dtypes = {t.dtype for t in facts.tensors() if t.dtype}
    rejected = sorted(dtypes & HTP_REJECTED_DTYPES)
    if rejected:
        reasons.append(Reason(DTYPE, f"the HTP takes no {', '.join(rejected)} tensors"))
    if facts.op not in ("QuantizeLinear", "DequantizeLinear") and dtypes & _FLOAT:
        reasons.append(
            Reason(
                NOTE,
                "float tensors run at FP16 precision on the HTP (Hexagon v73 or later); quantise to u8/u16",
            )
        )
    return reasons


def qnn_reasons(facts: NodeFacts, table: QnnTable | None = None) -> list[Reason]:
    """Why the QNN EP would not place the node on the HTP (caveats as notes); static shapes aside.

    Examples
    --------
    >>> from explorer.targets.support import NodeFacts, TensorFact
    >>> x = TensorFact("x", "float32", (1, 4), False)
    >>> [r.kind for r in qnn_reasons(NodeFacts("p", "ReduceProd", "", 17, 13, (x,), (), {}))]
    ['op missing', 'note']
    """
    table = qnn_table() if table is None else table
    if facts.function_body is not None:
        return local_function_reasons(facts, "QNN")
    row = table.ops.get((facts.domain_name, facts.op))
    if row is None:
        return [Reason(OP_MISSING, f"the QNN EP has no HTP builder for {facts.qualified_op}")]
    reasons = []
    if row.htp == "no":
        reasons.append(Reason(OP_MISSING, f"the QNN EP rejects {facts.op} on the HTP ({row.constraints})"))
    reasons += constant_input_reasons(facts, row.constant_inputs)
    reasons += attribute_reasons(facts, row.attributes)
    reasons += input_count_reasons(facts, row.min_inputs, row.max_inputs)
    reasons += rank_reasons(facts, row.ranks)
    reasons += _dtype_reasons(facts)
    if row.plugin_since:
        reasons.append(Reason(NOTE, f"needs the QNN plugin EP v{row.plugin_since} or later"))
    if row.htp in ("partial", "unknown") and row.constraints:
        reasons.append(Reason(NOTE, row.constraints))
    return reasons

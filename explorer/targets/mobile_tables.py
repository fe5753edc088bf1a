"""NNAPI and CoreML support, read from the tables ONNX Runtime ships in ``tools/mobile_helpers``.

The installed ``onnxruntime`` package carries ``nnapi_supported_ops.md``,
``coreml_supported_mlprogram_ops.md`` and ``coreml_supported_neuralnetwork_ops.md``: the
tables its mobile usability checker reads, one ``|domain:op|note|`` row per op. They are
parsed at run time, so they follow the installed version. An op absent from a table is
not supported. A note's sentences become rules where they say something a rule can check
(:func:`note_rules`: "Only 2D Conv is supported" -> input rank 4, "Weights and bias
should be constant" -> those inputs must be initializers, "Only DCR mode DepthToSpace is
supported" -> ``mode in DCR``, "padding_type of SAME_UPPER/SAME_LOWER is not supported"
-> ``auto_pad`` rules); every other sentence is kept as a :data:`~explorer.targets.support.NOTE`
on the node, in the table's words.

Examples
--------
>>> table = mobile_table("nnapi")
>>> table.ops["ai.onnx:Conv"].rules.ranks, table.ops["ai.onnx:Conv"].rules.constant_names
((4,), ('W', 'B'))
>>> "ai.onnx:NonZero" in table.ops
False
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from explorer.targets.rules import (
    attribute_reasons,
    constant_input_reasons,
    local_function_reasons,
    rank_reasons,
)
from explorer.targets.support import NOTE, OP_MISSING, NodeFacts, Reason, onnx_op_schema

__all__ = [
    "MOBILE_TABLES",
    "NoteRules",
    "MobileOp",
    "MobileTable",
    "mobile_table",
    "note_rules",
    "mobile_reasons",
]

MOBILE_TABLES = {
    "nnapi": "nnapi_supported_ops.md",
    "coreml-mlprogram": "coreml_supported_mlprogram_ops.md",
    "coreml-nn": "coreml_supported_neuralnetwork_ops.md",
}
"""Target name -> the table file in ``onnxruntime/tools/mobile_helpers``."""

_ALIASES = {"weights": "W", "weight": "W", "bias": "B"}
_ONLY_ND = re.compile(r"^Only ((?:\d+D/)*\d+D) \w+ is supported")
_ONLY_MODE = re.compile(r"^Only (\w+) mode \w+ is supported")
_MUST_EQUAL = re.compile(r"^`?(\w+)`? must be (\d+)\.?$")
_NOT_SUPPORTED_VALUES = re.compile(r"^(\w+) of ([A-Z_/]+) is not supported")
_RANK_UP_TO = re.compile(r"rank up to (\d+)")
_CONSTANT = re.compile(r"\b(should|must) be constant")


@dataclass(frozen=True)
class NoteRules:
    """What the sentences of one note say, as rules; ``notes``: the sentences no rule checks.

    Attributes
    ----------
    ranks : tuple of int
        The ranks the first input may have (empty: any).
    max_rank : int or None
        The highest rank any input may have.
    constant_names : tuple of str
        Schema input names that must be constants.
    constant_quantization : bool
        Whether every scale and zero-point input must be a constant.
    attributes : tuple of str
        Attribute rules (see :mod:`explorer.targets.rules`).
    notes : tuple of str
        The sentences kept as caveats.
    """

    ranks: tuple[int, ...] = ()
    max_rank: int | None = None
    constant_names: tuple[str, ...] = ()
    constant_quantization: bool = False
    attributes: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class MobileOp:
    """One row of a mobile support table.

    Attributes
    ----------
    key : str
        ``domain:op`` as the table writes it.
    note : str
        The note, ``<br/>`` turned into spaces.
    rules : NoteRules
        What :func:`note_rules` made of it.
    """

    key: str
    note: str
    rules: NoteRules = field(default_factory=NoteRules)


@dataclass(frozen=True)
class MobileTable:
    """A parsed table: which file, from which ONNX Runtime, and its ops.

    Attributes
    ----------
    target : str
        ``"nnapi"``, ``"coreml-mlprogram"`` or ``"coreml-nn"``.
    path : pathlib.Path
        The file read.
    onnxruntime_version : str
        The installed ONNX Runtime the file came with.
    ops : dict
        ``domain:op`` -> :class:`MobileOp`.
    """

    target: str
    path: Path
    onnxruntime_version: str
    ops: dict[str, MobileOp]


def _sentences(note: str) -> list[str]:
    parts = re.split(r"<br\s*/?>", note)
    out = []
    for part in parts:
        out.extend(s.strip() for s in re.split(r"(?<=\.)\s+(?=[A-Z`'])", part) if s.strip())
    return out


def _input_names(op: str, domain: str) -> list[str]:
    schema = onnx_op_schema(op, "" if domain == "ai.onnx" else domain, 99)
    return [p.name for p in schema.inputs] if schema is not None else []


def _named_inputs(sentence: str, names: list[str]) -> list[str]:
    lowered = {n.lower(): n for n in names}
    found = []
    for word in re.findall(r"[A-Za-z_]+", sentence):
        key = word.lower()
        name = (
            _ALIASES.get(key)
            if _ALIASES.get(key) in names
            else lowered.get(key) or lowered.get(key.rstrip("s"))
        )
        if name and name not in found:
            found.append(name)
    return found


def note_rules(op: str, domain: str, note: str) -> NoteRules:
    """Turn a table note into rules, keeping what no rule checks as notes.

    Examples
    --------
    >>> r = note_rules("ConvTranspose", "ai.onnx",
    ...     "Weight and bias must be constant.<br/>padding_type of SAME_UPPER/SAME_LOWER is not supported.")
    >>> r.constant_names, r.attributes
    (('W', 'B'), ('auto_pad!=SAME_UPPER', 'auto_pad!=SAME_LOWER'))
    >>> note_rules("Pow", "ai.onnx", "Only supports cases when both inputs are fp32.").notes
    ('Only supports cases when both inputs are fp32.',)
    """
    names = _input_names(op, domain)
    ranks: list[int] = []
    max_rank = None
    constants: list[str] = []
    quantization = False
    attributes: list[str] = []
    notes: list[str] = []
    for sentence in _sentences(note):
        checked = False
        if m := _ONLY_ND.match(sentence):
            ranks.extend(int(d) + 2 for d in re.findall(r"(\d+)D", m.group(1)))
            checked = True
        elif m := _ONLY_MODE.match(sentence):
            attributes.append(f"mode in {m.group(1)}")
            checked = True
        elif (m := _NOT_SUPPORTED_VALUES.match(sentence)) and m.group(1) == "padding_type":
            attributes.extend(f"auto_pad!={v}" for v in m.group(2).split("/"))
            checked = True
        elif m := _MUST_EQUAL.match(sentence):
            attributes.append(f"{m.group(1)}={m.group(2)}")
            checked = True
        if m := _RANK_UP_TO.search(sentence):
            max_rank = int(m.group(1))
        if _CONSTANT.search(sentence) and "may be" not in sentence:
            if "scales and zero points" in sentence:
                quantization = True
                checked = True
            else:
                named = _named_inputs(sentence, names)
                constants.extend(n for n in named if n not in constants)
                checked = checked or bool(named)
        if not checked:
            notes.append(sentence)
    return NoteRules(tuple(ranks), max_rank, tuple(constants), quantization, tuple(attributes), tuple(notes))


@functools.cache
def mobile_table(target: str) -> MobileTable:
    """Parse the installed ONNX Runtime's support table for ``target`` (see :data:`MOBILE_TABLES`).

    Raises
    ------
    FileNotFoundError
        When the installed onnxruntime does not ship the table.

    Examples
    --------
    >>> "ai.onnx:Conv" in mobile_table("coreml-mlprogram").ops
    True
    """
    import onnxruntime

    path = Path(onnxruntime.__file__).parent / "tools" / "mobile_helpers" / MOBILE_TABLES[target]
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: onnxruntime {onnxruntime.__version__} does not ship the {target} support table"
        )
    ops = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        pieces = line.strip().split("|")
        if len(pieces) != 4 or ":" not in pieces[1]:
            continue  # not a table row, or the header
        key, note = pieces[1].strip(), pieces[2].strip()
        domain, _, op = key.partition(":")
        ops[key] = MobileOp(key, note.replace("<br/>", " "), note_rules(op, domain, note))
    return MobileTable(target, path, onnxruntime.__version__, ops)


def _quantization_positions(op: str, domain: str) -> list[int]:
    names = _input_names(op, domain)
    return [i for i, n in enumerate(names) if "scale" in n or "zero_point" in n]


def mobile_reasons(facts: NodeFacts, table: MobileTable, max_rank: int | None = None) -> list[Reason]:
    """Why the table's provider would not take the node (notes included as caveats).

    Examples
    --------
    >>> from explorer.targets.support import NodeFacts, TensorFact
    >>> x = TensorFact("x", "float32", (1, 8, 4, 4), False)
    >>> f = NodeFacts("d", "DepthToSpace", "", 17, 13, (x,), (), {"mode": "CRD"})
    >>> [str(r) for r in mobile_reasons(f, mobile_table("nnapi"))]
    ['attribute value: mode=CRD (needs mode in DCR)']
    """
    if facts.function_body is not None:
        return local_function_reasons(facts, table.target)
    row = table.ops.get(f"{facts.domain_name}:{facts.op}")
    if row is None:
        return [Reason(OP_MISSING, f"{facts.qualified_op} is not in ONNX Runtime's {table.target} table")]
    rules = row.rules
    names = _input_names(facts.op, facts.domain_name)
    positions = [names.index(n) for n in rules.constant_names if n in names]
    if rules.constant_quantization:
        positions.extend(_quantization_positions(facts.op, facts.domain_name))
    reasons = rank_reasons(facts, rules.ranks, rules.max_rank if rules.max_rank is not None else max_rank)
    reasons += constant_input_reasons(facts, sorted(set(positions)))
    reasons += attribute_reasons(facts, rules.attributes)
    reasons += [Reason(NOTE, note) for note in rules.notes]
    return reasons

"""Op categories of the graph drawing, read from ``explorer/data/op_categories.json``.

Each op type belongs to one Netron-like category (convolution / linear,
activation, normalization, pooling, tensor / shape, control flow,
quantization, ...) with a legend name and a header colour. Graph inputs and
outputs, constants and collapsed scopes have categories of their own; ops of
non-standard domains that the file does not list are ``custom``, the rest
``other``. The file also lists the key attributes an op box shows.

Examples
--------
>>> category_of({"kind": "op", "op_type": "Conv", "domain": ""})
'conv'
>>> CATEGORIES["conv"].legend
'Convolution / linear'
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

__all__ = [
    "Category",
    "CATEGORIES",
    "KEY_ATTRIBUTES",
    "ATTRIBUTE_LABELS",
    "OpCategories",
    "category_of",
    "load_categories",
]


@dataclass(frozen=True)
class Category:
    """One op category: its id, legend name, header colour and header text colour.

    Attributes
    ----------
    name : str
        Category id (``"conv"``, ``"activation"``, ...).
    legend : str
        Name shown in the figure's legend.
    color : str
        Header fill colour.
    text : str
        Header text colour.
    """

    name: str
    legend: str
    color: str
    text: str

    def to_dict(self) -> dict[str, str]:
        """The category as a JSON-ready dict.

        Examples
        --------
        >>> CATEGORIES["control"].to_dict()["legend"]
        'Control flow'
        """
        return {"name": self.name, "legend": self.legend, "color": self.color, "text": self.text}


@dataclass(frozen=True)
class OpCategories:
    """The data file, read: categories (legend order), op and kind -> category, key attributes.

    Attributes
    ----------
    categories : dict
        Category id -> :class:`Category`, in legend order.
    ops : dict
        Op type -> category id.
    kinds : dict
        Node kind (``"input"``, ``"group"``, ...) -> category id.
    standard_domains : frozenset of str
        Domains whose unlisted ops are ``other`` rather than ``custom``.
    key_attributes : dict
        Op type -> the attributes its box shows, in order.
    attribute_labels : dict
        Attribute name -> the shorter name a box shows (``kernel_shape`` -> ``kernel``).
    other_ir_ops : dict
        IR (``"relax"``) -> its op name (``nn.conv2d`` read as ``conv2d``) -> the ONNX op whose
        category it takes, or a category id where no ONNX op stands for it (``memory``).
    dialects : dict
        MLIR dialect (a node's ``domain`` in an MLIR graph: ``linalg``, ``flow``) -> category id.
    """

    categories: dict[str, Category]
    ops: dict[str, str]
    kinds: dict[str, str]
    standard_domains: frozenset[str]
    key_attributes: dict[str, tuple[str, ...]]
    attribute_labels: dict[str, str]
    other_ir_ops: dict[str, dict[str, str]] = field(default_factory=dict)
    dialects: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The tables as JSON-ready dicts.

        Examples
        --------
        >>> load_categories().to_dict()["ops"]["Conv"]
        'conv'
        """
        return {
            "categories": {k: c.to_dict() for k, c in self.categories.items()},
            "ops": dict(self.ops),
            "kinds": dict(self.kinds),
            "standard_domains": sorted(self.standard_domains),
            "key_attributes": {k: list(v) for k, v in self.key_attributes.items()},
            "attribute_labels": dict(self.attribute_labels),
            "other_ir_ops": {ir: dict(ops) for ir, ops in self.other_ir_ops.items()},
            "dialects": dict(self.dialects),
        }


def load_categories() -> OpCategories:
    """Read ``explorer/data/op_categories.json``.

    Examples
    --------
    >>> tables = load_categories()
    >>> tables.ops["Relu"], tables.kinds["group"], "" in tables.standard_domains
    ('activation', 'group', True)
    """
    text = resources.files("explorer").joinpath("data/op_categories.json").read_text(encoding="utf-8")
    raw: dict[str, Any] = json.loads(text)
    categories: dict[str, Category] = {}
    ops: dict[str, str] = {}
    dialects: dict[str, str] = {}
    for name, spec in raw["categories"].items():
        categories[name] = Category(name, spec["legend"], spec["color"], spec["text"])
        for op in spec["ops"]:
            ops[op] = name
        for dialect in spec.get("dialects", ()):
            dialects[dialect] = name
    return OpCategories(
        categories=categories,
        ops=ops,
        kinds=dict(raw["kinds"]),
        standard_domains=frozenset(raw["standard_domains"]),
        key_attributes={op: tuple(attrs) for op, attrs in raw["key_attributes"].items()},
        attribute_labels=dict(raw["attribute_labels"]),
        other_ir_ops={
            ir: dict(ops) for ir, ops in raw.get("other_ir_ops", {}).items() if not ir.startswith("_")
        },
        dialects=dialects,
    )


_TABLES = load_categories()
CATEGORIES = _TABLES.categories
"""Category id -> :class:`Category`, in legend order."""
KEY_ATTRIBUTES = _TABLES.key_attributes
"""Op type -> the attributes its box shows."""
ATTRIBUTE_LABELS = _TABLES.attribute_labels
"""Attribute name -> its short name in a box."""


def category_of(data: dict[str, Any]) -> str:
    """The category id of a node's (or a collapsed group's) data dict.

    Examples
    --------
    >>> category_of({"kind": "op", "op_type": "Relu", "domain": ""})
    'activation'
    >>> category_of({"kind": "op", "op_type": "MyOp", "domain": "my.domain"})
    'custom'
    >>> category_of({"kind": "input"}), category_of({"kind": "group"})
    ('io', 'group')
    >>> category_of({"kind": "op", "op": "relax.call_tir", "op_type": "fused_conv2d_add_relu", "domain": ""})
    'conv'
    >>> category_of({"kind": "op", "op": "relax.call_tir", "op_type": "batch_norm3", "domain": ""})
    'normalization'
    >>> category_of({"kind": "op", "op": "relax.memory.alloc_storage", "op_type": "memory.alloc_storage"})
    'memory'
    >>> category_of({"kind": "op", "op": "linalg.generic", "op_type": "linalg.generic", "domain": "linalg"})
    'mlir_linalg'
    """
    kind = data.get("kind", "op")
    if kind != "op":
        return _TABLES.kinds.get(kind, "other")
    dialect = _TABLES.dialects.get(data.get("domain") or "")
    if dialect is not None:  # an MLIR op: coloured by its dialect
        return dialect
    op_type = data.get("op_type", "")
    found = _TABLES.ops.get(op_type)
    if found is not None:
        return found
    ir = str(data.get("op") or "").split(".", 1)[0]
    aliases = _TABLES.other_ir_ops.get(ir)
    if aliases:
        onnx_op = _alias(op_type, aliases)
        if onnx_op is not None and onnx_op in _TABLES.ops:
            return _TABLES.ops[onnx_op]
        if onnx_op is not None and onnx_op in _TABLES.categories:  # no ONNX op stands for it
            return onnx_op
    return "other" if (data.get("domain") or "") in _TABLES.standard_domains else "custom"


def _alias(op_type: str, aliases: dict[str, str]) -> str | None:
    """The ONNX op another IR's op stands for: ``nn.conv2d`` and ``conv2d`` -> ``Conv``; a fused
    PrimFunc (``fused_conv2d_add_relu``) -> its first op that has one."""
    name = op_type.rsplit(".", 1)[-1]
    if name.startswith("fused_"):
        parts = name[len("fused_") :].split("_")
        for start in range(len(parts)):
            for stop in range(len(parts), start, -1):
                found = _lookup("_".join(parts[start:stop]), aliases)
                if found is not None:
                    return found
        return None
    return _lookup(name, aliases)


def _lookup(name: str, aliases: dict[str, str]) -> str | None:
    """``conv2d`` and the PrimFuncs LegalizeOps numbers after it (``conv2d1``, ``conv2d12``)."""
    return aliases.get(name) or aliases.get(name.rstrip("0123456789"))

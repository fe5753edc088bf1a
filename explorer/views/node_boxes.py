"""What each drawn box says and how big it is: the header, the body lines and the size in layout units.

An op box reads like Netron's: a header with the op type, coloured by its
category (:mod:`explorer.core.op_categories`), and a body with the weights' shapes
(``W 64×3×7×7``) and the op's key attributes. A weight is named by the input it
feeds (the op schema's name for that slot), also when it reaches the op through a
hidden DequantizeLinear (:func:`explorer.views.qdq.hide_qdq`); its type is shown when it
is not one a float model's weights have (``W int8 64×3×7×7``, ``B int32 64``). A collapsed scope says its
name, node count and op mix; graph inputs and outputs say their shape.

Sizes are in *layout units*: the units of :class:`explorer.views.layout.Layout`
positions, where one layer is ``vgap = 1``. At the *reading zoom*,
:data:`PX_PER_UNIT` pixels per unit, the text has its nominal size
(:data:`HEADER_FONT`, :data:`BODY_FONT`) and fits its box; the figure shows the
text from :data:`TEXT_ZOOM` pixels per unit on.

Examples
--------
>>> from explorer import load
>>> g = load("zoo:resnet18")
>>> text = box_text(g.nx.nodes["/conv1/Conv"])
>>> text.header, text.body[0]
('Conv', 'W 64×3×7×7')
>>> w, h = node_box_size(g.nx.nodes["/conv1/Conv"])
>>> 0.5 < w < 2.5 and 0.2 < h < 0.8
True
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from explorer.core.op_categories import ATTRIBUTE_LABELS, KEY_ATTRIBUTES, category_of
from explorer.core.tensors import format_shape

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = [
    "PX_PER_UNIT",
    "TEXT_ZOOM",
    "HEADER_FONT",
    "BODY_FONT",
    "HEADER_PX",
    "LINE_PX",
    "MAX_BODY_LINES",
    "BoxText",
    "box_text",
    "node_box_size",
    "box_size_px",
    "group_data",
    "dims_text",
]

PX_PER_UNIT = 80.0
"""Reading zoom: pixels per layout unit at which box text has its nominal size and fits its box."""

TEXT_ZOOM = 0.8 * PX_PER_UNIT
"""Box text is shown from this many pixels per layout unit on (the width estimate has some slack)."""

HEADER_FONT = 11
"""Header font size (px)."""

BODY_FONT = 9
"""Body font size (px)."""

HEADER_PX = 18.0
"""Header height (px at the reading zoom)."""

LINE_PX = 12.0
"""Height of one body line (px at the reading zoom)."""

MAX_BODY_LINES = 3
"""At most this many body lines; the rest is in the hover text and the details panel."""

_TERMINALS = ("input", "output")  # graph inputs and outputs drawn in a box (layout.visible) are no ops
_PAD_PX = 6.0  # below the last body line
_FOOT_PX = 5.0  # the body strip of a box without body text (it shows the overlay colour)
_SIDE_PX = 8.0  # left and right of the widest line
_MIN_WIDTH_PX = 56.0
_LINE_CHARS = 26  # body lines are packed up to this many characters
_HEADER_CHAR_PX = 0.6 * HEADER_FONT  # a generous average advance of a sans-serif character
_BODY_CHAR_PX = 0.6 * BODY_FONT


@dataclass(frozen=True)
class BoxText:
    """The text of one box.

    Attributes
    ----------
    header : str
        First line (op type, scope name, input name).
    body : tuple of str
        Further lines (weights, attributes, op mix, shape), at most :data:`MAX_BODY_LINES`.
    category : str
        Op category id (:mod:`explorer.core.op_categories`).
    """

    header: str
    body: tuple[str, ...]
    category: str

    def to_dict(self) -> dict[str, Any]:
        """The text as a JSON-ready dict.

        Examples
        --------
        >>> BoxText("Relu", (), "activation").to_dict()
        {'header': 'Relu', 'body': [], 'category': 'activation'}
        """
        return {"header": self.header, "body": list(self.body), "category": self.category}


def dims_text(shape: Sequence[Any] | None) -> str:
    """A shape the way a box or an edge shows it: ``format_shape(shape, compact=True)``.

    Examples
    --------
    >>> dims_text((64, 3, 7, 7)), dims_text(("batch", None)), dims_text(()), dims_text(None)
    ('64×3×7×7', 'batch×?', 'scalar', '?')
    >>> dims_text(("batch", "unk__1", 256))  # names shape inference made up read as unknown
    'batch×?×256'
    >>> dims_text(("batch", 16, "floor(height/2 - 1/2) + 1"))  # an expression in parentheses
    'batch×16×(floor(height/2 - 1/2) + 1)'
    """
    return format_shape(shape, compact=True)


@lru_cache(maxsize=4096)
def _input_names(op_type: str, domain: str) -> tuple[str, ...]:
    try:
        import onnx.defs

        schema = onnx.defs.get_schema(op_type, domain=domain or "")
    except Exception:  # no schema (custom or contrib op): the tensor's own name is used
        return ()
    return tuple(param.name for param in schema.inputs)


def _value_text(name: str, value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        if value and all(v == value[0] for v in value) and name in ("strides", "pads", "dilations"):
            return _value_text(name, value[0])
        sep = "×" if name == "kernel_shape" else ","
        if len(value) > 6:
            return sep.join(_value_text(name, v) for v in value[:6]) + sep + "…"
        return sep.join(_value_text(name, v) for v in value)
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    text = str(value)
    return text if len(text) <= 14 else text[:13] + "…"


_TRIVIAL = {
    "group": (1,),
    "dilations": (1,),
    "strides": (1,),
    "pads": (0,),
    "transA": (0,),
    "transB": (0,),
    "alpha": (1.0,),
    "beta": (1.0,),
}


def _trivial(name: str, value: Any) -> bool:
    plain = _TRIVIAL.get(name)
    if plain is None:
        return False
    values = value if isinstance(value, (list, tuple)) else [value]
    return all(v in plain for v in values)


_HEADLINE_CATEGORIES = ("conv", "normalization")
"""What a box's body lists first, in this order (each by count): the compute ops (convolutions,
matmuls, attention), then the normalisations, then the rest. A decoder layer reads
``MatMulNBits ×5 / GroupQueryAttention ×1 / SkipSimplified…``: its attention shows, not hidden
behind ``Mul ×2``."""


def _headline_first(entry: tuple[str, int]) -> tuple[int, int]:
    """Sort key of one ``(op type, count)`` of a box's mix: headline categories first, then by count.

    Examples
    --------
    >>> sorted([("Mul", 2), ("GroupQueryAttention", 1), ("MatMulNBits", 5)], key=_headline_first)
    [('MatMulNBits', 5), ('GroupQueryAttention', 1), ('Mul', 2)]
    """
    op, count = entry
    category = category_of({"kind": "op", "op_type": op, "domain": ""})
    rank = (
        _HEADLINE_CATEGORIES.index(category)
        if category in _HEADLINE_CATEGORIES
        else len(_HEADLINE_CATEGORIES)
    )
    return rank, -count


def _pack(items: Iterable[str], lines: int) -> list[str]:
    """Pack short items into at most ``lines`` lines of up to ``_LINE_CHARS`` characters."""
    out: list[str] = []
    for item in items:
        if len(item) > _LINE_CHARS:
            item = item[: _LINE_CHARS - 1] + "…"
        if out and len(out[-1]) + 2 + len(item) <= _LINE_CHARS:
            out[-1] += "  " + item
        elif len(out) < lines:
            out.append(item)
        else:
            last = out[-1]
            out[-1] = last if last.endswith("…") else last[: _LINE_CHARS - 2] + " …"
            break
    return out


_PLAIN_DTYPES = frozenset({"float32", "int64", ""})
"""Weight types a box leaves unsaid: a float model's weights and its shape/axis inputs have them."""


def _weight_slot(data: Mapping[str, Any], name: str) -> int | None:
    """Which input of the node a weight is: by name, or by the tensor it stands for (a hidden DQ's output)."""
    inputs = list(data.get("inputs") or ())
    read_as = (data.get("weight_inputs") or {}).get(name, name)
    for candidate in (name, read_as):
        if candidate in inputs:
            return inputs.index(candidate)
    return None


def _weight_label(data: Mapping[str, Any], name: str, names: Sequence[str]) -> str:
    slot = _weight_slot(data, name)
    if names and slot is not None:
        label = names[min(slot, len(names) - 1)]
    else:
        label = name.rsplit(".", 1)[-1].rsplit("/", 1)[-1]
    return label.removeprefix("input_")


def _op_body(data: Mapping[str, Any]) -> list[str]:
    op_type = data.get("op_type", "")
    names = _input_names(op_type, data.get("domain") or "")
    by_shape: dict[str, list[str]] = {}
    values: list[str] = []
    last = len(data.get("inputs") or ())
    slots = {w.name: _weight_slot(data, w.name) for w in data.get("weights") or ()}
    ordered = sorted(data.get("weights") or (), key=lambda w: last if (k := slots[w.name]) is None else k)
    for weight in ordered:  # in input order (a weight a hidden DQ handed over comes last in the list)
        label = _weight_label(data, weight.name, names)
        if weight.values is not None and 0 < weight.numel <= 3:  # small constants: the value itself
            shown = weight.values[0] if len(weight.shape) == 0 else list(weight.values)
            values.append(f"{label} = {_value_text('', shown)}")
        else:
            dtype = "" if weight.dtype in _PLAIN_DTYPES else f"{weight.dtype} "
            by_shape.setdefault(dtype + dims_text(weight.shape), []).append(label)
    weights = [f"{','.join(labels)} {shape}" for shape, labels in by_shape.items()] + values
    attributes = dict(data.get("attributes") or {})
    subgraphs = set(data.get("subgraphs") or ())
    attrs = [
        f"{ATTRIBUTE_LABELS.get(key, key)} {_value_text(key, attributes[key])}"
        for key in KEY_ATTRIBUTES.get(op_type, ())
        if key in attributes and key not in subgraphs and not _trivial(key, attributes[key])
    ]
    weight_lines = _pack(weights, 2 if attrs else MAX_BODY_LINES)
    return weight_lines + _pack(attrs, MAX_BODY_LINES - len(weight_lines))


def _short(text: str, limit: int = 28) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def box_text(data: Mapping[str, Any]) -> BoxText:
    """The header and body lines of a node's (or a :func:`group_data`) box.

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:resnet18")
    >>> box_text(g.nx.nodes["input:input"])
    BoxText(header='input', body=('batch×3×224×224 float32',), category='io')
    >>> layer1 = [n for n in g.nx if g.nx.nodes[n].get("scope", ())[:1] == ("layer1",)]
    >>> box_text(group_data(g, ("layer1",), layer1))  # doctest: +NORMALIZE_WHITESPACE
    BoxText(header='layer1 · 14 ops', body=('Conv ×4', 'BatchNormalization ×4', 'Relu ×4  Add ×2'),
            category='group')

    A graph input drawn in a box is no op of it:

    >>> box_text(group_data(g, ("layer1",), ["input:input", *layer1])).header
    'layer1 · 14 ops'
    """
    category = category_of(dict(data))
    kind = data.get("kind", "op")
    if kind == "group":
        scope = data.get("scope") or ("?",)
        ops: Mapping[str, int] = data.get("ops") or {}
        # the ops only: graph inputs and outputs drawn in the box (a decoder layer's KV cache) are members too
        count = sum(ops.values()) if "ops" in data else len(data.get("members") or ())
        mix = [f"{op} ×{n}" for op, n in sorted(Counter(ops).most_common(), key=_headline_first)]
        return BoxText(f"{_short(scope[-1])} · {count} ops", tuple(_pack(mix, MAX_BODY_LINES)), category)
    if kind == "op":
        return BoxText(data.get("op_type") or "?", tuple(_op_body(data)), category)
    shape = data.get("shape")
    body = f"{dims_text(shape)} {data.get('dtype') or ''}".strip() if shape is not None else ""
    name = data.get("name") or kind
    return BoxText(_short(str(name)), (body,) if body else (), category)


def box_size_px(text: BoxText) -> tuple[float, float]:
    """Width and height of a box in pixels at the reading zoom.

    Examples
    --------
    >>> box_size_px(BoxText("Relu", (), "activation"))
    (56.0, 23.0)
    """
    width = len(text.header) * _HEADER_CHAR_PX
    if text.body:
        width = max(width, max(len(line) for line in text.body) * _BODY_CHAR_PX)
    height = HEADER_PX + (len(text.body) * LINE_PX + _PAD_PX if text.body else _FOOT_PX)
    return max(_MIN_WIDTH_PX, width + 2 * _SIDE_PX), height


def node_box_size(node_data: Mapping[str, Any]) -> tuple[float, float]:
    """Width and height of a node's box in layout units (one layer is ``vgap = 1``).

    ``node_data`` is a node's data dict (``graph.nx.nodes[node_id]``) or, for a
    collapsed scope, :func:`group_data`. The layout leaves this much room
    around each item; the text fits at :data:`PX_PER_UNIT` pixels per unit.

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:mlp")
    >>> w, h = node_box_size(g.nx.nodes["/fc1/Gemm"])
    >>> round(w, 3), round(h, 3)
    (1.28, 0.6)
    """
    width, height = box_size_px(box_text(node_data))
    return width / PX_PER_UNIT, height / PX_PER_UNIT


def group_data(graph: ModelGraph, scope: Sequence[str], members: Iterable[str]) -> dict[str, Any]:
    """The data dict of a collapsed scope's box: kind, scope, members and op mix.

    Graph inputs and outputs drawn in the box (a decoder layer's ``past_key_values.N``) are
    members but not ops.

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:mlp")
    >>> group_data(g, ("fc1",), ["/fc1/Gemm"])["ops"]
    Counter({'Gemm': 1})
    """
    members = list(members)
    nodes = graph.nx.nodes
    ops = Counter(
        nodes[m].get("op_type") or nodes[m].get("kind", "?")
        for m in members
        if nodes[m].get("kind") not in _TERMINALS
    )
    return {"kind": "group", "scope": tuple(scope), "members": members, "ops": ops}

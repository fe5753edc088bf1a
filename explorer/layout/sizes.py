"""Room for boxes: item sizes from a ``node_size`` rule, and the default rule :func:`label_size`."""

from __future__ import annotations

import hashlib
import math
import weakref
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .value import NodeSize, Size
from .visible import _Visible

if TYPE_CHECKING:
    from ..graph import ModelGraph


__all__ = ["PX_PER_UNIT", "label_size"]


PX_PER_UNIT = 80.0
"""Pixels per layout unit at which :func:`label_size` boxes fit their text (11 px header, 9 px body);
the reading zoom of ``explorer.node_boxes`` (on the drawing branch) uses the same value."""


_HEADER_CHAR = 6.6  # px per character of the 11 px header, at PX_PER_UNIT


_BODY_CHAR = 5.4  # px per character of a 9 px body line


_HEADER_PX, _LINE_PX, _PAD_PX, _SIDE_PX, _MIN_PX = 18.0, 12.0, 6.0, 8.0, 56.0


_LINE_CHARS = 26


def _dims(shape: Sequence[Any] | None) -> str:
    if shape is None:
        return "?"
    return "x".join("?" if d is None else str(d) for d in shape) if len(shape) else "scalar"


def label_size(data: Mapping[str, Any]) -> Size:
    """Default ``(width, height)`` of an item's box in layout units, from its label text.

    The box has a header line (the op type; a collapsed scope's
    ``"name · N ops"``; an input's or output's name) and body lines (an op's
    weight shapes, at most two; a scope's op mix, one line; an input's
    shape). At :data:`PX_PER_UNIT` pixels per unit, an 11 px header and 9 px
    body text fit. ``data`` is a node's data dict (``graph.nx.nodes[node]``)
    or, for a collapsed scope, ``{"kind": "group", "scope": ..., "members":
    ..., "ops": Counter of op types}``: what ``layered(..., node_size=f)``
    passes to ``f``.

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:resnet18")
    >>> w, h = label_size(g.nx.nodes["/conv1/Conv"])
    >>> round(w, 3), round(h, 3)
    (0.875, 0.45)
    >>> label_size({"kind": "op", "op_type": "Relu"})
    (0.7, 0.225)
    """
    kind = data.get("kind", "op")
    body: list[str] = []
    if kind == "group":
        scope = data.get("scope") or ("?",)
        header = f"{scope[-1]} · {len(data.get('members') or ())} ops"
        ops = Counter(data.get("ops") or {})
        mix = "  ".join(f"{op} x{count}" for op, count in ops.most_common(4))
        if mix:
            body.append(mix if len(mix) <= _LINE_CHARS else mix[: _LINE_CHARS - 1] + "…")
    elif kind == "op":
        header = str(data.get("op_type") or "?")
        shapes = list(dict.fromkeys(_dims(w.shape) for w in data.get("weights") or ()))
        body.extend(f"W {shape}" for shape in shapes[:2])
    else:
        header = str(data.get("name") or kind)[:28]
        if data.get("shape") is not None:
            body.append(_dims(data["shape"]))
    width = max(_MIN_PX, len(header) * _HEADER_CHAR + 2 * _SIDE_PX)
    if body:
        width = max(width, max(len(line) for line in body) * _BODY_CHAR + 2 * _SIDE_PX)
    height = _HEADER_PX + (len(body) * _LINE_PX + _PAD_PX if body else 0.0)
    return width / PX_PER_UNIT, height / PX_PER_UNIT


def _item_data(vis: _Visible, i: int) -> Mapping[str, Any]:
    """What a ``node_size`` callable gets for visible item ``i``."""
    item = vis.items[i]
    members = vis.groups.get(item)
    if members is None:
        return vis.graph.nodes[item]
    nodes = vis.graph.nodes
    ops = Counter(nodes[m].get("op_type") or nodes[m].get("kind", "?") for m in members)
    return {"kind": "group", "scope": vis.scopes[item], "members": list(members), "ops": ops}


def _item_sizes(vis: _Visible, node_size: NodeSize, indices: Iterable[int] | None = None) -> list[Size]:
    """``(width, height)`` of the visible items (all, or ``indices``) under a ``node_size`` rule.

    Values that are not two finite numbers >= 0 are refused with an error naming the item.
    """
    given: Mapping[str, Sequence[float]] = {}
    rule: Callable[[Mapping[str, Any]], Sequence[float]] = label_size
    if isinstance(node_size, Mapping):
        given = node_size
    elif callable(node_size):
        rule = node_size
    elif node_size != "auto":
        raise TypeError(f"node_size must be None, 'auto', a mapping or a callable, not {node_size!r}")
    sizes: list[Size] = []
    nodes = vis.graph.nodes
    memo: dict[Hashable, Size] = {}  # label_size of ops by (op type, weight shapes): many ops look alike
    for i in range(len(vis.items)) if indices is None else indices:
        item = vis.items[i]
        value = given.get(item)
        if value is None and rule is label_size and item not in vis.groups:
            data = nodes[item]
            if data.get("kind", "op") == "op":
                key = (data.get("op_type"), *(w.shape for w in data.get("weights") or ()))
                found = memo.get(key)
                if found is None:
                    found = memo[key] = label_size(data)
                sizes.append(found)
                continue
        if value is None:
            value = rule(_item_data(vis, i))
        sizes.append(_pair(item, value))
    return sizes


_LABELS: weakref.WeakKeyDictionary[Any, tuple[int, str]] = weakref.WeakKeyDictionary()


def _pair(item: str, value: Any) -> Size:
    """``value`` as a ``(width, height)`` of finite numbers >= 0, or an error naming ``item``."""
    try:
        w, h = (float(v) for v in value)
    except (TypeError, ValueError):
        raise TypeError(f"node_size gave {value!r} for {item!r}; expected (width, height)") from None
    if not (math.isfinite(w) and math.isfinite(h) and w >= 0 and h >= 0):
        raise ValueError(f"node_size gave {value!r} for {item!r}; sizes must be finite and >= 0")
    return w, h


def _size_key(graph: ModelGraph, node_size: NodeSize) -> Hashable:
    """The cache-key part for ``node_size`` (a callable's key is the sizes it gives)."""
    if node_size is None:
        return None
    if isinstance(node_size, Mapping):
        return ("given", tuple((k, _pair(k, v)) for k, v in node_size.items()), _labels(graph))
    if node_size == "auto":
        return ("auto", _labels(graph))
    raise TypeError(f"node_size must be None, 'auto', a mapping or a callable, not {node_size!r}")


def _labels(graph: ModelGraph) -> str:
    """Hash of what :func:`label_size` reads (op types, weight shapes, I/O names and shapes), memoized."""
    g = graph.nx
    known = _LABELS.get(g)
    if known is not None and known[0] == g.number_of_nodes():
        return known[1]
    digest = hashlib.blake2b(digest_size=16)
    for node, data in g.nodes(data=True):
        weights = ",".join(_dims(w.shape) for w in data.get("weights") or ())
        digest.update(f"{node}\x1f{data.get('op_type')}\x1f{data.get('name')}\x1f{weights}".encode())
        digest.update(f"\x1f{data.get('shape')}\x1e".encode())
    value = digest.hexdigest()
    _LABELS[g] = (g.number_of_nodes(), value)
    return value

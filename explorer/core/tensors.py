"""Plain descriptions of tensors: shapes, byte sizes, small values and statistics.

These are the values stored on graph edges and attached to nodes as weights;
they never hold large arrays. Nothing here reads an IR's protos: the ONNX
adapter reads ONNX element types, ``TypeProto`` shapes and ``TensorProto``
descriptions (``explorer.onnx_adapter.tensor_protos``).

Examples
--------
>>> from explorer.core.tensors import TensorInfo, format_bytes, format_shape
>>> info = TensorInfo("w", (2, 3), "float32", numel=6, nbytes=24)
>>> format_shape(info.shape), format_bytes(info.nbytes), info.loaded
('[2, 3]', '24 B', True)
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = [
    "Dim",
    "Shape",
    "PROTOBUF_LIMIT",
    "over_protobuf_limit",
    "SMALL_VALUE_LIMIT",
    "TensorInfo",
    "array_stats",
    "chunk_stats",
    "STATS_CHUNK",
]

Dim = int | str | None
"""One dimension: a size, a symbolic name, or ``None`` when unknown."""

Shape = tuple[Dim, ...]
"""A tensor shape; ``None`` as a whole means the rank is unknown."""

PROTOBUF_LIMIT = 2**31 - 1
"""Protobuf cannot serialize one message larger than this (2 GiB - 1 byte): the limit of one model file."""


def over_protobuf_limit(message: Any) -> bool:
    """Whether a protobuf message (a model) is too big to serialize as one message.

    ``ByteSize()`` itself raises ``EncodeError`` past the limit in protobuf's C
    implementation, so it cannot be compared with :data:`PROTOBUF_LIMIT` alone.

    Examples
    --------
    >>> from google.protobuf.wrappers_pb2 import BytesValue
    >>> over_protobuf_limit(BytesValue(value=b"weights"))
    False
    """
    from google.protobuf.message import EncodeError

    try:
        return message.ByteSize() >= PROTOBUF_LIMIT
    except EncodeError:
        return True


SMALL_VALUE_LIMIT = 16
"""Tensors with at most this many elements keep their values (shape constants, scales)."""


def dtype_bytes(name: str | None) -> int | None:
    """Bytes of one element of the dtype called ``name`` (numpy's names, plus ``bfloat16``), or None.

    Examples
    --------
    >>> dtype_bytes("float32"), dtype_bytes("bfloat16"), dtype_bytes(None)
    (4, 2, None)
    """
    if not name:
        return None
    if name == "bfloat16":
        return 2
    try:
        return int(np.dtype(name).itemsize)
    except TypeError:
        return None


@dataclass(frozen=True)
class TensorInfo:
    """A constant tensor attached to the node that consumes it.

    Attributes
    ----------
    name : str
        Tensor name in the graph.
    shape : tuple of int
        Dimensions.
    dtype : str
        Element type name, e.g. ``"float32"``.
    numel : int
        Number of elements.
    nbytes : int
        Storage size in bytes.
    source : str
        ``"initializer"`` or ``"constant"`` (the output of a ``Constant`` node).
    values : tuple or None
        The values when the tensor has at most :data:`SMALL_VALUE_LIMIT` elements.
    external : bool
        Whether the data is stored in an external file.
    loaded : bool
        Whether the values are available: in memory, or in a checked external
        file that is read on demand (``False`` with ``external_data=False``).
    stats : dict or None
        ``min``, ``max``, ``mean`` and ``std`` of floating-point data, when asked for.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    numel: int
    nbytes: int
    source: str = "initializer"
    values: tuple[Any, ...] | None = None
    external: bool = False
    loaded: bool = True
    stats: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict.

        Examples
        --------
        >>> TensorInfo("w", (2,), "float32", 2, 8).to_dict()["shape"]
        [2]
        """
        out = asdict(self)
        out["shape"] = list(self.shape)
        out["values"] = None if self.values is None else list(self.values)
        return out


STATS_CHUNK = 1 << 22
"""Elements per chunk when statistics are computed over a large tensor (memory stays flat)."""


def chunk_stats(chunks: Iterable[np.ndarray]) -> dict[str, float] | None:
    """``min``, ``max``, ``mean`` and ``std`` of floating-point values given in chunks, in one pass.

    Chunks are combined with Chan et al.'s pairwise update of mean and squared
    deviations, in float64. Returns ``None`` for non-float or empty data.

    Examples
    --------
    >>> chunk_stats([np.array([1.0], np.float32), np.array([3.0], np.float32)])
    {'min': 1.0, 'max': 3.0, 'mean': 2.0, 'std': 1.0}
    """
    count, mean, squares = 0, 0.0, 0.0
    low, high = math.inf, -math.inf
    for chunk in chunks:
        if chunk.dtype.kind != "f":
            return None
        if chunk.size == 0:
            continue
        low = min(low, float(chunk.min()))
        high = max(high, float(chunk.max()))
        values = chunk.reshape(-1).astype(np.float64)
        n = values.size
        chunk_mean = float(values.mean())
        values -= chunk_mean
        chunk_squares = float(np.dot(values, values))
        total = count + n
        delta = chunk_mean - mean
        mean += delta * n / total
        squares += chunk_squares + delta * delta * count * n / total
        count = total
    if count == 0:
        return None
    return {"min": low, "max": high, "mean": mean, "std": math.sqrt(squares / count)}


def array_stats(array: np.ndarray) -> dict[str, float] | None:
    """``min``, ``max``, ``mean`` and ``std`` of floating-point values, or ``None`` for others.

    Works in chunks of :data:`STATS_CHUNK` elements (see :func:`chunk_stats`).

    Examples
    --------
    >>> array_stats(np.array([1.0, 3.0], np.float32))
    {'min': 1.0, 'max': 3.0, 'mean': 2.0, 'std': 1.0}
    """
    flat = array.reshape(-1)
    return chunk_stats(flat[start : start + STATS_CHUNK] for start in range(0, flat.size, STATS_CHUNK))


def format_shape(shape: Sequence[Dim] | None, *, compact: bool = False) -> str:
    """Format a shape for people: ``[batch, 3, 224, 224]``, or ``batch×3×224×224`` where drawn.

    The one rule for every place that shows a shape (hover, details, summaries, boxes,
    edge labels): ``?`` for an unknown dimension, and a dimension that is an expression
    (``floor(height/2 - 1/2) + 1`` as onnxsim writes it for a strided conv over a symbolic
    size, ``(((height - 1)//2)) + 1`` as the dynamo exporter does) printed with only the
    parentheses its operators need, and in the drawn form inside one pair of parentheses,
    so ``batch×16×(floor(height/2 - 1/2) + 1)`` does not read as arithmetic across
    dimensions. Plain names (``batch``), numbers and calls (``floor(h/2)``) stay as they are.

    Parameters
    ----------
    shape : sequence of int, str or None, or None
        The shape; ``None`` when unknown.
    compact : bool
        The drawn form: dimensions joined by ``×``, ``scalar`` for rank 0, names that shape
        inference invents for unknown sizes (``unk__3``) shown as ``?``, and an expression
        longer than 40 characters (a flattened ``(floor(floor(height/2 - 1/2)/2) + 1)*(...)``)
        as ``(…)``: the full one is in the hover and the details.

    Returns
    -------
    str

    Examples
    --------
    >>> format_shape(("batch", 3, None)), format_shape(None)
    ('[batch, 3, ?]', '?')
    >>> format_shape((64, 3, 7, 7), compact=True), format_shape((), compact=True)
    ('64×3×7×7', 'scalar')
    >>> format_shape(("batch", "unk__1", 256), compact=True)  # invented names read as unknown
    'batch×?×256'
    >>> format_shape(("batch", 16, "floor(height/2 - 1/2) + 1", "floor(w/2)"), compact=True)
    'batch×16×(floor(height/2 - 1/2) + 1)×floor(w/2)'
    >>> format_shape(("batch", "(((height - 1)//2)) + 1", "2*seq"))  # the dynamo exporter's spelling
    '[batch, (height - 1)//2 + 1, 2*seq]'
    >>> format_shape(("batch", "(((height - 1)//2)) + 1", "2*seq"), compact=True)
    'batch×((height - 1)//2 + 1)×(2*seq)'
    >>> area = "(floor(floor(height/2 - 1/2)/2) + 1)*(floor(floor(width/2 - 1/2)/2) + 1)"
    >>> format_shape(("batch", 64, area), compact=True)
    'batch×64×(…)'
    """
    if shape is None:
        return "?"
    if compact:
        if len(shape) == 0:
            return "scalar"
        return "×".join(
            "?" if isinstance(d, str) and _INVENTED.fullmatch(d) else _dim_text(d, wrap=True) for d in shape
        )
    return "[" + ", ".join(_dim_text(d) for d in shape) + "]"


_INVENTED = re.compile(r"unk__\d+")  # dimension names that shape inference invents for unknown sizes
_OPERATOR = re.compile(r"[\s+\-*/%^<>=!&|,]")
_EXPRESSION_LIMIT = 200  # longer dimension names are shown as written
_DRAWN_LIMIT = 40  # longer expressions are drawn as "(…)"


def _dim_text(dim: Dim, *, wrap: bool = False) -> str:
    """One dimension: ``?`` when unknown; when ``wrap`` (drawn), a compound expression in parentheses."""
    if dim is None:
        return "?"
    if isinstance(dim, int):
        return str(dim)
    text, compound = _expression_text(str(dim))
    if not wrap:
        return text
    if len(text) > _DRAWN_LIMIT and _OPERATOR.search(text):
        return "(…)"
    return f"({text})" if compound else text


@lru_cache(maxsize=4096)
def _expression_text(text: str) -> tuple[str, bool]:
    """A symbolic dimension without redundant parentheses, and whether an operator is at its top level.

    sympy (onnxsim, ONNX Runtime's symbolic shape inference) writes ``floor(height/2 - 1/2) + 1``
    and the dynamo exporter ``(((height - 1)//2)) + 1``; both are Python expressions, printed
    again with as few parentheses as the operators need (spaces around ``+`` and ``-`` where the
    name had them). A name that is not such an expression is kept as written.
    """
    if not _OPERATOR.search(text):
        return text, False
    if len(text) <= _EXPRESSION_LIMIT:
        try:
            tree = ast.parse(text.strip(), mode="eval").body
            printed, precedence = _print(tree, spaced=bool(_SPACED.search(text)))
        except (SyntaxError, ValueError, RecursionError, MemoryError, _NotArithmetic):
            pass
        else:
            return printed, precedence < _ATOM
    depth = 0
    for char in text:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif depth == 0 and _OPERATOR.match(char):
            return text, True
    return text, False


def _associates(op: ast.operator, right: ast.expr) -> bool:
    """Whether ``a op (b rop c)`` is ``a op b rop c``: sums of sums and differences, products of products."""
    if not isinstance(right, ast.BinOp):
        return False
    if isinstance(op, ast.Add):
        return isinstance(right.op, ast.Add | ast.Sub)
    return isinstance(op, ast.Mult) and isinstance(right.op, ast.Mult)


class _NotArithmetic(Exception):
    """An expression :func:`_print` does not print (kept as written)."""


_ATOM = 5
_SPACED = re.compile(r"\s[+-]\s")
_BINARY: dict[type, tuple[str, int]] = {
    ast.Add: ("+", 1),
    ast.Sub: ("-", 1),
    ast.Mult: ("*", 2),
    ast.Div: ("/", 2),
    ast.FloorDiv: ("//", 2),
    ast.Mod: ("%", 2),
    ast.Pow: ("**", 4),
}


def _print(node: ast.expr, *, spaced: bool) -> tuple[str, int]:
    """Text and precedence of an arithmetic expression (names, numbers, calls, + - * / // % **)."""
    if isinstance(node, ast.Name):
        return node.id, _ATOM
    if isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value >= 0:
        return repr(node.value), _ATOM
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        return f"{node.func.id}({', '.join(_print(a, spaced=spaced)[0] for a in node.args)})", _ATOM
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        text, inner = _print(node.operand, spaced=spaced)
        return "-" + (text if inner >= 3 else f"({text})"), 3
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        symbol, precedence = _BINARY[type(node.op)]
        if spaced and precedence == 1:
            symbol = f" {symbol} "
        left, lp = _print(node.left, spaced=spaced)
        right, rp = _print(node.right, spaced=spaced)
        right_assoc = isinstance(node.op, ast.Pow)
        if lp < precedence or (right_assoc and lp == precedence):
            left = f"({left})"
        if rp < precedence or (rp == precedence and not right_assoc and not _associates(node.op, node.right)):
            right = f"({right})"
        return f"{left}{symbol}{right}", precedence
    raise _NotArithmetic


def format_bytes(n: float) -> str:
    """Format a byte count for people: ``512 B``, ``1.5 KiB``, ``44.6 MiB``.

    Examples
    --------
    >>> format_bytes(512), format_bytes(1536), format_bytes(46796448)
    ('512 B', '1.5 KiB', '44.6 MiB')
    """
    size = float(n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


__all__ += ["format_shape", "format_bytes", "dtype_bytes"]

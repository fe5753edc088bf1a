"""The graph model's node and edge data, declared once for every IR.

Every node of a :class:`~explorer.core.graph.ModelGraph` (its networkx node data) is made by
:func:`node_data` and every edge by :func:`edge_data`; each IR's adapter fills
them (ONNX: :func:`explorer.onnx_adapter.graph_builder.build_graph`;
Relax: :func:`explorer.lower.tvm.relax_adapter.relax_graph`) with the same keys,
so the layout, figures, diff and widgets read one schema.

Node keys (:data:`NODE_KEYS`):

- ``kind``: ``"op"``, or a tensor node: ``"input"``, ``"output"``, ``"outer"`` (read
  from an enclosing graph), ``"constant"`` (:data:`NODE_KINDS`);
- ``op``: the qualified operator, unique across IRs and domains (``Conv``,
  ``com.microsoft.FusedConv``, later ``relax.nn.conv2d``); ``op_type`` and ``domain`` are
  its two parts as the IR writes them;
- ``name``, ``index`` (position in the IR's node list, -1 for tensor nodes),
  ``attributes`` (decoded), ``inputs`` / ``outputs`` (tensor names), ``scope`` (name-scope
  path, or the fused function a binding belongs to), ``weights`` (TensorInfo tuple),
  ``subgraphs`` (attributes holding nested regions);
- ``shape`` / ``dtype``: the tensor of a tensor node (None on operators);
- ``origin``: ids of the nodes of the IR this node was lowered from (empty for ONNX).

Edge keys (:data:`EDGE_KEYS`): ``tensor``, ``shape``, ``dtype``, ``bytes``, ``slots``
(input positions of the consumer), ``implicit`` (read only inside a nested region).

Examples
--------
>>> data = node_data("op", "FusedConv", "conv1", domain="com.microsoft", index=3)
>>> data["op"], data["shape"], tuple(data) == NODE_KEYS
('com.microsoft.FusedConv', None, True)
>>> edge_data("x", (1, 3), "float32", 12)["slots"]
()
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from explorer.core.errors import UsageError

__all__ = ["NODE_KINDS", "NODE_KEYS", "EDGE_KEYS", "qualified_op", "node_data", "edge_data"]

NODE_KINDS = ("op", "input", "output", "outer", "constant")
"""What a node is: an operator, or one of the tensor nodes."""

NODE_KEYS = (
    "kind",
    "op",
    "op_type",
    "domain",
    "name",
    "index",
    "attributes",
    "inputs",
    "outputs",
    "scope",
    "weights",
    "subgraphs",
    "shape",
    "dtype",
    "origin",
)
"""The keys of every node's data, in this order."""

EDGE_KEYS = ("tensor", "shape", "dtype", "bytes", "slots", "implicit")
"""The keys of every edge's data, in this order."""

_DEFAULT_DOMAINS = ("", "ai.onnx")


def qualified_op(op_type: str, domain: str = "") -> str:
    """The operator's name qualified by its domain (ONNX's default domain stays bare).

    Examples
    --------
    >>> qualified_op("Conv"), qualified_op("Conv", "ai.onnx"), qualified_op("Gelu", "com.microsoft")
    ('Conv', 'Conv', 'com.microsoft.Gelu')
    """
    return op_type if domain in _DEFAULT_DOMAINS else f"{domain}.{op_type}"


def node_data(
    kind: str,
    op_type: str,
    name: str,
    *,
    domain: str = "",
    op: str | None = None,
    index: int = -1,
    attributes: Mapping[str, Any] | None = None,
    inputs: Sequence[str] = (),
    outputs: Sequence[str] = (),
    scope: Sequence[str] = (),
    weights: Iterable[Any] = (),
    subgraphs: Sequence[str] = (),
    shape: Any = None,
    dtype: str | None = None,
    origin: Iterable[str] = (),
) -> dict[str, Any]:
    """A node's data (see the module docstring for each key).

    Parameters
    ----------
    kind : str
        One of :data:`NODE_KINDS`.
    op_type, name : str
        The operator as the IR names it, and the node's name.
    op : str, optional
        The qualified operator; by default :func:`qualified_op` of ``op_type`` and ``domain``.
    **others
        The remaining keys, with empty defaults.

    Returns
    -------
    dict
        With exactly :data:`NODE_KEYS`.

    Examples
    --------
    >>> node_data("input", "Input", "x", outputs=["x"], shape=("batch", 3), dtype="float32")["kind"]
    'input'
    >>> node_data("tensor", "X", "x")
    Traceback (most recent call last):
    ...
    explorer.core.errors.UsageError: node kind must be one of op, input, output, outer, constant, not 'tensor'
    """
    if kind not in NODE_KINDS:
        raise UsageError(f"node kind must be one of {', '.join(NODE_KINDS)}, not {kind!r}")
    return {
        "kind": kind,
        "op": qualified_op(op_type, domain) if op is None else op,
        "op_type": op_type,
        "domain": domain,
        "name": name,
        "index": index,
        "attributes": dict(attributes or {}),
        "inputs": list(inputs),
        "outputs": list(outputs),
        "scope": tuple(scope),
        "weights": tuple(weights),
        "subgraphs": tuple(subgraphs),
        "shape": shape,
        "dtype": dtype,
        "origin": tuple(origin),
    }


def edge_data(
    tensor: str,
    shape: Any,
    dtype: str | None,
    nbytes: int | None,
    *,
    slots: Sequence[int] = (),
    implicit: bool = False,
) -> dict[str, Any]:
    """An edge's data: the tensor it carries, its type and size, the consumer's input slots.

    Examples
    --------
    >>> edge_data("h", ("batch", 8), "float16", None, slots=(0, 1))["slots"]
    (0, 1)
    """
    return {
        "tensor": tensor,
        "shape": shape,
        "dtype": dtype,
        "bytes": nbytes,
        "slots": tuple(slots),
        "implicit": implicit,
    }

"""Everything about one node, for the details panel and the report: attributes, I/O, weights, subgraphs.

Examples
--------
>>> from explorer import load
>>> d = node_details(load("zoo:resnet18"), "/conv1/Conv")
>>> d.op_type, d.weights[0]["shape"]
('Conv', [64, 3, 7, 7])
>>> "min" in d.weights[0]["stats"]
True
"""

from __future__ import annotations

import html
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from explorer.core.tensors import format_bytes, format_shape
from explorer.views.tables import html_table

if TYPE_CHECKING:
    import pandas as pd

    from explorer.core.graph import ModelGraph

__all__ = ["NodeDetails", "node_details", "details_html", "find_tensor", "weight_stats", "STATS_MAX_ELEMENTS"]

STATS_MAX_ELEMENTS = 50_000_000
"""Weights up to this many elements get min/max/mean/std in the details panel."""


@dataclass(frozen=True)
class NodeDetails:
    """One node as the details panel shows it.

    Attributes
    ----------
    node_id, kind, op_type, domain, name : str
        Identity of the node.
    scope : tuple of str
        Name-scope path.
    attributes : dict
        Decoded attributes.
    inputs, outputs : tuple of dict
        ``{"tensor", "shape", "dtype", "peer"}``: the producer (inputs) or the
        consumers (outputs) of each tensor.
    weights : tuple of dict
        ``TensorInfo.to_dict()`` of the constants it reads, with ``stats``.
    subgraphs : tuple of str
        Attribute names holding subgraphs (``then_branch``, ``body``...).
    """

    node_id: str
    kind: str
    op_type: str
    domain: str
    name: str
    scope: tuple[str, ...]
    attributes: dict[str, Any] = field(default_factory=dict)
    inputs: tuple[dict[str, Any], ...] = ()
    outputs: tuple[dict[str, Any], ...] = ()
    weights: tuple[dict[str, Any], ...] = ()
    subgraphs: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict.

        Examples
        --------
        >>> from explorer import load
        >>> node_details(load("zoo:mlp"), "/fc1/Gemm").to_dict()["op_type"]
        'Gemm'
        """
        out = asdict(self)
        out["scope"] = list(self.scope)
        out["inputs"], out["outputs"] = list(self.inputs), list(self.outputs)
        out["weights"], out["subgraphs"] = list(self.weights), list(self.subgraphs)
        return out

    def to_frame(self) -> pd.DataFrame:
        """Inputs, outputs and weights as one table (``role``, ``tensor``, ``shape``, ``dtype``, ``peer``).

        Examples
        --------
        >>> from explorer import load
        >>> node_details(load("zoo:mlp"), "/fc1/Gemm").to_frame().role.tolist()
        ['input', 'output', 'weight', 'weight']
        """
        import pandas as pd

        rows = [{"role": "input", **i} for i in self.inputs] + [{"role": "output", **o} for o in self.outputs]
        rows += [
            {
                "role": "weight",
                "tensor": w["name"],
                "shape": w["shape"],
                "dtype": w["dtype"],
                "peer": w["source"],
            }
            for w in self.weights
        ]
        return pd.DataFrame(rows, columns=["role", "tensor", "shape", "dtype", "peer"])


def find_tensor(graph: ModelGraph, name: str) -> Any | None:
    """The IR's object holding a weight's values (an ONNX ``TensorProto``), or ``None``.

    Examples
    --------
    >>> from explorer import load
    >>> find_tensor(load("zoo:mlp"), "fc1.weight").dims
    [256, 784]
    """
    return graph.adapter.find_tensor(graph, name)


def weight_stats(graph: ModelGraph, name: str) -> dict[str, float] | None:
    """``min``, ``max``, ``mean`` and ``std`` of one weight, read when asked.

    Weights in external files are memory-mapped and read in chunks, so a
    multi-GB tensor costs one pass over its file and little memory. Returns
    ``None`` for non-float weights and for weights whose values are not
    available (``external_data=False``).

    Parameters
    ----------
    graph : ModelGraph
        The graph (or subgraph) holding the weight.
    name : str
        The tensor's name.

    Examples
    --------
    >>> from explorer import load
    >>> stats = weight_stats(load("zoo:mlp"), "fc1.weight")
    >>> sorted(stats)
    ['max', 'mean', 'min', 'std']
    """
    return graph.adapter.weight_stats(graph, name)


def node_details(graph: ModelGraph, node_id: str) -> NodeDetails:
    """Collect everything about one node of a graph.

    Parameters
    ----------
    graph : ModelGraph
        The graph (or subgraph).
    node_id : str
        The node's id.

    Returns
    -------
    NodeDetails

    Examples
    --------
    >>> from explorer import load
    >>> [i["peer"] for i in node_details(load("zoo:mlp"), "/fc1/Gemm").inputs]
    ['/Flatten']
    """
    data = graph.node(node_id)
    nx_graph = graph.nx
    inputs = tuple(
        {"tensor": key, "shape": _list(e["shape"]), "dtype": e["dtype"], "peer": u}
        for u, _, key, e in nx_graph.in_edges(node_id, keys=True, data=True)
    )
    consumers: dict[str, list[str]] = {}
    shapes: dict[str, tuple[Any, Any]] = {}
    for _, v, key, e in nx_graph.out_edges(node_id, keys=True, data=True):
        consumers.setdefault(key, []).append(v)
        shapes[key] = (e["shape"], e["dtype"])
    outputs = tuple(
        {"tensor": t, "shape": _list(shapes[t][0]), "dtype": shapes[t][1], "peer": ", ".join(consumers[t])}
        for t in consumers
    )
    weights = []
    for weight in data.get("weights", ()):
        row = weight.to_dict()
        if weight.loaded and weight.numel <= STATS_MAX_ELEMENTS:
            row["stats"] = weight_stats(graph, weight.name)
        weights.append(row)
    return NodeDetails(
        node_id=node_id,
        kind=data["kind"],
        op_type=data["op_type"],
        domain=data.get("domain", ""),
        name=data.get("name", ""),
        scope=tuple(data.get("scope", ())),
        attributes=dict(data.get("attributes", {})),
        inputs=inputs,
        outputs=outputs,
        weights=tuple(weights),
        subgraphs=tuple(data.get("subgraphs", ())),
    )


def _list(shape: Any) -> list[Any] | None:
    return None if shape is None else list(shape)


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _short(value: Any, limit: int = 120) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def details_html(details: NodeDetails) -> str:
    """Render :class:`NodeDetails` as an HTML fragment (CSS class ``oge-details``).

    Examples
    --------
    >>> from explorer import load
    >>> "<table" in details_html(node_details(load("zoo:mlp"), "/fc1/Gemm"))
    True
    """
    title = f"{_esc(details.op_type)}" + (
        f" <small>({_esc(details.domain)})</small>" if details.domain else ""
    )
    parts = [
        f'<div class="oge-details" data-node="{_esc(details.node_id)}">',
        f'<h4 style="margin:4px 0">{title}</h4>',
        f'<div class="oge-node-name"><code>{_esc(details.name or details.node_id)}</code></div>',
    ]
    if details.scope:
        parts.append(f"<div>scope: <code>{_esc('/'.join(details.scope))}</code></div>")
    if details.attributes:
        rows = [(_esc(k), f"<code>{_esc(_short(v))}</code>") for k, v in sorted(details.attributes.items())]
        parts.append(f"<b>attributes</b>{html_table(rows)}")
    # one column: each tensor's name on its own line (long names wrap anywhere), then its shape
    # (never broken) and where it goes, so a narrow panel reads like a list, not a squeezed table
    for label, entries, peer in (("inputs", details.inputs, "from"), ("outputs", details.outputs, "to")):
        if entries:
            cells = [
                (
                    f"{_tensor_name(e['tensor'])}"
                    f'<div class="oge-meta">{_shape_dtype(e["shape"], e["dtype"])}'
                    + (f" · {peer} <code>{_esc(_short(e['peer'], 80))}</code>" if e.get("peer") else "")
                    + "</div>",
                )
                for e in entries
            ]
            parts.append(f"<b>{label}</b>{html_table(cells)}")
    if details.weights:
        weights = []
        for w in details.weights:
            stats = w.get("stats") or {}
            stat_text = " ".join(f"{k}={v:.3g}" for k, v in stats.items())
            values = "" if w.get("values") is None else f" = <code>{_esc(_short(w['values'], 60))}</code>"
            weights.append(
                (
                    f"{_tensor_name(w['name'])}"
                    f'<div class="oge-meta">{_shape_dtype(w["shape"], w["dtype"])} · '
                    f'<span title="{w["nbytes"]:,} bytes">{format_bytes(w["nbytes"])}</span>{values}</div>'
                    + (f'<div class="oge-meta">{_esc(stat_text)}</div>' if stat_text else ""),
                )
            )
        parts.append(f"<b>weights</b>{html_table(weights)}")
    if details.subgraphs:
        parts.append(f"<b>subgraphs</b>: {_esc(', '.join(details.subgraphs))}")
    parts.append("</div>")
    return "".join(parts)


def _tensor_name(name: str) -> str:
    return f'<code class="oge-tensor">{_esc(_short(name, 120))}</code>'


def _shape_dtype(shape: Any, dtype: str | None) -> str:
    return f'<span class="oge-shape">{_esc(format_shape(shape))} {_esc(dtype or "")}</span>'

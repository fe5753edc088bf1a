"""GraphDiff: what changed between two versions of a model, node by node.

Nodes are matched in rounds, cheapest and surest first:

1. by name, where a real name survives (ids made up from positions are not trusted);
2. by the tensor they produce (most passes keep tensor names even when they drop node names);
3. by op, attributes and input tensors (renamed but otherwise identical nodes);
4. by structure: Weisfeiler-Lehman style labels built from op, attributes,
   weights and the labels of producers and consumers, anchored on the nodes
   already matched; pairs whose label is unique on both sides match.

A matched pair is *kept* when nothing differs, else *changed* (its op
attributes, weights or producers). Unmatched nodes are *added* or *removed*.
A *fusion* is recorded when removed nodes are absorbed into an added or
changed node: "these N nodes became this one" (BatchNormalization folded into
Conv, MatMul + Add into Gemm, Pad into Conv); it is a *fold* when the absorbed
nodes became a constant input of the node (shape chains folded by onnxsim).

Examples
--------
>>> from explorer import load
>>> from explorer import zoo
>>> from explorer.passes import get_pass
>>> before = load("zoo:resnet18")
>>> after = load(get_pass("fuse_bn_into_conv").run(before.model).model)
>>> d = diff(before, after)
>>> d.op_deltas
{'BatchNormalization': -20}
>>> len(d.fusions), d.fusions[0].pattern
(20, 'Conv + BatchNormalization -> Conv')
"""

from __future__ import annotations

import gc
import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from explorer.core.graph import ModelGraph
from explorer.core.graph_memo import PerGraph
from explorer.core.op_deltas import op_deltas

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["diff", "GraphDiff", "NodeChange", "Fusion", "weight_digests"]

_WL_ROUNDS = 3


@dataclass(frozen=True)
class NodeChange:
    """A node present in both graphs whose content differs.

    Attributes
    ----------
    before, after : str
        Node ids in the first and second graph.
    op_type : str
        The op (the same on both sides).
    what : tuple of str
        Which aspects changed: ``"attributes"``, ``"weights"``, ``"inputs"``, and for IRs whose
        scopes are functions (Relax), ``"group"``: the fused function the node belongs to.
    """

    before: str
    after: str
    op_type: str
    what: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict.

        Examples
        --------
        >>> NodeChange("a", "a", "Conv", ("weights",)).to_dict()["what"]
        ['weights']
        """
        return {"before": self.before, "after": self.after, "op_type": self.op_type, "what": list(self.what)}


@dataclass(frozen=True)
class Fusion:
    """Nodes of the first graph that became one node of the second.

    Attributes
    ----------
    into : str
        Node id in the second graph.
    sources : tuple of str
        Node ids in the first graph (the matched counterpart of ``into`` first, if any).
    pattern : str
        Readable form, e.g. ``"Conv + BatchNormalization -> Conv"``.
    kind : str
        ``"fused"``, or ``"folded"`` when the sources became a constant input of ``into``.
    """

    into: str
    sources: tuple[str, ...]
    pattern: str
    kind: str = "fused"

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict.

        Examples
        --------
        >>> Fusion("g", ("m", "a"), "MatMul + Add -> Gemm").to_dict()["sources"]
        ['m', 'a']
        """
        return {"into": self.into, "sources": list(self.sources), "pattern": self.pattern, "kind": self.kind}


@dataclass(frozen=True)
class GraphDiff:
    """The difference between two ModelGraphs (``before`` -> ``after``).

    Attributes
    ----------
    added : tuple of str
        Ids (in ``after``) of operators with no counterpart in ``before``.
    removed : tuple of str
        Ids (in ``before``) of operators with no counterpart in ``after``.
    changed : tuple of NodeChange
        Matched operators whose attributes, weights or producers differ.
    kept : tuple of (str, str)
        Matched operators that did not change.
    renamed : tuple of (str, str)
        Matched operators whose name differs.
    fusions : tuple of Fusion
        Groups of ``before`` nodes that became one ``after`` node.
    op_deltas : dict
        Op type -> change in count over the main graphs' node lists (zeros left out).
    node_delta, param_delta : int
        Change in number of nodes (node list) and of parameters.
    weight_bytes_changed : int
        Bytes of weights in ``after`` whose content did not exist in ``before``.
    matched_by : dict
        How many pairs each matching round found.
    """

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[NodeChange, ...]
    kept: tuple[tuple[str, str], ...]
    renamed: tuple[tuple[str, str], ...]
    fusions: tuple[Fusion, ...]
    op_deltas: dict[str, int]
    node_delta: int
    param_delta: int
    weight_bytes_changed: int
    matched_by: dict[str, int] = field(default_factory=dict)

    @property
    def is_empty(self) -> bool:
        """Whether nothing was added, removed or changed.

        Examples
        --------
        >>> from explorer import load
        >>> diff(load("zoo:mlp"), load("zoo:mlp")).is_empty
        True
        """
        return not (self.added or self.removed or self.changed)

    def status_before(self) -> dict[str, str]:
        """Node id in ``before`` -> ``"removed"``, ``"fused"``, ``"changed"`` or ``"kept"``.

        Examples
        --------
        >>> from explorer import load
        >>> set(diff(load("zoo:mlp"), load("zoo:mlp")).status_before().values())
        {'kept'}
        """
        status = {a: "kept" for a, _ in self.kept}
        status.update({c.before: "changed" for c in self.changed})
        status.update({r: "removed" for r in self.removed})
        for fusion in self.fusions:
            status.update({s: "fused" for s in fusion.sources if status.get(s) == "removed"})
        return status

    def status_after(self) -> dict[str, str]:
        """Node id in ``after`` -> ``"added"``, ``"fused"``, ``"changed"`` or ``"kept"``.

        Examples
        --------
        >>> from explorer import load
        >>> len(diff(load("zoo:mlp"), load("zoo:mlp")).status_after())
        6
        """
        status = {b: "kept" for _, b in self.kept}
        status.update({c.after: "changed" for c in self.changed})
        status.update({a: "added" for a in self.added})
        status.update({f.into: "fused" for f in self.fusions})
        return status

    def counts(self) -> dict[str, int]:
        """Counts of added, removed, modified (changed) and kept operators, and fusions.

        Examples
        --------
        >>> from explorer import load
        >>> diff(load("zoo:mlp"), load("zoo:mlp")).counts()["kept"]
        6
        """
        return {
            "added": len(self.added),
            "removed": len(self.removed),
            "modified": len(self.changed),
            "kept": len(self.kept),
            "fusions": len(self.fusions),
        }

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (the ``onnx-explorer diff --json`` object).

        ``added``/``removed``/``modified``/``kept`` are counts; the ids are under ``nodes``.

        Examples
        --------
        >>> from explorer import load
        >>> sorted(diff(load("zoo:mlp"), load("zoo:mlp")).to_dict())[:4]
        ['added', 'fusions', 'kept', 'matched_by']
        """
        counts = self.counts()
        return {
            "added": counts["added"],
            "removed": counts["removed"],
            "modified": counts["modified"],
            "kept": counts["kept"],
            "fusions": [f.to_dict() for f in self.fusions],
            "op_deltas": dict(self.op_deltas),
            "node_delta": self.node_delta,
            "param_delta": self.param_delta,
            "weight_bytes_changed": self.weight_bytes_changed,
            "renamed": len(self.renamed),
            "matched_by": dict(self.matched_by),
            "nodes": {
                "added": list(self.added),
                "removed": list(self.removed),
                "modified": [c.to_dict() for c in self.changed],
                "renamed": [list(pair) for pair in self.renamed],
            },
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per node of either graph: ``side``, ``node``, ``status``, ``partner``, ``detail``.

        Examples
        --------
        >>> from explorer import load
        >>> diff(load("zoo:mlp"), load("zoo:mlp")).to_frame().columns.tolist()
        ['side', 'node', 'status', 'partner', 'detail']
        """
        import pandas as pd

        partner_of = {a: b for a, b in self.kept} | {c.before: c.after for c in self.changed}
        detail = {c.before: ", ".join(c.what) for c in self.changed}
        fused_into = {s: f.into for f in self.fusions for s in f.sources}
        rows = [
            {
                "side": "before",
                "node": node,
                "status": status,
                "partner": partner_of.get(node) or fused_into.get(node),
                "detail": detail.get(node, ""),
            }
            for node, status in self.status_before().items()
        ]
        patterns = {f.into: f.pattern for f in self.fusions}
        rows += [
            {
                "side": "after",
                "node": node,
                "status": status,
                "partner": None,
                "detail": patterns.get(node, ""),
            }
            for node, status in self.status_after().items()
            if status in ("added", "fused")
        ]
        return pd.DataFrame(rows, columns=["side", "node", "status", "partner", "detail"])


def weight_digests(graph: ModelGraph) -> dict[str, str]:
    """Tensor name -> content digest of every initializer and Constant value of a top-level graph.

    Cached on the graph. Weights in external files are hashed from their files
    (once per file region); tensors whose data is not available get a digest of
    their shape and dtype only.

    Examples
    --------
    >>> from explorer import load
    >>> digests = weight_digests(load("zoo:mlp"))
    >>> len(next(iter(digests.values())))
    32
    """
    return _WEIGHT_DIGESTS(graph)


_WEIGHT_DIGESTS: PerGraph[dict[str, str]] = PerGraph(
    "weight digests", lambda graph: graph.adapter.weight_digests(graph)
)


@dataclass
class _Side:
    """Per-graph facts the matcher needs, computed once (no reference to the graph: it is memoized
    by it, and a value that held its weak key would keep the graph alive)."""

    ops: list[str]
    op_type: dict[str, str]
    attrs: dict[str, str]
    weights: dict[str, tuple[str, ...]]
    producers: dict[str, tuple[str | None, ...]]
    outputs: dict[str, tuple[str, ...]]
    inputs: dict[str, tuple[str, ...]]
    named: set[str]
    successors: dict[str, list[str]]
    predecessors: dict[str, list[str]]
    groups: dict[str, tuple[str, ...]]


def _side(graph: ModelGraph) -> _Side:
    """The matcher's view of a graph, memoized (a timeline diffs each snapshot twice)."""
    return _SIDES(graph)


def _build_side(graph: ModelGraph) -> _Side:
    digests = weight_digests(graph)
    nx_graph = graph.nx
    ops: list[str] = []
    op_type: dict[str, str] = {}
    attrs: dict[str, str] = {}
    weights: dict[str, tuple[str, ...]] = {}
    outputs: dict[str, tuple[str, ...]] = {}
    inputs: dict[str, tuple[str, ...]] = {}
    producer_of: dict[str, str] = {}
    named: set[str] = set()
    groups: dict[str, tuple[str, ...]] = {}
    functions_are_scopes = not graph.adapter.scopes_from_names  # a name scope: renames cover it
    for node, data in nx_graph.nodes(data=True):
        if data["kind"] != "op":
            continue
        ops.append(node)
        if functions_are_scopes:
            groups[node] = tuple(data["scope"])
        op_type[node] = data["op_type"] if not data["domain"] else f"{data['domain']}::{data['op_type']}"
        attrs[node] = repr(sorted(data["attributes"].items()))
        weight_names = {w.name for w in data["weights"]}
        weights[node] = tuple(
            digests.get(name, name) if name in weight_names else "" for name in data["inputs"]
        )
        outputs[node] = tuple(o for o in data["outputs"] if o)
        inputs[node] = tuple(data["inputs"])
        if data["name"] and data["name"] == node:
            named.add(node)
        for out in outputs[node]:
            producer_of[out] = node
    producers = {
        node: tuple(
            producer_of.get(name) if name and not weights[node][i] else None
            for i, name in enumerate(inputs[node])
        )
        for node in ops
    }
    successors: dict[str, list[str]] = {node: [] for node in ops}
    predecessors: dict[str, list[str]] = {node: [] for node in ops}
    for node in ops:
        for src in producers[node]:
            if src is not None and src != node:
                successors[src].append(node)
                predecessors[node].append(src)
    return _Side(
        ops, op_type, attrs, weights, producers, outputs, inputs, named, successors, predecessors, groups
    )


class _Matcher:
    def __init__(self, a: _Side, b: _Side) -> None:
        self.a, self.b = a, b
        self.a2b: dict[str, str] = {}
        self.b2a: dict[str, str] = {}
        self.rounds: dict[str, int] = {}

    def pair(self, x: str, y: str, round_name: str) -> None:
        self.a2b[x] = y
        self.b2a[y] = x
        self.rounds[round_name] = self.rounds.get(round_name, 0) + 1

    def free_a(self) -> list[str]:
        return [n for n in self.a.ops if n not in self.a2b]

    def free_b(self) -> list[str]:
        return [n for n in self.b.ops if n not in self.b2a]

    def by_name(self) -> None:
        for node in self.a.ops:
            if node in self.a.named and node in self.b.named and self.a.op_type[node] == self.b.op_type[node]:
                self.pair(node, node, "name")

    def by_key(self, key_a: Any, key_b: Any, round_name: str) -> None:
        """Match free nodes whose key is unique among the free nodes on both sides.

        ``key_a`` / ``key_b`` map a node id to its key (a dict, or a function).
        """
        get_a = key_a.__getitem__ if isinstance(key_a, dict) else key_a
        get_b = key_b.__getitem__ if isinstance(key_b, dict) else key_b
        index_b: dict[Any, list[str]] = defaultdict(list)
        for node in self.free_b():
            index_b[get_b(node)].append(node)
        index_a: dict[Any, list[str]] = defaultdict(list)
        for node in self.free_a():
            index_a[get_a(node)].append(node)
        for key, nodes in index_a.items():
            partners = index_b.get(key, [])
            if len(nodes) == 1 and len(partners) == 1:
                self.pair(nodes[0], partners[0], round_name)

    def by_output(self) -> None:
        produced_b: dict[tuple[str, str], str] = {}
        for node in self.free_b():
            for out in self.b.outputs[node]:
                produced_b[(self.b.op_type[node], out)] = node
        for node in self.free_a():
            for out in self.a.outputs[node]:
                partner = produced_b.get((self.a.op_type[node], out))
                if partner is not None and partner not in self.b2a:
                    self.pair(node, partner, "output")
                    break

    def wl_labels(self, side: _Side, anchor: dict[str, str]) -> dict[str, str]:
        """Structural labels; matched nodes are labelled by their ``before`` id, so both sides agree."""
        labels = {
            node: "M:" + anchor[node]
            if node in anchor
            else _hash(side.op_type[node], side.attrs[node], side.weights[node])
            for node in side.ops
        }
        for _ in range(_WL_ROUNDS):
            labels = {
                node: labels[node]
                if node in anchor
                else _hash(
                    labels[node],
                    sorted(labels[p] for p in side.predecessors[node]),
                    sorted(labels[s] for s in side.successors[node]),
                )
                for node in side.ops
            }
        return labels

    def structural(self) -> None:
        for _ in range(2):
            before = len(self.a2b)
            anchor_a = {n: n for n in self.a2b}
            anchor_b = {n: self.b2a[n] for n in self.b2a}
            self.by_key(self.wl_labels(self.a, anchor_a), self.wl_labels(self.b, anchor_b), "structure")
            if len(self.a2b) == before:
                break


def _hash(*parts: Any) -> str:
    return hashlib.blake2b(repr(parts).encode(), digest_size=10).hexdigest()


def _base_changes(a: _Side, b: _Side, x: str, y: str) -> list[str]:
    what = []
    if a.attrs[x] != b.attrs[y]:
        what.append("attributes")
    if tuple(w for w in a.weights[x] if w) != tuple(w for w in b.weights[y] if w):
        what.append("weights")
    if a.groups.get(x, ()) != b.groups.get(y, ()):
        what.append("group")
    return what


def _resolver(a: _Side, matcher: _Matcher, fused_into: dict[str, str]) -> Any:
    """Map a ``before`` producer to what stands for it in ``after``.

    Matched nodes map to their partner, fused nodes to the node they became,
    and removed pass-through nodes (one data input, e.g. an eliminated Identity)
    to whatever their own producer maps to.
    """

    def resolve(node: str) -> str:
        seen: set[str] = set()
        while node not in seen:
            seen.add(node)
            if node in matcher.a2b:
                return matcher.a2b[node]
            if node in fused_into:
                return fused_into[node]
            data_inputs = [p for p in a.producers[node] if p is not None]
            if len(data_inputs) != 1:
                break
            node = data_inputs[0]
        return f"?{node}"

    return resolve


def _fusions(
    a: _Side, b: _Side, matcher: _Matcher, removed: set[str], base: dict[str, list[str]]
) -> list[Fusion]:
    producer_a = {out: node for node in removed for out in a.outputs[node]}
    fusions: list[Fusion] = []
    taken: set[str] = set()
    for node in b.ops:
        partner = matcher.b2a.get(node)
        if partner is not None and not base.get(node):
            continue  # only added nodes, or nodes whose attributes/weights changed, absorb others
        group = {producer_a[o] for o in b.outputs[node] if o in producer_a} - taken
        members = set(group) | ({partner} if partner else set())
        grew = True
        while grew:  # the closure of absorption; only neighbours of the group can be absorbed
            grew = False
            near = {p for m in members for p in a.producers[m] if p is not None}
            near.update(c for m in members for c in a.successors[m])
            for candidate in sorted(near & removed - taken - group):
                if _absorbed(a, b, matcher, candidate, members, node):
                    group.add(candidate)
                    members.add(candidate)
                    grew = True
        if not group:
            continue
        taken |= group
        ordered = [partner] if partner else []
        ordered += [n for n in a.ops if n in group]  # node-list order is data-flow order
        kind = "fused"
        if partner is not None:
            fed = {i for i, p in enumerate(a.producers[partner]) if p in group}
            weights_b = b.weights[node]
            if fed and all(i < len(weights_b) and weights_b[i] for i in fed):
                kind = "folded"
        into = _wrapped_op(b, matcher, node) if partner is None else node
        fusions.append(
            Fusion(into, tuple(ordered), f"{_sources_pattern(a, ordered)} -> {b.op_type[into]}", kind)
        )
    return fusions


_PATTERN_OPS = 8
"""Fusions of more nodes name each op once, in data-flow order, and the count (attention is ~50 nodes)."""


def _sources_pattern(a: _Side, ordered: list[str]) -> str:
    ops = [a.op_type[n] for n in ordered]
    if len(ops) <= _PATTERN_OPS:
        return " + ".join(ops)
    return " + ".join(dict.fromkeys(ops)) + f" ({len(ops)} nodes)"


_LAYOUT_OPS = frozenset({"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Cast", "Flatten"})


def _wrapped_op(b: _Side, matcher: _Matcher, node: str) -> str:
    """The contrib op behind an added layout op, else the node itself.

    A rewrite that emits ``Reshape(Transpose(MultiHeadAttention))`` in place of what it
    replaced fused that into the MultiHeadAttention, not into the last Transpose.
    """
    current, seen = node, {node}
    while b.op_type[current] in _LAYOUT_OPS:
        data = [p for p in b.producers[current] if p is not None]
        if len(data) != 1 or data[0] in matcher.b2a or data[0] in seen:
            return node
        current = data[0]
        seen.add(current)
    return current if "::" in b.op_type[current] and current != node else node


def _absorbed(a: _Side, b: _Side, matcher: _Matcher, candidate: str, members: set[str], into: str) -> bool:
    """Whether a removed node was swallowed by the group becoming ``into``."""
    consumers = a.successors[candidate]
    if consumers and all(c in members for c in consumers):
        return True  # it only fed the group (MatMul before the Add that became Gemm, Pad before Conv)
    producers = [p for p in a.producers[candidate] if p is not None]
    if producers and all(p in members for p in producers) and consumers:
        # it sat right after the group, and its consumers now read from `into` (BatchNormalization after Conv)
        return all(c in matcher.a2b and into in b.producers[matcher.a2b[c]] for c in consumers)
    return False


def _param_count(graph: ModelGraph) -> int:
    return graph.summary().params


def _node_list_ops(graph: ModelGraph) -> Counter[str]:
    return graph.op_counts  # the IR's own node list (ONNX: Constant nodes included)


def diff(before: ModelGraph, after: ModelGraph) -> GraphDiff:
    """Compute what changed from ``before`` to ``after``.

    Parameters
    ----------
    before, after : ModelGraph
        Two versions of a model (e.g. snapshots around a pass, or two files).

    Returns
    -------
    GraphDiff

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.passes import get_pass
    >>> a = load("zoo:detection_head", input_shapes={"image": [1, 3, 128, 128]})
    >>> b = load(get_pass("onnxsim").run(a.model).model)
    >>> d = diff(a, b)
    >>> d.op_deltas["Shape"], d.op_deltas["Gather"]
    (-10, -6)
    """
    enabled = gc.isenabled()
    gc.disable()  # the matcher allocates many small objects and no cycles; collections only cost time
    try:
        return _diff(before, after)
    finally:
        if enabled:
            gc.enable()


def _diff(before: ModelGraph, after: ModelGraph) -> GraphDiff:
    a, b = _side(before), _side(after)
    matcher = _Matcher(a, b)
    matcher.by_name()
    matcher.by_output()
    matcher.by_key(
        lambda n: (a.op_type[n], a.attrs[n], a.inputs[n]),
        lambda n: (b.op_type[n], b.attrs[n], b.inputs[n]),
        "inputs",
    )
    matcher.structural()

    removed = [n for n in a.ops if n not in matcher.a2b]
    added = [n for n in b.ops if n not in matcher.b2a]
    base = {y: _base_changes(a, b, x, y) for x, y in matcher.a2b.items()}
    fusions = _fusions(a, b, matcher, set(removed), base)
    resolve = _resolver(a, matcher, {s: f.into for f in fusions for s in f.sources})
    changes: dict[str, tuple[str, ...]] = {}
    for x, y in matcher.a2b.items():
        what = base[y]
        before_inputs = [resolve(p) for p in a.producers[x] if p is not None]
        after_inputs = [q for q in b.producers[y] if q is not None]
        changes[y] = (*what, "inputs") if before_inputs != after_inputs else tuple(what)
    kept = tuple((x, y) for x, y in matcher.a2b.items() if not changes[y])
    changed = tuple(NodeChange(x, y, b.op_type[y], changes[y]) for x, y in matcher.a2b.items() if changes[y])
    renamed = tuple(
        (x, y)
        for x, y in matcher.a2b.items()
        if before.nx.nodes[x]["name"]
        and after.nx.nodes[y]["name"]
        and before.nx.nodes[x]["name"] != after.nx.nodes[y]["name"]
    )

    ops_a, ops_b = _node_list_ops(before), _node_list_ops(after)
    deltas = op_deltas(ops_a, ops_b)
    digests_a = set(weight_digests(before).values())
    new_bytes = 0
    for name, digest in weight_digests(after).items():
        if digest not in digests_a:
            info = after.weights.get(name)
            new_bytes += info.nbytes if info is not None else 0
    return GraphDiff(
        added=tuple(added),
        removed=tuple(removed),
        changed=changed,
        kept=kept,
        renamed=renamed,
        fusions=tuple(fusions),
        op_deltas=deltas,
        node_delta=sum(ops_b.values()) - sum(ops_a.values()),
        param_delta=_param_count(after) - _param_count(before),
        weight_bytes_changed=new_bytes,
        matched_by=dict(matcher.rounds),
    )


_SIDES: PerGraph[_Side] = PerGraph("diff sides", _build_side)

"""The graph as drawn: name scopes collapsed into boxes, edges between items, :func:`auto_collapse`."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from explorer.core.errors import UsageError
from explorer.views.layout.value import Collapse, Scope, group_id

if TYPE_CHECKING:
    import networkx as nx

    from explorer.core.graph import ModelGraph


__all__ = ["auto_collapse", "repeated_depths"]


@dataclass
class _Visible:
    """The graph as drawn: items (nodes or groups) and deduplicated edges between them."""

    items: list[str]
    kinds: list[str]
    index: dict[str, int]
    item_of: dict[str, str]
    edges: list[tuple[int, int]]
    tensors: list[tuple[str, ...]]
    groups: dict[str, tuple[str, ...]]
    scopes: dict[str, Scope]
    collapsed: frozenset[Scope]
    graph: nx.MultiDiGraph = field(repr=False)


def _normalize_collapse(collapse: Collapse) -> int | frozenset[Scope] | None:
    if collapse is None:
        return None
    if isinstance(collapse, bool):
        raise TypeError("collapse must be None, a depth (int >= 1) or an iterable of scope tuples")
    if isinstance(collapse, int):
        if collapse < 1:
            raise UsageError(f"collapse depth must be at least 1, got {collapse}")
        return collapse
    if isinstance(collapse, str):
        raise TypeError("collapse must be None, a depth or an iterable of scope tuples, not a string")
    return frozenset(tuple(s) for s in collapse if len(s) > 0)


def _group_scope(scope: Scope, collapse: int | frozenset[Scope] | None) -> Scope | None:
    """The collapsed scope a node with this scope is drawn in, or None when it is drawn itself."""
    if collapse is None or not scope:
        return None
    if isinstance(collapse, int):
        return scope[:collapse] if len(scope) >= collapse else None
    for depth in range(1, len(scope) + 1):
        if scope[:depth] in collapse:
            return scope[:depth]
    return None


def _visible(graph: ModelGraph, collapse: int | frozenset[Scope] | None) -> _Visible:
    g = graph.nx
    memo: dict[Scope, Scope | None] = {}
    items: list[str] = []
    kinds: list[str] = []
    index: dict[str, int] = {}
    item_of: dict[str, str] = {}
    members: dict[str, list[str]] = {}
    scopes: dict[str, Scope] = {}
    node_group: dict[str, Scope | None] = {}
    for node, data in g.nodes(data=True):
        scope = data.get("scope", ())
        if scope not in memo:
            memo[scope] = _group_scope(scope, collapse)
        node_group[node] = memo[scope]
    sizes = Counter(node_group.values())
    if collapse is not None:
        _absorb_terminals(g, node_group, sizes)
    for node, data in g.nodes(data=True):
        group = node_group[node]
        if group is not None and sizes[group] == 1:
            group = None  # a box of one node is just that node
        if group is None:
            item, kind = node, data.get("kind", "op")
        else:
            item, kind = group_id(group), "group"
            if item not in members:
                members[item] = []
                scopes[item] = group
            members[item].append(node)
        if item not in index:
            index[item] = len(items)
            items.append(item)
            kinds.append(kind)
        item_of[node] = item
    pairs: dict[tuple[int, int], list[str]] = {}
    for u, nbrs in g.adjacency():
        a = index[item_of[u]]
        for v, keys in nbrs.items():
            b = index[item_of[v]]
            if a != b:
                pairs.setdefault((a, b), []).extend(keys)
    collapsed = collapse if isinstance(collapse, frozenset) else frozenset(scopes.values())
    return _Visible(
        items=items,
        kinds=kinds,
        index=index,
        item_of=item_of,
        edges=list(pairs),
        tensors=[tuple(dict.fromkeys(names)) for names in pairs.values()],
        groups={gid: tuple(m) for gid, m in members.items()},
        scopes=scopes,
        collapsed=collapsed,
        graph=g,
    )


def _absorb_terminals(
    g: nx.MultiDiGraph, node_group: dict[str, Scope | None], sizes: Counter[Scope | None]
) -> None:
    """Draw a side input inside the box of its consumers, a side output inside the box of its producer.

    An input (output) of no scope whose consumers (producers) all lie in one collapsed box of
    several nodes goes into that box when the box also reads from (feeds) ops outside it:
    a decoder's ``past_key_values.N`` and ``present.N`` are drawn in layer N's box (which
    reads layer N-1), not as 120 items of their own beside the layers; opening the box (down
    to the node that reads them) shows them beside that node. An input that starts the
    graph (a CNN's image, a decoder's ``input_ids``) stays at the top, where it was.
    """
    terminal = {node for node, kind in g.nodes(data="kind") if kind in ("input", "output")}
    candidates: dict[str, tuple[Scope, bool]] = {}
    for node in terminal:
        if node_group[node] is not None:
            continue
        is_input = g.in_degree(node) == 0
        peers = g.successors(node) if is_input else g.predecessors(node)
        groups = {node_group[peer] for peer in peers}
        if len(groups) == 1:
            (group,) = groups
            if group is not None and sizes[group] > 1:
                candidates[node] = (group, is_input)
    if not candidates:
        return
    fed: set[Scope] = set()  # boxes with a producer outside that is an op
    feeding: set[Scope] = set()  # boxes with a consumer outside that is an op
    for u, v in g.edges():
        a, b = node_group[u], node_group[v]
        if a != b:
            if b is not None and u not in terminal:
                fed.add(b)
            if a is not None and v not in terminal:
                feeding.add(a)
    for node, (group, is_input) in sorted(candidates.items()):
        if group in (fed if is_input else feeding):
            node_group[node] = group
            sizes[group] += 1


def auto_collapse(
    graph: ModelGraph, max_items: int = 300, *, min_items: int = 20, hard_max: int = 1000
) -> int | None:
    """Choose a collapse depth from the scope tree that keeps the view to at most ``max_items`` items.

    A graph lowered below ONNX (``graph.ir`` not ``"onnx"``) whose scopes are fused
    functions opens with them collapsed (depth 1) whatever its size: each box is one kernel,
    and opening it shows what the fusion merged. Otherwise
    returns ``None`` when the graph already has at most ``max_items`` nodes. A bigger graph
    opens at the depth of its repeated blocks when that view fits: the shallowest depth
    where a parent scope has a handful of numbered siblings of one stem
    (``layer.0 .. layer.11``, ``h.0 .. h.11``, ``layer1 .. layer4``, ``model.0 .. model.22``,
    ``dense, dense_1, dense_2``; see :func:`repeated_depths`) holding at least half of the
    graph's nodes together, so a BERT opens with its 12 layers, a ConvNeXt with its 4
    stages, a YOLO with its numbered modules, each opening into its parts (the blocks of
    a stage, the attention and MLP of a layer). A graph with no repeated blocks whose
    view fits opens at the deepest (most detailed) depth whose view fits, or 1 (the most
    collapsed view) when none does; when the depth that fits shows fewer than
    ``min_items`` items (a 50k-node transformer at depth 1 is four boxes: input,
    embeddings, encoder, output), the next depth is taken if it stays under
    ``hard_max`` (the encoder's layers, one box each).

    Parameters
    ----------
    graph : ModelGraph
        The graph.
    max_items : int
        Most visible items (nodes plus boxes) wanted.
    min_items : int
        Fewer items than this is too coarse to be useful.
    hard_max : int
        Most items accepted when going one level finer than ``max_items`` allows.

    Returns
    -------
    int or None
        A value for ``layered(graph, collapse=...)``.

    Examples
    --------
    >>> from explorer import load
    >>> auto_collapse(load("zoo:mlp")) is None
    True
    >>> auto_collapse(load("zoo:transformer"), max_items=30)  # encoder/layers.0 and encoder/layers.1
    2
    >>> auto_collapse(load("zoo:mobilenetv2"), max_items=60)  # features.0 .. features.18
    2
    """
    g = graph.nx
    if not graph.adapter.scopes_from_names and any(scope for _, scope in g.nodes(data="scope", default=())):
        return 1
    if g.number_of_nodes() <= max_items:
        return None
    by_scope = Counter(scope for _, scope in g.nodes(data="scope", default=()))
    for depth in repeated_depths(by_scope):
        if _items_at_depth(by_scope, depth) <= max_items:
            return depth
    deepest = max((len(s) for s in by_scope), default=0)
    for depth in range(deepest, 0, -1):
        if _items_at_depth(by_scope, depth) <= max_items:
            finer = depth + 1
            if (
                _items_at_depth(by_scope, depth) < min_items
                and finer <= deepest
                and _items_at_depth(by_scope, finer) <= hard_max
            ):
                return finer
            return depth
    return 1


_NUMBERED = re.compile(r"^(.*?)[._]?(\d+)$")  # "layer.0", "layer1", "h.3", "dense_2", "0"
_MIN_REPEATS = 3  # numbered siblings of one stem that make a stack of repeated blocks


def repeated_depths(by_scope: Mapping[Scope, int], *, share: float = 0.5) -> list[int]:
    """The collapse depths at which the scope tree has repeated blocks, shallowest first.

    Siblings (children of one parent scope) are repeated blocks when at least three of
    them share a stem and all but possibly one carry a number (``layer.0 .. layer.11``,
    ``layer1 .. layer4``, ``dense, dense_1, dense_2``), or when two such siblings both have
    scopes inside (the two layers of a small encoder; not ``conv1, conv2``). A depth counts
    when the repeated blocks whose scopes have that length hold at least ``share`` of all nodes.

    Parameters
    ----------
    by_scope : mapping of scope tuple to int
        How many nodes each scope holds directly.
    share : float
        Least fraction of the nodes the repeated blocks at a depth must hold.

    Returns
    -------
    list of int
        Depths for ``layered(graph, collapse=...)``.

    Examples
    --------
    >>> tree = {(): 4, ("embeddings",): 3}
    >>> layers = {("encoder", f"layer.{i}", part): 5 for i in range(12) for part in ("attention", "output")}
    >>> tree.update(layers)
    >>> repeated_depths(tree)
    [2]
    >>> repeated_depths({("conv1",): 1, ("conv2",): 1, ("conv3",): 1, ("head",): 10})
    []
    >>> repeated_depths({("layers.0", "attn"): 5, ("layers.1", "attn"): 5, ("norm1",): 5, ("norm2",): 5})
    [1]
    """
    total = sum(by_scope.values())
    if total == 0:
        return []
    subtree: Counter[Scope] = Counter()
    for scope, count in by_scope.items():
        for depth in range(1, len(scope) + 1):
            subtree[scope[:depth]] += count
    stems: dict[tuple[Scope, str], list[Scope]] = {}
    for scope in subtree:
        match = _NUMBERED.match(scope[-1])
        stem = match.group(1) if match else scope[-1]
        stems.setdefault((scope[:-1], stem), []).append(scope)
    parents = {scope[:-1] for scope in subtree}
    covered: Counter[int] = Counter()
    for siblings in stems.values():
        numbered = sum(1 for s in siblings if _NUMBERED.match(s[-1]))
        blocks = len(siblings) >= _MIN_REPEATS or (len(siblings) == 2 and all(s in parents for s in siblings))
        if blocks and numbered >= len(siblings) - 1:
            covered[len(siblings[0])] += sum(subtree[s] for s in siblings)
    return sorted(depth for depth, nodes in covered.items() if nodes >= share * total)


def _items_at_depth(by_scope: Counter[Scope], depth: int) -> int:
    boxes = {scope[:depth] for scope in by_scope if len(scope) >= depth}
    return len(boxes) + sum(count for scope, count in by_scope.items() if len(scope) < depth)

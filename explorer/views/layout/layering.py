"""Layers in linear time: longest path from the inputs, pulled down to the first consumer; cycles broken."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from explorer.views.layout.visible import _Visible

__all__: list[str] = []


def _adjacency(n: int, edges: Sequence[tuple[int, int]]) -> tuple[list[list[int]], list[list[int]]]:
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        succ[a].append(b)
        pred[b].append(a)
    return succ, pred


def _topological(
    n: int, succ: list[list[int]], pred: list[list[int]], rank: Callable[[], Sequence[float]]
) -> list[int]:
    """Kahn's algorithm; when a cycle blocks it, the waiting item of lowest ``rank()`` goes next.

    ``rank`` is called only when there is a cycle to break.
    """
    missing = [len(p) for p in pred]
    order = [i for i in range(n) if missing[i] == 0]
    placed = [False] * n
    for i in order:
        placed[i] = True
    by_rank: list[int] | None = None
    cursor = 0
    head = 0
    while len(order) < n:
        while head < len(order):
            for b in succ[order[head]]:
                missing[b] -= 1
                if missing[b] == 0 and not placed[b]:
                    placed[b] = True
                    order.append(b)
            head += 1
        if len(order) == n:
            break
        if by_rank is None:
            by_rank = sorted(range(n), key=rank().__getitem__)
        while placed[by_rank[cursor]]:
            cursor += 1
        forced = by_rank[cursor]
        placed[forced] = True
        order.append(forced)
    return order


def _layering(
    n: int,
    edges: Sequence[tuple[int, int]],
    rank: Callable[[], Sequence[float]],
    floor: Sequence[int] | None = None,
    pinned: Sequence[bool] | None = None,
) -> tuple[list[int], list[bool]]:
    """Layers (longest path, then pulled down to the first consumer) and which edges point back.

    ``floor`` gives each item a lowest allowed layer (the previous layout's);
    ``pinned`` items are not pulled down.
    """
    succ, pred = _adjacency(n, edges)
    order = _topological(n, succ, pred, rank)
    where = [0] * n
    for position, i in enumerate(order):
        where[i] = position
    back = [where[a] > where[b] for a, b in edges]
    if any(back):
        succ, pred = _adjacency(
            n, [(b, a) if flip else (a, b) for (a, b), flip in zip(edges, back, strict=True)]
        )
    layer = list(floor) if floor is not None else [0] * n
    for a in order:
        below = layer[a] + 1
        for b in succ[a]:
            if layer[b] < below:
                layer[b] = below
    for a in reversed(order):
        if succ[a] and not (pinned is not None and pinned[a]):
            lowest = min(layer[b] for b in succ[a]) - 1
            if lowest > layer[a]:
                layer[a] = lowest
    return layer, back


def _rank_of(vis: _Visible) -> list[float]:
    """Position of each item's earliest member in a topological order of the full graph."""
    import networkx as nx

    position = {node: i for i, node in enumerate(nx.topological_sort(vis.graph))}
    rank = [math.inf] * len(vis.items)
    for node, item in vis.item_of.items():
        i = vis.index[item]
        rank[i] = min(rank[i], position[node])
    return rank

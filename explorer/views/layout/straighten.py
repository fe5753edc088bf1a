"""Straight main paths: x placement by one priority alignment, keeping every layer's order."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import groupby
from operator import itemgetter

import numpy as np

from explorer.views.layout.ordering import _Layers
from explorer.views.layout.visible import _Visible

__all__: list[str] = []


def _slot_of(vis: _Visible, edge_map: Sequence[int] | None = None) -> Callable[[int], float]:
    """Edge index -> the lowest input slot its tensors have at the consumer (inf for boxes).

    ``edge_map`` turns the indices asked for into indices of ``vis.edges``.
    """
    g = vis.graph

    def slot(j: int) -> float:
        a, b = vis.edges[j if edge_map is None else edge_map[j]]
        u, v = vis.items[a], vis.items[b]
        if u in vis.groups or v in vis.groups or v not in g[u]:
            return math.inf
        return min((min(d.get("slots") or (math.inf,)) for d in g[u][v].values()), default=math.inf)

    return slot


def _straighten(graph: _Layers, slot: Callable[[int], float]) -> None:
    """Place every vertex (item or bend) again, keeping each layer's order, so main paths run straight.

    igraph's Brandes-Koepf placement balances four alignments and so bends
    chains sideways (a SiLU block ``Conv -> Sigmoid -> Mul`` zigzags). Here
    one alignment is chosen, by priority, and kept:

    1. Every vertex picks one *main* upper neighbour: a bend, the vertex above
       it on its own edge (so a long edge runs down as one straight lane); an
       item, a producer one layer up (the longest path) rather than the last
       bend of a long edge, one with producers of its own rather than a graph
       input beside it (a decoder layer follows the layer above, not the
       ``past_key_values.N`` it also reads), the lowest input slot first
       (``Add(out, identity)`` follows ``out``).
    2. Layer by layer, alignments are accepted best first (item to item, then
       along long edges, then the ends of long edges; among several consumers
       of one producer, the one whose own chain of main links goes furthest
       down, then the middle one) unless they would cross an accepted one or
       take an upper vertex already taken. Aligned vertices form *blocks*
       that share one x.
    3. Blocks are compacted to the left and to the right, keeping neighbours
       of a layer :meth:`_Placement.sep` apart (``hgap``, or half their widths
       plus ``box_gap`` when wider; bends of edges from the same item may share
       a lane: they are 0 apart), and the two results
       are averaged (both feasible, so the mean is too); then each block is
       pulled towards the median of what its edges connect to, inside the
       room its neighbours leave (:func:`_pull`).

    The order inside every layer is unchanged, so crossings stay as they were.
    """
    n = graph.n
    count = len(graph.layer)
    if count == 0:
        return
    placement = graph.placement
    top, bottom = graph.top, graph.bottom
    layer_of = np.asarray(graph.layer, dtype=np.int64)
    order = np.lexsort((np.asarray(graph.x), layer_of))
    row_of = layer_of[order]
    starts_row = np.ones(count, dtype=bool)
    starts_row[1:] = row_of[1:] != row_of[:-1]
    index = np.arange(count)
    pos = np.empty(count, dtype=np.int64)
    pos[order] = index - np.maximum.accumulate(np.where(starts_row, index, 0))
    pos_l = pos.tolist()

    # 1. the main upper neighbour of every vertex
    want = np.full(count, -1, dtype=np.int64)
    into_bend = bottom >= n
    want[bottom[into_bend]] = top[into_bend]
    segs = np.flatnonzero(~into_bend)
    ends = bottom[segs]
    single = np.bincount(ends, minlength=n)[ends] == 1
    want[ends[single]] = top[segs[single]]
    multi = segs[~single]
    has_upper: list[bool] | None = None
    if len(multi):
        has_upper = (np.bincount(bottom, minlength=count)[:n] > 0).tolist()
        multi = multi[np.argsort(bottom[multi], kind="stable")]
        lookup: dict[int, int] = {}
        pairs = zip(bottom[multi].tolist(), top[multi].tolist(), strict=True)
        for b, group in groupby(pairs, key=itemgetter(0)):
            tops = [t for _, t in group]
            direct = [t for t in tops if t < n]
            if len(direct) > 1 and has_upper is not None:
                inner = [t for t in direct if has_upper[t]]  # a graph input is never the main path
                direct = inner or direct
            if len(direct) == 1:
                want[b] = direct[0]
            elif direct:
                if not lookup:
                    lookup = _edge_of_last_segment(graph)
                want[b] = min(direct, key=lambda u, b=b: (slot(lookup[u * count + b]), pos_l[u]))
            else:
                tops.sort(key=pos_l.__getitem__)
                want[b] = tops[(len(tops) - 1) // 2]
    prio = np.where(index >= n, np.where(want >= n, 2, 1), np.where(want < n, 3, 1))
    prio[want < 0] = 0
    want_l = want.tolist()
    order_l = order.tolist()

    # 2. alignment, best first, without crossings
    reach = [0] * count  # how far the chain of main links goes down from each vertex
    for v in reversed(order_l):
        u = want_l[v]
        if u >= 0 and reach[u] <= reach[v]:
            reach[u] = reach[v] + 1
    align = want.copy()
    claimed = want[want >= 0]
    shared = np.bincount(claimed, minlength=count) > 1
    wanted_sorted = want[order]
    cand = wanted_sorted >= 0
    cand_rows = row_of[cand]
    up_pos = pos[wanted_sorted[cand]]
    clash = (cand_rows[1:] == cand_rows[:-1]) & (up_pos[1:] <= up_pos[:-1])
    bad_rows = set(cand_rows[1:][clash].tolist())
    if bad_rows:
        central: dict[int, float] = {}
        claimants = np.flatnonzero((want >= 0) & shared[np.maximum(want, 0)])
        claimants = claimants[np.lexsort((pos[claimants], want[claimants]))].tolist()
        for _, group in groupby(claimants, key=want_l.__getitem__):
            vs = list(group)
            mid = (len(vs) - 1) / 2
            for i, v in enumerate(vs):
                central[v] = abs(i - mid)
        prio_l = prio.tolist()
        by_row: dict[int, list[int]] = {}
        for v in order[cand][np.isin(cand_rows, list(bad_rows))].tolist():
            by_row.setdefault(graph.layer[v], []).append(v)
        for vs in by_row.values():
            vs.sort(key=lambda v: (-prio_l[v], -reach[v], central.get(v, 0.0), pos_l[v]))
            ups: list[int] = []
            downs: list[int] = []
            for v in vs:
                pu, pv = pos_l[want_l[v]], pos_l[v]
                i = bisect_left(ups, pu)
                if (
                    (i < len(ups) and ups[i] == pu)
                    or (i > 0 and downs[i - 1] > pv)
                    or (i < len(downs) and downs[i] < pv)
                ):
                    align[v] = -1
                    continue
                ups.insert(i, pu)
                downs.insert(i, pv)
    root = np.where(align >= 0, align, index)
    while True:
        jumped = root[root]
        if np.array_equal(jumped, root):
            break
        root = jumped

    # 3. compaction of blocks: left, right, average; then pull
    source = np.full(count, -1, dtype=np.int64)
    bend_count = np.asarray([len(b) for b in placement.bends], dtype=np.int64)
    if count > n:
        sources = np.asarray([a for a, _ in placement.oriented], dtype=np.int64)
        source[n:] = np.repeat(sources, bend_count)
    same = ~starts_row[1:]
    a, b = order[:-1][same], order[1:][same]
    hgap = placement.hgap
    if placement.width:
        width = np.zeros(count)
        width[:n] = placement.width
        gap = np.maximum(hgap, (width[a] + width[b]) / 2 + placement.pad)  # _separation, vectorized
        gap[(width[a] == 0) & (width[b] == 0)] = hgap
    else:
        gap = np.full(len(a), hgap)
    gap[(source[a] >= 0) & (source[a] == source[b])] = 0.0
    blocks = np.flatnonzero(root == index)
    block_of = np.full(count, -1, dtype=np.int64)
    block_of[blocks] = np.arange(len(blocks))
    vb = block_of[root]
    pair = vb[a] * len(blocks) + vb[b]  # one constraint per pair of blocks: the largest gap
    by_pair = np.lexsort((gap, pair))
    pair, gap = pair[by_pair], gap[by_pair]
    last = np.ones(len(pair), dtype=bool)
    last[:-1] = pair[1:] != pair[:-1]
    keys, gaps = pair[last], gap[last]
    x = _compact(len(blocks), keys // len(blocks), keys % len(blocks), gaps)
    _pull(vb, top, bottom, keys // len(blocks), keys % len(blocks), gaps, x)
    xs = np.asarray(x)[vb]
    graph.x = xs.tolist()
    placement.x[:] = graph.x[:n]
    first = graph.first_bend
    for j, k in enumerate(bend_count.tolist()):
        if k:
            placement.bends[j] = graph.x[first[j] : first[j] + k]


def _compact(count: int, lefts: np.ndarray, rights: np.ndarray, gaps: np.ndarray) -> list[float]:
    """x of ``count`` blocks with ``x[right] - x[left] >= gap``: mean of leftmost and rightmost packing."""
    order = np.argsort(lefts, kind="stable")
    tails, lengths = rights[order].tolist(), gaps[order].tolist()
    offsets = np.searchsorted(lefts[order], np.arange(count + 1)).tolist()
    missing = np.bincount(rights, minlength=count).tolist()
    topo = [r for r in range(count) if missing[r] == 0]
    left = [0.0] * count
    head = 0
    while head < len(topo):
        r = topo[head]
        head += 1
        xr = left[r]
        for k in range(offsets[r], offsets[r + 1]):
            s = tails[k]
            if left[s] < xr + lengths[k]:
                left[s] = xr + lengths[k]
            missing[s] -= 1
            if missing[s] == 0:
                topo.append(s)
    span = max(left, default=0.0)
    right = [span] * count
    for r in reversed(topo):
        lo, hi = offsets[r], offsets[r + 1]
        if lo < hi:
            right[r] = min(right[tails[k]] - lengths[k] for k in range(lo, hi))
    return [(lx + rx) / 2 for lx, rx in zip(left, right, strict=True)]


def _edge_of_last_segment(graph: _Layers) -> dict[int, int]:
    """``top * count + bottom`` of each edge's last segment -> edge index."""
    count = len(graph.layer)
    oriented = np.asarray(graph.placement.oriented, dtype=np.int64).reshape(-1, 2)
    k = np.asarray([len(b) for b in graph.placement.bends], dtype=np.int64)
    last = np.where(k > 0, np.asarray(graph.first_bend, dtype=np.int64) + k - 1, oriented[:, 0])
    return dict(zip((last * count + oriented[:, 1]).tolist(), range(len(k)), strict=True))


def _pull(
    block: np.ndarray,
    top: np.ndarray,
    bottom: np.ndarray,
    lefts: np.ndarray,
    rights: np.ndarray,
    gaps: np.ndarray,
    x: list[float],
    passes: int = 2,
) -> None:
    """Move each block towards the median x of the blocks its edges connect it to, within its room.

    ``block`` is the block of every vertex; ``lefts[k]`` must stay ``gaps[k]``
    left of ``rights[k]``. Smaller blocks move first, as far as their
    neighbours in the layers allow (Gauss-Seidel, a few passes).
    """
    bt, bb = block[top], block[bottom]
    cut = bt != bb
    ends = np.concatenate([bt[cut], bb[cut]])
    others = np.concatenate([bb[cut], bt[cut]])
    if not len(ends):
        return
    by = np.argsort(ends, kind="stable")
    ends, others = ends[by], others[by]
    near: dict[int, list[int]] = {}
    bounds = np.flatnonzero(np.r_[True, ends[1:] != ends[:-1], True])
    others_l = others.tolist()
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        near[int(ends[lo])] = others_l[lo:hi]
    below: dict[int, list[tuple[int, float]]] = {}
    above: dict[int, list[tuple[int, float]]] = {}
    for a, b, g in zip(lefts.tolist(), rights.tolist(), gaps.tolist(), strict=True):
        below.setdefault(b, []).append((a, g))
        above.setdefault(a, []).append((b, g))
    size = np.bincount(block, minlength=len(x)).tolist()
    movers = [(r, near[r], below.get(r, ()), above.get(r, ())) for r in sorted(near, key=size.__getitem__)]
    for _ in range(passes):
        moved = False
        for r, others, lefts_r, rights_r in movers:
            xs = [x[o] for o in others]
            xs.sort()
            mid = len(xs) // 2
            target = xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2
            lo, hi = -math.inf, math.inf
            for a, g in lefts_r:
                if x[a] + g > lo:
                    lo = x[a] + g
            for b, g in rights_r:
                if x[b] - g < hi:
                    hi = x[b] - g
            new = hi if target > hi else lo if target < lo else target
            if lo <= hi and abs(new - x[r]) > 1e-9:
                x[r] = new
                moved = True
        if not moved:
            break

"""Memos beside graphs: computed once per graph object, nothing set on the graph, dropped with it."""

from __future__ import annotations

import gc
import weakref

from explorer import load
from explorer.core.diff import diff, weight_digests
from explorer.core.graph_memo import PerGraph
from explorer.views.details import find_tensor


def test_a_value_is_computed_once_per_graph_and_dropped_with_it() -> None:
    calls: list[int] = []
    memo = PerGraph("nodes", lambda g: calls.append(1) or len(g.nx))
    first, second = load("zoo:mlp"), load("zoo:mlp")
    assert memo(first) == memo(first) == memo(second) and calls == [1, 1]
    gone = weakref.ref(first)
    del first
    gc.collect()
    assert gone() is None and len(memo) == 1


def test_diff_and_details_leave_the_graph_as_it_was_and_let_it_go() -> None:
    before, after = load("zoo:resnet18"), load("zoo:resnet18")
    attributes = set(vars(before))
    diff(before, after)
    weight_digests(before)
    assert find_tensor(before, "conv1.weight") is not None
    assert set(vars(before)) == attributes  # no cache attached to the graph object
    gone = weakref.ref(before)
    del before
    gc.collect()
    assert gone() is None  # the memos do not keep a snapshot alive

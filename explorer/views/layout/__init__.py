"""Layered (Sugiyama) layout of a ModelGraph, with collapsible name-scope groups.

The layout runs top to bottom in data-flow order, in five steps:

1. *Layers*, computed here in linear time: longest path from the inputs, then
   every item pulled down to just above its first (highest) consumer, so
   nodes fed only by weights or constants sit next to their consumer instead
   of at the top with edges spanning the whole graph.
2. *Order and x*: python-igraph's C implementation of the Sugiyama method
   (``Graph.layout_sugiyama(layers=..., maxiter=...)``) orders every layer
   and places it with Brandes-Koepf. igraph 1.0 returns the bends of long
   edges (the dummy vertices of its extended graph) as ``edge_routing``;
   they become one bend point per layer crossed, so long edges route around
   items.
3. *Clean-up* (Python, only where needed): vertices igraph put on the same
   spot are pushed apart, and around the layers where edges still cross, our
   own Graphviz-style sweeps (median ordering plus neighbour swaps, keeping
   the best) remove crossings igraph's plain barycenter sweeps leave.
4. *Straight main paths* (``straight=True``, the default): keeping every
   layer's order (so the crossings stay as they are), x is chosen again so
   that each op sits directly below its main producer (a SiLU block
   ``Conv -> Sigmoid -> Mul`` is one column, a ResNet block's and a
   transformer layer's main path one straight line), long edges run down as
   straight side lanes beside what they skip, and edges from one item share
   a lane while they run side by side (:func:`_straighten`).
5. *Stability* (with ``previous=``): items and bends present in the previous
   version keep their layer and x where possible.

Coordinates: ``x`` grows to the right; ``y = -layer * vgap``, so the first
layer is at ``y = 0`` and data flows towards negative ``y``. A plotly figure
can use the positions as they are (no reversed axis) and the graph reads top
to bottom. These are *layout units*: by default neighbours in a layer are at
least ``hgap = 1`` apart and layers ``vgap = 1``. With ``node_size=`` every
item gets a box (``width, height`` in the same units, centred on its
position, in :attr:`Layout.sizes`) and the spacing grows so that boxes never
overlap and edges pass them with ``box_gap`` to spare; :func:`label_size` is
the default size rule, which fits 11 px text at :data:`PX_PER_UNIT` pixels
per unit.

Name scopes (``('encoder', 'layers.0', 'self_attn')``) can be collapsed into
one box each: a visible *item* is either a node id or a group id
``"scope:encoder/layers.0"``. :func:`auto_collapse` picks the depth a big model
opens at: its repeated blocks (:func:`repeated_depths`: a BERT's layers, a YOLO's
numbered modules) when they fit, else a depth that keeps it to a few hundred
items; :func:`expand` and :func:`collapse_group`
open and close one group without laying the whole graph out again.

Every walk is iterative (no recursion), so 100k-node chains lay out.

Examples
--------
>>> from explorer import load
>>> lay = layered(load("zoo:mlp"))
>>> lay.positions["input:input"]
(0.0, 0.0)
>>> all(lay.layers[u] < lay.layers[v] for u, v in lay.edges)
True
>>> count_crossings(lay)
0
"""

from __future__ import annotations

from explorer.views.layout.build import layered
from explorer.views.layout.cache import CACHE_SIZE, clear_cache, graph_fingerprint, layout_digest
from explorer.views.layout.crossings import count_crossings
from explorer.views.layout.incremental import collapse_group, expand
from explorer.views.layout.ordering import MAXITER
from explorer.views.layout.sizes import PX_PER_UNIT, label_size
from explorer.views.layout.value import BOX_GAP, GROUP_PREFIX, Layout, group_id
from explorer.views.layout.visible import auto_collapse, repeated_depths

__all__ = [
    "GROUP_PREFIX",
    "Layout",
    "layered",
    "count_crossings",
    "auto_collapse",
    "repeated_depths",
    "expand",
    "collapse_group",
    "graph_fingerprint",
    "layout_digest",
    "group_id",
    "clear_cache",
    "CACHE_SIZE",
    "MAXITER",
    "BOX_GAP",
    "PX_PER_UNIT",
    "label_size",
]

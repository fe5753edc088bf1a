"""Lowering provenance as Model Explorer's sync-navigation mapping: which nodes of a lowered graph
(TVM Relax bindings and kernels, IREE's MLIR dispatches) came from which ONNX nodes.

Model Explorer's split view syncs a selection between two graphs from an uploaded JSON file
(``SyncNavigationMode.UPLOAD_MAPPING_FROM_COMPUTER``; its web app's
``SyncNavigationService.updateSyncNavigationData`` reads it): ``{"mappingEntries": [{"leftNodeIds":
[...], "rightNodeIds": [...]}]}`` (or one-to-one ``{"mapping": {left: right}}``), and
``disableMappingFallback`` (a node without an entry then maps to nothing rather than to the node of
the same id). An id listed in two entries keeps only the last, so :func:`sync_mapping` makes one
entry per connected group: the ONNX nodes a kernel fused and every lowered node made from them.

Left ids are the ONNX graph's as Model Explorer's ONNX adapter gives them (node names,
:func:`~explorer.overlays.model_explorer.node_key`); right ids are the lowered graph's node ids as
the explorer names them (Relax binding names such as ``lv#2``, MLIR values such as ``%2``): Model
Explorer has no adapter for Relax, so the right side is our graph's naming.

Examples
--------
>>> from explorer import load
>>> from explorer.lower import relax_import
>>> graph = load("zoo:mlp")
>>> relax = relax_import(graph, {"input": [1, 1, 28, 28]}).graph
>>> sync_mapping(graph, relax)["mappingEntries"][1]
{'leftNodeIds': ['/fc1/Gemm'], 'rightNodeIds': ['lv1', 'lv2', 'lv3']}
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from explorer.core.errors import UsageError
from explorer.isolation.io import write_text_atomic
from explorer.overlays.model_explorer import node_key

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph
    from explorer.core.timeline import Snapshot, Timeline

__all__ = ["DEFAULT_STEPS", "sync_mapping", "mapping_step", "write_sync_mapping"]

DEFAULT_STEPS = ("FuseTIR", "flow")
"""The step whose graph the mapping is made from, the first of these a timeline has: TVM's kernels
after ``FuseTIR`` (each binding a call of a fused PrimFunc), IREE's dispatches at ``flow``. Without
any: the last step whose nodes still carry their ``origin``."""


def sync_mapping(source: ModelGraph, lowered: ModelGraph, *, disable_fallback: bool = True) -> dict[str, Any]:
    """Model Explorer's sync mapping from ``source``'s nodes to the ``lowered`` nodes made of them.

    Parameters
    ----------
    source : ModelGraph
        The ONNX graph (the left model).
    lowered : ModelGraph
        A graph of a lower IR whose nodes name their ONNX nodes in ``origin`` (the right model).
    disable_fallback : bool
        Write ``disableMappingFallback``: a node without an entry maps to nothing (ids of the two
        sides are unrelated names).

    Returns
    -------
    dict
        ``{"mappingEntries": [{"leftNodeIds", "rightNodeIds"}, ...], "disableMappingFallback"?}``,
        one entry per group of ONNX nodes lowered together, in the ONNX graph's order.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.lower import relax_pipeline
    >>> graph = load("zoo:mlp")
    >>> fused = relax_pipeline(graph, None, "zero")[-1].graph
    >>> sync_mapping(graph, fused)["mappingEntries"][1]  # the fused matmul+add+relu kernel's call
    {'leftNodeIds': ['/fc1/Gemm'], 'rightNodeIds': ['lv#2']}
    """
    order = {node: i for i, node in enumerate(source.op_nodes())}
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    rights: list[tuple[str, list[str]]] = []
    for node, data in lowered.nx.nodes(data=True):
        origins = [o for o in data.get("origin") or () if o in order]
        if data.get("kind") != "op" or not origins:
            continue
        rights.append((node, origins))
        for other in origins[1:]:
            parent[find(other)] = find(origins[0])
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for node, origins in rights:
        left, right = groups.setdefault(find(origins[0]), ([], []))
        right.append(node)
        left.extend(o for o in origins if o not in left)
    entries = [
        {
            "leftNodeIds": [node_key(source, n) for n in sorted(left, key=order.__getitem__)],
            "rightNodeIds": right,
        }
        for left, right in sorted(groups.values(), key=lambda g: min(order[n] for n in g[0]))
    ]
    mapping: dict[str, Any] = {"mappingEntries": entries}
    if disable_fallback:
        mapping["disableMappingFallback"] = True
    return mapping


def mapping_step(timeline: Timeline, step: str | None = None) -> Snapshot:
    """The snapshot of ``timeline`` a mapping is made from: ``step`` by name, else the first of
    :data:`DEFAULT_STEPS` it has, else its last step whose op nodes carry an ``origin``.

    Raises
    ------
    UsageError
        ``step`` is not a step of the timeline (the message lists them), or no step carries origins.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.lower import relax_pipeline
    >>> mapping_step(relax_pipeline(load("zoo:mlp"), None, "zero")).name
    'FuseTIR'
    """
    names = [s.name for s in timeline.snapshots]
    if step is not None:
        if step not in names:
            raise UsageError(f"no step {step!r} in the lowering; its steps are: {', '.join(names)}")
        return timeline.snapshots[names.index(step)]
    for name in DEFAULT_STEPS:
        if name in names:
            return timeline.snapshots[names.index(name)]
    for snapshot in reversed(timeline.snapshots):
        if any(d.get("origin") for _, d in snapshot.graph.nx.nodes(data=True) if d.get("kind") == "op"):
            return snapshot
    raise UsageError("no step of the lowering names the ONNX nodes its nodes came from (origin)")


def write_sync_mapping(mapping: dict[str, Any] | Sequence[Any], path: str | os.PathLike[str]) -> Path:
    """Write ``mapping`` (:func:`sync_mapping`) as JSON at ``path``, atomically; return the path.

    Examples
    --------
    >>> import os, tempfile
    >>> path = write_sync_mapping({"mappingEntries": []}, os.path.join(tempfile.mkdtemp(), "m.json"))
    >>> path.read_text()
    '{\\n  "mappingEntries": []\\n}\\n'
    """
    return write_text_atomic(json.dumps(mapping, indent=2) + "\n", path)

"""The colours of placements: each partition its own, the CPU fallback grey, nodes a target cannot
run at all red. One palette for every drawing of a partitioning: our graph's partition overlay and
the placement written as Model Explorer node data (:mod:`explorer.overlays.ours`).

Examples
--------
>>> PARTITION_COLORS[0], FALLBACK_COLOR
('#2e7d32', '#b4b4b4')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from explorer.targets.partition import Partitioning

__all__ = ["partition_palette", "FALLBACK_COLOR", "UNSUPPORTED_COLOR", "PARTITION_COLORS"]

FALLBACK_COLOR = "#b4b4b4"
"""Nodes that fall back to the CPU."""
UNSUPPORTED_COLOR = "#c0392b"
"""Nodes a target without a fallback cannot run at all."""
PARTITION_COLORS = ("#2e7d32", "#1565c0", "#8e24aa", "#ef6c00", "#00838f", "#ad1457", "#6d4c41", "#558b2f")
"""Partition colours, in partition order (repeating past the eighth)."""


def partition_palette(p: Partitioning) -> dict[str, str]:
    """Placement (:meth:`~explorer.targets.partition.Partitioning.overlay`'s categories) -> colour.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.targets import get_target, partition
    >>> partition_palette(partition(load("zoo:mlp"), get_target("nnapi")))
    {'CPU': '#b4b4b4'}
    """
    palette = {
        f"partition {i}": PARTITION_COLORS[(i - 1) % len(PARTITION_COLORS)]
        for i in range(1, len(p.groups) + 1)
    }
    if p.fallback is not None:
        palette[p.fallback] = FALLBACK_COLOR
    elif p.fallback_nodes:
        palette["unsupported"] = UNSUPPORTED_COLOR
    return palette

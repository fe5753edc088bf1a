"""Overlays from a diff: each node's diff status, and hover notes linking the nodes of each fusion.

Examples
--------
>>> from explorer.passes.pipeline import run_pipeline
>>> step = run_pipeline("zoo:resnet18", "fuse_bn_into_conv", verify=False).diff(1)
>>> diff_overlay(step, "before")["/bn1/BatchNormalization"]
'fused'
>>> fusion_notes(step)["/conv1/Conv"]
'fused from /conv1/Conv, /bn1/BatchNormalization: Conv + BatchNormalization -> Conv'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from explorer.core.errors import UsageError

if TYPE_CHECKING:
    from explorer.core.diff import GraphDiff

__all__ = ["diff_overlay", "fusion_notes"]


def fusion_notes(diff: GraphDiff, side: str = "after") -> dict[str, str]:
    """Node id -> a hover line linking each fusion's nodes on one side of a diff.

    Examples
    --------
    >>> from explorer.passes.pipeline import run_pipeline
    >>> t = run_pipeline("zoo:resnet18", "fuse_bn_into_conv", verify=False)
    >>> fusion_notes(t.diff(1), "before")["/bn1/BatchNormalization"]
    'fused into /conv1/Conv: Conv + BatchNormalization -> Conv'
    """
    notes: dict[str, str] = {}
    for fusion in diff.fusions:
        if side == "after":
            notes[fusion.into] = f"{fusion.kind} from {', '.join(fusion.sources)}: {fusion.pattern}"
        else:
            for source in fusion.sources:
                notes[source] = f"{fusion.kind} into {fusion.into}: {fusion.pattern}"
    return notes


def diff_overlay(diff: GraphDiff, side: str = "after") -> dict[str, str]:
    """Node id -> diff status, for colouring one side of a diff.

    Parameters
    ----------
    diff : GraphDiff
        The diff.
    side : {"after", "before"}
        ``after``: added / changed / fused / kept; ``before``: removed / changed / fused / kept.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.core.diff import diff
    >>> set(diff_overlay(diff(load("zoo:mlp"), load("zoo:mlp"))).values())
    {'kept'}
    """
    if side not in ("after", "before"):
        raise UsageError(f"side must be 'after' or 'before', not {side!r}")
    return diff.status_after() if side == "after" else diff.status_before()

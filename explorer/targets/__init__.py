"""Targets: which nodes each runtime and accelerator takes, the partitions, and what falls back.

A :class:`Target` (``get_target("qnn-htp")``; every name in :data:`TARGET_NAMES`) judges
each node of a graph: supported, or not with a reason (op missing, opset out of range,
dtype, dynamic shape, attribute value, constant input, rank, input count, import
failed, compile failed); its knowledge is measured from the installed build (ONNX
Runtime's kernel registry, TVM's importer, IREE's importer and compiler) or read from a
published table with its date.
:func:`partition` groups the supported nodes as ONNX Runtime's partitioning does and
counts the tensors crossing between devices; :func:`coverage` sums it up per target and
per op type; :func:`real_assignment` asks ONNX Runtime where it placed each node.

Examples
--------
>>> from explorer import load
>>> p = partition(load("zoo:mlp"), get_target("ort-cpu"))
>>> p.verdict
'all 6 nodes run on CPU'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from explorer.core.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from explorer.targets.assignment import Assignment, compare_assignment, real_assignment
    from explorer.targets.coverage import CoverageReport, TargetCoverage, coverage
    from explorer.targets.partition import Partitioning, Transition, partition
    from explorer.targets.registry import TARGET_NAMES, get_target, list_targets, targets_frame
    from explorer.targets.support import NodeFacts, NodeSupport, Reason, node_facts
    from explorer.targets.target import KnowledgeSource, Target

__all__ = [
    "TARGET_NAMES",
    "get_target",
    "list_targets",
    "targets_frame",
    "Target",
    "KnowledgeSource",
    "NodeFacts",
    "NodeSupport",
    "Reason",
    "node_facts",
    "partition",
    "Partitioning",
    "Transition",
    "coverage",
    "CoverageReport",
    "TargetCoverage",
    "real_assignment",
    "Assignment",
    "compare_assignment",
]

#: Public name -> the module that defines it, imported on first use: a worker that unpickles
#: :func:`explorer.targets.assignment.ort_assignment` imports this package, and must not pay for
#: every target's tables and the partitioner (networkx) with it.
_LAZY = {
    "TARGET_NAMES": "explorer.targets.registry",
    "get_target": "explorer.targets.registry",
    "list_targets": "explorer.targets.registry",
    "targets_frame": "explorer.targets.registry",
    "Target": "explorer.targets.target",
    "KnowledgeSource": "explorer.targets.target",
    "NodeFacts": "explorer.targets.support",
    "NodeSupport": "explorer.targets.support",
    "Reason": "explorer.targets.support",
    "node_facts": "explorer.targets.support",
    "partition": "explorer.targets.partition",
    "Partitioning": "explorer.targets.partition",
    "Transition": "explorer.targets.partition",
    "coverage": "explorer.targets.coverage",
    "CoverageReport": "explorer.targets.coverage",
    "TargetCoverage": "explorer.targets.coverage",
    "real_assignment": "explorer.targets.assignment",
    "Assignment": "explorer.targets.assignment",
    "compare_assignment": "explorer.targets.assignment",
}


lazy_exports(__name__, _LAZY)

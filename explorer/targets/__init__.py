"""Targets: which nodes each runtime and accelerator takes, the partitions, and what falls back.

A :class:`Target` (``get_target("qnn-htp")``; every name in :data:`TARGET_NAMES`) judges
each node of a graph: supported, or not with a reason (op missing, opset out of range,
dtype, dynamic shape, attribute value, constant input, rank, input count, import
failed); its knowledge is measured from the installed build (ONNX Runtime's kernel
registry, TVM's importer) or read from a published table with its date.
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

from .assignment import Assignment, compare_assignment, real_assignment
from .coverage import CoverageReport, TargetCoverage, coverage
from .partition import Partitioning, Transition, partition
from .registry import TARGET_NAMES, get_target, list_targets, targets_frame
from .support import NodeFacts, NodeSupport, Reason, node_facts
from .target import KnowledgeSource, Target

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

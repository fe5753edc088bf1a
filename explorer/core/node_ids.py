"""Node ids of the graph model that are not operators: graph inputs, outputs, outer-scope values, constants.

An operator's id is its node name (or ``NAME#INDEX`` / ``OPTYPE#INDEX``); the other nodes
of a :class:`~explorer.core.graph.ModelGraph` carry one of these prefixes before a tensor name.
Modules that only read ids (the summary, figures, details) import them from here rather
than from the graph model.

Examples
--------
>>> INPUT_PREFIX + "x", is_tensor_node("output:y"), is_tensor_node("/conv1/Conv")
('input:x', True, False)
"""

from __future__ import annotations

__all__ = ["INPUT_PREFIX", "OUTPUT_PREFIX", "OUTER_PREFIX", "CONSTANT_PREFIX", "is_tensor_node"]

INPUT_PREFIX = "input:"
"""Node-id prefix of graph inputs."""
OUTPUT_PREFIX = "output:"
"""Node-id prefix of graph outputs."""
OUTER_PREFIX = "outer:"
"""Node-id prefix of values a subgraph reads from its enclosing graph."""
CONSTANT_PREFIX = "const:"
"""Node-id prefix of initializers when constants are drawn as nodes."""

_PREFIXES = (INPUT_PREFIX, OUTPUT_PREFIX, OUTER_PREFIX, CONSTANT_PREFIX)


def is_tensor_node(node_id: str) -> bool:
    """Whether a node id names a tensor node (input, output, outer value, constant), not an operator.

    Examples
    --------
    >>> is_tensor_node("const:w"), is_tensor_node("Relu#3")
    (True, False)
    """
    return node_id.startswith(_PREFIXES)

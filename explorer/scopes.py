"""Name scopes: the module hierarchy exporters encode in node names.

PyTorch writes ``/encoder/layers.0/self_attn/MatMul``, TensorFlow/Keras
(tf2onnx) writes ``model/dense/MatMul`` or ``StatefulPartitionedCall/model/dense/BiasAdd``,
older exporters write ``layer1.0.conv1.Conv``, and Paddle (paddle2onnx) writes
``p2o.Conv.3`` with meaningful output names such as ``conv2d_1.tmp_0``.
:func:`scope_of` turns each into a tuple of scope names (the op's own name is
dropped), so the graph view can collapse a scope into one box.

Examples
--------
>>> scope_of("/model.0/conv/Conv")
('model.0', 'conv')
>>> scope_of("model/dense/MatMul")
('model', 'dense')
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["scope_of"]

_PADDLE_NODE = re.compile(r"^p2o\.[A-Za-z0-9_]+\.\d+$")
_PADDLE_TMP = re.compile(r"\.tmp_\d+$")


def scope_of(name: str, outputs: Sequence[str] = ()) -> tuple[str, ...]:
    """Return the name-scope path of a node.

    Parameters
    ----------
    name : str
        The node's name (may be empty).
    outputs : sequence of str
        The node's output names; used when the node name carries no scope
        (Paddle's ``p2o.Op.N`` names, or no name at all).

    Returns
    -------
    tuple of str
        Outermost scope first; empty when the name has no hierarchy.

    Examples
    --------
    >>> scope_of("/encoder/layers.0/self_attn/MatMul_1")
    ('encoder', 'layers.0', 'self_attn')
    >>> scope_of("StatefulPartitionedCall/model/conv2d/Conv2D__6")
    ('StatefulPartitionedCall', 'model', 'conv2d')
    >>> scope_of("backbone.layer1.0.conv1.Conv")
    ('backbone', 'layer1', '0', 'conv1')
    >>> scope_of("p2o.Conv.3", ["conv2d_1.tmp_0"])
    ('conv2d_1',)
    >>> scope_of("p2o.Shape.0", ["p2o.Shape.1"])
    ()
    >>> scope_of("Relu_12")
    ()
    """
    if name and _PADDLE_NODE.match(name):
        return _paddle_scope(outputs)
    if "/" in name:
        parts = [p for p in name.split("/") if p]
        return tuple(parts[:-1])
    if "." in name:
        parts = [p for p in name.split(".") if p]
        return tuple(parts[:-1])
    if not name and outputs:
        return _paddle_scope(outputs) if _PADDLE_TMP.search(outputs[0]) else ()
    return ()


def _paddle_scope(outputs: Sequence[str]) -> tuple[str, ...]:
    """Scope from a Paddle output name (``conv2d_1.tmp_0`` -> ``conv2d_1``); helpers (``p2o.*``) get none."""
    for out in outputs:
        if out and _PADDLE_TMP.search(out) and not out.startswith("p2o."):
            return (_PADDLE_TMP.sub("", out),)
    return ()

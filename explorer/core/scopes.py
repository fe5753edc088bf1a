"""Name scopes: the module hierarchy exporters encode in node names.

PyTorch writes ``/encoder/layers.0/self_attn/MatMul``, TensorFlow/Keras
(tf2onnx) writes ``model/dense/MatMul`` or ``StatefulPartitionedCall/model/dense/BiasAdd``,
older exporters write ``layer1.0.conv1.Conv``, and Paddle (paddle2onnx) writes
``p2o.Conv.3`` with meaningful output names such as ``conv2d_1.tmp_0``.
:func:`scope_of` turns each into a tuple of scope names (the op's own name is
dropped), so the graph view can collapse a scope into one box.

PyTorch's dynamo exporter (``torch.onnx.export(..., dynamo=True)``) names nodes
``node_linear_12`` and keeps the module path in each node's
``pkg.torch.onnx.name_scopes`` metadata, as qualified names
(``['', 'encoder', 'encoder.layer.0', ...]``). :func:`node_scope` reads it and
spells it as the classic exporter does (``('encoder', 'layer.0', ...)``), so one
model has the same scopes whichever exporter wrote it.

Examples
--------
>>> scope_of("/model.0/conv/Conv")
('model.0', 'conv')
>>> scope_of("model/dense/MatMul")
('model', 'dense')
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onnx import NodeProto

__all__ = ["node_scope", "scope_of", "torch_name_scopes"]

TORCH_NAME_SCOPES = "pkg.torch.onnx.name_scopes"
"""The node metadata key where the dynamo exporter writes the module path."""
_TORCH_NO_MODULE = "_empty_nn_module_stack"  # prefix of the pseudo-module of nodes outside any module

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


def torch_name_scopes(value: str) -> tuple[str, ...] | None:
    """The scope of a dynamo-exported node from its ``pkg.torch.onnx.name_scopes`` metadata value.

    The value lists the root module (``''``), each submodule by its qualified name and
    last the aten op. Each submodule is named as the classic exporter names it: from its
    last non-numeric part on (``encoder.layer.0`` -> ``layer.0``, ``stages.0`` ->
    ``stages.0``, ``features.1.conv.0.0`` -> ``conv.0.0``).

    Parameters
    ----------
    value : str
        The metadata value, a Python list literal.

    Returns
    -------
    tuple of str or None
        Outermost scope first (empty for an op of the root module or of no module);
        ``None`` when the value is not a list of names.

    Examples
    --------
    >>> torch_name_scopes("['', 'encoder', 'encoder.layer.0', 'encoder.layer.0.attention', 'linear_3']")
    ('encoder', 'layer.0', 'attention')
    >>> torch_name_scopes("['', 'stages', 'stages.0', 'stages.0.blocks', 'stages.0.blocks.1', 'conv2d']")
    ('stages', 'stages.0', 'blocks', 'blocks.1')
    >>> torch_name_scopes("['_empty_nn_module_stack_from_metadata_hook', 'sym_size_int_18']")
    ()
    >>> torch_name_scopes("not a list") is None
    True
    """
    try:
        parts = ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
        return None
    if parts and parts[0].startswith(_TORCH_NO_MODULE):
        return ()
    return tuple(_unqualified(p) for p in parts[:-1] if p)


def _unqualified(qualified: str) -> str:
    """A module's name from its last non-numeric part on, as ``torch.onnx``'s classic exporter writes it."""
    atoms = qualified.split(".")
    for i in range(len(atoms) - 1, -1, -1):
        if not atoms[i].isdigit():
            return ".".join(atoms[i:])
    return qualified


def node_scope(node: NodeProto) -> tuple[str, ...]:
    """The name-scope path of an ONNX node, from the dynamo exporter's metadata or from its name.

    Parameters
    ----------
    node : onnx.NodeProto
        The node.

    Returns
    -------
    tuple of str
        As :func:`scope_of`; a node with ``pkg.torch.onnx.name_scopes`` metadata gets
        :func:`torch_name_scopes` of it.

    Examples
    --------
    >>> from onnx import helper
    >>> node = helper.make_node("MatMul", ["x", "w"], ["y"], name="node_linear_3")
    >>> node_scope(node)
    ()
    >>> helper.set_metadata_props(node, {TORCH_NAME_SCOPES: "['', 'encoder', 'encoder.layer.0', 'linear_3']"})
    >>> node_scope(node)
    ('encoder', 'layer.0')
    >>> node_scope(helper.make_node("Relu", ["y"], ["z"], name="/encoder/layer.0/act/Relu"))
    ('encoder', 'layer.0', 'act')
    """
    for prop in node.metadata_props:
        if prop.key == TORCH_NAME_SCOPES:
            scope = torch_name_scopes(prop.value)
            if scope is not None:
                return scope
            break
    return scope_of(node.name, node.output)

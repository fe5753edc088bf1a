"""A model named the way PyTorch's dynamo exporter names it, built from a classic-exporter one.

``torch.onnx.export(..., dynamo=True)`` names nodes ``node_Conv_12`` and keeps the module path
only in each node's ``pkg.torch.onnx.name_scopes`` metadata, as qualified module names
(``['', 'encoder', 'encoder.layers.0', 'encoder.layers.0.self_attn', 'linear_3']``).
:func:`dynamo_style` rewrites a model whose names carry the classic exporter's scopes
(``/encoder/layers.0/self_attn/MatMul``, as :mod:`explorer.zoo` writes them) that way, so the
scope logic is tested on the base install, without torch.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx
from onnx import helper

from explorer.core.scopes import TORCH_NAME_SCOPES, scope_of

__all__ = ["dynamo_style", "qualified_names"]


def qualified_names(scope: Sequence[str]) -> list[str]:
    """The qualified module names of a classic-exporter scope, outermost first.

    ``("layer1", "layer1.0", "conv1")`` -> ``["layer1", "layer1.0", "layer1.0.conv1"]``;
    ``("encoder", "layers.0")`` -> ``["encoder", "encoder.layers.0"]``;
    ``("features", "features.1", "conv", "conv.0", "conv.0.0")`` ->
    ``[..., "features.1.conv.0", "features.1.conv.0.0"]``.
    """
    names: list[str] = []
    for k, part in enumerate(scope):
        if not names:
            names.append(part)
            continue
        parent, last = names[-1], scope[k - 1]
        if part.startswith(last + "."):  # a numbered child of a called container: "layer1.0"
            names.append(parent[: len(parent) - len(last)] + part)
        else:
            names.append(f"{parent}.{part}")
    return names


def dynamo_style(model: onnx.ModelProto, *, outside: int = 0) -> onnx.ModelProto:
    """A copy with dynamo's node names and the scopes in ``pkg.torch.onnx.name_scopes`` only.

    ``outside`` nodes (the first ones) get the metadata dynamo writes for nodes outside any
    module (``['_empty_nn_module_stack_from_metadata_hook', 'sym_size_int_3']``).
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for i, node in enumerate(out.graph.node):
        scope = scope_of(node.name, node.output)
        if i < outside:
            value = ["_empty_nn_module_stack_from_metadata_hook", f"sym_size_int_{i}"]
        else:
            value = ["", *qualified_names(scope), f"{node.op_type.lower()}_{i}"]
        node.name = f"node_{node.op_type}_{i}"
        helper.set_metadata_props(node, {TORCH_NAME_SCOPES: repr(value)})
    return out

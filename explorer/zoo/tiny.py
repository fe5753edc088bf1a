"""The tiniest valid model, for examples that need just some model: :func:`single_op`.

Not a registered zoo model (:func:`explorer.zoo.names` leaves it out): it carries no zoo
metadata and is not one of the architectures every runtime is tested on.

Examples
--------
>>> from explorer import zoo
>>> [n.op_type for n in zoo.single_op().graph.node]
['Relu']
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx
from onnx import TensorProto, helper

__all__ = ["single_op"]


def single_op(
    op_type: str = "Relu",
    shape: Sequence[int | str] = (1, 4),
    *,
    node_name: str = "",
    opset: int = 17,
) -> onnx.ModelProto:
    """A model of one operator: float32 input ``x`` of ``shape``, output ``y`` of the same shape.

    Meant for operators with one input and an output shaped like it (``Relu``, ``Neg``,
    ``Sigmoid`` ...); the model is valid for those.

    Parameters
    ----------
    op_type : str
        The operator (default domain).
    shape : sequence of int or str
        Dimensions of ``x`` and ``y``; a string is a symbolic dimension (``dim_param``).
    node_name : str
        The node's name; empty leaves it unnamed.
    opset : int
        The default domain's opset version; the IR version is the lowest that allows it.

    Returns
    -------
    onnx.ModelProto
        A new model with graph ``single_op``.

    Examples
    --------
    >>> import onnx
    >>> from explorer import zoo
    >>> model = zoo.single_op("Neg", ("n", 3), node_name="/act/Neg")
    >>> onnx.checker.check_model(model, full_check=True)
    >>> node = model.graph.node[0]
    >>> node.op_type, node.name, list(node.input), list(node.output)
    ('Neg', '/act/Neg', ['x'], ['y'])
    >>> [d.dim_param or d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    ['n', 3]
    """
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))
    node = helper.make_node(op_type, ["x"], ["y"], name=node_name or None)
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(helper.make_graph([node], "single_op", [x], [y]), opset_imports=opsets)
    model.ir_version = helper.find_min_ir_version_for(opsets)
    return model

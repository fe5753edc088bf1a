"""The machinery every contrib decomposition shares: a writer of the standard nodes replacing one node.

A rule (``rule(writer)``) reads the node being replaced (``writer.node``), adds standard nodes
with :meth:`Writer.op` and new weights with :meth:`Writer.initializer`, and raises :class:`Keep`
when the node has no exact standard form; :mod:`explorer.passes.contrib_decompositions` runs the
rules and splices the result into the model.

Examples
--------
>>> from onnx import helper
>>> from explorer.core.unique_names import UniqueNames
>>> node = helper.make_node("QuickGelu", ["x"], ["y"], name="/act/QuickGelu", domain="com.microsoft")
>>> w = Writer(node, UniqueNames({"x", "y"}), {"x": (2, 1)}, opset=17)
>>> w.op("Sigmoid", ["x"], "y"), [n.name for n in w.nodes]
('y', ['/act/Sigmoid'])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper

from explorer.core.unique_names import UniqueNames

__all__ = ["Writer", "Keep", "Rule", "node_attrs"]

Shape = tuple[int | str | None, ...]


class Keep(Exception):
    """A node cannot be decomposed exactly; the message says why.

    Examples
    --------
    >>> str(Keep("softcap has no standard form"))
    'softcap has no standard form'
    """


@dataclass
class Writer:
    """Emits the standard nodes (and new initializers) replacing one node, with fresh names in its scope.

    ``types`` maps a value to (rank or None, element type); ``shapes`` to its shape where known;
    ``weights`` to the model's initializers (read with :meth:`constant`).

    Examples
    --------
    >>> from onnx import helper
    >>> node = helper.make_node("Gelu", ["x"], ["y"], name="g", domain="com.microsoft")
    >>> w = Writer(node, UniqueNames({"x", "y"}), {"x": (1, 1)}, opset=17)
    >>> w.scalar(0.5, "x") in {n.output[0] for n in w.nodes}
    True
    """

    node: NodeProto
    fresh: UniqueNames
    types: dict[str, tuple[int | None, int]]
    opset: int
    shapes: Mapping[str, Shape] = field(default_factory=dict)
    weights: Mapping[str, TensorProto] = field(default_factory=dict)
    nodes: list[NodeProto] = field(default_factory=list)
    initializers: list[TensorProto] = field(default_factory=list)
    options: Mapping[str, object] = field(default_factory=dict)
    out_types: dict[str, int] = field(default_factory=dict)
    """Element types of the node's outputs where they are not the first input's."""
    note: str = ""
    """Said after the node's log line (a precondition of exactness, the form chosen)."""

    def op(self, op_type: str, inputs: Sequence[str], output: str | None = None, **attrs: object) -> str:
        """Add a node; its output is ``output`` (an original output name) or a fresh name."""
        return self.op_n(op_type, inputs, [output], **attrs)[0]

    def op_n(
        self, op_type: str, inputs: Sequence[str], outputs: Sequence[str | None], **attrs: object
    ) -> list[str]:
        """Add a node with several outputs (``None``: a fresh name, ``""``: an absent output)."""
        scope = self.node.name.rsplit("/", 1)[0] if "/" in self.node.name else self.node.name
        name = self.fresh(f"{scope}/{op_type}")
        outs = [o if o is not None else self.fresh(f"{name}_output_{i}") for i, o in enumerate(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=name, **attrs))
        return outs

    def rank(self, name: str) -> int:
        """The rank of a value, or :class:`Keep` when it is not known."""
        rank = self.types.get(name, (None, 0))[0]
        if rank is None:
            raise Keep(f"the rank of {name!r} is not known (run shape inference or fix the input shapes)")
        return rank

    def elem_type(self, name: str) -> int:
        """The element type of a value (0 when not known)."""
        return self.types.get(name, (None, 0))[1]

    def dim(self, name: str, axis: int) -> int | None:
        """A static dimension of a value, or None."""
        shape = self.shapes.get(name)
        if shape is None or not -len(shape) <= axis < len(shape):
            return None
        value = shape[axis]
        return value if isinstance(value, int) and value >= 0 else None

    def scalar(self, value: float, like: str) -> str:
        """A scalar constant of ``like``'s element type (all inputs of these ops share one)."""
        known = (self.types.get(v, (None, 0))[1] for v in (like, *self.node.input))
        elem_type = next((t for t in known if t), 0)
        if not elem_type:
            raise Keep(f"the element type of {like!r} is not known")
        array = np.array(value, dtype=helper.tensor_dtype_to_np_dtype(elem_type))
        return self.op("Constant", [], value=numpy_helper.from_array(array))

    def ints(self, values: Sequence[int]) -> str:
        """A 1-D int64 constant (shapes, axes, clip bounds as inputs)."""
        return self.op("Constant", [], value=numpy_helper.from_array(np.array(values, np.int64)))

    def int_scalar(self, value: int) -> str:
        """A 0-D int64 constant."""
        return self.op("Constant", [], value=numpy_helper.from_array(np.array(value, np.int64)))

    def constant(self, name: str) -> np.ndarray | None:
        """The value of an initializer, or None when ``name`` is not one."""
        tensor = self.weights.get(name)
        return numpy_helper.to_array(tensor) if tensor is not None else None

    def initializer(self, tensor: TensorProto, base: str) -> str:
        """Add a new initializer (``tensor``, renamed fresh from ``base``); returns its name."""
        tensor.name = self.fresh(base)
        self.initializers.append(tensor)
        return tensor.name


Rule = Callable[[Writer], None]
"""A decomposition: writes one node's standard form into the writer, or raises :class:`Keep`."""


def node_attrs(node: NodeProto) -> dict[str, object]:
    """A node's attributes by name (strings as bytes, as onnx gives them).

    Examples
    --------
    >>> from onnx import helper
    >>> node_attrs(helper.make_node("MatMulNBits", ["a"], ["y"], K=256, bits=4))
    {'K': 256, 'bits': 4}
    """
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}

"""The zoo's ``elementwise``: a row of elementwise operators, what a compiler fuses into one kernel.

Notebook 01 times it eager and compiled to show what fusion buys.

Examples
--------
>>> from explorer.zoo.elementwise import ELEMENTWISE_ACTIVATIONS
>>> ELEMENTWISE_ACTIVATIONS[0]
'Relu'
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from explorer.core.errors import UsageError
from explorer.zoo.parts import _Built, _check_positive, _Dim, _GraphBuilder, _scope, _value

__all__ = ["ELEMENTWISE_ACTIVATIONS"]


ELEMENTWISE_ACTIVATIONS = ("Relu", "Sigmoid", "Tanh", "Abs")
"""The activations ``elementwise`` takes (ONNX unary operators without attributes)."""


def _elementwise(
    *, ops: int = 12, features: int | None = 1024, activation: str = "Relu", seed: int = 0
) -> _Built:
    """``ops`` elementwise operators in a row: ``Mul`` by a scale, ``Add`` a shift, the activation, repeated.

    What an eager framework runs one kernel at a time and a compiler fuses into one: every
    operator reads and writes a whole tensor, and the scales and shifts are scalars, so the
    only bytes moved are the activations'.
    """
    _check_positive(ops=ops, features=features)
    if activation not in ELEMENTWISE_ACTIVATIONS:
        choices = ", ".join(ELEMENTWISE_ACTIVATIONS)
        raise UsageError(f"activation must be one of {choices}, got {activation!r}")
    b = _GraphBuilder(np.random.default_rng(seed))
    x = "x"
    for i in range(ops):
        path = f"blocks.{i // 3}"
        outputs = ["y"] if i == ops - 1 else None
        if i % 3 == 0:
            inputs = [x, b.uniform(f"{path}.scale", (), 0.5, 1.5)]
        elif i % 3 == 1:
            inputs = [x, b.normal(f"{path}.shift", (), 0.1)]
        else:
            inputs = [x]
        x = b.node(("Mul", "Add", activation)[i % 3], inputs, _scope(path), outputs=outputs)[0]
    width: _Dim = "features" if features is None else features
    graph = b.graph(
        "elementwise",
        [_value("x", TensorProto.FLOAT, ["batch", width])],
        [_value("y", TensorProto.FLOAT, ["batch", width])],
        f"{ops} elementwise ops in a row: x * scale + shift, then {activation}, repeated (scalar weights).",
    )
    return _Built(graph, 17)

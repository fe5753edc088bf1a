"""Random inputs for a model: the project's one generator (ONNX Runtime runs, verification, benchmarks).

One rule everywhere, reproducible by ``seed``: a fixed dimension keeps its size, a symbolic
or unknown one takes the size ``input_shapes`` gives it or :func:`symbolic_dim_default`;
floats are standard normal, integers lie in ``[0, 8)`` (safe as indices and small
sizes), booleans are random, anything else is zeros.

Examples
--------
>>> import numpy as np
>>> feeds = random_inputs([("ids", ["batch", "seq"], np.int64), ("x", [2, 3], np.float32)])
>>> {k: (v.shape, v.dtype.name) for k, v in feeds.items()}
{'ids': ((1, 32), 'int64'), 'x': ((2, 3), 'float32')}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from explorer.core.tensors import shape_from_type

__all__ = [
    "symbolic_dim_default",
    "input_shape",
    "concrete_input_shapes",
    "random_array",
    "random_inputs",
    "random_feeds",
]

_BATCH_NAMES = ("batch", "n", "b", "unk__", "n_batch", "batch_size", "p2o.dynamicdimension")

InputSpec = tuple[str, Sequence[Any] | None, Any]
"""``(name, declared dims, numpy dtype)``: a dim is an int, a symbol (str) or None (unknown)."""


def symbolic_dim_default(name: str | None) -> int:
    """The size given to a symbolic dimension when none is specified: 1 for batch-like names, else 32.

    Examples
    --------
    >>> symbolic_dim_default("batch"), symbolic_dim_default("seq"), symbolic_dim_default(None)
    (1, 32, 32)
    """
    if name and any(name.lower().startswith(b) for b in _BATCH_NAMES):
        return 1
    return 32


def input_shape(dims: Sequence[Any] | None, given: Sequence[int] | None = None) -> tuple[int, ...]:
    """The concrete shape of an input: ``given`` if any, else fixed dims kept and the others defaulted.

    A dimension that is not a positive int (a symbol, None, or an exporter's ``-1``) is dynamic.

    Examples
    --------
    >>> input_shape(["batch", 3, -1, None]), input_shape(["n", 4], given=[8, 4])
    ((1, 3, 32, 32), (8, 4))
    """
    if given is not None:
        return tuple(int(d) for d in given)
    return tuple(
        d if isinstance(d, int) and d > 0 else symbolic_dim_default(d if isinstance(d, str) else None)
        for d in (dims or ())
    )


def concrete_input_shapes(
    model: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]] | None = None
) -> dict[str, list[int]]:
    """Every graph input's concrete shape (initializers excluded), by :func:`input_shape`'s rule.

    Examples
    --------
    >>> from explorer import zoo
    >>> model = zoo.build("mlp")
    >>> concrete_input_shapes(model), concrete_input_shapes(model, {"input": [4, 1, 28, 28]})
    ({'input': [1, 1, 28, 28]}, {'input': [4, 1, 28, 28]})
    """
    initializers = {t.name for t in model.graph.initializer}
    given = input_shapes or {}
    return {
        value.name: list(input_shape(shape_from_type(value.type)[0], given.get(value.name)))
        for value in model.graph.input
        if value.name not in initializers
    }


def random_array(shape: Sequence[int], dtype: Any, rng: np.random.Generator) -> np.ndarray:
    """One random value of ``shape`` and ``dtype`` by the module's rule.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> int(random_array([100], np.int64, rng).max()) < 8, random_array([2], np.bool_, rng).dtype.name
    (True, 'bool')
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 8, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) > 0.5
    return np.zeros(shape, dtype=dtype)


def random_inputs(
    specs: Iterable[InputSpec], input_shapes: Mapping[str, Sequence[int]] | None = None, seed: int = 0
) -> dict[str, np.ndarray]:
    """Random values for ``(name, dims, dtype)`` specs, in order, reproducible by ``seed``.

    Examples
    --------
    >>> a = random_inputs([("x", ["n", 2], np.float32)], {"x": [3, 2]}, seed=1)
    >>> b = random_inputs([("x", ["n", 2], np.float32)], {"x": [3, 2]}, seed=1)
    >>> a["x"].shape, bool((a["x"] == b["x"]).all())
    ((3, 2), True)
    """
    rng = np.random.default_rng(seed)
    given = input_shapes or {}
    return {name: random_array(input_shape(dims, given.get(name)), dtype, rng) for name, dims, dtype in specs}


def random_feeds(
    model: onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Random inputs for every graph input of ``model`` (initializers excluded), reproducible by ``seed``.

    Examples
    --------
    >>> from explorer import zoo
    >>> {k: v.shape for k, v in random_feeds(zoo.build("resnet18")).items()}
    {'input': (1, 3, 224, 224)}
    """
    initializers = {t.name for t in model.graph.initializer}
    specs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        declared, elem_type = shape_from_type(value.type)
        dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type or onnx.TensorProto.FLOAT)
        specs.append((value.name, declared, dtype))
    return random_inputs(specs, input_shapes, seed)

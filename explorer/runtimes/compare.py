"""Numerical agreement: random inputs for a model and the largest difference between two runs.

Examples
--------
>>> import numpy as np
>>> max_abs_diff([np.ones(3)], [np.array([1.0, 1.5, 1.0])])
0.5
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx

from ..tensors import shape_from_type

__all__ = ["random_feeds", "max_abs_diff", "symbolic_dim_default"]

_BATCH_NAMES = ("batch", "n", "b", "unk__", "n_batch", "batch_size", "p2o.dynamicdimension")


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


def random_feeds(
    model: onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Random inputs for every graph input (initializers excluded), reproducible by ``seed``.

    Symbolic dims take their size from ``input_shapes`` or :func:`symbolic_dim_default`.
    Floats are standard normal; integers are in ``[0, 8)`` (safe as indices); booleans random.

    Examples
    --------
    >>> from explorer import zoo
    >>> {k: v.shape for k, v in random_feeds(zoo.build("resnet18")).items()}
    {'input': (1, 3, 224, 224)}
    """
    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    feeds: dict[str, np.ndarray] = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        declared, elem_type = shape_from_type(value.type)
        if input_shapes and value.name in input_shapes:
            shape = tuple(int(d) for d in input_shapes[value.name])
        else:
            shape = tuple(
                d if isinstance(d, int) and d > 0 else symbolic_dim_default(d if isinstance(d, str) else None)
                for d in (declared or ())
            )
        dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type or onnx.TensorProto.FLOAT)
        if dtype.kind == "f":
            feeds[value.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind in "iu":
            feeds[value.name] = rng.integers(0, 8, size=shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[value.name] = rng.random(shape) > 0.5
        else:
            feeds[value.name] = np.zeros(shape, dtype=dtype)
    return feeds


def max_abs_diff(reference: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> float:
    """Largest absolute difference between matching outputs; ``inf`` when shapes or counts differ.

    Examples
    --------
    >>> import numpy as np
    >>> max_abs_diff([np.zeros(2)], [np.zeros(3)])
    inf
    """
    if len(reference) != len(outputs):
        return float("inf")
    worst = 0.0
    for ref, out in zip(reference, outputs, strict=True):
        ref, out = np.asarray(ref), np.asarray(out)
        if ref.shape != out.shape:
            return float("inf")
        if ref.size == 0:
            continue
        if ref.dtype.kind in "fc" or out.dtype.kind in "fc":
            delta = np.abs(ref.astype(np.float64) - out.astype(np.float64))
            if np.isnan(delta).any():
                same_nan = np.isnan(ref.astype(np.float64)) == np.isnan(out.astype(np.float64))
                if not same_nan.all():
                    return float("inf")
                delta = np.nan_to_num(delta, nan=0.0)
            worst = max(worst, float(delta.max()))
        else:
            worst = max(worst, float(np.abs(ref.astype(np.int64) - out.astype(np.int64)).max()))
    return worst

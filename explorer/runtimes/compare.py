"""Numerical agreement: the largest difference between two runs (inputs: :mod:`explorer.runtimes.inputs`).

Examples
--------
>>> import numpy as np
>>> max_abs_diff([np.ones(3)], [np.array([1.0, 1.5, 1.0])])
0.5
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .inputs import random_feeds, symbolic_dim_default

__all__ = ["random_feeds", "max_abs_diff", "symbolic_dim_default"]


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

"""Numerical agreement: the largest difference between two runs, and whether it is within rounding.

Any two runs of a model compare here: two runtimes (:mod:`explorer.runtimes.bench`), a pass's
output against the original (:mod:`explorer.passes.verification`), a TVM build against ONNX
Runtime (:mod:`explorer.lower.tvm.relax_build`, :mod:`explorer.lower.tvm.schedule_check`). Pure numpy;
the inputs come from :mod:`explorer.onnx_adapter.inputs`.

Examples
--------
>>> import numpy as np
>>> max_abs_diff([np.ones(3)], [np.array([1.0, 1.5, 1.0])])
0.5
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = ["max_abs_diff", "Agreement", "agreement", "TOLERANCES"]

TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-9),
    "float32": (1e-3, 1e-4),
    "float16": (1e-2, 1e-3),
    "bfloat16": (5e-2, 1e-2),
}
"""Element type -> (rtol, atol): outputs agree where ``|a - b| <= atol * scale + rtol * |a|``, with
``scale`` the largest ``|a|`` of that output (at least 1: rounding grows with the values a
kernel sums). Integer and boolean outputs must be equal. float32's are what two correct
float32 implementations differ by after reordering sums; the rtol is the one the onnx package's
backend tests use (their atol, 1e-7, is not scaled), and the scaled atol is this project's own."""


@dataclass(frozen=True)
class Agreement:
    """How two runs' outputs compare, output by output.

    Attributes
    ----------
    max_abs_err : float
        The largest absolute difference (``inf`` when shapes or counts differ).
    max_rel_err : float
        The largest ``|a - b| / max(|a|, tiny)``.
    ok : bool
        Every output within its dtype's tolerance (:data:`TOLERANCES`).
    worst_output : int
        The output with the largest absolute difference (-1 when none).
    """

    max_abs_err: float
    max_rel_err: float
    ok: bool
    worst_output: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields.

        Examples
        --------
        >>> Agreement(0.0, 0.0, True, 0).to_dict()["ok"]
        True
        """
        return asdict(self)

    def to_frame(self) -> Any:
        """One row.

        Examples
        --------
        >>> Agreement(0.0, 0.0, True, 0).to_frame().shape
        (1, 4)
        """
        import pandas as pd

        return pd.DataFrame([self.to_dict()])


def agreement(
    reference: Sequence[np.ndarray], outputs: Sequence[np.ndarray], floor: Sequence[float] = ()
) -> Agreement:
    """Compare ``outputs`` to ``reference`` with dtype-dependent tolerances.

    Parameters
    ----------
    reference, outputs : sequence of numpy.ndarray
        The two runs' outputs, in graph-output order.
    floor : sequence of float
        Per output, how far two correct runs of this model already differ (see
        :func:`explorer.runtimes.bench.rounding_floor`): it is added to the tolerance.

    Examples
    --------
    >>> import numpy as np
    >>> agreement([np.ones(3, np.float32)], [np.ones(3, np.float32) + 1e-5]).ok
    True
    >>> agreement([np.ones(3, np.float32)], [np.ones(3, np.float32) * 1.1]).ok
    False
    >>> agreement([np.ones(3, np.float32)], [np.ones(3, np.float32) * 1.1], floor=[0.1]).ok
    True
    """
    if len(reference) != len(outputs):
        return Agreement(float("inf"), float("inf"), False, -1)
    worst_abs, worst_rel, ok, worst = 0.0, 0.0, True, -1
    for index, (ref, out) in enumerate(zip(reference, outputs, strict=True)):
        ref, out = np.asarray(ref), np.asarray(out)
        delta = max_abs_diff([ref], [out])
        if delta > worst_abs or worst < 0:
            worst_abs, worst = delta, index
        if not np.isfinite(delta):
            return Agreement(float("inf"), float("inf"), False, index)
        if ref.size == 0:
            continue
        if ref.dtype.kind not in "fc":
            ok = ok and delta == 0
            continue
        a, b = ref.astype(np.float64), out.astype(np.float64)
        finite = np.isfinite(a)
        diff = np.where(finite, np.abs(a - b), 0.0)
        worst_rel = max(worst_rel, float((diff / np.maximum(np.abs(a), np.finfo(np.float32).tiny)).max()))
        rtol, atol = TOLERANCES.get(ref.dtype.name, TOLERANCES["float32"])
        scale = max(1.0, float(np.abs(a[finite]).max()) if finite.any() else 1.0)
        allowed = atol * scale + rtol * np.abs(np.where(finite, a, 0.0))
        if index < len(floor):  # the float tolerance on top of the rounding both runs may do
            allowed = allowed + float(floor[index])
        ok = ok and bool((diff <= allowed).all())
    return Agreement(worst_abs, worst_rel, ok, worst)


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

"""Moved: the agreement checks to :mod:`explorer.core.compare`, random inputs to the ONNX adapter.

The stages before the runtimes (passes, lowering) compare outputs too, and a stage imports only
the stages before it; this module keeps the old names working (``random_feeds`` and
``symbolic_dim_default`` are :mod:`explorer.onnx_adapter.inputs`'s).

Examples
--------
>>> import numpy as np
>>> from explorer.runtimes.compare import max_abs_diff
>>> max_abs_diff([np.ones(3)], [np.array([1.0, 1.5, 1.0])])
0.5
"""

from __future__ import annotations

from explorer.core.compare import TOLERANCES, Agreement, agreement, max_abs_diff
from explorer.onnx_adapter.inputs import random_feeds, symbolic_dim_default

__all__ = ["random_feeds", "max_abs_diff", "symbolic_dim_default", "Agreement", "agreement", "TOLERANCES"]

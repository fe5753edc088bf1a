"""Worker steps of the ``ort-quant`` passes: ONNX Runtime's tools that make a model NPU-ready.

- ``ort-quant:fix_shapes``: ONNX Runtime's ``make_input_shape_fixed`` for each input given,
  then ``fix_output_shapes`` (``onnxruntime.tools.onnx_model_utils``, what its
  ``make_dynamic_shape_fixed`` tool runs): NPUs compile static graphs.
- ``ort-quant:qnn_preprocess``: ``onnxruntime.quantization.execution_providers.qnn.qnn_preprocess_model``:
  ONNX Runtime's basic optimisations, then the fusions the QNN EP maps to single HTP ops
  (Gelu, LpNormalization, SpaceToDepth; LayerNormalization on request).
- ``ort-quant:qnn_qdq``: QDQ quantisation with the QNN EP's configuration
  (``get_qnn_qdq_config`` + ``quantize``), calibrated on inputs the user gives or on the
  project's random inputs (a fixed seed per sample), 8- or 16-bit activations.

Each reads the model file it is given and writes ``out_path``; what it did is the log.

Examples
--------
>>> import os, tempfile
>>> from explorer import zoo
>>> with tempfile.TemporaryDirectory() as tmp:
...     src = str(zoo.save("mlp", tmp))
...     log = fix_shapes_step(src, {"input": [1, 1, 28, 28]}, out_path=os.path.join(tmp, "out.onnx"))
>>> log[0]
"input: ['batch', 1, 28, 28] -> [1, 1, 28, 28]"
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from explorer.core.errors import UsageError
from explorer.onnx_adapter.files import save_model
from explorer.onnx_adapter.tensor_protos import shape_from_type

__all__ = [
    "fix_shapes_step",
    "qnn_preprocess_step",
    "qnn_qdq_step",
    "ACTIVATION_TYPES",
    "CALIBRATION_SAMPLES",
]

ACTIVATION_TYPES = ("uint8", "uint16")
"""Activation types ``ort-quant:qnn_qdq`` takes (the QNN EP's "typically supported" types)."""
CALIBRATION_SAMPLES = 8
"""Generated calibration inputs when the user gives none."""


def fix_shapes_step(
    path: str, input_shapes: Mapping[str, Sequence[int]] | None, *, out_path: str
) -> list[str]:
    """Fix the given inputs' shapes with ONNX Runtime's helpers, then the outputs' (in the worker).

    Raises
    ------
    UsageError
        When no shapes are given, or one names no graph input.

    Examples
    --------
    >>> import os
    >>> from explorer import zoo
    >>> src = str(zoo.save("mlp"))
    >>> out = os.path.join(os.path.dirname(src), "o.onnx")
    >>> fix_shapes_step(src, {"input": [4, 1, 28, 28]}, out_path=out)
    ["input: ['batch', 1, 28, 28] -> [4, 1, 28, 28]"]
    """
    from onnxruntime.tools.onnx_model_utils import fix_output_shapes, make_input_shape_fixed

    if not input_shapes:
        raise UsageError("ort-quant:fix_shapes needs input_shapes, e.g. {'input': [1, 3, 224, 224]}")
    model = onnx.load(path)
    by_name = {v.name: v for v in model.graph.input}
    log = []
    for name, shape in input_shapes.items():
        if name not in by_name:
            raise UsageError(f"{path}: no graph input {name!r} (inputs: {', '.join(by_name)})")
        before = shape_from_type(by_name[name].type)[0]
        make_input_shape_fixed(model.graph, name, [int(d) for d in shape])
        log.append(f"{name}: {list(before) if before is not None else '?'} -> {[int(d) for d in shape]}")
    fix_output_shapes(model)
    save_model(model, out_path)
    return log


def qnn_preprocess_step(path: str, fuse_layernorm: bool = False, *, out_path: str) -> list[str]:
    """ONNX Runtime's QNN preprocessing, file to file (in the worker).

    Examples
    --------
    >>> import os
    >>> from explorer import zoo
    >>> src = str(zoo.save("mlp"))
    >>> qnn_preprocess_step(src, out_path=os.path.join(os.path.dirname(src), "o.onnx"))
    ['qnn_preprocess_model changed nothing']
    """
    from onnxruntime.quantization.execution_providers.qnn import qnn_preprocess_model

    model = onnx.load(path)
    before = Counter(n.op_type for n in model.graph.node)
    # ONNX Runtime 1.32's preprocessing fails on a model with metadata (it updates a dict with the
    # repeated proto field): hand it a copy without, and put the metadata back on its output
    metadata = {p.key: p.value for p in model.metadata_props}
    del model.metadata_props[:]
    modified = qnn_preprocess_model(model, out_path, fuse_layernorm=fuse_layernorm)
    if not modified:  # it writes nothing then
        shutil.copyfile(path, out_path)
        return ["qnn_preprocess_model changed nothing"]
    result = onnx.load(out_path)
    onnx.helper.set_model_props(result, {**metadata, **{p.key: p.value for p in result.metadata_props}})
    save_model(result, out_path)
    after = Counter(n.op_type for n in result.graph.node)
    changes = [
        f"{op} {after[op] - before[op]:+d}"
        for op in sorted(set(before) | set(after))
        if after[op] != before[op]
    ]
    return [f"qnn_preprocess_model: {', '.join(changes) or 'names and order only'}"]


class _Reader:
    """A CalibrationDataReader over a list of feeds (ONNX Runtime's protocol: get_next, rewind)."""

    def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
        self._feeds = feeds
        self._next = 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        if self._next >= len(self._feeds):
            return None
        self._next += 1
        return self._feeds[self._next - 1]

    def rewind(self) -> None:
        self._next = 0


def qnn_qdq_step(
    path: str,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    activation_type: str = "uint8",
    weight_type: str = "uint8",
    samples: int = CALIBRATION_SAMPLES,
    seed: int = 0,
    calibration: Sequence[Mapping[str, Any]] | None = None,
    *,
    out_path: str,
) -> list[str]:
    """QDQ-quantise with the QNN EP's configuration, calibrated on ``calibration`` or generated inputs.

    Raises
    ------
    UsageError
        For an activation or weight type the QNN configuration does not take.

    Examples
    --------
    >>> import os
    >>> from explorer import zoo
    >>> src = str(zoo.save("mlp"))
    >>> qnn_qdq_step(src, samples=2, out_path=os.path.join(os.path.dirname(src), "o.onnx"))[1]
    '4 QuantizeLinear and 10 DequantizeLinear nodes'
    """
    from onnxruntime.quantization import QuantType, quantize
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config

    from explorer.onnx_adapter.inputs import random_feeds

    types = {
        "uint8": QuantType.QUInt8,
        "uint16": QuantType.QUInt16,
        "int8": QuantType.QInt8,
        "int16": QuantType.QInt16,
    }
    if activation_type not in ACTIVATION_TYPES or weight_type not in types:
        raise UsageError(
            f"activation_type must be one of {ACTIVATION_TYPES} and weight_type one of {sorted(types)}, "
            f"not {activation_type!r} / {weight_type!r}"
        )
    model = onnx.load(path, load_external_data=False)
    if calibration:
        feeds = [{k: np.asarray(v) for k, v in sample.items()} for sample in calibration]
        where = f"{len(feeds)} inputs given"
    else:
        feeds = [random_feeds(model, input_shapes, seed + i) for i in range(int(samples))]
        last = seed + len(feeds) - 1
        where = f"{len(feeds)} generated inputs (seeds {seed}..{last}; give real ones for real ranges)"
    config = get_qnn_qdq_config(
        path, _Reader(feeds), activation_type=types[activation_type], weight_type=types[weight_type]
    )
    quantize(path, out_path, config)
    counts = Counter(n.op_type for n in onnx.load(out_path, load_external_data=False).graph.node)
    return [
        f"calibrated on {where}; activations {activation_type}, weights {weight_type}",
        f"{counts['QuantizeLinear']} QuantizeLinear and {counts['DequantizeLinear']} DequantizeLinear nodes",
    ]

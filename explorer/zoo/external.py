"""A model too big for one protobuf: :func:`write_external_chain` writes its weights to an external file.

Not a registered zoo model (it is written straight to disk, never built in memory); the load
benchmark, notebook 07 and the lazy-weight tests use it.

Examples
--------
>>> import os, tempfile
>>> from explorer import zoo
>>> sorted(os.listdir(zoo.write_external_chain(tempfile.mkdtemp(), hidden=8, layers=1).parent))
['model.onnx', 'model.onnx.data']
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

from explorer.core.errors import UsageError
from explorer.isolation.io import write_bytes_atomic
from explorer.zoo.parts import _check_positive, _model, _value

__all__ = ["write_external_chain"]


def write_external_chain(
    folder: str | os.PathLike[str],
    *,
    hidden: int = 16384,
    layers: int = 3,
    fill: str = "sparse",
    seed: int = 0,
) -> Path:
    """Write a model whose weights live in an external-data file: ``layers`` MatMuls of ``hidden²``.

    At the defaults the three float32 weights take 1 GiB each (3 GiB in all), the
    size of models that must keep their weights outside the protobuf, as today's
    PyTorch exports of LLMs, diffusion UNets or ViT-L do. The model cannot be
    built in memory as one ``ModelProto`` (protobuf's 2 GiB limit), so it is
    written straight to ``folder/model.onnx`` and ``folder/model.onnx.data``.

    Parameters
    ----------
    folder : path
        Where to write (created if missing).
    hidden : int
        Width of every layer; each weight holds ``hidden * hidden`` floats.
    layers : int
        Number of MatMuls.
    fill : {"sparse", "random"}
        ``"sparse"``: a sparse file of zeros (instant, no disk space) in which
        weight ``i`` starts with ``i + 1`` and ends with ``-(i + 1)``, so
        statistics are checkable; ``"random"``: real random weights (written in
        chunks; about 3 s per GiB).
    seed : int
        Seed of the random weights.

    Returns
    -------
    Path
        The model file.

    Examples
    --------
    >>> import tempfile, onnx
    >>> path = write_external_chain(tempfile.mkdtemp(), hidden=64, layers=2)
    >>> m = onnx.load(path, load_external_data=False)
    >>> [t.data_location == TensorProto.EXTERNAL for t in m.graph.initializer]
    [True, True]
    """
    _check_positive(hidden=hidden, layers=layers)
    if fill not in ("sparse", "random"):
        raise UsageError(f"fill must be 'sparse' or 'random', not {fill!r}")
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    path, data = target / "model.onnx", target / "model.onnx.data"
    size = hidden * hidden * 4
    rng = np.random.default_rng(seed)
    with open(data, "wb") as handle:
        handle.truncate(size * layers)
        for i in range(layers):
            if fill == "random":
                handle.seek(i * size)
                rows = max(1, (64 << 20) // (hidden * 4))
                for start in range(0, hidden, rows):
                    count = min(rows, hidden - start)
                    block = rng.standard_normal((count, hidden), dtype=np.float32) / math.sqrt(hidden)
                    handle.write(block.tobytes())
            marker = np.float32(i + 1)
            handle.seek(i * size)
            handle.write(marker.tobytes())
            handle.seek((i + 1) * size - 4)
            handle.write((-marker).tobytes())
    nodes, initializers = [], []
    x = "input"
    for i in range(layers):
        weight = TensorProto(name=f"layers.{i}.weight", data_type=TensorProto.FLOAT, dims=[hidden, hidden])
        weight.data_location = TensorProto.EXTERNAL
        for key, value in (("location", data.name), ("offset", str(i * size)), ("length", str(size))):
            entry = weight.external_data.add()
            entry.key, entry.value = key, value
        initializers.append(weight)
        out = "output" if i == layers - 1 else f"/layers.{i}/MatMul_output_0"
        nodes.append(helper.make_node("MatMul", [x, weight.name], [out], name=f"/layers.{i}/MatMul"))
        x = out
    graph = helper.make_graph(
        nodes,
        "external_chain",
        [_value("input", TensorProto.FLOAT, ["batch", hidden])],
        [_value("output", TensorProto.FLOAT, ["batch", hidden])],
        initializers,
    )
    model = _model(graph, "external_chain", {"hidden": hidden, "layers": layers, "fill": fill}, 17)
    return write_bytes_atomic(model.SerializeToString(), path)

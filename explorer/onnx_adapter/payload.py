"""What the ONNX adapter keeps beside a graph model: its protos and the files they came from.

A :class:`~explorer.core.graph.ModelGraph` is IR-neutral; an ONNX graph's protos, the file
that holds exactly this model, the folder its external tensors resolve against and the file
left holding large tensors when it loaded lazily are the ONNX adapter's, in one
:class:`OnnxPayload` (``graph.payload``). ``graph.model``, ``graph.proto``,
``graph.model_path``, ``graph.weights_dir``, ``graph.lazy_file`` and ``graph.graph_path``
read and write it.

Examples
--------
>>> from explorer import load
>>> g = load("zoo:mlp")
>>> type(g.payload).__name__, g.payload.model is g.model
('OnnxPayload', True)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["OnnxPayload"]


@dataclass
class OnnxPayload:
    """An ONNX graph's protos and files (mutable: a pass's output file is set after loading).

    Attributes
    ----------
    proto : onnx.GraphProto or None
        The ONNX graph the graph model was built from.
    model : onnx.ModelProto or None
        The model (top-level graphs only). Never mutated; copy it before changing it.
    model_path : Path or None
        A file holding exactly this model, which workers read instead of a re-serialized copy.
    weights_dir : Path or None
        The folder the model's external tensors resolve against (None: values not available).
    lazy_file : FileStamp or None
        The model file whose own bytes hold the large tensors a lazy load left there.
    graph_path : tuple
        Where a subgraph sits in its model (``()`` for the main graph).

    Examples
    --------
    >>> OnnxPayload().graph_path
    ()
    """

    proto: Any = None
    model: Any = None
    model_path: Path | None = None
    weights_dir: Path | None = None
    lazy_file: Any = None
    graph_path: tuple[tuple[int, str], ...] = ()

"""The overlay readers by format, how a file's format is recognised, and :func:`read`.

Each reader is a module with ``FORMAT``, ``sniff(data)`` (does this parsed JSON look like mine?)
and ``read(data, graph, *, source, **options)``; :data:`READERS` lists them in the order
:func:`detect` asks them.

Examples
--------
>>> list(READERS)
['ort-profile', 'model-explorer', 'ai-hub-profile', 'tensorrt-profile']
>>> detect({"execution_detail": []})
'ai-hub-profile'
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from explorer.core.errors import UsageError
from explorer.overlays import ai_hub, model_explorer, ort_profile, tensorrt
from explorer.overlays.source import Source, is_path, load_source

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph
    from explorer.overlays.value import Overlay

__all__ = ["Reader", "READERS", "detect", "read"]


@dataclass(frozen=True)
class Reader:
    """One format: its name, what it is, how to recognise it and how to read it.

    Attributes
    ----------
    name : str
        The format's name (``--format``).
    about : str
        What the file is and where it comes from, in a line.
    sniff : callable
        ``sniff(data) -> bool`` on the parsed JSON.
    read : callable
        ``read(data, graph, *, source, **options) -> Overlay``.
    """

    name: str
    about: str
    sniff: Callable[[Any], bool]
    read: Callable[..., Overlay]

    @property
    def options(self) -> tuple[str, ...]:
        """The options the reader takes beyond ``data``, ``graph`` and ``source``.

        Examples
        --------
        >>> READERS["ort-profile"].options
        ('level', 'split')
        """
        parameters = inspect.signature(self.read).parameters
        return tuple(p for p in parameters if p not in ("data", "graph", "source"))


READERS: Mapping[str, Reader] = {
    r.name: r
    for r in (
        Reader(
            ort_profile.FORMAT,
            "ONNX Runtime's profile (SessionOptions.enable_profiling): time and provider per node",
            ort_profile.sniff,
            ort_profile.read,
        ),
        Reader(
            model_explorer.FORMAT,
            "Model Explorer's node data: a value and colours per node",
            model_explorer.sniff,
            model_explorer.read,
        ),
        Reader(
            ai_hub.FORMAT,
            "Qualcomm AI Hub's profile (download_profile()): time and compute unit per layer",
            ai_hub.sniff,
            ai_hub.read,
        ),
        Reader(
            tensorrt.FORMAT,
            "TensorRT's profile (trtexec --exportProfile), with its --exportLayerInfo: time per layer",
            tensorrt.sniff,
            tensorrt.read,
        ),
    )
}
"""Format name -> :class:`Reader`, in the order :func:`detect` asks them."""


def detect(data: Any, source: str | None = None) -> str:
    """The format of the parsed JSON ``data`` (a key of :data:`READERS`).

    Raises
    ------
    UsageError
        No reader recognises it: the message names the file and lists the formats.

    Examples
    --------
    >>> detect([{"cat": "Node", "name": "a_kernel_time", "ph": "X"}])
    'ort-profile'
    """
    for reader in READERS.values():
        if reader.sniff(data):
            return reader.name
    formats = "; ".join(f"{r.name} ({r.about})" for r in READERS.values())
    raise UsageError(f"{source or '<value>'}: not a format the explorer reads; it reads: {formats}")


def _gather(source: Any) -> tuple[Any, str | None]:
    """Parse ``source``; two paths (or a dict of paths) are TensorRT's profile and layer information."""
    pair = isinstance(source, (list, tuple)) and len(source) == 2 and all(is_path(s) for s in source)
    if pair:
        profile, layers = (load_source(s)[0] for s in source)
        if tensorrt.is_layer_info(profile) and not tensorrt.is_layer_info(layers):
            profile, layers = layers, profile
        return {"profile": profile, "layers": layers}, ", ".join(os.fspath(s) for s in source)
    if isinstance(source, dict) and set(source) <= {"profile", "layers"} and source:
        paths = [os.fspath(v) for v in source.values() if is_path(v)]
        loaded = {k: load_source(v)[0] for k, v in source.items()}
        return loaded, ", ".join(paths) or None
    return load_source(source)


def read(
    source: Source,
    graph: ModelGraph | None = None,
    *,
    format: str | None = None,
    **options: Any,
) -> Overlay:
    """Read another tool's results and map them onto ``graph``'s nodes.

    Parameters
    ----------
    source : path, dict or list
        The file (read bounded, checked to be a regular file first), or its parsed JSON; for
        TensorRT, two paths (the profile and the layer information) or ``{"profile", "layers"}``.
    graph : ModelGraph, optional
        The model the results are about. Without it nothing is mapped: the values are keyed by
        the file's own names.
    format : str, optional
        One of :data:`READERS` (default: recognised from the content).
    **options
        The reader's options: ``level`` and ``split`` (ONNX Runtime), ``graph_id`` (Model
        Explorer), ``layer_info`` (TensorRT: a path or the parsed object) and ``split``.

    Returns
    -------
    Overlay

    Raises
    ------
    ModelNotFoundError
        The path does not exist or is not a regular file.
    UsageError
        The file is empty, too large, not JSON, not a format listed in :data:`READERS` (or not
        the one ``format`` names), or an option the reader does not take.

    Examples
    --------
    >>> from explorer import load
    >>> overlay = read({"main_graph": {"results": {"/fc1/Gemm": {"value": 1}, "nope": {"value": 2}}}},
    ...                load("zoo:mlp"))
    >>> overlay.format, overlay.mapped_nodes, [u.name for u in overlay.unmapped]
    ('model-explorer', 1, ['nope'])
    """
    if format is not None and format not in READERS:
        raise UsageError(f"no overlay format {format!r}; the formats are: {', '.join(READERS)}")
    data, path = _gather(source)
    name = format or detect(data, path)
    reader = READERS[name]
    unknown = sorted(set(options) - set(reader.options))
    if unknown:
        takes = ", ".join(reader.options) or "none"
        raise UsageError(f"the {name} reader has no option {', '.join(unknown)}; it takes: {takes}")
    if "layer_info" in options and is_path(options["layer_info"]):
        layers, layers_path = load_source(options["layer_info"])
        options["layer_info"] = layers
        path = f"{path}, {layers_path}" if path else layers_path
    return reader.read(data, graph, source=path, **options)

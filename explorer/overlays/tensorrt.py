"""TensorRT's per-layer profile (``trtexec --exportProfile``) on the model's own ONNX nodes.

The profile is a JSON list: an optional ``{"count": N}`` (the runs timed), then one entry per
engine layer, ``{"name", "timeMs", "averageMs", "medianMs", "percentage"}``. An engine layer is
often several ONNX nodes fused (``/conv1/Conv + /relu1/Relu``, ``PWN(/act/Sigmoid, /act/Mul)``), or a
Myelin region named only by its first and last node (``{ForeignNode[/a/MatMul.../b/Add]}``). The
layer information (``trtexec --exportLayerInfo`` with ``--profilingVerbosity=detailed``) says
exactly: each of its ``Layers`` has ``Name``, ``LayerType`` and ``Metadata``, the ONNX nodes it came
from as ``[ONNX Layer: /x/Conv]`` separated by ``\\x1e``.

Each layer's ``averageMs`` goes on the ONNX nodes its metadata names (split by
:data:`~explorer.overlays.mapping.SPLIT_RULES`); a layer the layer information does not describe
is read from its name (``+``- and ``PWN(...)``-joined node names). A reformat layer TensorRT added
(``Reformatting CopyNode for ...``), a Myelin region without the layer information, and names no
node of the model has are listed in ``unmapped`` with the reason. Read the two files together as
``read([profile, layer_info], graph)``, ``read({"profile": ..., "layers": ...}, graph)`` (paths or
parsed JSON) or ``onnx-explorer overlay MODEL PROFILE LAYER_INFO``.

Examples
--------
>>> from explorer import load
>>> profile = [{"count": 10}, {"name": "/fc1/Gemm + /relu1/Relu", "averageMs": 0.2, "percentage": 80.0}]
>>> overlay = read(profile, load("zoo:mlp"))
>>> overlay.values["/fc1/Gemm"].time_ms, overlay.values["/fc1/Gemm"].shared_with
(0.1, ('/relu1/Relu',))
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from explorer.core.errors import UsageError
from explorer.overlays.mapping import Collect, NodeIndex, check_split, spread
from explorer.overlays.value import Overlay, Unmapped

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = [
    "FORMAT",
    "METADATA_SEPARATOR",
    "sniff",
    "is_profile",
    "is_layer_info",
    "onnx_nodes",
    "name_parts",
    "read",
]

FORMAT = "tensorrt-profile"
"""The format's name in :data:`explorer.overlays.READERS`."""

METADATA_SEPARATOR = "\x1e"
"""What separates the ONNX nodes in a layer's ``Metadata`` (ASCII record separator)."""

_ONNX_LAYER = re.compile(r"^\[ONNX Layer: (.*)\]$", re.S)
_SPLIT = re.compile(r"\s+\+\s+|,\s*|PWN\(|\)")
_REFORMAT = "Reformatting CopyNode for"
_FOREIGN = re.compile(r"^\{ForeignNode\[(.*)\]\}$", re.S)


def is_profile(data: Any) -> bool:
    """Whether ``data`` is a ``--exportProfile`` list (layers with ``name`` and ``averageMs``).

    Examples
    --------
    >>> is_profile([{"count": 3}, {"name": "a", "averageMs": 0.1}]), is_profile([{"count": 3}])
    (True, False)
    """
    if not isinstance(data, list):
        return False
    layers = [e for e in data if isinstance(e, dict) and "count" not in e]
    return bool(layers) and all("name" in e and ("averageMs" in e or "timeMs" in e) for e in layers[:100])


def is_layer_info(data: Any) -> bool:
    """Whether ``data`` is a ``--exportLayerInfo`` object (with a ``Layers`` list).

    Examples
    --------
    >>> is_layer_info({"Layers": [], "Bindings": []}), is_layer_info({"layers": []})
    (True, False)
    """
    return isinstance(data, dict) and isinstance(data.get("Layers"), list)


def sniff(data: Any) -> bool:
    """Whether ``data`` is a TensorRT profile, layer information, or ``{"profile", "layers"}`` with them.

    Examples
    --------
    >>> sniff({"profile": [{"name": "a", "averageMs": 1.0}], "layers": {"Layers": []}})
    True
    """
    if isinstance(data, dict) and set(data) <= {"profile", "layers"} and data:
        return all(
            (is_profile(v) if k == "profile" else is_layer_info(v)) or isinstance(v, str)
            for k, v in data.items()
        )
    return is_profile(data) or is_layer_info(data)


def onnx_nodes(metadata: Any) -> list[str]:
    """The ONNX node names in a layer's ``Metadata``.

    Examples
    --------
    >>> onnx_nodes("[ONNX Layer: /x/Conv]\\x1e[ONNX Layer: /x/Relu]")
    ['/x/Conv', '/x/Relu']
    """
    if not isinstance(metadata, str):
        return []
    names = []
    for part in metadata.split(METADATA_SEPARATOR):
        match = _ONNX_LAYER.match(part.strip())
        if match and match.group(1) not in names:
            names.append(match.group(1))
    return names


def name_parts(name: str) -> list[str]:
    """The ONNX node names a layer's name is made of (``a + b``, ``PWN(a, b)``).

    Examples
    --------
    >>> name_parts("PWN(PWN(/act/Sigmoid, /act/Mul), /add/Add)")
    ['/act/Sigmoid', '/act/Mul', '/add/Add']
    """
    return [p.strip() for p in _SPLIT.split(name) if p.strip()]


def _layer_infos(layers: Any, label: str) -> dict[str, tuple[list[str], str | None]]:
    """Layer name -> (its ONNX nodes, its type), from the layer information."""
    if layers is None:
        return {}
    if not is_layer_info(layers):
        raise UsageError(f"{label}: the layer information is not --exportLayerInfo's JSON (no 'Layers' list)")
    found: dict[str, tuple[list[str], str | None]] = {}
    for layer in layers["Layers"]:
        if isinstance(layer, str):  # --profilingVerbosity=layer_names_only: names alone
            found.setdefault(layer, ([], None))
        elif isinstance(layer, dict) and isinstance(layer.get("Name"), str):
            kind = layer.get("LayerType")
            found[layer["Name"]] = (onnx_nodes(layer.get("Metadata")), str(kind) if kind else None)
    return found


def _entries(profile: Any, label: str) -> list[tuple[str, float]]:
    """(layer name, milliseconds per inference) of a ``--exportProfile`` list."""
    if not isinstance(profile, list):
        raise UsageError(f"{label}: the profile is not --exportProfile's JSON (a list of layers)")
    count = next((e["count"] for e in profile if isinstance(e, dict) and "count" in e), None)
    entries = []
    for number, entry in enumerate(profile):
        if not isinstance(entry, dict) or "count" in entry:
            continue
        name, average = entry.get("name"), entry.get("averageMs")
        if average is None and entry.get("timeMs") is not None and count:
            average = float(entry["timeMs"]) / float(count)
        if not isinstance(name, str) or isinstance(average, bool) or not isinstance(average, (int, float)):
            raise UsageError(f"{label}: profile entry {number} is not a layer with 'name' and 'averageMs'")
        if not math.isfinite(average) or average < 0:
            raise UsageError(f"{label}: layer {name!r} has averageMs {average!r}, not a time >= 0")
        entries.append((name, float(average)))
    return entries


def read(
    data: Any,
    graph: ModelGraph | None = None,
    *,
    source: str | None = None,
    layer_info: Mapping[str, Any] | None = None,
    split: str = "even",
) -> Overlay:
    """Read a TensorRT profile (and its layer information), mapped onto ``graph``'s ONNX nodes.

    Parameters
    ----------
    data : list or dict
        The ``--exportProfile`` list, the ``--exportLayerInfo`` object alone (layer types, no
        times), or ``{"profile": ..., "layers": ...}`` with both (parsed JSON).
    graph : ModelGraph, optional
        The ONNX model the engine was built from (without it, values are keyed by ONNX names).
    source : str, optional
        The file's path (or paths).
    layer_info : dict, optional
        The ``--exportLayerInfo`` object, when ``data`` is the profile alone.
    split : str
        How a layer's time is split over its ONNX nodes (``even`` or ``anchor``).

    Returns
    -------
    Overlay
        ``time_ms`` and ``op`` (the layer type, with the layer information) per node; ``about`` has
        the layers, the runs and whether the layer information was read.

    Examples
    --------
    >>> from explorer import load
    >>> reformat = "Reformatting CopyNode for Input Tensor 0 to fused"
    >>> profile = [{"name": "fused", "averageMs": 0.3}, {"name": reformat, "averageMs": 0.1}]
    >>> layers = {"Layers": [{"Name": "fused", "LayerType": "CaskGemm",
    ...                       "Metadata": "[ONNX Layer: /fc1/Gemm]\\x1e[ONNX Layer: /relu1/Relu]"}]}
    >>> overlay = read(profile, load("zoo:mlp"), layer_info=layers)
    >>> overlay.values["/relu1/Relu"].time_ms, overlay.values["/relu1/Relu"].op, overlay.time_share_mapped
    (0.15, 'CaskGemm', 0.75)
    """
    label = source or "<value>"
    check_split(split)
    if isinstance(data, dict) and not is_layer_info(data):
        profile, layers = data.get("profile"), data.get("layers")
    elif is_layer_info(data):
        profile, layers = None, data
    else:
        profile, layers = data, None
    if layer_info is not None:
        layers = layer_info
    infos = _layer_infos(layers, label)
    if profile is None:
        entries: list[tuple[str, float | None]] = [(name, None) for name in infos]
    else:
        entries = list(_entries(profile, label))
    index = NodeIndex(graph) if graph is not None else None
    collect = Collect()
    unmapped: list[Unmapped] = []
    for name, ms in entries:
        names, kind = infos.get(name, ([], None))
        described_by = "its metadata"
        if not names:
            if name.startswith(_REFORMAT):
                why = "a reformat layer TensorRT added (a layout or precision conversion), from no ONNX node"
                unmapped.append(Unmapped(name, why, ms))
                continue
            if _FOREIGN.match(name):
                why = (
                    "a Myelin region, named by its first and last node only: give the layer information "
                    "(trtexec --exportLayerInfo with --profilingVerbosity=detailed) to map all its nodes"
                )
                unmapped.append(Unmapped(name, why, ms))
                continue
            names, described_by = name_parts(name), "its name"
        if index is None:
            nodes = names
        else:
            nodes = [n for n in (index.find(part) for part in names) if n is not None]
            missing = [part for part in names if index.find(part) is None]
            if not nodes:
                listed = ", ".join(repr(m) for m in missing)
                why = f"no node of the model is named as {described_by} says ({listed})"
                unmapped.append(Unmapped(name, why, ms))
                continue
            for part in missing:
                why = f"named by TensorRT layer {name!r} ({described_by}); no node of the model has that name"
                unmapped.append(Unmapped(part, why))
        shares = spread(ms, nodes, split, graph) if ms is not None else dict.fromkeys(nodes)
        for node, share in shares.items():
            collect.add(
                node, entry=name, time_ms=share, op=kind, shared_with=tuple(n for n in shares if n != node)
            )
    count = next((e["count"] for e in profile or () if isinstance(e, dict) and "count" in e), None)
    about: dict[str, Any] = {"layers": len(entries), "layer_info": bool(infos), "split": split}
    if count is not None:
        about["runs"] = count
    total = float(sum(ms for _, ms in entries if ms is not None)) if profile is not None else None
    return collect.overlay(
        FORMAT,
        source,
        graph,
        unmapped,
        total,
        about,
    )

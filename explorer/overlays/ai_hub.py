"""Qualcomm AI Hub's profile (``ProfileJob.download_profile()``) on the model's own nodes.

The profile is a dict whose ``execution_detail`` lists each layer the device ran:
``{"name", "type", "compute_unit": "NPU" | "GPU" | "CPU", "execution_time": µs,
"execution_cycles"}`` (``execution_summary`` holds the totals). It gives the real placement per
layer, measured on a phone, where ``coverage --target qnn-htp`` predicts it.

A layer maps to the node of that ONNX name, else to the node writing a tensor of that name,
else to the one node whose name or output, with every character other than a letter, a digit or
``_`` replaced by ``_``, is the layer's name: QNN's converters spell ``/layer1/conv/Conv`` as
``_layer1_conv_Conv`` (a ``:OpId_N`` suffix, as ``qnn-net-run`` prints ops, is dropped first).
Layers the converters made of no node (a layout transpose, a data-type conversion), or whose
sanitized name several nodes share, are listed in ``unmapped`` with the reason and their time.

Examples
--------
>>> from explorer import load
>>> profile = {"execution_detail": [
...     {"name": "_fc1_Gemm", "type": "FullyConnected", "compute_unit": "NPU", "execution_time": 120,
...      "execution_cycles": 60000}]}
>>> overlay = read(profile, load("zoo:mlp"))
>>> overlay.values["/fc1/Gemm"].compute_unit, overlay.values["/fc1/Gemm"].time_ms
('NPU', 0.12)
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from explorer.core.errors import UsageError
from explorer.overlays.mapping import Collect, NodeIndex, described
from explorer.overlays.value import Overlay, Unmapped

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = ["FORMAT", "COMPUTE_UNITS", "sniff", "read"]

FORMAT = "ai-hub-profile"
"""The format's name in :data:`explorer.overlays.READERS`."""

COMPUTE_UNITS = ("NPU", "GPU", "CPU")
"""Where AI Hub says a layer ran."""

_OP_ID = re.compile(r":OpId_\d+$")


def sniff(data: Any) -> bool:
    """Whether ``data`` is an AI Hub profile (a dict with an ``execution_detail`` list).

    Examples
    --------
    >>> sniff({"execution_detail": [], "execution_summary": {}}), sniff([])
    (True, False)
    """
    return isinstance(data, dict) and isinstance(data.get("execution_detail"), list)


def _micros(layer: dict[str, Any], key: str, label: str, name: str) -> float | None:
    value = layer.get(key)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise UsageError(f"{label}: layer {name!r} has {key} {value!r}, not a number of µs >= 0")
    return float(value)


def read(data: Any, graph: ModelGraph | None = None, *, source: str | None = None) -> Overlay:
    """Read an AI Hub profile, mapped onto ``graph``'s nodes.

    Parameters
    ----------
    data : dict
        ``download_profile()``'s dict (or the JSON file AI Hub's page downloads).
    graph : ModelGraph, optional
        The model profiled (without it, values are keyed by the layers' names).
    source : str, optional
        The file's path.

    Returns
    -------
    Overlay
        ``time_ms``, ``compute_unit``, ``cycles`` and ``op`` (the layer type) per node; ``about``
        has the time per compute unit and the summary's estimated inference time.

    Examples
    --------
    >>> from explorer import load
    >>> profile = {"execution_detail": [
    ...     {"name": "/fc1/Gemm", "type": "FullyConnected", "compute_unit": "NPU", "execution_time": 300},
    ...     {"name": "Transpose_in", "type": "Transpose", "compute_unit": "CPU", "execution_time": 100}]}
    >>> overlay = read(profile, load("zoo:mlp"))
    >>> overlay.time_share_mapped, overlay.about["ms_per_compute_unit"]
    (0.75, {'NPU': 0.3, 'CPU': 0.1})
    """
    label = source or "<value>"
    if not sniff(data):
        raise UsageError(f"{label}: not a Qualcomm AI Hub profile (a JSON object with 'execution_detail')")
    index = NodeIndex(graph) if graph is not None else None
    collect = Collect()
    unmapped: list[Unmapped] = []
    per_unit: dict[str, float] = {}
    total = 0.0
    for number, layer in enumerate(data["execution_detail"]):
        if not isinstance(layer, dict) or not isinstance(layer.get("name"), str):
            raise UsageError(f"{label}: execution_detail[{number}] is not a layer with a 'name'")
        name = layer["name"]
        micros = _micros(layer, "execution_time", label, name)
        cycles = _micros(layer, "execution_cycles", label, name)
        ms = None if micros is None else micros / 1000.0
        unit = str(layer.get("compute_unit") or "") or None
        if ms is not None:
            total += ms
            if unit:
                per_unit[unit] = per_unit.get(unit, 0.0) + ms
        if index is None:
            collect.add(name, entry=name, time_ms=ms, cycles=cycles, compute_unit=unit, op=layer.get("type"))
            continue
        plain = _OP_ID.sub("", name)
        node = index.find(plain, tensors=True, sanitized=True)
        if node is None:
            several = index.sanitized_matches(plain)
            why = (
                f"its name, as QNN spells names, fits {len(several)} nodes: {described(several)}"
                if len(several) > 1
                else f"no node or tensor of the model is named {plain!r}, even with its punctuation as "
                "QNN writes it (a layer the converter added?)"
            )
            unmapped.append(Unmapped(name, why, ms))
            continue
        collect.add(node, entry=name, time_ms=ms, cycles=cycles, compute_unit=unit, op=layer.get("type"))
    summary = data.get("execution_summary") if isinstance(data.get("execution_summary"), dict) else {}
    about: dict[str, Any] = {
        "layers": len(data["execution_detail"]),
        "ms_per_compute_unit": {u: round(ms, 6) for u, ms in per_unit.items()},
    }
    estimated = summary.get("estimated_inference_time")
    if isinstance(estimated, (int, float)) and not isinstance(estimated, bool):
        about["estimated_inference_ms"] = float(estimated) / 1000.0
    has_times = any(
        isinstance(layer, dict) and "execution_time" in layer for layer in data["execution_detail"]
    )
    return collect.overlay(
        FORMAT,
        source,
        graph,
        unmapped,
        total if has_times else None,
        about,
    )

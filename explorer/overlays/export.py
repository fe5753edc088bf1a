"""``--export-overlay FILE``: the overlays a command computed, written as Model Explorer node data.

Model Explorer's node data holds one value per node of a graph, so each overlay is a file of its
own: the first at ``FILE``, each other beside it as ``FILE``'s stem, a dot, a slug of the
overlay's name and ``FILE``'s suffix (``cov.json``, ``cov.fallback-reason-on-nnapi.json``). Each
is written atomically by :func:`explorer.overlays.model_explorer.write_model_explorer`.

Examples
--------
>>> export_paths("out/cov.json", ["placement on nnapi", "fallback reason on nnapi"])
[PosixPath('out/cov.json'), PosixPath('out/cov.fallback-reason-on-nnapi.json')]
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from explorer.overlays.model_explorer import write_model_explorer

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph
    from explorer.overlays.value import Overlay

__all__ = ["slug", "export_paths", "export_overlays"]


def slug(name: str) -> str:
    """``name`` as a file-name part: lower case, runs of other characters one ``-``.

    Examples
    --------
    >>> slug("time on tvm, decode (ms)")
    'time-on-tvm-decode-ms'
    """
    return re.sub(r"[^a-z0-9_]+", "-", name.lower()).strip("-") or "overlay"


def export_paths(path: str | os.PathLike[str], names: Sequence[str]) -> list[Path]:
    """Where each overlay of ``names`` goes: the first at ``path``, the others beside it.

    Examples
    --------
    >>> export_paths("t.json", ["time on ort (ms)", "time on tvm (ms)"])
    [PosixPath('t.json'), PosixPath('t.time-on-tvm-ms.json')]
    """
    first = Path(path)
    paths = [first]
    seen = {first}
    for name in names[1:]:
        candidate = first.with_name(f"{first.stem}.{slug(name)}{first.suffix or '.json'}")
        n = 2
        while candidate in seen:
            candidate = first.with_name(f"{first.stem}.{slug(name)}-{n}{first.suffix or '.json'}")
            n += 1
        seen.add(candidate)
        paths.append(candidate)
    return paths


def export_overlays(
    overlays: Sequence[Overlay], path: str | os.PathLike[str], graph: ModelGraph | None = None
) -> list[Path]:
    """Write each of ``overlays`` as Model Explorer node data (:func:`export_paths`); return the paths.

    Parameters
    ----------
    overlays : sequence of Overlay
        What the command computed, the one ``path`` names first.
    path : path
        ``--export-overlay``'s FILE.
    graph : ModelGraph, optional
        The model: keys and graph id as Model Explorer's ONNX adapter gives them.

    Examples
    --------
    >>> import json, os, tempfile
    >>> from explorer.overlays.value import NodeValue, Overlay
    >>> overlay = Overlay("explorer-profile", None, "m", {"a": NodeValue("a", value=1.5)}, name="time on ort")
    >>> [p.name for p in export_overlays([overlay], os.path.join(tempfile.mkdtemp(), "t.json"))]
    ['t.json']
    """
    paths = export_paths(path, [o.name or o.format for o in overlays])
    for overlay, where in zip(overlays, paths, strict=True):
        write_model_explorer(overlay, where, graph=graph)
    return paths

"""Other tools' results on our graph: an ONNX Runtime profile, Model Explorer's node data, a Qualcomm
AI Hub profile, TensorRT's layer profile, each read onto a model's nodes with a report of what did
not map and why; any overlay written back as Model Explorer node data, our own results as
overlays (:mod:`explorer.overlays.ours`: time per node, placement, fallback reasons, drift), a
device's measured placement against a target's predicted one (:mod:`explorer.overlays.agreement`) and
lowering provenance as Model Explorer's sync mapping (:mod:`explorer.overlays.sync_mapping`).

:func:`read` recognises the format (:data:`READERS`; ``format=`` to say it) and returns an
:class:`Overlay`: a :class:`NodeValue` per node (time, provider or compute unit, value, colour),
the names that did not map (:class:`Unmapped`, with the reason) and ``time_share_mapped``, the
share of the file's time that landed on the model's nodes. A stage: the ONNX Runtime reader runs
ONNX Runtime's own optimisation levels (the ``ort:*`` passes) to map a fused kernel back to the
nodes it came from.

Examples
--------
>>> from explorer import load
>>> overlay = read({"main_graph": {"results": {"/fc1/Gemm": {"value": 0.5}}}}, load("zoo:mlp"))
>>> overlay.format, overlay.mapped_nodes, overlay.values["/fc1/Gemm"].value
('model-explorer', 1, 0.5)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from explorer.core.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from explorer.overlays.agreement import PlacementAgreement, placement_agreement
    from explorer.overlays.export import export_overlays
    from explorer.overlays.mapping import SPLIT_RULES
    from explorer.overlays.model_explorer import node_data, write_model_explorer
    from explorer.overlays.ours import drift_overlay, fallback_overlay, placement_overlay, profile_overlay
    from explorer.overlays.registry import READERS, Reader, detect, read
    from explorer.overlays.sync_mapping import sync_mapping, write_sync_mapping
    from explorer.overlays.value import NodeValue, Overlay, Unmapped

__all__ = [
    "read",
    "detect",
    "READERS",
    "Reader",
    "Overlay",
    "NodeValue",
    "Unmapped",
    "SPLIT_RULES",
    "node_data",
    "write_model_explorer",
    "export_overlays",
    "profile_overlay",
    "placement_overlay",
    "fallback_overlay",
    "drift_overlay",
    "placement_agreement",
    "PlacementAgreement",
    "sync_mapping",
    "write_sync_mapping",
]

lazy_exports(
    __name__,
    {
        "read": "explorer.overlays.registry",
        "detect": "explorer.overlays.registry",
        "READERS": "explorer.overlays.registry",
        "Reader": "explorer.overlays.registry",
        "Overlay": "explorer.overlays.value",
        "NodeValue": "explorer.overlays.value",
        "Unmapped": "explorer.overlays.value",
        "SPLIT_RULES": "explorer.overlays.mapping",
        "node_data": "explorer.overlays.model_explorer",
        "write_model_explorer": "explorer.overlays.model_explorer",
        "export_overlays": "explorer.overlays.export",
        "profile_overlay": "explorer.overlays.ours",
        "placement_overlay": "explorer.overlays.ours",
        "fallback_overlay": "explorer.overlays.ours",
        "drift_overlay": "explorer.overlays.ours",
        "placement_agreement": "explorer.overlays.agreement",
        "PlacementAgreement": "explorer.overlays.agreement",
        "sync_mapping": "explorer.overlays.sync_mapping",
        "write_sync_mapping": "explorer.overlays.sync_mapping",
    },
)

"""The core: what every IR shares, and nothing that knows one.

The neutral graph model (:class:`~explorer.core.graph.ModelGraph`, its node and edge
schema, node ids, name scopes, fresh names), tensors, the typed errors, op
categories, summaries, diffs and op deltas, the :class:`~explorer.core.timeline.Timeline`
of snapshots any producer builds, and the adapter interface
(:mod:`explorer.core.adapter`) through which the core asks an IR's adapter for what
only it knows. The core imports no adapter, stage, view or UI (``tests/test_layers.py``).

Examples
--------
>>> from explorer import load
>>> graph = load("zoo:mlp")  # the ONNX adapter builds a core graph
>>> type(graph).__module__, graph.ir, type(graph.adapter).__module__
('explorer.core.graph', 'onnx', 'explorer.onnx_adapter.adapter')
"""

__all__: list[str] = []

"""Import an ONNX graph into TVM Relax in the worker; when it fails, say which nodes failed and offer the fix.

The importer (``tvm.relax.frontend.onnx.from_onnx``) either converts every node or stops
at the first it cannot. :func:`relax_import` reports, mapped back to the ONNX nodes, every
node whose operator the importer lacks, or the node it stopped at and the importer's own
words; and it names the fix a learner should know: fix the input shapes and run onnxsim
first (a Reshape whose shape is computed at run time, common in Paddle and TF exports,
then becomes a constant). :meth:`RelaxImport.retry` is that fix in one call.

Examples
--------
>>> from explorer import load
>>> result = relax_import(load("zoo:mlp"), input_shapes={"input": [1, 1, 28, 28]})
>>> result.ok, result.graph.ir, result.graph.op_counts["nn.relu"]
(True, 'relax', 2)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import networkx as nx

from .. import worker
from ..graph import ModelGraph
from ..model_files import worker_source
from .relax_steps import import_relax

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ImportFailure", "RelaxImport", "relax_import", "relax_graph", "failed_import", "shape_dict"]

FIX = "fix the input shapes and run onnxsim first"
"""The fix offered for a failed import (what :meth:`RelaxImport.retry` does)."""


@dataclass(frozen=True)
class ImportFailure:
    """One ONNX node the importer could not convert.

    Attributes
    ----------
    node : str
        The ONNX node's id in the graph (its name), or ``""`` when the importer did not say.
    op_type : str
        Its operator.
    reason : str
        Why, in the importer's words where it gave some.
    """

    node: str
    op_type: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        """``{"node", "op_type", "reason"}``."""
        return {"node": self.node, "op_type": self.op_type, "reason": self.reason}


@dataclass(frozen=True)
class RelaxImport:
    """The outcome of importing an ONNX graph into Relax.

    Attributes
    ----------
    ok : bool
        Whether it imported.
    graph : ModelGraph or None
        The Relax ``main`` function as a graph (``ir="relax"``), when it imported.
    text : str
        The module as TVMScript (constants not printed), when it imported.
    failures : tuple of ImportFailure
        The ONNX nodes that failed, when it did not.
    fix : str or None
        What to do about it (:data:`FIX`, which :meth:`retry` does), when the importer stopped
        at a node it has a converter for; None when an operator has no converter at all
        (fixing shapes cannot help: the node has to be replaced, or the model run elsewhere).
    elapsed : float
        Seconds the import took in the worker.
    source : ModelGraph
        The ONNX graph imported.
    input_shapes : dict or None
        The shapes given.
    """

    ok: bool
    graph: ModelGraph | None
    text: str
    failures: tuple[ImportFailure, ...]
    fix: str | None
    elapsed: float
    source: ModelGraph = field(repr=False)
    input_shapes: dict[str, list[int]] | None = None

    def retry(self, input_shapes: Mapping[str, Sequence[int]] | None = None) -> RelaxImport:
        """Apply the fix and import again: fix the input shapes (``input_shapes``, or the shapes
        given before, or 1 for batch-like dimensions and 32 for others) and run onnxsim first.

        Examples
        --------
        >>> from explorer import load
        >>> relax_import(load("zoo:mlp")).retry().ok
        True
        """
        from ..runtimes.inputs import concrete_input_shapes
        from ..timeline import run_pipeline

        shapes = concrete_input_shapes(self.source.model, input_shapes or self.input_shapes)
        simplified = run_pipeline(self.source, "onnxsim", input_shapes=shapes, verify=False)[-1].graph
        return relax_import(simplified, input_shapes=shapes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready facts (``onnx-explorer lower`` prints them).

        Examples
        --------
        >>> from explorer import load
        >>> sorted(relax_import(load("zoo:mlp")).to_dict())
        ['bindings', 'elapsed_ms', 'failures', 'fix', 'ok']
        """
        return {
            "ok": self.ok,
            "bindings": sum(self.graph.op_counts.values()) if self.graph is not None else 0,
            "elapsed_ms": round(self.elapsed * 1000, 3),
            "failures": [f.to_dict() for f in self.failures],
            "fix": self.fix,
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per failed ONNX node (empty when it imported).

        Examples
        --------
        >>> from explorer import load
        >>> relax_import(load("zoo:mlp")).to_frame().shape[0]
        0
        """
        import pandas as pd

        return pd.DataFrame([f.to_dict() for f in self.failures], columns=["node", "op_type", "reason"])


def relax_graph(data: Mapping[str, Any], source: str = "<relax>") -> ModelGraph:
    """Build the graph model of a Relax function from the records the worker made.

    Examples
    --------
    >>> from explorer.graph_schema import node_data
    >>> g = relax_graph({"name": "main", "nodes": [("lv", node_data("op", "add", "lv", op="relax.add"))],
    ...                  "edges": []})
    >>> g.ir, g.op_counts
    ('relax', Counter({'add': 1}))
    """
    graph = nx.MultiDiGraph(name=data["name"])
    graph.add_nodes_from(data["nodes"])
    graph.add_edges_from(data["edges"])
    weights = {w.name: w for _, d in data["nodes"] for w in d["weights"]}
    return ModelGraph(graph, ir="relax", name=data["name"], source=source, weights=weights)


def shape_dict(input_shapes: Mapping[str, Sequence[int]] | None) -> dict[str, list[int]] | None:
    """Input shapes as the importer's ``shape_dict`` takes them (plain ints), or None.

    Examples
    --------
    >>> shape_dict({"x": (1, 3)}), shape_dict(None)
    ({'x': [1, 3]}, None)
    """
    return {k: [int(d) for d in v] for k, v in input_shapes.items()} if input_shapes else None


def failed_import(out: Mapping[str, Any], graph: ModelGraph, shapes: Mapping[str, Any] | None) -> RelaxImport:
    """The :class:`RelaxImport` of a failed import, from what the worker said (``import_relax``).

    Examples
    --------
    >>> from explorer import load
    >>> out = {"ok": False, "missing": True, "failures": [{"node": "n", "op_type": "Loop", "reason": "none"}]}
    >>> failed_import(out, load("zoo:mlp"), None).failures[0].op_type
    'Loop'
    """
    failures = tuple(ImportFailure(f["node"], f["op_type"], f["reason"]) for f in out["failures"])
    fix = None if out.get("missing") else FIX
    return RelaxImport(False, None, "", failures, fix, 0.0, graph, dict(shapes) if shapes else None)


def relax_import(
    graph: ModelGraph,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    timeout: float | None = None,
) -> RelaxImport:
    """Import an ONNX graph into TVM Relax (in the worker) and read its ``main`` function as a graph.

    Parameters
    ----------
    graph : ModelGraph
        A top-level ONNX graph (from :func:`explorer.load`).
    input_shapes : mapping, optional
        Static shapes for the inputs (``shape_dict`` of the importer).
    timeout : float, optional
        Seconds the worker may take.

    Returns
    -------
    RelaxImport

    Examples
    --------
    >>> from explorer import load
    >>> relax_import(load("zoo:resnet18"), {"input": [1, 3, 224, 224]}).graph.op_counts["nn.conv2d"]
    20
    """
    if graph.model is None:
        raise ValueError("relax_import needs a top-level ONNX graph (one with a ModelProto)")
    shapes = shape_dict(input_shapes)
    out = worker.run_on_model(
        import_relax, worker_source(graph), shapes, step="Relax import", timeout=timeout
    )
    if not out["ok"]:
        return failed_import(out, graph, shapes)
    relax = relax_graph(out["graph"], source=f"relax:{graph.source}")
    return RelaxImport(True, relax, out["text"], (), None, out["elapsed"], graph, shapes)

"""Import an ONNX graph into TVM Relax in the worker; when it fails, say which nodes failed and offer the fix.

The importer (``tvm.relax.frontend.onnx.from_onnx``) either converts every node or stops
at the first it cannot. :func:`relax_import` reports, mapped back to the ONNX nodes, every
node whose operator the importer lacks, or the node it stopped at and the importer's own
words; and it names the fix a learner should know. For a node the importer stopped at: fix
the input shapes and run onnxsim first (a Reshape whose shape is computed at run time,
common in Paddle and TF exports, then becomes a constant). For operators it lacks, the
rewrites into standard ONNX that remove them
(:data:`~explorer.lower.rewrites.REWRITE_FIXES`): inline model-local functions, write
com.microsoft contrib ops in standard ONNX, unroll loops with a constant trip count.
:meth:`RelaxImport.retry` is that fix in one call.

Examples
--------
>>> from explorer import load
>>> result = relax_import(load("zoo:mlp"), input_shapes={"input": [1, 1, 28, 28]})
>>> result.ok, result.graph.ir, result.graph.op_counts["nn.relu"]
(True, 'relax', 2)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from explorer.core.graph import ModelGraph
from explorer.core.node_ids import INPUT_PREFIX
from explorer.isolation import worker
from explorer.lower.rewrites import FIX, ImportFailure, fix_graph, rewrite_fix, shape_dict
from explorer.lower.tvm.relax_adapter import relax_graph
from explorer.lower.tvm.relax_frontend import import_relax
from explorer.onnx_adapter.adapter import has_onnx_model, onnx_model
from explorer.onnx_adapter.model_files import worker_source

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RelaxImport", "relax_import", "failed_import"]


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
        What to do about it, which :meth:`retry` does: :data:`~explorer.lower.rewrites.FIX` when
        the importer stopped at a node it has a converter for; the rewrites of
        :data:`~explorer.lower.rewrites.REWRITE_FIXES` that remove every operator it lacks; None
        when some operator has no converter and no rewrite removes it (the node has to be
        replaced by hand, or the model run elsewhere).
    elapsed : float
        Seconds the import took in the worker.
    source : ModelGraph
        The ONNX graph imported.
    input_shapes : dict or None
        The shapes given.
    fix_pipeline : tuple
        The passes :meth:`retry` runs before importing again (pipeline items of
        :func:`explorer.core.timeline.run_pipeline`): ``("onnxsim",)`` with fixed shapes for
        :data:`~explorer.lower.rewrites.FIX`, else the rewrites.
    applied : tuple of str
        The fixes applied to get here (by :meth:`retry` / :meth:`fixed`), first first.
    """

    ok: bool
    graph: ModelGraph | None
    text: str
    failures: tuple[ImportFailure, ...]
    fix: str | None
    elapsed: float
    source: ModelGraph = field(repr=False)
    input_shapes: dict[str, list[int]] | None = None
    fix_pipeline: tuple[Any, ...] = ("onnxsim",)
    applied: tuple[str, ...] = ()

    def retry(self, input_shapes: Mapping[str, Sequence[int]] | None = None) -> RelaxImport:
        """Apply the fix and import again.

        For :data:`~explorer.lower.rewrites.FIX`: fix the input shapes (``input_shapes``, or the
        shapes given before, or 1 for batch-like dimensions and 32 for others) and run onnxsim
        first. For rewrites: run them (``input_shapes`` or the shapes given before stay as they are). The new
        result's ``source`` is the rewritten ONNX graph, which the Relax nodes' origins name.

        Raises
        ------
        ExplorerError
            A pass of the fix failed (the message says which and why).

        Examples
        --------
        >>> from explorer import load
        >>> relax_import(load("zoo:mlp")).retry().ok
        True
        >>> relax_import(load("zoo:control_flow")).retry().ok
        True
        """
        shapes = shape_dict(input_shapes) or self.input_shapes
        graph, shapes = fix_graph(self.source, self.fix_pipeline, shapes, fixed_shapes=self.fix == FIX)
        again = relax_import(graph, input_shapes=shapes)
        return dataclasses.replace(again, applied=(*self.applied, self.fix or ""))

    def fixed(
        self, input_shapes: Mapping[str, Sequence[int]] | None = None, max_tries: int = 3
    ) -> RelaxImport:
        """Retry with the offered fix while the import fails and a fix is offered (at most ``max_tries``).

        A model may need two fixes: a loop unrolled, then its shapes fixed. The result says
        the last failure (and ``fix`` None) when no fix is left.

        Examples
        --------
        >>> from explorer import load
        >>> result = relax_import(load("zoo:custom_domain")).fixed()
        >>> result.ok, "FusedMatMul" in result.source.summary().ops, len(result.applied)
        (True, False, 1)
        """
        result = self
        for _ in range(max_tries):
            if result.ok or result.fix is None:
                break
            result = result.retry(input_shapes)
        return result

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready facts (``onnx-explorer lower`` prints them).

        Examples
        --------
        >>> from explorer import load
        >>> sorted(relax_import(load("zoo:mlp")).to_dict())
        ['applied', 'bindings', 'elapsed_ms', 'failures', 'fix', 'fix_pipeline', 'ok']
        """
        return {
            "ok": self.ok,
            "bindings": sum(self.graph.op_counts.values()) if self.graph is not None else 0,
            "elapsed_ms": round(self.elapsed * 1000, 3),
            "failures": [f.to_dict() for f in self.failures],
            "fix": self.fix,
            "applied": list(self.applied),
            "fix_pipeline": [item if isinstance(item, str) else item[0] for item in self.fix_pipeline]
            if self.fix
            else [],
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


def failed_import(out: Mapping[str, Any], graph: ModelGraph, shapes: Mapping[str, Any] | None) -> RelaxImport:
    """The :class:`RelaxImport` of a failed import, from what the worker said (``import_relax``).

    Examples
    --------
    >>> from explorer import load
    >>> out = {"ok": False, "missing": True, "failures": [{"node": "n", "op_type": "Loop", "reason": "none"}]}
    >>> failed_import(out, load("zoo:mlp"), None).failures[0].op_type
    'Loop'
    """
    from explorer.onnx_adapter.protos import string_inputs

    failures = tuple(ImportFailure(f["node"], f["op_type"], f["reason"]) for f in out["failures"])
    fix: str | None = FIX
    pipeline: tuple[Any, ...] = ("onnxsim",)
    strings = string_inputs(graph.model) if has_onnx_model(graph) else []
    if strings:  # no fix makes text a tensor TVM can hold
        failures = tuple(
            ImportFailure(INPUT_PREFIX + name, "", "a string tensor: TVM's Relax has no string tensors")
            for name in strings
        )
        fix, pipeline = None, ()
    elif out.get("missing"):
        rewrite = rewrite_fix(graph, failures)
        fix, pipeline = rewrite if rewrite is not None else (None, ())
    return RelaxImport(False, None, "", failures, fix, 0.0, graph, dict(shapes) if shapes else None, pipeline)


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
    onnx_model(graph, "relax_import")
    shapes = shape_dict(input_shapes)
    out = worker.run_on_model(
        import_relax, worker_source(graph), shapes, step="Relax import", timeout=timeout
    )
    if not out["ok"]:
        return failed_import(out, graph, shapes)
    relax = relax_graph(out["graph"], source=f"relax:{graph.source}")
    return RelaxImport(True, relax, out["text"], (), None, out["elapsed"], graph, shapes)

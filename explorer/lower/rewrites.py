"""What every compiler's fix path rewrites before it tries again: the rewrites into standard ONNX.

A compiler's ONNX importer (TVM's, IREE's) stops at an operator it lacks, or at a node it
cannot lower with the shapes it was given. Both failures have compiler-neutral answers, on
the ONNX graph: fixed input shapes and onnxsim (:data:`FIX`), or the rewrites that remove
the operator (:data:`REWRITE_FIXES`: inline model-local functions, write com.microsoft
contrib ops in standard ONNX, unroll loops with a constant trip count), chosen by
:func:`rewrite_fix` for the failed nodes and run by :func:`fix_graph`. The shared fix path
(:func:`explorer.lower.import_fix.lower_with_fixes`) applies them for either compiler.

Examples
--------
>>> from explorer import load
>>> rewrite_fix(load("zoo:control_flow"), [ImportFailure("/loop/Loop", "Loop", "")])[0]
'unroll the loops with a constant trip count (explorer:unroll_loops)'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from explorer.core.graph import ModelGraph
from explorer.passes.contrib_quantized import PRIMITIVE

__all__ = [
    "FIX",
    "NO_CONVERSION",
    "REWRITE_FIXES",
    "REWRITE_PARAMETERS",
    "UNTYPED",
    "ImportFailure",
    "fix_graph",
    "rewrite_fix",
    "shape_dict",
]

FIX = "fix the input shapes and run onnxsim first"
"""The fix offered when the importer stopped at a node it has a converter for."""

REWRITE_FIXES: dict[str, str] = {
    "onnxscript:inline": "inline the model-local functions",
    "explorer:decompose_contrib": "write the com.microsoft contrib ops in standard ONNX",
    "explorer:unroll_loops": "unroll the loops with a constant trip count",
}
"""The passes that remove operators the importer lacks, in the order the fix runs them, and what each does."""

REWRITE_PARAMETERS: dict[str, dict[str, Any]] = {
    "explorer:decompose_contrib": {"quantized": PRIMITIVE},
}
"""Parameters of a fix's rewrite: the form the compilers import. TVM 0.27 and IREE 3.13 take no uint4
initializer or blocked DequantizeLinear, so quantised weights are written as bytes + Cast/Sub/Mul
(:data:`explorer.passes.contrib_quantized.PRIMITIVE`)."""

UNTYPED = "ONNX shape inference gave its output no type"
"""What a failure says when the op a compiler could not lower has an output of no type (IREE's import
needs every value typed)."""

NO_CONVERSION = "IREE's ONNX lowering has no conversion for this op (at this opset or with these attributes)"
"""The ``fix`` of a failure at a typed op the compiler's ONNX lowering cannot convert: why, not a fix to
apply (:func:`explorer.lower.import_fix.offer_simplify` offers onnxsim where it computes the op ahead of
time)."""


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


def fix_graph(
    graph: ModelGraph,
    pipeline: Sequence[Any],
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    fixed_shapes: bool = False,
) -> tuple[ModelGraph, dict[str, list[int]] | None]:
    """Run a fix's passes on ``graph`` before an import: the rewritten graph and the shapes to import it with.

    ``fixed_shapes``: every input gets a static shape first (``input_shapes``, else 1 for
    batch-like dimensions and 32 for others), what :data:`FIX` does with ``("onnxsim",)``.

    Raises
    ------
    ExplorerError
        A pass of the fix failed (the message says which and why).

    Examples
    --------
    >>> from explorer import load
    >>> graph, shapes = fix_graph(load("zoo:mlp"), ("onnxsim",), fixed_shapes=True)
    >>> shapes, graph.source.startswith("zoo:mlp")
    ({'input': [1, 1, 28, 28]}, True)
    """
    from explorer.core.errors import ExplorerError
    from explorer.onnx_adapter.inputs import concrete_input_shapes
    from explorer.passes.pipeline import run_pipeline

    shapes = shape_dict(input_shapes)
    if fixed_shapes:
        shapes = concrete_input_shapes(graph.model, shapes)
    timeline = run_pipeline(graph, list(pipeline), input_shapes=shapes, verify=False)
    failed = next((snap for snap in timeline if snap.error), None)
    if failed is not None:
        raise ExplorerError(f"{graph.source}: {failed.name} failed before the import: {failed.error}")
    return timeline[-1].graph, shapes


def shape_dict(input_shapes: Mapping[str, Sequence[int]] | None) -> dict[str, list[int]] | None:
    """Input shapes as the importer's ``shape_dict`` takes them (plain ints), or None.

    Examples
    --------
    >>> shape_dict({"x": (1, 3)}), shape_dict(None)
    ({'x': [1, 3]}, None)
    """
    return {k: [int(d) for d in v] for k, v in input_shapes.items()} if input_shapes else None


def rewrite_fix(graph: ModelGraph, failures: Sequence[ImportFailure]) -> tuple[str, tuple[Any, ...]] | None:
    """The rewrites that remove every operator the importer lacks, in words and as a pipeline; or None.

    Model-local functions are inlined (``onnxscript:inline``), decomposable com.microsoft
    ops written in standard ONNX (``explorer:decompose_contrib``, only those ops), loops
    unrolled (``explorer:unroll_loops``); None when some failed operator is none of these.

    Examples
    --------
    >>> from explorer import load
    >>> graph = load("zoo:custom_domain")
    >>> rewrite_fix(graph, [ImportFailure("/act/Swish", "Swish", "")])
    ('inline the model-local functions (onnxscript:inline)', ('onnxscript:inline',))
    >>> rewrite_fix(graph, [ImportFailure("", "Celu", "")]) is None
    True
    """
    from explorer.passes.contrib_decompositions import is_decomposable

    model = graph.model
    nodes = {node.name: node for node in model.graph.node} if model is not None else {}
    local = {f.domain for f in model.functions} if model is not None else set()
    needed: dict[str, set[str]] = {}
    for failure in failures:
        node = nodes.get(failure.node)
        domain = node.domain if node is not None else ""
        if domain in local:
            needed.setdefault("onnxscript:inline", set())
        elif is_decomposable(domain, failure.op_type):
            needed.setdefault("explorer:decompose_contrib", set()).add(failure.op_type)
        elif failure.op_type == "Loop" and domain in ("", "ai.onnx"):
            needed.setdefault("explorer:unroll_loops", set())
        else:
            return None
    pipeline = tuple(
        (name, {"ops": sorted(needed[name]), **REWRITE_PARAMETERS.get(name, {})}) if needed[name] else name
        for name in REWRITE_FIXES
        if name in needed
    )
    words = ", then ".join(f"{REWRITE_FIXES[name]} ({name})" for name in REWRITE_FIXES if name in needed)
    return words, pipeline

"""One fix path for everything that lowers a model into TVM: ``lower`` and ``bench`` (and any caller).

:func:`lower_with_fixes` runs an attempt (import and lower, or build and time) on a graph.
``simplify`` fixes the input shapes and runs onnxsim before the first attempt (shape
computations become constants). ``fix`` applies what the failure offers and tries again:
when TVM's importer fails, every fix its retry offers (:meth:`RelaxImport.fixed
<explorer.lower.tvm.relax_import.RelaxImport.fixed>`: rewrites into standard ONNX, then fixed
shapes and onnxsim); when a lowering pass fails on a tensor whose shape it does not know
(a :class:`~explorer.core.errors.LoweringError` whose fix is :data:`~explorer.lower.rewrites.FIX`),
fixed shapes and onnxsim; when a compiler fails at ONNX nodes a rewrite into standard ONNX
removes (IREE's lowering has no Loop and no com.microsoft ops: :func:`lowering_rewrite`), that
rewrite; and whatever else failed, in the import or a compiler (IREE's crashes included), fixed
shapes and onnxsim before it gives up. So ``fix`` never does less than ``simplify``, and the caller
runs every runtime on the graph the fixes made. Without either, a compiler's failure at nodes
onnxsim computes ahead of time offers it (:func:`offer_simplify`).

Examples
--------
>>> from explorer import load
>>> from explorer.lower import relax_import
>>> result, fixes = lower_with_fixes(load("zoo:control_flow"), None, relax_import, fix=True)
>>> result.ok, fixes  # relax_import reports a failure rather than raising: nothing to fix here
(False, ())
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import onnx

from explorer.core.errors import ExplorerError, LoweringError
from explorer.core.graph import ModelGraph
from explorer.lower.rewrites import (
    FIX,
    NO_CONVERSION,
    REWRITE_FIXES,
    REWRITE_PARAMETERS,
    UNTYPED,
    ImportFailure,
    fix_graph,
    rewrite_fix,
)
from explorer.lower.tvm.relax_pipeline import RelaxImportFailed

__all__ = [
    "lower_with_fixes",
    "simplified",
    "lowering_rewrite",
    "rewrites_applied",
    "rewritten",
    "foldable_nodes",
    "offer_simplify",
]

T = TypeVar("T")

Shapes = Mapping[str, Sequence[int]] | None


def simplified(graph: ModelGraph, input_shapes: Shapes = None) -> tuple[ModelGraph, dict[str, list[int]]]:
    """``graph`` with static input shapes (``input_shapes``, else the defaults) and onnxsim run on it.

    Examples
    --------
    >>> from explorer import load
    >>> graph, shapes = simplified(load("zoo:yolov8"), {"images": [1, 3, 64, 64]})
    >>> shapes, "Range" in graph.summary().ops
    ({'images': [1, 3, 64, 64]}, False)
    """
    fixed, shapes = fix_graph(graph, ("onnxsim",), input_shapes, fixed_shapes=True)
    return fixed, shapes or {}


_NOT_FOLDED = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
    | {"If", "Loop", "Scan", "SequenceMap"}
)
"""Ops onnxsim does not compute ahead of time even on constant inputs: random ones, and control flow."""


def foldable_nodes(graph: ModelGraph) -> list[onnx.NodeProto]:
    """The main graph's nodes onnxsim computes ahead of time once the input shapes are fixed: standard
    ops (not random, no subgraphs) whose inputs are all initializers, ``Constant`` outputs or other such
    nodes' outputs, and the ``Shape`` / ``Size`` of any tensor (static once the inputs' shapes are).

    Examples
    --------
    >>> from explorer import load
    >>> ops = {n.op_type for n in foldable_nodes(load("zoo:yolov8"))}  # the anchors, from the maps' sizes
    >>> sorted(ops & {"Shape", "Range", "Concat", "Conv"})
    ['Concat', 'Range', 'Shape']
    >>> foldable_nodes(load("zoo:mlp"))
    []
    """
    model = graph.model
    known = {t.name for t in model.graph.initializer}
    found: list[onnx.NodeProto] = []
    for node in model.graph.node:  # in topological order, as ONNX keeps them
        if node.domain not in ("", "ai.onnx") or node.op_type in _NOT_FOLDED:
            continue
        computed = node.op_type in ("Shape", "Size") or (
            bool(node.input) and all(not name or name in known for name in node.input)
        )
        if computed or node.op_type == "Constant":
            known.update(name for name in node.output if name)
            found.append(node)
    return found


def offer_simplify(graph: ModelGraph, err: LoweringError) -> LoweringError:
    """``err`` offering :data:`~explorer.lower.rewrites.FIX` (fixed shapes, onnxsim: ``--simplify``)
    when onnxsim would take away what the compiler failed at: the ONNX nodes it names are computed ahead of
    time (:func:`foldable_nodes`), or, where it names none (a compiler's crash), the graph has nodes that
    are; the message says which. A failure with a fix of its own (another opset) keeps it.

    Examples
    --------
    >>> from explorer import load
    >>> graph = load("zoo:yolov8")
    >>> node = next(n.name for n in foldable_nodes(graph) if n.op_type == "Range")
    >>> err = LoweringError("failed to legalize", pass_name="phase input", compiler="IREE", onnx_nodes=[node])
    >>> offered = offer_simplify(graph, err)
    >>> offered.fix == FIX, "onnxsim computes Range 1 ahead of time" in offered.reason
    (True, True)
    >>> offer_simplify(load("zoo:mlp"), err) is err
    True
    """
    if err.fix not in (None, NO_CONVERSION):
        return err
    folded = foldable_nodes(graph)
    named = set(err.onnx_nodes)
    hit = [n for n in folded if n.name in named] if named else [n for n in folded if n.op_type != "Constant"]
    if not hit:
        return err
    counts = Counter(n.op_type for n in hit).most_common()
    ops = ", ".join(f"{op} {count}" for op, count in counts[:6]) + (", ..." if len(counts) > 6 else "")
    where = "" if named else " of this graph"
    return err.replace(
        message=f"{err.reason} (onnxsim computes {ops}{where} ahead of time once the input shapes are fixed)",
        fix=FIX,
    )


def lowering_rewrite(graph: ModelGraph, err: LoweringError) -> tuple[str, tuple] | None:
    """The rewrite into standard ONNX that removes the ONNX nodes a compiler failed at, in words and
    as a pipeline (:func:`~explorer.lower.rewrites.rewrite_fix`); None when none does.

    Examples
    --------
    >>> from explorer import load
    >>> err = LoweringError("failed to legalize", pass_name="phase input", onnx_nodes=["/loop/Loop"])
    >>> lowering_rewrite(load("zoo:control_flow"), err)[0]
    'unroll the loops with a constant trip count (explorer:unroll_loops)'
    >>> lowering_rewrite(load("zoo:mlp"), LoweringError("x", pass_name="p")) is None
    True
    """
    nodes = graph.nx.nodes
    failures = [ImportFailure(n, nodes[n]["op_type"], err.reason) for n in err.onnx_nodes if n in nodes]
    rewritable = _rewritable_nodes(graph)
    if (
        UNTYPED in err.reason
    ):  # a node without types: any rewritable node upstream may be why (a local function)
        failures = [f for f, _ in rewritable]
    elif failures and rewrite_fix(graph, failures) is not None:
        # a compiler stops at the first node it cannot lower: the nodes after it that the same
        # rewrites remove (IREE lacks every com.microsoft op) go with it, not one fix per op
        passes = set(_pass_names(rewrite_fix(graph, failures)))
        failures += [f for f, names in rewritable if names <= passes and f.node not in err.onnx_nodes]
    return rewrite_fix(graph, failures) if failures else None


def _pass_names(rewrite: tuple[str, tuple] | None) -> list[str]:
    """The pass names of a rewrite's pipeline (:func:`~explorer.lower.rewrites.rewrite_fix`)."""
    return [item if isinstance(item, str) else item[0] for item in rewrite[1]] if rewrite else []


def _rewritable_nodes(graph: ModelGraph) -> list[tuple[ImportFailure, set[str]]]:
    """Every op node a rewrite of :data:`~explorer.lower.rewrites.REWRITE_FIXES` removes, with the
    passes that do (asked once per op type and domain)."""
    nodes = graph.nx.nodes
    asked: dict[tuple[str, str], set[str]] = {}
    found: list[tuple[ImportFailure, set[str]]] = []
    for node, data in nodes(data=True):
        if data["kind"] != "op":
            continue
        failure = ImportFailure(node, data["op_type"], "")
        key = (data["op_type"], str(data.get("domain", "")))
        if key not in asked:
            asked[key] = set(_pass_names(rewrite_fix(graph, [failure])))
        if asked[key]:
            found.append((failure, asked[key]))
    return found


def rewrites_applied(applied: Sequence[str]) -> tuple[Any, ...]:
    """The rewrites into standard ONNX among the fixes ``applied`` (in words, as
    :func:`lower_with_fixes` returns them), as a pipeline with the parameters the fix gives them
    (every op they rewrite, not only the ones a compiler failed at); empty when none.

    A runtime that needs no fix (ONNX Runtime) runs what the compilers ran through this:
    the same graph, fixed shapes apart.

    Examples
    --------
    >>> words = "write the com.microsoft contrib ops in standard ONNX (explorer:decompose_contrib)"
    >>> rewrites_applied([FIX, words])
    (('explorer:decompose_contrib', {'quantized': 'primitive'}),)
    >>> rewrites_applied([FIX])
    ()
    """
    named = [name for name in REWRITE_FIXES if any(f"({name})" in words for words in applied)]
    return tuple(
        (name, dict(REWRITE_PARAMETERS[name])) if name in REWRITE_PARAMETERS else name for name in named
    )


def rewritten(graph: ModelGraph, applied: Sequence[str]) -> ModelGraph:
    """``graph`` with the rewrites among the fixes ``applied`` (:func:`rewrites_applied`), its input
    shapes left as they are; ``graph`` itself when the fixes rewrote nothing.

    Examples
    --------
    >>> from explorer import load
    >>> err = LoweringError("x", pass_name="p", onnx_nodes=["/loop/Loop"])
    >>> words = lowering_rewrite(load("zoo:control_flow"), err)[0]
    >>> "Loop" in rewritten(load("zoo:control_flow"), [words]).summary().ops
    False
    """
    pipeline = rewrites_applied(applied)
    return fix_graph(graph, pipeline)[0] if pipeline else graph


def lower_with_fixes(
    graph: ModelGraph,
    input_shapes: Shapes,
    attempt: Callable[[ModelGraph, Shapes], T],
    *,
    simplify: bool = False,
    fix: bool = False,
    progress: Callable[[str], object] | None = None,
) -> tuple[T, tuple[str, ...]]:
    """``attempt(graph, input_shapes)``, after ``simplify`` and with ``fix`` when it fails.

    Parameters
    ----------
    graph : ModelGraph
        A top-level ONNX graph.
    input_shapes : mapping or None
        The shapes given (``--input-shape``).
    attempt : callable
        ``attempt(graph, shapes)``: what to do with the model (:func:`~explorer.lower.tvm.relax_pipeline`,
        :func:`explorer.runtimes.bench.bench`, ...); it raises
        :class:`~explorer.lower.RelaxImportFailed` or :class:`~explorer.core.errors.LoweringError`
        when TVM cannot take the model.
    simplify : bool
        Fix the input shapes and run onnxsim before the first attempt.
    fix : bool
        When the import or a lowering pass fails, apply the fixes offered and attempt again:
        every fix the import's retry offers; the rewrite that removes the ONNX nodes a pass
        failed at (:func:`lowering_rewrite`); then, whatever the failure, fixed shapes and onnxsim
        (unless done already): never less than ``simplify``. Without ``fix`` or ``simplify``, a
        compiler's failure that onnxsim may take away offers it (:func:`offer_simplify`).
    progress : callable, optional
        Called with the words of each fix as it is applied.

    Returns
    -------
    tuple
        What ``attempt`` returned, and the fixes applied (in words, first first).

    Raises
    ------
    RelaxImportFailed
        The import failed and no fix (left) makes it import.
    LoweringError
        A pass failed and no fix (left) helps.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.lower import relax_pipeline
    >>> graph = load("zoo:yolov8")
    >>> shapes = {"images": [1, 3, 64, 64]}
    >>> timeline, fixes = lower_with_fixes(graph, shapes, relax_pipeline, fix=True)  # doctest: +SKIP
    >>> fixes  # doctest: +SKIP
    ('fix the input shapes and run onnxsim first',)
    >>> _, fixes = lower_with_fixes(load("zoo:mlp"), None, lambda g, s: g.source, simplify=True)
    >>> fixes
    ('fix the input shapes and run onnxsim first',)
    """
    applied: list[str] = []

    def note(words: str) -> None:
        applied.append(words)
        if progress is not None:
            progress(words)

    shapes: Shapes = input_shapes
    simplified_already = False
    if simplify:
        graph, shapes = simplified(graph, shapes)
        simplified_already = True
        note(FIX)
    for _ in range(3):  # the import's fixes, then fixed shapes for a pass: at most two retries
        try:
            return attempt(graph, shapes), tuple(applied)
        except RelaxImportFailed as err:
            if not fix:
                raise
            result = err.result.fixed(shapes)
            if not result.ok:  # no fix offered helps: onnxsim still may (--fix does what --simplify does)
                if simplified_already or FIX in result.applied:
                    raise RelaxImportFailed(result) from None
                try:
                    graph, shapes = simplified(graph, shapes)
                except ExplorerError:  # onnxsim cannot take it: the import's failure is the one to tell
                    raise RelaxImportFailed(result) from None
                simplified_already = True
                note(FIX)
                continue
            for words in result.applied[len(err.result.applied) :]:
                note(words)
                simplified_already = simplified_already or words == FIX
            graph, shapes = result.source, result.input_shapes
        except LoweringError as err:
            if not fix:
                if simplified_already:
                    raise
                raise offer_simplify(graph, err) from None
            rewrite = lowering_rewrite(graph, err)
            if rewrite is not None and rewrite[0] not in applied:
                graph, shapes = fix_graph(graph, rewrite[1], shapes)
                note(rewrite[0])
                continue
            if simplified_already:
                raise
            try:  # whatever failed (IREE's crashes too): --fix never does less than --simplify
                graph, shapes = simplified(graph, shapes)
            except ExplorerError:  # onnxsim cannot take it: the compiler's failure is the one to tell
                raise err from None
            simplified_already = True
            note(FIX)
    return attempt(graph, shapes), tuple(applied)

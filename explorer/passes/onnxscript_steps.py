"""onnxscript's optimizer and rewriter as worker steps: each part, and each ONNX Runtime fusion rule set.

Models exported by ``torch.onnx.export(..., dynamo=True)`` are cleaned up by
``onnxscript.optimizer.optimize`` and fused for ONNX Runtime by
``onnxscript.rewriter.ort_fusions``. The steps here run one of them on the model at
a path and write the result to ``out_path`` (see :func:`explorer.isolation.worker.run_on_model`).
A fusion rule set that matches nothing is run once more under the rewriter's
``MatchingTracer``, and the step's log says, per rule, how far its closest
near-miss got and why it failed, in the tracer's words.

Examples
--------
>>> import tempfile, os, onnx
>>> from explorer import zoo
>>> with tempfile.TemporaryDirectory() as tmp:
...     src = str(zoo.save("transformer", tmp, layers=1, hidden=32, heads=2))
...     dst = os.path.join(tmp, "out.onnx")
...     log = fusion_step(src, "fuse_skip_layer_normalization", out_path=dst)
...     sum(n.op_type == "SkipLayerNormalization" for n in onnx.load(dst).graph.node)
2
>>> log[1]
'fused 2: SkipLayerNormPreBias -> com.microsoft::SkipLayerNormalization'
"""

from __future__ import annotations

import contextlib
import importlib
from collections import Counter
from collections.abc import Iterator
from typing import Any, NamedTuple

import onnx

from explorer.core.errors import UsageError
from explorer.core.op_deltas import format_op_deltas, op_deltas
from explorer.onnx_adapter.files import save_model
from explorer.passes.native_steps import _drop_inferred_value_info, _has_value_info

__all__ = [
    "FUSION_STEPS",
    "OPTIMIZER_PARTS",
    "INTERNAL_DOMAIN",
    "optimizer_step",
    "fusion_step",
    "ort_fusions_step",
    "NearMiss",
    "traced_near_misses",
    "near_misses",
]

FUSION_STEPS: dict[str, str] = {
    "fuse_erfgelu": "erfgelu",
    "fuse_rms_normalization": "rms_normalization",
    "fuse_skip_layer_normalization": "skip_normalization",
    "fuse_skip_rms_normalization": "skip_normalization",
    "fuse_rotary_embedding": "rotary_embedding",
    "fuse_cos_sin_cache": "cos_sin_cache",
    "fuse_partial_rotary_embedding": "rotary_embedding",
    "fuse_sdpa": "sdpa",
    "fuse_gqa": "gqa",
    "fuse_qkv_gqa": "gqa_packed_qkv",
    "fuse_mha1": "mha",
    "fuse_mha2": "mha",
    "fuse_mha_scale": "mha_scale",
    "fuse_mha_bias": "mha_bias",
    "fuse_attention": "attention",
    "fuse_gelu": "gelu",
    "fuse_bias_gelu": "bias_gelu",
    "replace_sdpa_by_mha": "sdpa_via_mha",
    "ort_pattern_rewrite_rules": "",
}
"""Each fusion function of ``onnxscript.rewriter.ort_fusions`` (as ``fuse_xformers`` calls them, in its
order) -> its module there; ``ort_pattern_rewrite_rules`` is ``ORT_PATTERN_REWRITE_RULES`` (softmax,
instance-to-group normalization, FusedMatMul), which ``optimize_for_ort`` applies last."""

OPTIMIZER_PARTS = ("optimize", "constant_folding", "remove_unused", "inline", "rewrite")
"""The parts of ``onnxscript.optimizer`` (and the rewriter's default rules) a step can run."""

INTERNAL_DOMAIN = "ai.onnxruntime._fusion"
"""onnxscript's domain for intermediate fusion ops (SDPA, RotaryEmbedding) that later rules consume."""

_SDPA_FUNCTION_STEPS = frozenset({"fuse_sdpa"})
"""Rule sets whose single replacement op has no ONNX Runtime kernel: their matches are kept as
model-local functions (the rewriter's ``as_function``), so the step's model still runs."""


_NOTHING = "no node matched even the last op of the pattern"


def _ir_model(path: str) -> tuple[Any, onnx.ModelProto]:
    import onnx_ir as ir

    proto = onnx.load(path)
    return ir.serde.deserialize_model(proto), proto


def _save(model: Any, out_path: str, had_value_info: bool) -> onnx.ModelProto:
    """Save; the shapes our inference added are dropped again unless a contrib op now blocks inferring them.

    ONNX's shape inference knows no ``com.microsoft`` op, so once a step fused one, the shapes
    after it can only be inferred now: they are kept, for the next rule set's shape checks.
    """
    import onnx_ir as ir

    proto = ir.serde.serialize_model(model)
    if not any(n.domain not in ("", "ai.onnx") for n in proto.graph.node):
        _drop_inferred_value_info(proto, had_value_info)
    save_model(proto, out_path)
    return proto


def _op(node: Any) -> str:
    return f"{node.domain}::{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type


def optimizer_step(path: str, part: str, *, out_path: str) -> list[str]:
    """Run one part of ``onnxscript.optimizer`` on the model at ``path``; write it to ``out_path``.

    Parameters
    ----------
    path : str
        The input model.
    part : {"optimize", "constant_folding", "remove_unused", "inline", "rewrite"}
        ``optimize``: the whole optimizer (inlining, then constant folding, the default
        rewrite rules and unused-node removal repeated, then constant lifting, initializer
        deduplication and CSE). ``constant_folding``: ``fold_constants`` with ONNX shape
        inference. ``remove_unused``: ``remove_unused_nodes`` and ``remove_unused_functions``.
        ``inline``: ``inline`` (every call of a model-local function replaced by its body).
        ``rewrite``: ``onnxscript.rewriter.rewrite`` with its default rules.
    out_path : str
        Where to write the result.

    Examples
    --------
    Run in the worker, as the registry does (onnxscript stays out of this process):

    >>> import os, tempfile
    >>> from explorer import zoo
    >>> from explorer.isolation import worker
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     log = worker.run_on_model(
    ...         optimizer_step, zoo.build("custom_domain"), "inline", output=os.path.join(tmp, "out.onnx")
    ...     )
    >>> log[1:]
    ['inlined the calls of 1 model-local functions', 'op counts: Mul +1, Sigmoid +1, zoo.local::Swish -1']
    """
    import onnx_ir.passes.common as common_passes
    import onnxscript
    from onnxscript import optimizer, rewriter

    model, proto = _ir_model(path)
    before = Counter(_op(n) for n in model.graph)
    log = [f"onnxscript {onnxscript.__version__}: {part}"]
    if part == "optimize":
        optimizer.optimize(model)
    elif part == "constant_folding":
        result = optimizer.fold_constants(model, onnx_shape_inference=True)
        log.append("folded constants" if result.modified else "nothing to fold")
    elif part == "remove_unused":
        common_passes.RemoveUnusedNodesPass()(model)
        common_passes.RemoveUnusedFunctionsPass()(model)
    elif part == "inline":
        functions = len(model.functions)
        optimizer.inline(model)
        log.append(f"inlined the calls of {functions} model-local functions" if functions else "no functions")
    elif part == "rewrite":
        rewriter.rewrite(model)
    else:
        raise UsageError(
            f"unknown onnxscript optimizer part {part!r}; use one of {', '.join(OPTIMIZER_PARTS)}"
        )
    after = Counter(_op(n) for n in model.graph)
    delta = op_deltas(before, after)
    if delta:
        log.append("op counts: " + format_op_deltas(delta))
    _save(model, out_path, _has_value_info(proto))
    return log


def _fusion_function(name: str) -> Any:
    module = importlib.import_module(f"onnxscript.rewriter.ort_fusions.{FUSION_STEPS[name]}")
    return getattr(module, name)


def _rule_set(name: str) -> Any:
    """The ``RewriteRuleSet`` behind a fusion function (``apply_fusion_rules`` closes over it)."""
    from onnxscript.rewriter import pattern

    if name == "ort_pattern_rewrite_rules":
        from onnxscript.rewriter.ort_fusions import ORT_PATTERN_REWRITE_RULES

        return pattern.RewriteRuleSet(ORT_PATTERN_REWRITE_RULES)
    cells = _fusion_function(name).__closure__ or ()
    return next(c.cell_contents for c in cells if isinstance(c.cell_contents, pattern.RewriteRuleSet))


@contextlib.contextmanager
def _internal_functions_hidden(model: Any) -> Iterator[None]:
    """Take the functions of :data:`INTERNAL_DOMAIN` out of the model for the block.

    They hold what an earlier step fused (e.g. the nodes an SDPA replaced); the rewriter
    also visits function bodies, and matching the pattern again inside one would make
    the function call itself.
    """
    hidden = {key: f for key, f in model.functions.items() if f.domain == INTERNAL_DOMAIN}
    for key in hidden:
        del model.functions[key]
    try:
        yield
    finally:
        model.functions.update(hidden)


@contextlib.contextmanager
def _as_functions(rules: Any) -> Iterator[None]:
    """Make each rule keep what it matched as a model-local function of its replacement op, for the block."""
    saved = [rule.as_function for rule in rules]
    try:
        for rule in rules:
            rule.as_function = True
        yield
    finally:
        for rule, value in zip(rules, saved, strict=True):
            rule.as_function = value


class NearMiss(NamedTuple):
    """The closest attempt of one rule, as the rewriter's ``MatchingTracer`` recorded it."""

    rule: str
    at: str
    matched: int
    status: str
    reason: str

    def line(self) -> str:
        """The log line.

        Examples
        --------
        >>> print(NearMiss("SDPA", "MatMul_1", 5, "condition failed", "bad scale").line())
        SDPA: closest near-miss at MatMul_1 (5 pattern nodes matched, condition failed): bad scale
        """
        if not self.matched:
            return f"{self.rule}: {_NOTHING}"
        where = f"{self.matched} pattern nodes matched, {self.status}"
        return f"{self.rule}: closest near-miss at {self.at} ({where}): {self.reason}"


def _name(item: Any) -> str:
    return getattr(item, "name", None) or getattr(item, "op_type", None) or "?"


def _other_uses(nodes: Any, root: Any) -> str:
    """Which matched node is also read outside the match (what 'other uses' means), as text."""
    inside = set(nodes)
    for node in nodes:
        if node is root:
            continue
        for value in node.outputs:
            outside = [u.node for u in value.uses() if u.node not in inside]
            if outside or value.is_graph_output():
                reader = "a graph output" if not outside else _name(outside[0])
                return f" ({_name(node)} is also read by {reader})"
    return ""


def traced_near_misses(model: Any, rules: Any) -> list[NearMiss]:
    """Why each rule of ``rules`` did not match ``model`` (an ``ir.Model``): its closest near-miss, traced.

    The rewriter's ``MatchingTracer`` records, per rule, the attempts that got furthest
    (most pattern nodes matched; a failed condition check ranks above a failed structural
    match); this keeps the first of them per rule, with the reason the rewriter gave, plus
    where it failed when the tracer knows and, for "other uses", which node is read outside.
    Commuted copies of a rule share its name and are reported once when they agree.

    Examples
    --------
    >>> import onnx_ir as ir
    >>> from explorer import zoo
    >>> from onnxscript.rewriter.ort_fusions.gelu import gelu_rules
    >>> model = ir.serde.deserialize_model(zoo.build("mlp"))
    >>> [miss.matched for miss in traced_near_misses(model, gelu_rules)]
    [0, 0]
    """
    from onnxscript.rewriter import MatchingTracer, MatchStatus

    tracer = MatchingTracer()
    rules.apply_to_model(model, tracer=tracer)
    misses: list[NearMiss] = []
    for index, rule in enumerate(rules, start=1):
        label = rule.name or f"rule {index} (unnamed)"
        matches = tracer.best_matches_map.get(rule)
        if not matches:
            miss = NearMiss(label, "", 0, "no_match", "")
        else:
            best = matches[0]
            result = best.match_result
            status = (
                "condition failed"
                if best.status == MatchStatus.CONDITION_FAILED
                else best.status.name.lower()
            )
            reason = result.reason or "(the rewriter gave no reason)"
            if reason.startswith("Matched nodes have other uses"):
                reason += _other_uses(result.nodes, best.root_node)
            around = [_name(x) for x in result.failure_nodes_and_values]
            if around and not any(a in reason for a in around):
                reason += f" (around {', '.join(dict.fromkeys(around))})"
            miss = NearMiss(label, _name(best.root_node), len(result.nodes), status, reason)
        if miss not in misses:
            misses.append(miss)
    return misses


def near_misses(model: Any, rules: Any) -> list[str]:
    """:func:`traced_near_misses` as log lines.

    Examples
    --------
    >>> import onnx_ir as ir
    >>> from explorer import zoo
    >>> from onnxscript.rewriter.ort_fusions.gelu import gelu_rules
    >>> model = ir.serde.deserialize_model(zoo.build("mlp"))
    >>> for line in near_misses(model, gelu_rules):
    ...     print(line)
    GeluTanhFusion: no node matched even the last op of the pattern
    GeluErfFusion: no node matched even the last op of the pattern
    """
    return [miss.line() for miss in traced_near_misses(model, rules)]


def _fused(model: Any, known: set[Any]) -> list[str]:
    """What the rules made: ``fused N: rule -> op`` for each new node a rule tagged."""
    from onnxscript.rewriter import RULE_NAME_TAG

    made: Counter[tuple[str, str]] = Counter()
    around: Counter[str] = Counter()
    for node in model.graph:
        if node in known or node.op_type == "Constant":
            continue
        if node.domain in ("", "ai.onnx"):
            around[node.op_type] += 1
        else:
            rule = node.metadata_props.get(RULE_NAME_TAG, "?").split(",")[0].strip()
            made[rule, _op(node)] += 1
    lines = [f"fused {n}: {rule} -> {op}" for (rule, op), n in sorted(made.items())]
    if around:
        lines.append("also added: " + ", ".join(f"{op} {n}" for op, n in sorted(around.items())))
    return lines


def fusion_step(path: str, name: str, *, out_path: str) -> list[str]:
    """Apply one ONNX Runtime fusion rule set of ``onnxscript.rewriter.ort_fusions`` on its own.

    ONNX shape inference runs first (most rules check shapes; the inferred shapes are
    dropped again when the input had none), then the rule set. When it fuses, the log
    says which rule made which op; when it does not, the log carries each rule's
    closest near-miss and the tracer's reason (:func:`near_misses`). Replacements that
    only exist inside onnxscript (``ai.onnxruntime._fusion::SDPA``) are kept as model-local
    functions, so ONNX Runtime can still run the step's model.

    Parameters
    ----------
    path : str
        The input model.
    name : str
        A key of :data:`FUSION_STEPS`, e.g. ``"fuse_sdpa"``.
    out_path : str
        Where to write the result.

    Examples
    --------
    >>> import os, tempfile
    >>> from explorer import zoo
    >>> from explorer.isolation import worker
    >>> model = zoo.build("transformer", layers=1, hidden=32, heads=2)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     log = worker.run_on_model(
    ...         fusion_step, model, "fuse_skip_layer_normalization", output=os.path.join(tmp, "out.onnx")
    ...     )
    >>> log[1]
    'fused 2: SkipLayerNormPreBias -> com.microsoft::SkipLayerNormalization'
    """
    import onnx_ir.passes.common as common_passes
    import onnxscript

    if name not in FUSION_STEPS:
        raise UsageError(f"unknown onnxscript fusion {name!r}; use one of {', '.join(FUSION_STEPS)}")
    model, proto = _ir_model(path)
    log = [f"onnxscript {onnxscript.__version__}: {name}"]
    try:
        common_passes.ShapeInferencePass()(model)
    except Exception as err:  # shape inference failing is a note: rules that need shapes then do not match
        log.append(f"shape inference failed ({type(err).__name__}); rules that check shapes will not match")
    rules = _rule_set(name)
    known = set(model.graph)
    keep = _as_functions(rules.rules) if name in _SDPA_FUNCTION_STEPS else contextlib.nullcontext()
    with _internal_functions_hidden(model), keep:
        count = rules.apply_to_model(model)
    with _internal_functions_hidden(model):  # again: the rules may have made new ones
        misses = traced_near_misses(model, rules)
    if count:
        common_passes.RemoveUnusedNodesPass()(model)
        common_passes.RemoveUnusedFunctionsPass()(model)
        common_passes.RemoveUnusedOpsetsPass()(model)
        log += _fused(model, known)
        internal = Counter(n.op_type for n in model.graph if n.domain == INTERNAL_DOMAIN)
        if internal:
            ops = ", ".join(f"{n} {op}" for op, n in sorted(internal.items()))
            log.append(
                f"{ops} in onnxscript's internal domain {INTERNAL_DOMAIN}, kept as model-local functions so "
                "ONNX Runtime runs them; later rules (fuse_mha2, fuse_gqa, replace_sdpa_by_mha, "
                "fuse_cos_sin_cache) turn them into com.microsoft ops"
            )
        partial = [m for m in misses if m.matched >= 2 or m.status == "condition failed"]
        if partial:
            log.append("where it did not fuse, the closest near-miss of each rule that got furthest:")
            log += [f"  {m.line()}" for m in partial]
    else:
        log.append(f"{name} matched nothing; closest near-miss of each rule:")
        log += [f"  {m.line()}" for m in misses]
        save_model(proto, out_path)  # the model as it came, not a re-serialization of it
        return log
    _save(model, out_path, _has_value_info(proto))
    return log


def ort_fusions_step(path: str, *, out_path: str) -> list[str]:
    """``onnxscript.rewriter.ort_fusions.optimize_for_ort``: every fusion, in order, with the counts.

    Examples
    --------
    >>> import os, tempfile
    >>> from explorer import zoo
    >>> from explorer.isolation import worker
    >>> model = zoo.build("transformer", layers=1, hidden=32, heads=2)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     log = worker.run_on_model(ort_fusions_step, model, output=os.path.join(tmp, "out.onnx"))
    >>> log[1]
    'fusions applied: skip_layer_normalization 2, sdpa 1, bias_gelu 1, sdpa_via_mha 1'
    """
    import onnxscript
    from onnxscript.rewriter.ort_fusions import optimize_for_ort

    model, proto = _ir_model(path)
    model, counts = optimize_for_ort(model)
    fused = {k: v for k, v in counts.items() if v}
    log = [f"onnxscript {onnxscript.__version__}: optimize_for_ort"]
    log.append(
        "fusions applied: " + ", ".join(f"{k} {v}" for k, v in fused.items())
        if fused
        else "no fusion applied (run the fusions one by one to see why each did not match)"
    )
    _save(model, out_path, _has_value_info(proto))
    return log

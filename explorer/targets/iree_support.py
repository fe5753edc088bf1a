"""Which ONNX nodes IREE takes: its ONNX importer and lowering, tried on each distinct node for real.

IREE (``iree.compiler``) imports an ONNX model into MLIR's torch dialect, one
``torch.operator "onnx.Conv"`` per node, and lowers every one of them through its
ONNX conversions and on down its phases; an op without a conversion, a form of it the
conversion refuses, or a pass failing on its shapes stops the whole model. So, as for
TVM (:mod:`explorer.targets.tvm_support`), the model is compiled whole first, in the
worker (:mod:`explorer.lower.iree.iree_compile`: the importer in-process, ``iree-compile`` as
its child); when that works every node is supported. When it does not, each distinct
node (op, domain, opset, attributes, its inputs' dtypes, ranks and constness:
:func:`~explorer.targets.tvm_support.node_signature`) is written as a one-node model and
compiled, and a node whose compile fails is unsupported, with IREE's own message as the
reason. The node the whole model's failure names is always tried itself (its shapes may
be what fails), and keeps the whole model's error when it compiles alone.

Starting ``iree-compile`` costs more than compiling a one-node module, so the one-node
models are first compiled side by side in one module (:func:`side_by_side`, inputs
renamed apart): when it compiles, each of them does; when it fails, the node its error
is located at is taken out and compiled alone, and the rest go on together; a failure
that names no node of the module (a crash) splits it in halves. A node that holds
subgraphs, or that ONNX has no schema for (its output is untyped, so it fails any module
it is in), is compiled alone from the start.

IREE compiles for fixed shapes: the whole model gets the project's concrete input shapes
(:func:`~explorer.onnx_adapter.inputs.concrete_input_shapes`, as ``lower`` and ``bench``
use them), and each one-node model the shapes its tensors have then (inferred again with
the inputs fixed, :func:`~explorer.runtimes.cost_model.node_costs`), so a Conv that fails
only on a 2x2 input fails alone too. Compiling stops after the ``flow`` phase
(:data:`COMPILE_TO`): every failure of the zoo models (an op not legalized, a custom
domain, a Conv IREE's unit-dimension folding breaks) shows by then, in a third of the time
of a full build; a failure in code generation (after ``flow``) is not seen.

Results are kept: per graph (a second check of the same graph compiles nothing) and per
one-node model (the same node in another graph is not compiled again).

Examples
--------
>>> from explorer import load
>>> judged = iree_reasons(load("zoo:mlp"))
>>> sorted(judged.values())
[[], [], [], [], [], []]
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from explorer.core.errors import UsageError, WorkerCrashed, WorkerOutOfMemory, WorkerTimeout
from explorer.core.graph_memo import PerGraph
from explorer.isolation import worker
from explorer.onnx_adapter.adapter import has_onnx_model
from explorer.onnx_adapter.model_files import worker_source
from explorer.targets.support import (
    COMPILE_FAILED,
    CONSTANT_INPUT,
    IMPORT_FAILED,
    NOTE,
    OP_MISSING,
    NodeFacts,
    Reason,
)
from explorer.targets.tvm_support import node_signature, single_node_model, small_constant

if TYPE_CHECKING:
    from onnx import ModelProto, NodeProto

    from explorer.core.graph import ModelGraph

__all__ = [
    "COMPILE_TO",
    "NODE_TIMEOUT",
    "IreeFailure",
    "iree_missing",
    "require_iree",
    "iree_version",
    "compile_whole",
    "compile_one",
    "one_node_model",
    "side_by_side",
    "untyped_nodes",
    "iree_reasons",
]

COMPILE_TO = "flow"
"""The ``iree-compile`` phase each check stops after (``--compile-to``); ``"end"`` builds the VM module."""

NODE_TIMEOUT = 120.0
"""Seconds one node's compile may take (a worker call each: a compiler that hangs costs that node only)."""

_STANDARD_DOMAINS = ("", "ai.onnx")
_WORKER = "the worker running iree-compile"
_NODE_CACHE_SIZE = 4096


@dataclass(frozen=True)
class IreeFailure:
    """Why IREE refused a model: where it stopped, on which op and ONNX node, in its own words.

    Attributes
    ----------
    stage : {"import", "compile"}
        The ONNX importer (and the opset conversion before it), or ``iree-compile``.
    message : str
        IREE's message (its location prefix and the dump of the operation left out).
    where : str
        The step: ``"ONNX import"``, or ``"phase input, pass ConvertTorchOnnxToTorch"``.
    op : str or None
        The failing operation (``"onnx.Loop"``, ``"linalg.generic"``), where IREE names it.
    node : str or None
        The ONNX node the failing operation came from (its location), where IREE names it.
    untyped : bool
        The failing operation's result has no type (``!torch.none``): ONNX's shape inference,
        which IREE's importer relies on, could not infer it (an op it has no schema for).
    lowers_when_typed : bool or None
        For an untyped failure: whether the node compiles once its outputs are typed (None: not tried).

    Examples
    --------
    >>> IreeFailure("compile", "failed to legalize", "phase input", "onnx.Loop", "/loop/Loop").text
    'failed to legalize (onnx.Loop; phase input)'
    """

    stage: str
    message: str
    where: str
    op: str | None = None
    node: str | None = None
    untyped: bool = False
    lowers_when_typed: bool | None = None

    @property
    def text(self) -> str:
        """The message with the op and the step, as a reason says it."""
        return f"{self.message} ({'; '.join(p for p in (self.op, self.where) if p)})"

    @classmethod
    def from_error(cls, error: Exception) -> IreeFailure:
        """The failure a :class:`~explorer.core.errors.LoweringError` (or any error) of the IREE path says.

        Examples
        --------
        >>> from explorer.core.errors import LoweringError
        >>> err = LoweringError('<unknown>:0: error: loc("/a/Conv"): bad shape', pass_name="phase flow",
        ...                     binding="linalg.generic", compiler="IREE")
        >>> f = IreeFailure.from_error(err)
        >>> f.stage, f.node, f.message
        ('compile', '/a/Conv', 'bad shape')
        """
        from explorer.core.errors import LoweringError

        if not isinstance(error, LoweringError):
            first = (str(error).strip().splitlines() or [""])[0]
            return cls("import", f"{type(error).__name__}: {first[:300]}", "ONNX import")
        where = error.pass_name or ""
        stage = "compile" if where.startswith("phase") else "import"
        located = _LOCATION.search(error.reason)
        node = error.onnx_nodes[0] if error.onnx_nodes else (located.group(1) if located else None)
        return cls(stage, _clean(error.reason), where, error.binding, node or None)


_LOCATION = re.compile(r'loc\("([^"]*)"')
_PREFIX = re.compile(r'^.*?error:\s*(?:loc\("[^"]*"\)\s*:\s*)?', re.DOTALL)


_CRASH = re.compile(r"^#\d+ 0x|Stack dump|Please report issues", re.MULTILINE)


def _clean(message: str) -> str:
    """IREE's message without its location prefix and the dump of the operation after it."""
    if _CRASH.search(message) and "error:" not in message:
        return "iree-compile crashed (a stack dump, no diagnostic)"
    text = _PREFIX.sub("", message.strip(), count=1) if "error:" in message else message.strip()
    text = text.split(": %", 1)[0].split("\n", 1)[0].strip()
    return text[:300] or message.strip()[:300]


def iree_missing() -> str | None:
    """None when IREE's compiler is installed, else what to install, in words.

    Examples
    --------
    >>> iree_missing() is None
    True
    """
    from explorer.lower.iree.iree_pipeline import iree_available

    if iree_available():
        return None
    return (
        "IREE is not installed: pip install 'onnx-graph-explorer[iree]' "
        "(iree-base-compiler[onnx] 3.13 and iree-base-runtime)"
    )


def require_iree() -> None:
    """Raise :class:`~explorer.core.errors.UsageError` saying what to install when IREE is not installed.

    Examples
    --------
    >>> require_iree()  # installed here: nothing happens
    """
    missing = iree_missing()
    if missing is not None:
        raise UsageError(f"target iree-llvm-cpu: {missing}")


def iree_version() -> str | None:
    """The installed ``iree-base-compiler``'s version (package metadata, nothing imported), None without it.

    Examples
    --------
    >>> iree_version().startswith("3.")
    True
    """
    import importlib.metadata

    for distribution in ("iree-base-compiler", "iree-compiler"):
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def untyped_nodes(mlir_text: str) -> set[str]:
    """The ONNX nodes whose imported op has an untyped result (``!torch.none``) in the importer's text.

    ONNX's shape inference, which IREE's importer relies on, leaves the outputs of an op it has no
    schema for (``com.microsoft::FusedMatMul``) without a type, and IREE cannot lower such an op.

    Examples
    --------
    >>> text = chr(10).join([
    ...     '%5 = torch.operator "onnx.FusedMatMul"(%a, %b) : (!t, !t) -> !torch.none  loc(#loc9)',
    ...     '%6 = torch.operator "onnx.Relu"(%5) : (!torch.none) -> !t  loc("/r")',
    ...     '#loc9 = loc("/fc1/FusedMatMul")'])
    >>> untyped_nodes(text)
    {'/fc1/FusedMatMul'}
    """
    aliases = dict(_ALIAS.findall(mlir_text))
    found = set()
    for line in mlir_text.splitlines():
        op = _UNTYPED_OP.search(line)
        if op is not None:
            name = op.group("name") if op.group("name") is not None else aliases.get(op.group("alias"))
            if name:
                found.add(name)
    return found


_ALIAS = re.compile(r'^#(loc\d+) = loc\("([^"]*)"', re.MULTILINE)
_UNTYPED_OP = re.compile(r'torch\.operator .*-> !torch\.none\s+loc\((?:#(?P<alias>loc\d+)|"(?P<name>[^"]*)")')


def _try_compile(path: str, compile_to: str) -> IreeFailure | None:
    """Import and compile the ONNX file at ``path`` up to ``compile_to`` (in the worker)."""
    from explorer.lower.iree.iree_compile import compile_mlir, import_onnx

    with tempfile.TemporaryDirectory(prefix="iree-check-") as scratch:
        mlir = os.path.join(scratch, "model.mlirbc")
        flags = [] if compile_to == "end" else [f"--compile-to={compile_to}"]
        untyped: set[str] = set()
        try:
            untyped = untyped_nodes(import_onnx(path, None, mlir)["text"])
            compile_mlir(mlir, os.path.join(scratch, "out"), extra_flags=flags)
        except Exception as err:  # the model's: any refusal on the way is the answer
            failure = IreeFailure.from_error(err)
            if failure.node in untyped:
                failure = dataclasses.replace(failure, untyped=True)
            return failure
    return None


def compile_whole(path: str, compile_to: str = COMPILE_TO) -> IreeFailure | None:
    """Compile the ONNX model at ``path`` with IREE for llvm-cpu (in the worker): None, or why not.

    Examples
    --------
    >>> from explorer import zoo
    >>> failure = worker.run_on_model(compile_whole, zoo.build("custom_domain"))
    >>> failure.op, failure.node
    ('onnx.FusedMatMul', '/fc1/FusedMatMul')
    """
    worker.report(0.0, "IREE: compiling the whole model")
    return _try_compile(path, compile_to)


def compile_one(model: bytes, compile_to: str = COMPILE_TO) -> IreeFailure | None:
    """Compile one serialized (one-node) ONNX model with IREE (in the worker): None, or why not.

    Examples
    --------
    >>> from explorer import zoo
    >>> worker.run(compile_one, zoo.single_op("Relu", (2,)).SerializeToString()) is None
    True
    """
    with tempfile.TemporaryDirectory(prefix="iree-node-") as scratch:
        path = os.path.join(scratch, "node.onnx")
        with open(path, "wb") as handle:
            handle.write(model)
        return _try_compile(path, compile_to)


def _with_shapes(facts: NodeFacts, shapes: Mapping[str, tuple[int, ...]]) -> NodeFacts:
    """``facts`` with each computed tensor's shape replaced by its concrete one, where known."""

    def fixed(tensor: Any) -> Any:
        if tensor is None or tensor.constant or tensor.name not in shapes:
            return tensor
        return dataclasses.replace(tensor, shape=tuple(shapes[tensor.name]))

    return dataclasses.replace(
        facts,
        inputs=tuple(fixed(t) for t in facts.inputs),
        outputs=tuple(fixed(t) for t in facts.outputs),
    )


def one_node_model(
    graph: ModelGraph, facts: NodeFacts, node: NodeProto, *, typed_outputs: bool = False
) -> ModelProto:
    """``node`` alone in a model, as IREE's importer sees it in the whole model.

    :func:`~explorer.targets.tvm_support.single_node_model` with two changes: the outputs
    are declared by name only, so their types come from ONNX's shape inference as in the
    whole model (an op ONNX has no schema for, ``com.microsoft::FusedMatMul``, gets none:
    IREE then cannot lower it, as in the whole model), and the weights the node's
    subgraphs read (an If's branches, a Loop's body) come along. ``typed_outputs`` declares
    the outputs with the types ``facts`` know instead (does IREE lower the op once typed?).

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.targets.support import node_facts
    >>> g = load("zoo:control_flow")
    >>> loop = g.model.graph.node[g.nx.nodes["/loop/Loop"]["index"]]
    >>> m = one_node_model(g, node_facts(g)["/loop/Loop"], loop)
    >>> sorted(t.name for t in m.graph.initializer), m.graph.output[0].HasField("type")
    (['/loop/Constant_1_output_0', '/loop/Constant_output_0', 'loop.bias', 'loop.weight'], False)
    """
    from onnx import helper

    from explorer.onnx_adapter.tensor_protos import dtype_from_name

    model = single_node_model(graph, facts, node)
    known = {t.name: t for t in facts.outputs if t is not None and t.dtype and t.kind == "tensor"}
    for value in model.graph.output:
        fact = known.get(value.name) if typed_outputs else None
        if fact is None:
            value.ClearField("type")
        else:
            dims = None if fact.shape is None else [d if isinstance(d, int) else str(d) for d in fact.shape]
            value.CopyFrom(helper.make_tensor_value_info(value.name, dtype_from_name(fact.dtype), dims))
    present = {v.name for v in model.graph.input} | {t.name for t in model.graph.initializer}
    for info in graph.nx.nodes[facts.node].get("weights") or ():
        if info.name in present:
            continue
        value = small_constant(graph, info.name)  # its value when small, as for the node's own inputs
        if value is not None:
            model.graph.initializer.append(value)
        else:
            shape = None if info.shape is None else list(info.shape)
            model.graph.input.append(
                helper.make_tensor_value_info(info.name, dtype_from_name(info.dtype), shape)
            )
        present.add(info.name)
    return model


def _reasons(facts: NodeFacts, failure: IreeFailure) -> list[Reason]:
    """The reason a node's failure gives: import failed, op missing (a custom domain), compile failed."""
    op = facts.qualified_op
    custom = facts.domain not in _STANDARD_DOMAINS
    if failure.untyped:
        text = (
            f"IREE's importer gives {op}'s output no type (ONNX's shape inference cannot infer it), "
            "and IREE cannot lower it so"
        )
        if failure.lowers_when_typed:
            text += " (with its output type declared, alone it compiles)"
        return [Reason(IMPORT_FAILED, f"{text}: {failure.text}")]
    if "failed to legalize" in failure.message and custom:
        return [Reason(OP_MISSING, f"IREE's ONNX lowering has no conversion for {op}: {failure.text}")]
    computed = [
        (i, t.name)
        for i, t in enumerate(facts.inputs)
        if i > 0 and t is not None and not t.constant and t.dtype in ("int64", "int32")
    ]
    if computed:  # a shape computed by other nodes: alone it is an unknown tensor, in the model maybe not
        i, name = computed[0]
        text = (
            f"input {i} ({name}) is computed at run time, and alone IREE fails on it (fix the input "
            f"shapes and run onnxsim to make it a constant): {failure.text}"
        )
        return [Reason(CONSTANT_INPUT, text)]
    if failure.stage == "import":
        return [Reason(IMPORT_FAILED, f"IREE's ONNX importer: {failure.text}")]
    return [Reason(COMPILE_FAILED, failure.text)]


_NODE_RESULTS: OrderedDict[str, IreeFailure | None] = OrderedDict()
_NODE_LOCK = threading.Lock()
_UNKNOWN = object()


def _key(blob: bytes, compile_to: str) -> str:
    return hashlib.blake2b(blob + b"\0" + compile_to.encode(), digest_size=16).hexdigest()


def _remembered(key: str) -> Any:
    """A one-node model's remembered result, or ``_UNKNOWN``."""
    with _NODE_LOCK:
        if key not in _NODE_RESULTS:
            return _UNKNOWN
        _NODE_RESULTS.move_to_end(key)
        return _NODE_RESULTS[key]


def _remember(key: str, result: IreeFailure | None) -> None:
    with _NODE_LOCK:
        _NODE_RESULTS[key] = result
        while len(_NODE_RESULTS) > _NODE_CACHE_SIZE:
            _NODE_RESULTS.popitem(last=False)


def _compile_in_worker(blob: bytes, compile_to: str, what: str) -> IreeFailure | None:
    """A serialized model compiled in the worker under :data:`NODE_TIMEOUT`; a crash or hang: a failure."""
    try:
        return worker.run(compile_one, blob, compile_to, timeout=NODE_TIMEOUT, step=f"IREE compile of {what}")
    except (WorkerTimeout, WorkerCrashed, WorkerOutOfMemory) as err:
        return IreeFailure("compile", f"{type(err).__name__}: {str(err)[:300]}", _WORKER)


def _compile_node(blob: bytes, compile_to: str, node: str) -> IreeFailure | None:
    """One one-node model's result: remembered, else compiled in the worker."""
    key = _key(blob, compile_to)
    known = _remembered(key)
    if known is not _UNKNOWN:
        return known
    result = _compile_in_worker(blob, compile_to, node)
    if result is None or result.where != _WORKER:  # a crash or a hang is not a fact to keep
        _remember(key, result)
    return result


def _compile_graph(graph: ModelGraph, compile_to: str) -> IreeFailure | None:
    try:
        return worker.run_on_model(
            compile_whole, worker_source(graph), compile_to, step="IREE compile of the model"
        )
    except (WorkerTimeout, WorkerCrashed, WorkerOutOfMemory) as err:
        return IreeFailure("compile", f"{type(err).__name__}: {str(err)[:300]}", _WORKER)


def _node_model(
    graph: ModelGraph, facts: NodeFacts, shapes: Mapping[str, tuple[int, ...]], *, typed: bool = False
) -> ModelProto:
    """The node alone at the concrete shapes, named by its node id (IREE's locations then name it)."""
    proto = type(graph.model.graph.node[0])()
    proto.CopyFrom(graph.model.graph.node[graph.nx.nodes[facts.node]["index"]])
    proto.name = facts.node
    return one_node_model(graph, _with_shapes(facts, shapes), proto, typed_outputs=typed)


def _try_node(
    graph: ModelGraph, facts: NodeFacts, shapes: Mapping[str, tuple[int, ...]], compile_to: str
) -> IreeFailure | None:
    """One node compiled alone; an output IREE's importer leaves untyped tried again typed."""
    blob = _node_model(graph, facts, shapes).SerializeToString()
    failure = _compile_node(blob, compile_to, facts.node)
    if failure is None or not failure.untyped:
        return failure
    if not all(t.dtype for t in facts.outputs if t is not None):
        return failure
    typed = _node_model(graph, facts, shapes, typed=True).SerializeToString()
    again = _compile_node(typed, compile_to, facts.node)
    if again is None:
        return dataclasses.replace(failure, lowers_when_typed=True)
    return again if not again.untyped else dataclasses.replace(failure, lowers_when_typed=False)


def side_by_side(models: list[ModelProto]) -> ModelProto:
    """One model holding the (one-node) ``models`` side by side, each node's inputs renamed apart.

    One ``iree-compile`` of it answers for every node that compiles (a compiler's start costs
    more than a small module), and a failure names its node by location.

    Examples
    --------
    >>> from explorer import zoo
    >>> both = side_by_side([zoo.single_op("Relu", (2,)), zoo.single_op("Relu", (3,))])
    >>> [list(n.input) for n in both.graph.node], len(both.graph.input)
    ([['n0/x'], ['n1/x']], 2)
    """
    from onnx import helper

    first = models[0]
    nodes, inputs, initializers, outputs = [], [], [], []
    for i, model in enumerate(models):
        renamed = {v.name: f"n{i}/{v.name}" for v in (*model.graph.input, *model.graph.initializer)}
        for node in model.graph.node:
            copy = type(node)()
            copy.CopyFrom(node)
            copy.input[:] = [renamed.get(name, name) for name in node.input]
            nodes.append(copy)
        for value in model.graph.input:
            copy = type(value)()
            copy.CopyFrom(value)
            copy.name = renamed[value.name]
            inputs.append(copy)
        for tensor in model.graph.initializer:
            copy = type(tensor)()
            copy.CopyFrom(tensor)
            copy.name = renamed[tensor.name]
            initializers.append(copy)
        outputs.extend(model.graph.output)
    graph = helper.make_graph(nodes, "nodes", inputs, outputs, initializer=initializers)
    merged = helper.make_model(graph, opset_imports=list(first.opset_import))
    merged.ir_version = first.ir_version
    return merged


def _alone_only(graph: ModelGraph, facts: NodeFacts) -> bool:
    """Whether a node is compiled alone, never side by side: it holds graphs (If, Loop, Scan: they read
    outer names), or ONNX has no schema for it (its output is untyped, so it fails any module it is in)."""
    from onnx import AttributeProto

    from explorer.onnx_adapter.protos import has_schema

    if facts.function_body is not None or not has_schema(facts.op, facts.domain):
        return True
    proto = graph.model.graph.node[graph.nx.nodes[facts.node]["index"]]
    return any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in proto.attribute)


def _try_nodes(
    graph: ModelGraph,
    facts: Mapping[str, NodeFacts],
    nodes: list[str],
    shapes: Mapping[str, tuple[int, ...]],
    compile_to: str,
) -> dict[str, IreeFailure | None]:
    """Each of ``nodes`` compiled alone, in effect: side by side in one module while that compiles,
    the node a failure names taken out and tried alone; a failure naming none splits the module."""
    results: dict[str, IreeFailure | None] = {}
    models, keys = {}, {}
    for node in nodes:
        if _alone_only(graph, facts[node]):
            results[node] = _try_node(graph, facts[node], shapes, compile_to)
            continue
        models[node] = _node_model(graph, facts[node], shapes)
        keys[node] = _key(models[node].SerializeToString(), compile_to)
        known = _remembered(keys[node])
        if known is not _UNKNOWN and (known is None or not known.untyped):
            results[node] = known
    groups = [[node for node in models if node not in results]]
    while groups:
        group = groups.pop()
        if len(group) <= 1:
            results.update({node: _try_node(graph, facts[node], shapes, compile_to) for node in group})
            continue
        blob = side_by_side([models[node] for node in group]).SerializeToString()
        failure = _compile_in_worker(blob, compile_to, f"{len(group)} nodes side by side")
        if failure is None:
            for node in group:
                results[node] = None
                _remember(keys[node], None)
        elif failure.node in group:  # that node alone; the rest together again
            results[failure.node] = _try_node(graph, facts[failure.node], shapes, compile_to)
            groups.append([node for node in group if node != failure.node])
        else:  # a crash, or an error located nowhere in the group: each half on its own
            half = len(group) // 2
            groups += [group[half:], group[:half]]
    return results


def _judge_nodes(
    graph: ModelGraph, facts: Mapping[str, NodeFacts], whole: IreeFailure, compile_to: str
) -> dict[str, list[Reason]]:
    """Each distinct node compiled alone, at the whole model's concrete shapes; the whole's failure placed."""
    from explorer.runtimes.cost_model import node_costs

    shapes = node_costs(graph).tensor_shapes
    distinct: dict[str, list[str]] = {}
    for node, f in facts.items():
        distinct.setdefault(node_signature(f), []).append(node)
    tried = [nodes[0] for nodes in distinct.values()]
    located = whole.node if whole.node in facts else None
    if located is not None and located not in tried:
        tried.append(located)
    results = _try_nodes(graph, facts, tried, shapes, compile_to)
    out: dict[str, list[Reason]] = {}
    for nodes in distinct.values():
        failure = results[nodes[0]]
        for node in nodes:
            out[node] = [] if failure is None else _reasons(facts[node], failure)
    if located is not None:
        alone = results[located]
        if alone is None:
            out[located] = [Reason(COMPILE_FAILED, f"in the whole model (alone it compiles): {whole.text}")]
        else:
            out[located] = _reasons(facts[located], alone)
    elif not any(out.values()):  # every node compiles alone, and no node is named: say so on each
        note = Reason(NOTE, f"each node compiles alone, but not the whole model: {whole.text}")
        out = {node: [note] for node in out}
    return out


_JUDGED: PerGraph[dict[str, dict[str, list[Reason]]]] = PerGraph("IREE verdicts by phase", lambda g: {})


def iree_reasons(
    graph: ModelGraph, facts: Mapping[str, NodeFacts] | None = None, *, compile_to: str = COMPILE_TO
) -> dict[str, list[Reason]]:
    """Compile ``graph`` with IREE, else each distinct node alone, and say which nodes failed, and why.

    Parameters
    ----------
    graph : ModelGraph
        An ONNX graph with its model.
    facts : mapping, optional
        Its :func:`~explorer.targets.support.node_facts`.
    compile_to : str
        The last ``iree-compile`` phase (:data:`COMPILE_TO`; ``"end"``: the whole build).

    Returns
    -------
    dict
        Node id -> reasons (empty when the node compiled). Remembered per graph.

    Raises
    ------
    UsageError
        IREE is not installed (:func:`iree_missing` says what to install).

    Examples
    --------
    >>> from explorer import load
    >>> judged = iree_reasons(load("zoo:control_flow"))
    >>> judged["/loop/Loop"][0].kind, judged["/branch/If"]
    ('compile failed', [])
    """
    from explorer.targets.support import node_facts

    facts = node_facts(graph) if facts is None else facts
    if not has_onnx_model(graph):
        return {}
    require_iree()
    memo = _JUDGED(graph)
    if compile_to not in memo:
        whole = _compile_graph(graph, compile_to)
        memo[compile_to] = (
            {node: [] for node in facts} if whole is None else _judge_nodes(graph, facts, whole, compile_to)
        )
    return {node: list(memo[compile_to].get(node, ())) for node in facts}

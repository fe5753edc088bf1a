"""What a target's support check reads about one node, and what it answers.

:func:`node_facts` gathers, for every operator of a graph, the facts the support rules
look at: op, domain, the opset the model imports for that domain and the schema version
it resolves to, each input's dtype, shape and whether it is a constant (a weight), the
outputs, and the attributes with the schema's defaults filled in. A target's check turns
them into a :class:`NodeSupport`: supported, or not, with one :class:`Reason` per rule
that failed. Reason kinds are the module constants (:data:`OP_MISSING`, :data:`OPSET`,
:data:`DTYPE`, :data:`DYNAMIC_SHAPE`, :data:`ATTRIBUTE`, :data:`CONSTANT_INPUT`,
:data:`RANK`, :data:`INPUT_COUNT`, :data:`IMPORT_FAILED`, :data:`COMPILE_FAILED`); a
:data:`NOTE` is a caveat that does not make a node unsupported (a published note no rule
here can check).

The rules themselves, shared by every target, are in :mod:`explorer.targets.rules`.

Examples
--------
>>> from explorer import load
>>> facts = node_facts(load("zoo:resnet18"))["/conv1/Conv"]
>>> facts.op, facts.since_version, facts.inputs[1].constant, facts.attribute("group")
('Conv', 11, True, 1)
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from explorer.onnx_adapter.adapter import has_onnx_model, opset_versions

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = [
    "OP_MISSING",
    "OPSET",
    "DTYPE",
    "DYNAMIC_SHAPE",
    "ATTRIBUTE",
    "CONSTANT_INPUT",
    "RANK",
    "INPUT_COUNT",
    "IMPORT_FAILED",
    "COMPILE_FAILED",
    "NOTE",
    "REASON_KINDS",
    "Reason",
    "NodeSupport",
    "TensorFact",
    "NodeFacts",
    "node_facts",
    "onnx_type_string",
    "type_kind",
    "value_kinds",
    "onnx_op_schema",
]

OP_MISSING = "op missing"
"""The target has no implementation of the op at all."""
OPSET = "opset out of range"
"""The target implements the op, but not the version the model's opset resolves to."""
DTYPE = "dtype"
"""An input's element type is not one the target takes for this op."""
DYNAMIC_SHAPE = "dynamic shape"
"""A tensor of the node has a dimension that is not a fixed number, and the target needs static shapes."""
ATTRIBUTE = "attribute value"
"""An attribute has a value the target does not take."""
CONSTANT_INPUT = "constant input"
"""An input the target needs as a constant (an initializer) is computed at run time."""
RANK = "rank"
"""An input's rank is outside what the target takes."""
INPUT_COUNT = "input count"
"""The node has more or fewer inputs than the target takes."""
IMPORT_FAILED = "import failed"
"""The target's importer (TVM's ONNX frontend, IREE's ONNX importer) raised on this node."""
COMPILE_FAILED = "compile failed"
"""The target's compiler (``iree-compile``: its ONNX lowering or a later pass) failed on this node."""
NOTE = "note"
"""A published caveat no rule here checks; the node still counts as supported."""
REASON_KINDS = (
    OP_MISSING,
    OPSET,
    DTYPE,
    DYNAMIC_SHAPE,
    ATTRIBUTE,
    CONSTANT_INPUT,
    RANK,
    INPUT_COUNT,
    IMPORT_FAILED,
    COMPILE_FAILED,
    NOTE,
)
"""Every reason kind, in the order a verdict lists them."""


@dataclass(frozen=True)
class Reason:
    """Why a node is not supported (or, for :data:`NOTE`, what to watch).

    Attributes
    ----------
    kind : str
        One of :data:`REASON_KINDS`.
    text : str
        The detail in words ("input 1 (shape) is computed at run time").

    Examples
    --------
    >>> str(Reason(OP_MISSING, "no NonZero kernel"))
    'op missing: no NonZero kernel'
    """

    kind: str
    text: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.text}"


@dataclass(frozen=True)
class NodeSupport:
    """One node on one target: supported or not, and why.

    Attributes
    ----------
    node, op : str
        The node id and its qualified op (``"Conv"``, ``"com.microsoft::Attention"``).
    supported : bool
        Whether the target takes the node.
    reasons : tuple of Reason
        Every failed rule (empty when supported) followed by the caveats (:data:`NOTE`).

    Examples
    --------
    >>> s = NodeSupport("n", "Relu", False, (Reason(DTYPE, "input 0 is int8"),))
    >>> s.blocking[0].kind, s.to_dict()["reasons"]
    ('dtype', ['dtype: input 0 is int8'])
    """

    node: str
    op: str
    supported: bool
    reasons: tuple[Reason, ...] = ()

    @property
    def blocking(self) -> tuple[Reason, ...]:
        """The reasons that make the node unsupported (notes left out)."""
        return tuple(r for r in self.reasons if r.kind != NOTE)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (reasons as ``"kind: text"`` strings)."""
        return {
            "node": self.node,
            "op": self.op,
            "supported": self.supported,
            "reasons": [str(r) for r in self.reasons],
        }

    @staticmethod
    def judge(facts: NodeFacts, reasons: Sequence[Reason]) -> NodeSupport:
        """The support of ``facts``' node given every reason found (supported when all are notes).

        Examples
        --------
        >>> f = NodeFacts("n", "Relu", "", 17, 14, (), (), {})
        >>> NodeSupport.judge(f, [Reason(NOTE, "fp16 only on v73")]).supported
        True
        """
        blocking = [r for r in reasons if r.kind != NOTE]
        notes = [r for r in reasons if r.kind == NOTE]
        return NodeSupport(facts.node, facts.qualified_op, not blocking, (*blocking, *notes))


@dataclass(frozen=True)
class TensorFact:
    """One input or output of a node, as a support rule sees it.

    Attributes
    ----------
    name : str
        Tensor name.
    dtype : str or None
        Element type (numpy-like: ``"float32"``, ``"int64"``); None when unknown.
    shape : tuple or None
        Dimensions (ints, or strings for symbolic ones); None when even the rank is unknown.
    constant : bool
        Whether the tensor is a weight (initializer or folded ``Constant``).
    kind : str
        What kind of value it is, its type string without the element type: ``"tensor"``,
        ``"seq(tensor)"``, ``"optional(tensor)"``, ``"optional(seq(tensor))"``, ``"sparse_tensor"``
        (see :func:`type_kind`); ``dtype`` is then the element type of the tensors inside.

    Examples
    --------
    >>> TensorFact("x", "float32", ("batch", 3), False).static
    False
    >>> TensorFact("s", "float32", None, False, "seq(tensor)").type_string
    'seq(tensor(float))'
    """

    name: str
    dtype: str | None
    shape: tuple[Any, ...] | None
    constant: bool
    kind: str = "tensor"

    @property
    def type_string(self) -> str | None:
        """The value's type as ONNX Runtime's kernel constraints spell it (``tensor(float)``,
        ``seq(tensor(int64))``); None when the element type is unknown."""
        return onnx_type_string(self.dtype, self.kind)

    @property
    def static(self) -> bool:
        """Whether every dimension is a fixed number (a rank-0 scalar is static)."""
        return self.shape is not None and all(isinstance(d, int) and d >= 0 for d in self.shape)

    @property
    def rank(self) -> int | None:
        """The number of dimensions, None when unknown."""
        return None if self.shape is None else len(self.shape)


@dataclass(frozen=True)
class NodeFacts:
    """Everything a support rule reads about one operator node.

    Attributes
    ----------
    node, op, domain : str
        Node id, op type and domain (``""`` for the default ONNX domain).
    opset : int or None
        The version the model imports for ``domain``.
    since_version : int or None
        The op schema version that opset resolves to (what kernels are registered against).
    inputs, outputs : tuple of TensorFact or None
        In slot order; None for an optional input left empty.
    attributes : mapping
        The node's attributes, decoded.
    defaults : mapping
        The schema's default for each attribute the node does not set.
    function_body : tuple or None
        For a call of a model-local function: ``(domain, op, schema version)`` of each node
        of its body (runtimes inline it before placing nodes); None for any other node.

    Examples
    --------
    >>> NodeFacts("n", "Attention", "com.microsoft", 1, 1, (), (), {}).qualified_op
    'com.microsoft::Attention'
    """

    node: str
    op: str
    domain: str
    opset: int | None
    since_version: int | None
    inputs: tuple[TensorFact | None, ...]
    outputs: tuple[TensorFact | None, ...]
    attributes: Mapping[str, Any]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    function_body: tuple[tuple[str, str, int | None], ...] | None = None

    @property
    def qualified_op(self) -> str:
        """``op`` for the ONNX domain, ``domain::op`` for any other."""
        return self.op if self.domain in ("", "ai.onnx") else f"{self.domain}::{self.op}"

    @property
    def domain_name(self) -> str:
        """The domain as kernel registries and support tables spell it (``"ai.onnx"`` for ``""``)."""
        return self.domain or "ai.onnx"

    def attribute(self, name: str) -> Any:
        """The attribute's value, its schema default when the node does not set it, else None."""
        if name in self.attributes:
            return self.attributes[name]
        return self.defaults.get(name)

    def tensors(self) -> tuple[TensorFact, ...]:
        """Every input and output present (empty optional slots left out)."""
        return tuple(t for t in (*self.inputs, *self.outputs) if t is not None)


def onnx_type_string(dtype: str | None, kind: str = "tensor") -> str | None:
    """ONNX Runtime's type string of a numpy-like dtype name (``float32`` -> ``tensor(float)``),
    for a value of ``kind`` (:func:`type_kind`: ``seq(tensor)`` -> ``seq(tensor(float))``).

    Examples
    --------
    >>> onnx_type_string("float32"), onnx_type_string("int64"), onnx_type_string(None)
    ('tensor(float)', 'tensor(int64)', None)
    >>> onnx_type_string("float64", "optional(seq(tensor))")
    'optional(seq(tensor(double)))'
    """
    if not dtype or _ELEMENT_FREE.search(kind) is None:
        return None
    element = {"float32": "float", "float64": "double"}.get(dtype, dtype)
    return _ELEMENT_FREE.sub(lambda m: f"{m.group(0)}({element})", kind, count=1)


_ELEMENT_FREE = re.compile(r"(?<!\w)(?:sparse_)?tensor(?!\()")
"""A ``tensor`` or ``sparse_tensor`` in a kind, without its element type."""
_ELEMENT = re.compile(r"\b((?:sparse_)?tensor)\([a-z0-9]+\)")
"""A ``tensor(float)`` (or ``sparse_tensor(...)``) in a type string."""


def type_kind(type_proto: Any) -> str | None:
    """The kind of value an ONNX ``TypeProto`` describes: its type string as ONNX Runtime spells it,
    with the element type left out (``tensor``, ``seq(tensor)``, ``optional(seq(tensor))``,
    ``map(int64,tensor)``); None when the type is not set.

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> type_kind(helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None)))
    'seq(tensor)'
    >>> type_kind(helper.make_tensor_type_proto(TensorProto.INT64, [2]))
    'tensor'
    """
    which = type_proto.WhichOneof("value")
    if which == "tensor_type":
        return "tensor"
    if which == "sparse_tensor_type":
        return "sparse_tensor"
    if which in ("sequence_type", "optional_type"):
        inner = getattr(type_proto, which).elem_type
        inner_kind = type_kind(inner) if inner.WhichOneof("value") else None
        wrapper = "seq" if which == "sequence_type" else "optional"
        return f"{wrapper}({inner_kind})" if inner_kind else None
    if which == "map_type":
        from onnx import helper

        key = helper.tensor_dtype_to_np_dtype(type_proto.map_type.key_type).name
        value = type_kind(type_proto.map_type.value_type)
        return f"map({'string' if key == 'object' else key},{value})" if value else None
    return None


def _text_type_kind(text: str) -> str | None:
    """:func:`type_kind` of a ``TypeProto`` written in protobuf's text format (a decoded attribute)."""
    import onnx
    from google.protobuf import text_format

    try:
        return type_kind(text_format.Parse(str(text), onnx.TypeProto()))
    except text_format.ParseError:
        return None


def _kinds_allowed(schema: Any, type_str: str) -> set[str]:
    """The kinds a formal parameter's type (a constraint name or a literal type) allows."""
    allowed = [type_str]
    for constraint in schema.type_constraints:
        if constraint.type_param_str == type_str:
            allowed = list(constraint.allowed_type_strs)
    return {_ELEMENT.sub(lambda m: m.group(1), t) for t in allowed}


def value_kinds(graph: ModelGraph) -> dict[str, str]:
    """The kind (:func:`type_kind`) of each value of ``graph``'s main graph that is not a plain tensor.

    A declared type (graph input, output, ``value_info``) says it; otherwise the producing op's
    schema does, as ONNX's type inference would: the kinds its output's type constraint
    allows, when that is one kind (``SequenceConstruct`` makes a ``seq(tensor)``); else the
    kind of the input that shares the constraint (``Identity`` of a sequence is a sequence);
    ``Optional`` wraps its input's kind (or its ``type`` attribute) and ``OptionalGetElement``
    unwraps it. Values it cannot tell are taken as tensors.

    Examples
    --------
    >>> import onnx
    >>> from onnx import TensorProto, helper
    >>> from explorer.onnx_adapter.graph_builder import build_graph
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    >>> nodes = [helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
    ...          helper.make_node("Identity", ["s"], ["t"]),
    ...          helper.make_node("SequenceAt", ["t", "i"], ["y"])]
    >>> i = helper.make_tensor("i", TensorProto.INT64, [], [0])
    >>> opsets = [helper.make_opsetid("", 17)]
    >>> m = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [i]), opset_imports=opsets)
    >>> value_kinds(build_graph(m))
    {'s': 'seq(tensor)', 't': 'seq(tensor)'}
    """
    kinds: dict[str, str] = {}
    proto = graph.proto
    if proto is not None:
        for value in (*proto.input, *proto.output, *proto.value_info):
            kind = type_kind(value.type) if value.HasField("type") else None
            if kind and kind != "tensor":
                kinds[value.name] = kind
    declared = set(kinds)
    opsets = opset_versions(graph)
    for node in graph.op_nodes():
        data = graph.nx.nodes[node]
        domain, op = data.get("domain") or "", data["op_type"]
        opset = opsets.get(domain)
        schema = onnx_op_schema(op, domain, opset) if opset else None
        if schema is None:
            continue
        inputs = list(data.get("inputs") or ())
        outputs = list(data.get("outputs") or ())
        for i, name in enumerate(outputs):
            if not name or name in declared or not schema.outputs:
                continue
            kind = _output_kind(schema, op, data, inputs, min(i, len(schema.outputs) - 1), kinds)
            if kind != "tensor":
                kinds[name] = kind
    return kinds


def _output_kind(
    schema: Any, op: str, data: Mapping[str, Any], inputs: Sequence[str], slot: int, kinds: Mapping[str, str]
) -> str:
    """The kind of a node's output ``slot`` (see :func:`value_kinds`)."""
    first = kinds.get(inputs[0], "tensor") if inputs and inputs[0] else None
    if op == "Optional" and schema.domain == "":
        declared = (data.get("attributes") or {}).get("type")  # a TypeProto in text format
        return f"optional({first or (_text_type_kind(declared) if declared else None) or 'tensor'})"
    if op == "OptionalGetElement" and schema.domain == "" and first:
        return first[len("optional(") : -1] if first.startswith("optional(") else first
    type_str = schema.outputs[slot].type_str
    allowed = _kinds_allowed(schema, type_str)
    if len(allowed) == 1:
        return next(iter(allowed))
    for formal, name in zip(schema.inputs, inputs, strict=False):
        if name and formal.type_str == type_str:
            return kinds.get(name, "tensor")
    return "tensor"


@functools.cache
def onnx_op_schema(op: str, domain: str, opset: int) -> Any:
    """The ONNX schema ``op`` resolves to at ``opset`` (None for ops ONNX does not define).

    Examples
    --------
    >>> onnx_op_schema("Resize", "", 17).since_version, onnx_op_schema("Attention", "com.microsoft", 1)
    (13, None)
    """
    import onnx.defs

    try:
        return onnx.defs.get_schema(op, opset, domain)
    except onnx.defs.SchemaError:
        return None


def _attribute_defaults(schema: Any) -> dict[str, Any]:
    from onnx import helper

    out = {}
    for name, attr in schema.attributes.items():
        default = attr.default_value
        if default is not None and default.name:
            out[name] = helper.get_attribute_value(default)
            if isinstance(out[name], bytes):
                out[name] = out[name].decode()
    return out


def _tensor_fact(
    name: str, graph: ModelGraph, weights: Mapping[str, Any], edges: Mapping, kinds: Mapping[str, str]
) -> Any:
    if not name:
        return None
    w = weights.get(name) or graph.weights.get(name)
    if w is not None:
        return TensorFact(name, w.dtype, tuple(w.shape) if w.shape is not None else None, True)
    data = edges.get(name)
    kind = kinds.get(name, "tensor")
    if data is None:
        return TensorFact(name, None, None, False, kind)
    shape = data.get("shape")
    return TensorFact(name, data.get("dtype"), tuple(shape) if shape is not None else None, False, kind)


def node_facts(graph: ModelGraph) -> dict[str, NodeFacts]:
    """The facts of every operator of ``graph``'s main graph, by node id, in node-list order.

    Parameters
    ----------
    graph : ModelGraph
        An ONNX graph (from :func:`explorer.load`).

    Returns
    -------
    dict
        Node id -> :class:`NodeFacts`.

    Examples
    --------
    >>> from explorer import load
    >>> facts = node_facts(load("zoo:mlp"))
    >>> facts["/fc1/Gemm"].inputs[0].shape, facts["/fc1/Gemm"].attribute("transB")
    (('batch', 784), 1)
    """
    opsets = opset_versions(graph)
    opsets.setdefault("ai.onnx", opsets.get("", 0))
    bodies = _function_bodies(graph)
    kinds = value_kinds(graph)
    out = {}
    for node in graph.op_nodes():
        data = graph.nx.nodes[node]
        domain = data.get("domain") or ""
        opset = opsets.get(domain)
        schema = onnx_op_schema(data["op_type"], domain, opset) if opset else None
        since = int(schema.since_version) if schema is not None else opset
        weights = {w.name: w for w in data.get("weights") or ()}
        edges_in = {k: d for _, _, k, d in graph.nx.in_edges(node, keys=True, data=True)}
        edges_out = {k: d for _, _, k, d in graph.nx.out_edges(node, keys=True, data=True)}
        inputs = tuple(_tensor_fact(n, graph, weights, edges_in, kinds) for n in data.get("inputs") or ())
        outputs = tuple(_tensor_fact(n, graph, {}, edges_out, kinds) for n in data.get("outputs") or ())
        out[node] = NodeFacts(
            node=node,
            op=data["op_type"],
            domain=domain,
            opset=opset,
            since_version=since,
            inputs=inputs,
            outputs=outputs,
            attributes=dict(data.get("attributes") or {}),
            defaults=_attribute_defaults(schema) if schema is not None else {},
            function_body=bodies.get((domain, data["op_type"])),
        )
    return out


def _function_bodies(graph: ModelGraph) -> dict[tuple[str, str], tuple[tuple[str, str, int | None], ...]]:
    """(domain, name) of each model-local function -> its body's (domain, op, schema version)."""
    if not has_onnx_model(graph):
        return {}
    out = {}
    for function in graph.model.functions:
        opsets = {(o.domain or ""): int(o.version) for o in function.opset_import}
        body = []
        for node in function.node:
            opset = opsets.get(node.domain or "")
            schema = onnx_op_schema(node.op_type, node.domain or "", opset) if opset else None
            body.append(
                (node.domain or "ai.onnx", node.op_type, int(schema.since_version) if schema else opset)
            )
        out[(function.domain, function.name)] = tuple(body)
    return out

"""ModelSummary: the at-a-glance facts of a model (op histogram, parameters, opsets, I/O).

Examples
--------
>>> from explorer import load
>>> s = load("zoo:mlp").summary()
>>> s.to_dict()["nodes"] == sum(s.ops.values())
True
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from explorer.core.tensors import Shape, format_bytes, format_shape

if TYPE_CHECKING:
    import pandas as pd

    from explorer.core.graph import ModelGraph

__all__ = ["TensorSpec", "ModelSummary", "summarize_graph", "dynamic_dims", "llm_lines", "STANDARD_DOMAINS"]

STANDARD_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training"})
"""Domains whose operators the ``onnx`` package defines."""


@dataclass(frozen=True)
class TensorSpec:
    """A graph input or output: name, element type and shape (symbolic dims as strings)."""

    name: str
    dtype: str | None
    shape: Shape | None

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"name", "dtype", "shape"}`` with the shape as a list (``None`` if unknown)."""
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": None if self.shape is None else list(self.shape),
        }


@dataclass(frozen=True)
class ModelSummary:
    """Facts about a model, as shown by ``onnx-explorer info``.

    Attributes
    ----------
    source : str
        Where the model came from.
    graph_name, producer : str
        The graph's name and the producer (``name version``).
    ir_version : int
        ONNX IR version.
    opsets : dict
        Domain -> opset version (the default domain is written ``"ai.onnx"``).
    nodes : int
        Number of operators in the main graph (``len(model.graph.node)``).
    ops : dict
        Op type -> count over the main graph's node list, exactly
        ``collections.Counter(n.op_type for n in model.graph.node)``.
    ops_in_subgraphs : dict
        Op type -> count over all nested subgraphs.
    inputs, outputs : tuple of TensorSpec
        Graph inputs (initializers excluded) and outputs.
    params, param_bytes : int
        Elements and bytes of every constant tensor in the model: initializers
        and ``Constant`` node values, in all graphs.
    initializers, constant_nodes : int
        How many initializers and ``Constant`` nodes the model holds (all graphs).
    dynamic_dims : tuple of str
        Symbolic dimension names of the inputs and outputs, plus ``"?"`` when
        some dimension is entirely unknown.
    subgraphs : int
        Number of nested subgraphs (``If`` branches, ``Loop``/``Scan`` bodies), at any depth.
    max_depth : int
        Deepest nesting of subgraphs.
    unknown_ops : tuple of str
        ``domain::op`` of operators that neither the installed onnx (schemas),
        ONNX Runtime (kernels) nor the model's local functions define.
    runtime_ops : tuple of str
        ``domain::op`` of operators onnx does not define but ONNX Runtime runs
        (contrib ops such as ``com.microsoft::FusedMatMul``): only ORT runs them.
    custom_domains : tuple of str
        Opset domains outside the ONNX standard ones (e.g. ``com.microsoft``).
    functions : int
        Number of model-local functions.
    external_tensors : int
        Tensors whose data lives in external files.
    shapes_known : float
        Fraction of the main graph's tensor edges whose rank and every dimension
        (a size or a symbolic name) are known.
    notes : tuple of str
        Remarks from loading (e.g. shape-inference fallbacks).
    llm : dict or None
        A decoder LLM's figures (layers, heads, KV cache, weights: ``DecoderSpec.to_dict()`` of
        :mod:`explorer.onnx_adapter.decoder`), None for any other model.
    """

    source: str
    graph_name: str
    producer: str
    ir_version: int
    opsets: dict[str, int]
    nodes: int
    ops: dict[str, int]
    ops_in_subgraphs: dict[str, int]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    params: int
    param_bytes: int
    initializers: int
    constant_nodes: int
    dynamic_dims: tuple[str, ...]
    subgraphs: int
    max_depth: int
    unknown_ops: tuple[str, ...]
    runtime_ops: tuple[str, ...]
    custom_domains: tuple[str, ...]
    functions: int
    external_tensors: int
    shapes_known: float
    notes: tuple[str, ...] = field(default=())
    llm: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (the ``onnx-explorer info --json`` object).

        Examples
        --------
        >>> from explorer import load
        >>> d = load("zoo:mlp").summary().to_dict()
        >>> sorted(k for k in ("nodes", "ops", "inputs", "outputs", "params", "param_bytes",
        ...                    "opsets", "subgraphs") if k in d)  # doctest: +NORMALIZE_WHITESPACE
        ['inputs', 'nodes', 'ops', 'opsets', 'outputs', 'param_bytes', 'params', 'subgraphs']
        """
        return {
            "source": self.source,
            "graph_name": self.graph_name,
            "producer": self.producer,
            "ir_version": self.ir_version,
            "opsets": dict(self.opsets),
            "nodes": self.nodes,
            "ops": dict(self.ops),
            "ops_in_subgraphs": dict(self.ops_in_subgraphs),
            "inputs": [t.to_dict() for t in self.inputs],
            "outputs": [t.to_dict() for t in self.outputs],
            "params": self.params,
            "param_bytes": self.param_bytes,
            "initializers": self.initializers,
            "constant_nodes": self.constant_nodes,
            "dynamic_dims": list(self.dynamic_dims),
            "subgraphs": self.subgraphs,
            "max_depth": self.max_depth,
            "unknown_ops": list(self.unknown_ops),
            "runtime_ops": list(self.runtime_ops),
            "custom_domains": list(self.custom_domains),
            "functions": self.functions,
            "external_tensors": self.external_tensors,
            "shapes_known": self.shapes_known,
            "notes": list(self.notes),
            "llm": None if self.llm is None else dict(self.llm),
        }

    def to_json(self, **kwargs: Any) -> str:
        """Return :meth:`to_dict` as a JSON string."""
        return json.dumps(self.to_dict(), **kwargs)

    def to_frame(self) -> pd.DataFrame:
        """Return the op histogram as a DataFrame (``op_type``, ``count``, ``in_subgraphs``).

        Examples
        --------
        >>> from explorer import load
        >>> load("zoo:mlp").summary().to_frame().columns.tolist()
        ['op_type', 'count', 'in_subgraphs']
        """
        import pandas as pd

        names = sorted(set(self.ops) | set(self.ops_in_subgraphs), key=lambda o: (-self.ops.get(o, 0), o))
        return pd.DataFrame(
            {
                "op_type": names,
                "count": [self.ops.get(o, 0) for o in names],
                "in_subgraphs": [self.ops_in_subgraphs.get(o, 0) for o in names],
            }
        )

    def to_text(self) -> str:
        """Return a readable multi-line summary, as ``onnx-explorer info`` prints it."""
        lines = [
            f"model      {self.source}",
            f"graph      {self.graph_name or '(unnamed)'}   producer: {self.producer or '(unknown)'}",
            f"ir/opsets  IR {self.ir_version}; "
            + ", ".join(f"{d} {v}" for d, v in sorted(self.opsets.items())),
            f"operators  {self.nodes} in the main graph"
            + (
                f", {sum(self.ops_in_subgraphs.values())} in {self.subgraphs} subgraphs"
                if self.subgraphs
                else ""
            ),
            f"params     {self.params:,} ({format_bytes(self.param_bytes)}) in "
            f"{self.initializers} initializers and {self.constant_nodes} Constant nodes"
            + (f"; {self.external_tensors} stored externally" if self.external_tensors else ""),
            "inputs",
            *(f"  {t.name}: {t.dtype} {format_shape(t.shape)}" for t in self.inputs),
            "outputs",
            *(f"  {t.name}: {t.dtype} {format_shape(t.shape)}" for t in self.outputs),
        ]
        if self.dynamic_dims:
            lines.append(f"dynamic    {', '.join(self.dynamic_dims)}")
        if self.llm is not None:
            lines.extend(f"llm        {line}" for line in llm_lines(self.llm))
        lines.append(
            f"shapes     {self.shapes_known:.0%} of tensors have a known shape (sizes or named dims)"
        )
        if self.custom_domains:
            lines.append(f"domains    custom: {', '.join(self.custom_domains)}")
        if self.runtime_ops:
            lines.append(f"ort-only   {', '.join(self.runtime_ops)} (ONNX Runtime contrib ops)")
        if self.unknown_ops:
            lines.append(f"unknown    {', '.join(self.unknown_ops)} (no ONNX schema, no ONNX Runtime kernel)")
        lines.append("ops")
        width = max((len(o) for o in self.ops), default=0)
        for op, count in sorted(self.ops.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"  {op:<{width}}  {count}")
        lines.extend(f"note       {n}" for n in self.notes)
        return "\n".join(lines)


def summarize_graph(graph: ModelGraph) -> ModelSummary:
    """The summary of a graph of any IR, from the graph model alone (no protos).

    What only an ONNX model has (producer, IR version, opsets, functions, external
    files, ops that no runtime knows) is empty; the rest is read from the nodes,
    edges and weights: ``ops`` is :attr:`~explorer.core.graph.ModelGraph.op_counts`, inputs
    and outputs are the tensor nodes, ``params`` the elements of every weight.

    Examples
    --------
    >>> from explorer import load
    >>> onnx_view = load("zoo:mlp")
    >>> generic = summarize_graph(onnx_view)
    >>> generic.ops == onnx_view.summary().ops, generic.params == onnx_view.summary().params
    (True, True)
    """
    nodes = graph.nx.nodes

    def specs(kind: str) -> tuple[TensorSpec, ...]:  # in the order the adapter added them
        found = [d for _, d in nodes(data=True) if d["kind"] == kind]
        return tuple(TensorSpec(d["name"], d.get("dtype"), d.get("shape")) for d in found)

    inputs, outputs = specs("input"), specs("output")
    dynamic = dynamic_dims((*inputs, *outputs))
    sub_ops: Counter[str] = Counter()
    max_depth = subgraphs = 0
    for path, sub in graph.iter_subgraphs():
        subgraphs += 1
        max_depth = max(max_depth, len(path) // 2)
        sub_ops.update(sub.op_counts)
    shapes = [shape for *_, shape in graph.nx.edges(data="shape")]
    known = sum(1 for s in shapes if s is not None and all(d is not None for d in s))
    by_name = {w.name: w for _, d in nodes(data=True) for w in d["weights"]}
    by_name.update(graph.weights)  # weights no node reads count too
    weights = by_name.values()
    return ModelSummary(
        source=graph.source,
        graph_name=graph.name,
        producer="",
        ir_version=0,
        opsets={},
        nodes=sum(graph.op_counts.values()),
        ops=dict(graph.op_counts),
        ops_in_subgraphs=dict(sub_ops),
        inputs=inputs,
        outputs=outputs,
        params=sum(w.numel for w in weights),
        param_bytes=sum(w.nbytes or 0 for w in weights),
        initializers=len(by_name),
        constant_nodes=0,
        dynamic_dims=tuple(dynamic),
        subgraphs=subgraphs,
        max_depth=max_depth,
        unknown_ops=(),
        runtime_ops=(),
        custom_domains=(),
        functions=0,
        external_tensors=0,
        shapes_known=round(known / len(shapes), 4) if shapes else 1.0,
        notes=tuple(graph.notes),
    )


def llm_lines(llm: dict[str, Any]) -> list[str]:
    """A decoder LLM's figures in words (``ModelSummary.llm``), as ``onnx-explorer info`` prints them.

    Examples
    --------
    >>> from explorer import load
    >>> print("\\n".join(llm_lines(load("zoo:llama").summary().llm)))
    decoder: 2 layers, 4 heads (2 KV heads) of 8, hidden 32, vocab 128, context 128
    weights: 108.6 KiB, mostly float32 (float32 108.6 KiB)
    KV cache: 256 B per token (float32), 32.0 KiB at the full context of 128
    """

    def size(v: Any) -> str:
        return "?" if v is None else str(v)

    heads = f"{size(llm['heads'])} heads ({size(llm['kv_heads'])} KV heads) of {size(llm['head_size'])}"
    made = f" ({llm['model_type']}, from {llm['source']})" if llm.get("model_type") else ""
    block = f" in blocks of {llm['weight_block_size']}" if llm.get("weight_block_size") else ""
    kinds = ", ".join(f"{k} {format_bytes(v)}" for k, v in llm["weight_bytes_by_dtype"].items())
    at_context = (
        f", {format_bytes(llm['kv_bytes_at_context'])} at the full context of {llm['context_length']}"
        if llm.get("kv_bytes_at_context") is not None
        else ""
    )
    return [
        f"decoder: {llm['layers']} layers, {heads}, hidden {size(llm['hidden_size'])}, "
        f"vocab {size(llm['vocab_size'])}, context {size(llm['context_length'])}{made}",
        f"weights: {format_bytes(llm['weight_bytes'])}, mostly {llm['weight_dtype']}{block} ({kinds})",
        f"KV cache: {format_bytes(llm['kv_bytes_per_token'])} per token ({llm['kv_dtype']}){at_context}",
    ]


def dynamic_dims(specs: tuple[TensorSpec, ...]) -> list[str]:
    """Symbolic dimension names in order of appearance, plus ``"?"`` for entirely unknown ones.

    Examples
    --------
    >>> specs = (TensorSpec("x", "float32", ("batch", 3, None)), TensorSpec("y", "float32", ("batch", 10)))
    >>> dynamic_dims(specs)
    ['batch', '?']
    """
    dynamic: list[str] = []
    for spec in specs:
        for dim in spec.shape or ():
            if isinstance(dim, str) and dim not in dynamic:
                dynamic.append(dim)
            elif dim is None and "?" not in dynamic:
                dynamic.append("?")
    return dynamic

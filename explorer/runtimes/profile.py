"""Where the time goes: per-kernel times from each runtime, mapped onto the ONNX graph's nodes.

ONNX Runtime's profiler (``SessionOptions.enable_profiling``) times every node of the graph
it ran, which after its optimisations is not the graph loaded: a fused node is named after
one of its members or after the tensor it writes (``/relu/Relu_output_0_nchwc``), and layout
reorders exist only there. TVM 0.27's Relax VM has no profiler flag; its instrument hook
(``VirtualMachine.set_instrument``) times every call, PrimFunc kernels and runtime functions.
:func:`profile` gathers either into a :class:`Profile`, and maps each kernel onto the ONNX
node that does its work: an ORT node by its name, or through the tensor it writes and up to
the member whose op it runs; a TVM kernel through the Relax lowering's ``origin`` (the n-th
call of a PrimFunc is its n-th call site), onto the heaviest ONNX node it came from (a
convolution before the batch norm and ReLU fused into it); an IREE dispatch (timed by IREE's
own profiler, :mod:`explorer.runtimes.iree_dispatches`) through the location of its call site
in the compiler's ``flow`` phase, onto that ONNX node (the heaviest, for a fused location).
What cannot be mapped is listed, and :attr:`Profile.coverage` says how much of the time the
overlay holds.

Examples
--------
>>> from explorer import load
>>> from explorer.runtimes import OrtRuntime, random_feeds
>>> graph = load("zoo:mlp")
>>> prof = profile(OrtRuntime(optimization="disable").prepare(graph), random_feeds(graph.model), runs=3)
>>> prof.coverage, "/fc1/Gemm" in prof.node_ms
(1.0, True)
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from explorer.core.errors import UsageError
from explorer.core.tensors import dtype_bytes
from explorer.isolation import worker
from explorer.onnx_adapter.model_files import worker_source
from explorer.runtimes.base import PreparedSession
from explorer.runtimes.sessions import profile_session

if TYPE_CHECKING:
    import pandas as pd

    from explorer.core.graph import ModelGraph

__all__ = ["KernelTime", "Profile", "profile", "HEAVY_CATEGORIES", "ORT_FUSED_ANCHORS"]

HEAVY_CATEGORIES = ("conv", "pooling", "normalization", "reduction")
"""Op categories that do a fused kernel's work, in order: the node its time is put on."""


@dataclass(frozen=True)
class KernelTime:
    """One kernel (an ORT node, a TVM call site) and its time per inference.

    Attributes
    ----------
    name : str
        As the runtime names it (ORT's node name; TVM's PrimFunc symbol, ``#N`` for its N-th call).
    op : str
        The op it runs (ORT's op, TVM's PrimFunc).
    ms : float
        Mean milliseconds per inference.
    node : str or None
        The ONNX graph node it is put on (None: not mapped).
    """

    name: str
    op: str
    ms: float
    node: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields.

        Examples
        --------
        >>> KernelTime("a", "Conv", 1.0, "a").to_dict()["node"]
        'a'
        """
        return {"name": self.name, "op": self.op, "ms": self.ms, "node": self.node}


@dataclass(frozen=True)
class Profile:
    """A runtime's per-kernel times on one model, and the same mapped onto its ONNX nodes.

    Attributes
    ----------
    runtime, label : str
        Who ran it.
    runs : int
        Profiled inferences (after a warm-up).
    run_ms : float
        Mean of the kernels' total per inference.
    kernels : tuple of KernelTime
        Every kernel, slowest first.
    node_ms : dict
        ONNX node id -> milliseconds per inference (an overlay for ``GraphView``).
    launches : float
        Kernels launched per inference (ORT's node runs; TVM's PrimFunc calls, not the VM's
        own builtins; IREE's dispatches).
    written_bytes : float or None
        Bytes the kernels write per inference: tensors that go through memory between
        kernels, the traffic fusion removes (ORT's ``output_size`` per node; TVM's kernel
        outputs in the lowered module; IREE's dispatch results at ``flow``). None when unknown.
    """

    runtime: str
    label: str
    runs: int
    run_ms: float
    kernels: tuple[KernelTime, ...]
    node_ms: Mapping[str, float] = field(default_factory=dict)
    launches: float = 0.0
    written_bytes: float | None = None

    @property
    def coverage(self) -> float:
        """Share of the kernels' time the node overlay holds (1.0: all of it).

        Examples
        --------
        >>> kernels = (KernelTime("a", "x", 1.5, "a"), KernelTime("b", "y", 0.5, None))
        >>> Profile("r", "r", 1, 2.0, kernels).coverage
        0.75
        """
        total = sum(k.ms for k in self.kernels)
        return 1.0 if total == 0 else round(sum(k.ms for k in self.kernels if k.node) / total, 6)

    @property
    def unmapped(self) -> tuple[str, ...]:
        """Kernels not put on any ONNX node (layout reorders, runtime functions).

        Examples
        --------
        >>> Profile("r", "r", 1, 1.0, (KernelTime("a", "x", 1.0, None),)).unmapped
        ('a',)
        """
        return tuple(k.name for k in self.kernels if k.node is None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the totals, coverage and every kernel.

        Examples
        --------
        >>> Profile("r", "r", 1, 1.0, ()).to_dict()["coverage"]
        1.0
        """
        return {
            "runtime": self.runtime,
            "label": self.label,
            "runs": self.runs,
            "run_ms": self.run_ms,
            "coverage": self.coverage,
            "launches": self.launches,
            "written_bytes": self.written_bytes,
            "kernels": [k.to_dict() for k in self.kernels],
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per kernel, slowest first, with its share of the time.

        Examples
        --------
        >>> Profile("r", "r", 1, 1.0, (KernelTime("a", "x", 1.0, "a"),)).to_frame()["share"].tolist()
        [1.0]
        """
        import pandas as pd

        frame = pd.DataFrame([k.to_dict() for k in self.kernels], columns=["name", "op", "ms", "node"])
        total = frame["ms"].sum() if len(frame) else 0.0
        frame["share"] = frame["ms"] / total if total else 0.0
        return frame


_ORT_SUFFIXES = re.compile(r"(_nchwc|_token_\d+|_fused\w*|/\w+Fusion/?)$")

ORT_FUSED_ANCHORS: Mapping[str, tuple[str, ...]] = {
    "SkipLayerNormalization": ("LayerNormalization", "ReduceMean"),
    "SkipSimplifiedLayerNormalization": ("SimplifiedLayerNormalization", "ReduceMean"),
    "LayerNormalization": ("LayerNormalization", "ReduceMean"),
    "SimplifiedLayerNormalization": ("SimplifiedLayerNormalization", "ReduceMean"),
    "Gelu": ("Gelu", "Erf"),
    "BiasGelu": ("Gelu", "Erf"),
    "FastGelu": ("Gelu", "Tanh", "Erf"),
    "QuickGelu": ("Sigmoid",),
    "FusedMatMul": ("MatMul",),
    "FusedGemm": ("Gemm",),
    "FusedConv": ("Conv",),
    "NhwcConv": ("Conv",),
    "BiasSoftmax": ("Softmax",),
    "Attention": ("Softmax",),
    "MultiHeadAttention": ("Softmax",),
    "GroupQueryAttention": ("Softmax",),
}
"""ONNX Runtime's fused ops -> the ONNX op types of the member their time goes on, in order of
preference (a SkipLayerNormalization is an Add and a LayerNormalization: the latter)."""


def _ort_node(graph: ModelGraph, name: str, op: str, producers: Mapping[str, str]) -> str | None:
    """The ONNX node an ORT profiler node stands for: by name, else by the tensor it writes and up
    the chain of single producers to the member running ``op`` (the Conv of a Conv+Relu)."""
    nodes = graph.nx.nodes
    name = name.removeprefix("fused ")  # ORT's name for a node it fused (FusedGemm, ...)
    if name in nodes and nodes[name]["kind"] == "op":
        return name
    tensor = name
    while _ORT_SUFFIXES.search(tensor):
        tensor = _ORT_SUFFIXES.sub("", tensor)
    start = producers.get(tensor) or (tensor if tensor in nodes and nodes[tensor]["kind"] == "op" else None)
    node = start
    for _ in range(4):  # a fusion of a few nodes: walk up to the one whose op ORT ran
        if node is None or nodes[node]["op_type"] == op:
            break
        ops = [p for p in graph.nx.predecessors(node) if nodes[p]["kind"] == "op"]
        node = ops[0] if len(ops) == 1 else None
    return node if node is not None and nodes[node]["op_type"] == op else start


def _ort_by_order(
    graph: ModelGraph, unnamed: Mapping[str, int], claimed: set[str]
) -> dict[tuple[str, int], str]:
    """Nodes for the fused nodes ORT names after nothing in the graph (``SkipLayerNormalization``):
    the n-th such call of an op in a run (``unnamed``: op -> calls a run) goes to the n-th node, in
    graph order and not already timed by name, of the first anchor op type
    (:data:`ORT_FUSED_ANCHORS`) with as many nodes."""
    found: dict[tuple[str, int], str] = {}
    order = graph.op_nodes()
    for op, calls in unnamed.items():
        for anchor in ORT_FUSED_ANCHORS.get(op, (op,)):
            free = [n for n in order if n not in claimed and graph.nx.nodes[n]["op_type"] == anchor]
            if len(free) == calls:
                found.update({(op, i): node for i, node in enumerate(free)})
                claimed.update(free)
                break
    return found


def _ort_kernels(graph: ModelGraph, records: Sequence[Mapping[str, Any]], runs: int) -> list[KernelTime]:
    producers = {
        out: node for node, d in graph.nx.nodes(data=True) if d["kind"] == "op" for out in d["outputs"] if out
    }
    by_name = {
        key: _ort_node(graph, *key, producers) for key in dict.fromkeys((r["name"], r["op"]) for r in records)
    }
    # calls no name maps, keyed by (op, n-th such call of the op in its run)
    totals: dict[tuple[str, str, int | None], float] = defaultdict(float)
    seen: dict[tuple[int, str], int] = defaultdict(int)
    unnamed: dict[str, int] = defaultdict(int)  # op -> such calls in a run
    for record in records:
        key = (record["name"], record["op"])
        nth = None
        if by_name[key] is None:
            nth = seen[(record["run"], record["op"])]
            seen[(record["run"], record["op"])] += 1
            unnamed[record["op"]] = max(unnamed[record["op"]], nth + 1)
        totals[(*key, nth)] += record["ms"]
    claimed = {node for node in by_name.values() if node}
    by_order = _ort_by_order(graph, unnamed, claimed)
    several = {op for op, calls in unnamed.items() if calls > 1}
    return [
        KernelTime(
            f"{name}#{nth}" if nth is not None and op in several else name,
            op,
            ms / runs,
            by_name[(name, op)] if nth is None else by_order.get((op, nth)),
        )
        for (name, op, nth), ms in totals.items()
    ]


def _anchor(source: ModelGraph, origins: Sequence[str]) -> str | None:
    """The ONNX node a fused kernel's time goes on: its first member in :data:`HEAVY_CATEGORIES` order."""
    from explorer.core.op_categories import category_of

    members = [o for o in origins if source.nx.has_node(o)]
    for category in HEAVY_CATEGORIES:
        for member in members:
            if category_of(source.nx.nodes[member]) == category:
                return member
    return members[0] if members else None


def _work_key(graph: ModelGraph, node: str) -> tuple[Any, ...]:
    """What a node computes, up to its weights' values: op, attributes, weight and output shapes."""
    d = graph.nx.nodes[node]
    outputs = sorted(
        {(k, str(e.get("shape"))) for _, _, k, e in graph.nx.out_edges(node, keys=True, data=True)}
    )
    weights = tuple(tuple(w.shape or ()) for w in d.get("weights") or ())
    return (
        d["op_type"],
        repr(sorted(d.get("attributes", {}).items())),
        weights,
        tuple(s for _, s in outputs),
    )


def _call_anchors(graph: ModelGraph, calls: Sequence[tuple[str, ...]]) -> list[str | None]:
    """The ONNX node each call site of one kernel is put on. Identical layers share one fused
    function, whose members carry the first layer's origins: calls that land on one node go,
    in order, to the nodes doing the same work, when there are as many."""
    anchors = [_anchor(graph, origin) for origin in calls]
    first = anchors[0] if anchors else None
    if first is None or len(set(anchors)) == len(anchors):
        return anchors
    key = _work_key(graph, first)
    same = [n for n in graph.op_nodes() if _work_key(graph, n) == key]
    return same if len(same) == len(anchors) else anchors


def _tvm_kernels(
    graph: ModelGraph,
    shapes: Mapping[str, Sequence[int]] | None,
    records: Sequence[Mapping[str, Any]],
    runs: int,
    passes: str | Sequence[str] = "zero",
) -> tuple[list[KernelTime], float | None]:
    """TVM calls per run, mapped to the call sites after FuseTIR (of the passes the build ran: a
    tuned or default-scheduled build decomposes batch norm first): the n-th kernel call of a run
    to the n-th call site when there are as many, else the n-th call of a PrimFunc to its n-th
    call site."""
    from explorer.lower.tvm.relax_pipeline import relax_pipeline
    from explorer.lower.tvm.relax_tuning import PREPACKED_SUFFIX

    lowered = relax_pipeline(graph, shapes, passes)[-1].graph
    sites: dict[str, list[tuple[str, ...]]] = defaultdict(list)
    calls_at = sorted(
        ((n, d) for n, d in lowered.nx.nodes(data=True) if d["kind"] == "op" and d["op"] == "relax.call_tir"),
        key=lambda pair: pair[1]["index"],
    )
    ordered = [d for _, d in calls_at]
    for d in ordered:
        sites[d["op_type"]].append(tuple(d["origin"]))
    by_run: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for record in records:
        if not record["name"].startswith("vm."):
            by_run[record["run"]].append(record)
    if by_run and all(len(calls) == len(ordered) for calls in by_run.values()):
        # one kernel call per call site, in order: the build may rename kernels (a tuned one
        # gets a suffix per rewrite), not reorder them
        index = {id(record): i for calls in by_run.values() for i, record in enumerate(calls)}
        records = [  # still in call order: the VM's own calls sit between the kernels they serve
            record
            if record["name"].startswith("vm.")
            else {**record, "name": ordered[index[id(record)]]["op_type"]}
            for record in records
        ]
    per_run: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    totals: dict[tuple[str, int], float] = defaultdict(float)
    # the VM's own calls (vm.builtin.*: allocations, tuples, reshapes) prepare the kernel call that
    # follows them (its output, its arguments): their time goes on that kernel's node, or on the
    # run's last kernel for those after it (the outputs' tuple)
    overhead: dict[tuple[str, tuple[str, int] | None], float] = defaultdict(float)
    pending: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    last: dict[int, tuple[str, int]] = {}
    for record in records:
        run = record["run"]
        if record["name"].startswith("vm."):
            pending[run].append(record)
            continue
        seen = per_run[run]
        symbol = record["name"].removesuffix(PREPACKED_SUFFIX)  # the kernel whose weights the build packed
        nth = seen[symbol]
        seen[symbol] += 1
        totals[(symbol, nth)] += record["ms"]
        last[run] = (symbol, nth)
        for call in pending.pop(run, []):
            overhead[(call["name"], (symbol, nth))] += call["ms"]
    for run, calls in pending.items():
        for call in calls:
            overhead[(call["name"], last.get(run))] += call["ms"]
    kernels = []
    anchors = {symbol: _call_anchors(graph, calls) for symbol, calls in sites.items()}

    def kernel_name(symbol: str, nth: int) -> str:
        return symbol if len(sites.get(symbol, [])) <= 1 else f"{symbol}#{nth}"

    def kernel_node(symbol: str, nth: int) -> str | None:
        return anchors[symbol][nth] if nth < len(sites.get(symbol, [])) else None

    for (symbol, nth), ms in totals.items():
        kernels.append(KernelTime(kernel_name(symbol, nth), symbol, ms / runs, kernel_node(symbol, nth)))
    for (symbol, kernel), ms in overhead.items():
        name = f"{symbol} ({kernel_name(*kernel)})" if kernel else symbol
        kernels.append(KernelTime(name, symbol, ms / runs, kernel_node(*kernel) if kernel else None))
    return kernels, _written_bytes(lowered, [node for node, _ in calls_at])


def _iree_kernels(
    graph: ModelGraph, records: Sequence[Mapping[str, Any]], runs: int
) -> tuple[list[KernelTime], float | None]:
    """IREE dispatches per run, each on the ONNX node its call site is located at (the heaviest
    of a fused location's nodes); the bytes their results take per run (None when a size is
    not known)."""
    by_name = {d["name"]: n for n, d in graph.nx.nodes(data=True) if d["kind"] == "op" and d.get("name")}
    totals: dict[tuple[str, str], float] = defaultdict(float)
    nodes: dict[tuple[str, str], str | None] = {}
    written: float | None = 0.0
    for record in records:
        key = (record["name"], record["op"])
        totals[key] += record["ms"]
        if key not in nodes:
            nodes[key] = _anchor(graph, [by_name[n] for n in record.get("onnx_nodes") or () if n in by_name])
        size = record.get("output_bytes")
        written = None if written is None or size is None else written + float(size)
    kernels = [KernelTime(name, op, ms / runs, nodes[(name, op)]) for (name, op), ms in totals.items()]
    return kernels, None if written is None else written / runs


def _written_bytes(lowered: ModelGraph, kernels: Sequence[str]) -> float | None:
    """Bytes the kernels' outputs take (each tensor once), or None when a shape is not known."""
    from explorer.runtimes.cost_model import bind_shape

    written = 0.0
    for node in kernels:
        tensors = {k: e for _, _, k, e in lowered.nx.out_edges(node, keys=True, data=True)}
        for e in tensors.values():
            shape, size = bind_shape(e.get("shape"), {}), dtype_bytes(e.get("dtype"))
            if shape is None or size is None:
                return None
            written += float(math.prod(shape) * size)
    return written


_Kernels = tuple[list[KernelTime], float | None, float]
"""A profile's kernels, the bytes they wrote per run (None: not known) and the launches per run."""


def _node_event_reader(
    session: PreparedSession, records: Sequence[Mapping[str, Any]], count: int
) -> _Kernels:
    """Node events (ONNX Runtime's, PyTorch eager's, the reference evaluator's): each on its node; written
    bytes from their outputs' sizes where the records have them."""
    sizes = [r.get("output_bytes") for r in records]
    written = None if any(b is None for b in sizes) else float(sum(sizes)) / count
    return _ort_kernels(session.graph, records, count), written, len(records) / count


def _tvm_reader(session: PreparedSession, records: Sequence[Mapping[str, Any]], count: int) -> _Kernels:
    """The Relax VM's calls: kernels traced to their ONNX nodes; the VM's own calls are no launches."""
    kernels, written = _tvm_kernels(
        session.graph, session.input_shapes, records, count, session.info.get("passes") or "zero"
    )
    return kernels, written, sum(1 for r in records if not r["name"].startswith("vm.")) / count


def _iree_reader(session: PreparedSession, records: Sequence[Mapping[str, Any]], count: int) -> _Kernels:
    """IREE's dispatches, each on the ONNX node its call site is located at."""
    kernels, written = _iree_kernels(session.graph, records, count)
    return kernels, written, len(records) / count


_KERNEL_READERS: Mapping[str, Callable[[PreparedSession, Sequence[Mapping[str, Any]], int], _Kernels]] = {
    "ort": _node_event_reader,
    "torch": _node_event_reader,
    "reference": _node_event_reader,
    "tvm": _tvm_reader,
    "iree": _iree_reader,
}
"""How a runtime family's profile records become kernels on ONNX nodes (``Runtime.family``)."""


def profile(session: PreparedSession, feeds: Mapping[str, np.ndarray], runs: int = 5) -> Profile:
    """Time every kernel of a prepared session over ``runs`` inferences and map them onto its graph.

    Parameters
    ----------
    session : PreparedSession
        From ``OrtRuntime().prepare(...)``, ``TvmRuntime().prepare(...)``, ``IreeRuntime().prepare(...)``
        or ``TorchEagerRuntime().prepare(...)``.
    feeds : mapping
        The inputs.
    runs : int
        Profiled inferences (after one warm-up).

    Returns
    -------
    Profile

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.runtimes import TvmRuntime, random_feeds
    >>> g = load("zoo:mlp")
    >>> p = profile(TvmRuntime().prepare(g), random_feeds(g.model), runs=2)
    >>> sorted(n for n in p.node_ms if n.endswith("Gemm")), p.runs
    (['/fc1/Gemm', '/fc2/Gemm', '/fc3/Gemm'], 2)
    """
    graph = session.graph
    out = session.with_session(
        lambda: worker.run_on_model(profile_session, worker_source(graph), session.key, dict(feeds), runs)
    )
    count = max(1, int(out["runs"]))
    family = getattr(session.runtime, "family", "")
    if family not in _KERNEL_READERS:
        raise UsageError(
            f"{session.runtime.label} keeps no kernel profile this explorer reads (family {family!r})"
        )
    read = _KERNEL_READERS[family]
    kernels, written, launches = read(session, out["records"], count)
    kernels.sort(key=lambda k: -k.ms)
    node_ms: dict[str, float] = defaultdict(float)
    for kernel in kernels:
        if kernel.node is not None:
            node_ms[kernel.node] += kernel.ms
    run_ms = float(np.mean(out["run_ms"])) if out["run_ms"] else 0.0
    return Profile(
        session.runtime.name,
        session.runtime.label,
        count,
        run_ms,
        tuple(kernels),
        dict(node_ms),
        launches=launches,
        written_bytes=written,
    )

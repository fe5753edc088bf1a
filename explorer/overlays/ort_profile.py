"""ONNX Runtime's profile (``SessionOptions.enable_profiling``) on the model's own nodes.

The profile is a list of chrome-trace events; each node ONNX Runtime ran is a ``cat: "Node"``
event named ``<node>_kernel_time``, with its duration ``dur`` in µs and ``args.op_name`` and
``args.provider``. Those names are the *optimised* graph's: at the extended level a Conv,
its BatchNormalization and its Relu run as one ``FusedConv`` named after the Conv, a MatMul and an
Add as one ``.../MatMulAddFusion``. The reader maps them back the way the explorer shows
optimisation: it runs the ``ort:LEVEL`` pass on the model (ONNX Runtime's own optimiser, on the
CPU, in the worker) and puts each kernel's time on the source nodes its optimised node came from,
split by :data:`~explorer.overlays.mapping.SPLIT_RULES`. Where an optimised node came from is
found, in order:

1. through the diff of the optimised graph against the model (:mod:`explorer.core.diff`): a kept
   or changed node is its counterpart, a fusion's node its sources (a fold's only its counterpart:
   the nodes folded into a constant no longer run);
2. a node the diff cannot place and that ONNX Runtime named after a tensor (the ``all`` level's
   NCHWc convolutions, ``/relu/Relu_output_0_nchwc``): the tensor's producer and up its chain to
   the node running the kernel's op (Conv + BatchNormalization + Relu), with the residual ``Add``
   and activation after it that no other kernel ran (:data:`FUSED_AFTER`);
3. a layout reorder (:data:`LAYOUT_OPS`) that took in a node no other kernel ran (a Transpose
   becomes ``ReorderOutput(channels_last=1)``) is that node; other reorders come from none;
4. a node ONNX Runtime added whose every consumer came from the same nodes (an ``Unsqueeze``
   preparing a ``Slice`` that replaced ``Range`` + ``Gather``, a bias ``DequantizeLinear``) is
   theirs; not a layout reorder, whose time stays unmapped.

The level is found by trying them (``disable``, the model itself, first; then ONNX Runtime's
default ``all``, ``extended``, ``basic``, ``layout``) until one's optimised graph has exactly the
profile's (name, op) pairs, else the one covering most of the time, unless ``level=`` says it; a
level ONNX Runtime cannot optimise the model at is left out, with a note.

Times are per inference: the file's total divided by its runs (its ``model_run`` events; a
warm-up run in the file counts as a run). A kernel whose node the optimised graph does not have
(another provider's graph, another ONNX Runtime), or that ONNX Runtime added from no node of the
model (a layout reorder, a copy), is listed in ``unmapped`` with the reason.

Examples
--------
>>> events = [
...     {"cat": "Session", "name": "model_run", "ph": "X", "dur": 10},
...     {"cat": "Node", "name": "/fc1/Gemm_kernel_time", "ph": "X", "dur": 500,
...      "args": {"op_name": "Gemm", "provider": "CPUExecutionProvider"}},
... ]
>>> sniff(events), [k.ms for k in kernels(events)[0]]
(True, [0.5])
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from explorer.core.errors import ExplorerError, UsageError, WorkerCancelled
from explorer.overlays.mapping import Collect, NodeIndex, check_split, spread
from explorer.overlays.value import Overlay, Unmapped

if TYPE_CHECKING:
    from explorer.core.diff import GraphDiff
    from explorer.core.graph import ModelGraph

__all__ = [
    "FORMAT",
    "LEVELS",
    "LAYOUT_OPS",
    "FUSED_AFTER",
    "Kernel",
    "sniff",
    "events_of",
    "kernels",
    "source_nodes",
    "read",
]

FORMAT = "ort-profile"
"""The format's name in :data:`explorer.overlays.READERS`."""

LEVELS = ("disable", "all", "extended", "basic", "layout")
"""ONNX Runtime's optimisation levels, in the order the reader tries them when the profile does not
say (``disable``: the model as it is; ``all`` is ONNX Runtime's default)."""

_SUFFIX = "_kernel_time"


@dataclass(frozen=True)
class Kernel:
    """One node ONNX Runtime ran, over the file's runs.

    Attributes
    ----------
    name : str
        The node's name in the graph ONNX Runtime ran (its optimised graph).
    op : str
        The kernel's op (``FusedConv``).
    provider : str
        The execution provider that ran it.
    ms : float
        Milliseconds per inference.
    """

    name: str
    op: str
    provider: str
    ms: float


def events_of(data: Any) -> list[Any] | None:
    """The trace events of a profile (a list, or a ``{"traceEvents": [...]}`` object), else None.

    Examples
    --------
    >>> events_of({"traceEvents": []}), events_of({"a": 1})
    ([], None)
    """
    if isinstance(data, dict):
        data = data.get("traceEvents")
    return data if isinstance(data, list) else None


def sniff(data: Any) -> bool:
    """Whether ``data`` is an ONNX Runtime profile: trace events with ``cat`` ``Node`` or ``Session``.

    Examples
    --------
    >>> sniff([{"cat": "Session", "name": "model_run", "ph": "X"}]), sniff([{"name": "a", "averageMs": 1}])
    (True, False)
    """
    events = events_of(data)
    return bool(events) and any(
        isinstance(e, dict) and e.get("cat") in ("Node", "Session") and "name" in e for e in events[:1000]
    )


def kernels(data: Any, source: str = "<value>") -> tuple[list[Kernel], int]:
    """The profile's node kernels (per inference, in the order first seen) and its number of runs.

    Raises
    ------
    UsageError
        ``data`` is no list of trace events (the message names ``source``).

    Examples
    --------
    >>> runs = [{"cat": "Session", "name": "model_run"}] * 2
    >>> node = {"cat": "Node", "name": "a_kernel_time", "dur": 1000, "args": {"op_name": "Relu"}}
    >>> kernels([*runs, node, node])
    ([Kernel(name='a', op='Relu', provider='', ms=1.0)], 2)
    """
    events = events_of(data)
    if events is None:
        raise UsageError(f"{source}: not an ONNX Runtime profile (a JSON list of trace events)")
    runs = sum(
        1
        for e in events
        if isinstance(e, dict) and e.get("cat") == "Session" and e.get("name") == "model_run"
    )
    if not runs:  # older ONNX Runtime: one executor event per run
        runs = sum(
            1
            for e in events
            if isinstance(e, dict)
            and e.get("cat") == "Session"
            and str(e.get("name", "")).endswith("Executor::Execute")
        )
    runs = max(1, runs)
    totals: dict[tuple[str, str], list[Any]] = {}
    for event in events:
        if not isinstance(event, dict) or event.get("cat") != "Node":
            continue
        name = str(event.get("name", ""))
        if not name.endswith(_SUFFIX):
            continue  # fences (_fence_before, _fence_after) and other node events
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        key = (name.removesuffix(_SUFFIX), str(args.get("op_name", "")))
        try:
            dur = float(event.get("dur", 0) or 0)
        except (TypeError, ValueError):
            raise UsageError(f"{source}: event {name!r} has a duration that is not a number") from None
        entry = totals.setdefault(key, [0.0, []])
        entry[0] += dur
        provider = str(args.get("provider", ""))
        if provider and provider not in entry[1]:
            entry[1].append(provider)
    found = [
        Kernel(name, op, "/".join(providers), total / 1000.0 / runs)
        for (name, op), (total, providers) in totals.items()
    ]
    return found, runs


def _pairs(graph: ModelGraph) -> set[tuple[str, str]]:
    nodes = graph.nx.nodes
    return {(nodes[n].get("name") or n, nodes[n].get("op_type", "")) for n in graph.op_nodes()}


def source_nodes(change: GraphDiff) -> dict[str, tuple[str, ...]]:
    """Node of the optimised graph -> the model's nodes it came from, through the diff ``change``
    (model -> optimised): a kept or changed node its counterpart, a fusion's node its sources
    (only its counterpart for a fold: the nodes folded into a constant run no more).

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.core.diff import diff
    >>> from explorer.passes import get_pass
    >>> model = load("zoo:resnet18")
    >>> optimised = load(get_pass("fuse_bn_into_conv").run(model.model).model)
    >>> source_nodes(diff(model, optimised))["/conv1/Conv"]
    ('/conv1/Conv', '/bn1/BatchNormalization')
    """
    sources: dict[str, tuple[str, ...]] = {after: (before,) for before, after in change.kept}
    sources.update({c.after: (c.before,) for c in change.changed})
    for fusion in change.fusions:
        if fusion.kind == "folded" and fusion.into in sources:
            continue
        sources[fusion.into] = tuple(fusion.sources)
    return sources


@dataclass(frozen=True)
class _Level:
    """A level's optimised graph, and where its nodes came from."""

    level: str
    graph: ModelGraph
    sources: Mapping[str, tuple[str, ...]]


LAYOUT_OPS = frozenset({"ReorderInput", "ReorderOutput"})
"""ONNX Runtime's NCHWc layout reorders (the ``all`` level on x86): added, from no node of the model."""

FUSED_AFTER = frozenset({"Add", "Sum", "Relu", "Clip", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid"})
"""Ops ONNX Runtime's NCHWc convolution takes into itself after it (a residual sum, an activation)."""

_SUFFIXES = re.compile(r"(_nchwc|_token_\d+|_fused\w*|/\w+Fusion/?)$")


def _chain(model: NodeIndex, name: str, op: str) -> list[str]:
    """The model's nodes an optimised node named after a tensor stands for (``X_output_0_nchwc``):
    the tensor's producer, and up its single-producer chain to the node running ``op`` (the Conv
    of a Conv + BatchNormalization + Relu); empty when the name leads to no node."""
    nodes = model.graph.nx.nodes
    tensor = name
    while _SUFFIXES.search(tensor):
        tensor = _SUFFIXES.sub("", tensor)
    start = model.producer(tensor) or model.find(tensor)
    if start is None:
        return []
    chain = [start]
    for _ in range(4):
        if nodes[chain[-1]]["op_type"] == op:
            return chain
        ops = [p for p in model.graph.nx.predecessors(chain[-1]) if nodes[p]["kind"] == "op"]
        if len(ops) != 1:
            break
        chain.append(ops[0])
    return chain if nodes[chain[-1]]["op_type"] == op else [start]


def _absorb(model: NodeIndex, groups: dict[str, list[str]], named: list[str]) -> None:
    """Give each group found by name the ops after it that no kernel ran and that it fused: the
    single consumer, repeatedly, when it is one of :data:`FUSED_AFTER` (an NCHWc Conv's residual Add
    and its Relu)."""
    claimed = {n for group in groups.values() for n in group}
    nx = model.graph.nx
    for key in named:
        node = groups[key][0]
        while True:
            users = list(dict.fromkeys(c for c in nx.successors(node) if nx.nodes[c]["kind"] == "op"))
            if len(users) != 1 or users[0] in claimed or nx.nodes[users[0]]["op_type"] not in FUSED_AFTER:
                break
            node = users[0]
            groups[key].append(node)
            claimed.add(node)


def _tensor_producer(model: NodeIndex, optimised: ModelGraph, node: str) -> str | None:
    """The model's node writing the tensor a layout reorder writes (a Transpose it took in)."""
    outputs = [t for t in optimised.nx.nodes[node].get("outputs") or () if t]
    producers = {model.producer(t) for t in outputs} - {None}
    return producers.pop() if len(producers) == 1 else None


def _adopt(optimised: ModelGraph, groups: dict[str, list[str]]) -> None:
    """A node ONNX Runtime added from nothing of the model (a helper Unsqueeze, a bias
    DequantizeLinear) whose every consumer comes from the same nodes joins them: it serves them."""
    nx = optimised.nx
    changed = True
    while changed:
        changed = False
        for node, group in groups.items():
            if group or optimised.nx.nodes[node]["op_type"] in LAYOUT_OPS:
                continue
            users = {c for c in nx.successors(node) if nx.nodes[c]["kind"] == "op"}
            served = {tuple(groups.get(c, ())) for c in users}
            if len(served) == 1 and (members := next(iter(served))):
                groups[node] = list(members)
                changed = True


def _provenance(model: ModelGraph, optimised: ModelGraph, change: GraphDiff) -> dict[str, tuple[str, ...]]:
    """Node of ``optimised`` -> the nodes of ``model`` it came from (the rules of the module's
    docstring, in order)."""
    sources = source_nodes(change)
    index = NodeIndex(model)
    nodes = optimised.nx.nodes
    groups: dict[str, list[str]] = {}
    named: list[str] = []
    layout: list[str] = []
    for node in optimised.op_nodes():
        op = nodes[node]["op_type"]
        if op in LAYOUT_OPS:
            groups[node] = []
            layout.append(node)
        elif node in sources:
            groups[node] = list(sources[node])
        else:
            groups[node] = _chain(index, nodes[node].get("name") or node, op)
            if groups[node]:
                named.append(node)
    _absorb(index, groups, named)
    claimed = {n for group in groups.values() for n in group}
    for node in layout:
        taken = _tensor_producer(index, optimised, node)
        if taken is not None and taken not in claimed:
            groups[node] = [taken]
            claimed.add(taken)
    _adopt(optimised, groups)
    return {node: tuple(group) for node, group in groups.items()}


def _optimised(graph: ModelGraph, level: str) -> _Level:
    """Run ``ort:LEVEL`` on ``graph`` (in the worker) and trace its nodes back to ``graph``'s."""
    if level == "disable":
        return _Level(level, graph, {n: (n,) for n in graph.op_nodes()})
    from explorer.onnx_adapter.adapter import has_onnx_model
    from explorer.passes.pipeline import run_pipeline

    if not has_onnx_model(graph):
        raise UsageError(
            f"an ONNX Runtime profile maps onto the ONNX model it ran; {graph.source} is not a top-level "
            "ONNX graph"
        )

    try:
        timeline = run_pipeline(graph, [f"ort:{level}"], verify=False, stop_on_error=True)
    except (KeyboardInterrupt, WorkerCancelled):
        raise
    except Exception as err:  # ONNX Runtime's own error (Fail, InvalidGraph) crosses the worker as is
        why = " ".join(str(err).split())[:500]
        raise ExplorerError(
            f"ONNX Runtime could not optimise {graph.source} at the {level} level, so the profile cannot be "
            f"mapped through it: {type(err).__name__}: {why}"
        ) from None
    optimised = timeline[1].graph
    return _Level(level, optimised, _provenance(graph, optimised, timeline.diff(1)))


def _levels() -> list[str]:
    from explorer.passes.registry import pass_names

    known = {name.removeprefix("ort:") for name in pass_names("ort")}
    return [level for level in LEVELS if level == "disable" or level in known]


def _find_level(graph: ModelGraph, found: Sequence[Kernel], notes: list[str]) -> tuple[_Level, bool]:
    """The level whose optimised graph has exactly the profile's (name, op) pairs, else the one whose
    nodes cover most of the profile's time; and whether the match was exact. A level ONNX Runtime
    cannot optimise the model at is left out (with a note)."""
    wanted = {(k.name, k.op) for k in found}
    best: tuple[tuple[float, int], _Level] | None = None
    for level in _levels():
        try:
            candidate = _optimised(graph, level)
        except ExplorerError as err:
            if isinstance(err, WorkerCancelled):
                raise
            notes.append(str(err))
            continue
        pairs = _pairs(candidate.graph)
        if pairs == wanted:
            return candidate, True
        covered = sum(k.ms for k in found if (k.name, k.op) in pairs)
        score = (covered, -len(pairs ^ wanted))
        if best is None or score > best[0]:
            best = (score, candidate)
    assert best is not None
    return best[1], False


def read(
    data: Any,
    graph: ModelGraph | None = None,
    *,
    source: str | None = None,
    level: str | None = None,
    split: str = "even",
) -> Overlay:
    """Read an ONNX Runtime profile, mapped onto ``graph``'s nodes.

    Parameters
    ----------
    data : list
        The profile's events (the parsed JSON file).
    graph : ModelGraph, optional
        The model the profile ran (without it, values are keyed by the kernels' names).
    source : str, optional
        The file's path, for messages and the overlay.
    level : str, optional
        The optimisation level the profile ran at (:data:`LEVELS`); found out when not given.
    split : str
        How a fused kernel's time is split over its source nodes (``even`` or ``anchor``).

    Returns
    -------
    Overlay
        ``time_ms`` and ``provider`` per node (and ``op``: the kernel that ran it); ``about``
        has ``level``, ``level_found`` (how), ``runs`` and ``split``.

    Examples
    --------
    >>> from explorer import load
    >>> events = [{"cat": "Node", "name": "/fc1/Gemm_kernel_time", "dur": 300,
    ...            "args": {"op_name": "Gemm", "provider": "CPUExecutionProvider"}},
    ...           {"cat": "Node", "name": "nothing_kernel_time", "dur": 100, "args": {"op_name": "Relu"}}]
    >>> overlay = read(events, load("zoo:mlp"), level="disable")
    >>> overlay.values["/fc1/Gemm"].time_ms, overlay.time_share_mapped
    (0.3, 0.75)
    >>> overlay.unmapped[0].reason
    "no node of the model is named 'nothing'"
    """
    label = source or "<value>"
    found, runs = kernels(data, label)
    check_split(split)
    if level is not None and level not in LEVELS:
        raise UsageError(f"no ONNX Runtime optimisation level {level!r}; the levels are: {', '.join(LEVELS)}")
    total = float(sum(k.ms for k in found))
    about: dict[str, Any] = {"runs": runs, "kernels": len(found), "split": split}
    notes: list[str] = []
    if not found:
        notes.append("the profile has no node events (was it written after at least one run?)")
    if graph is None:
        collect = Collect()
        for k in found:
            collect.add(k.name, entry=k.name, time_ms=k.ms, provider=k.provider, op=k.op)
        return Overlay(FORMAT, source, None, collect.values(), (), total, about, tuple(notes))
    if level is not None:
        chosen = _optimised(graph, level)
        about["level_found"] = "given"
    elif found:
        chosen, exact = _find_level(graph, found, notes)
        about["level_found"] = "exact match" if exact else "closest match"
    else:
        chosen = _optimised(graph, "disable")
        about["level_found"] = "no kernels"
    about["level"] = chosen.level
    what = "the model" if chosen.level == "disable" else f"ONNX Runtime's {chosen.level}-level graph"
    notes.append(
        f"kernels mapped through {what} ({about['level_found']}); a fused kernel's time split "
        f"{'evenly over' if split == 'even' else 'onto the heaviest of'} the nodes it came from"
    )
    optimised = NodeIndex(chosen.graph)
    collect = Collect()
    unmapped: list[Unmapped] = []
    for k in found:
        node = optimised.find(k.name)
        if node is None:
            if chosen.level == "disable":
                why = f"no node of the model is named {k.name!r}"
            else:
                why = f"no node of {what} is named {k.name!r} (another provider's or ONNX Runtime's graph?)"
            unmapped.append(Unmapped(k.name, why, k.ms))
            continue
        members = chosen.sources.get(node, ())
        if not members:
            kind = k.op or optimised.op(node)
            what_it_is = "a layout reorder" if kind in LAYOUT_OPS else "a copy, a cast or a layout change"
            why = (
                f"ONNX Runtime added this {kind} node at the {chosen.level} level ({what_it_is}); "
                "it comes from no node of the model"
            )
            unmapped.append(Unmapped(k.name, why, k.ms))
            continue
        shares = spread(k.ms, members, split, graph)
        for member, ms in shares.items():
            collect.add(
                member,
                entry=k.name,
                time_ms=ms,
                provider=k.provider,
                op=k.op,
                shared_with=tuple(m for m in shares if m != member),
            )
    values = collect.values(graph.op_nodes())
    return Overlay(FORMAT, source, graph.source, values, tuple(unmapped), total, about, tuple(notes))

"""ONNX Runtime's own placement of a graph's nodes, beside the predicted partitioning.

:func:`real_assignment` creates a session in the worker with graph optimisations off and
``session.record_ep_graph_assignment_info`` on, and reads
``InferenceSession.get_provider_graph_assignment_info()``: each subgraph an execution
provider took and its nodes. Nodes are matched by name (a model whose names are missing
or repeated gets the graph's node ids as names first, in a copy). When the session
cannot be created (a node without a kernel) the error is the answer. :func:`ort_assignment`
is the part that runs in the worker.

Examples
--------
>>> from explorer import load
>>> a = real_assignment(load("zoo:mlp"))
>>> set(a.providers.values()), a.subgraphs, a.error
({'CPUExecutionProvider'}, 6, None)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from explorer.isolation import worker
from explorer.onnx_adapter.adapter import onnx_model
from explorer.onnx_adapter.model_files import worker_source

if TYPE_CHECKING:
    import pandas as pd

    from explorer.core.graph import ModelGraph
    from explorer.targets.partition import Partitioning

__all__ = ["Assignment", "real_assignment", "ort_assignment", "compare_assignment", "INLINED_PREFIX"]

INLINED_PREFIX = "_inlfunc_"
"""How ONNX Runtime names the nodes of a model-local function it inlined (then the function's name)."""


@dataclass(frozen=True)
class Assignment:
    """Where ONNX Runtime placed each node.

    Attributes
    ----------
    providers : dict
        Node id -> execution provider.
    subgraphs : int
        How many subgraphs the providers took (the CPU provider takes each node on its own).
    requested : tuple of str
        The providers asked for, in priority order.
    error : str or None
        Why the session could not be created, when it could not.
    """

    providers: dict[str, str] = field(default_factory=dict)
    subgraphs: int = 0
    requested: tuple[str, ...] = ()
    error: str | None = None

    def to_frame(self) -> pd.DataFrame:
        """One row per node: the execution provider ONNX Runtime gave it.

        Examples
        --------
        >>> from explorer import load
        >>> real_assignment(load("zoo:mlp")).to_frame().loc["/fc1/Gemm", "provider"]
        'CPUExecutionProvider'
        """
        import pandas as pd

        rows = [{"node": node, "provider": provider} for node, provider in self.providers.items()]
        return pd.DataFrame(rows, columns=["node", "provider"]).set_index("node")

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "providers": dict(self.providers),
            "subgraphs": self.subgraphs,
            "requested": list(self.requested),
            "error": self.error,
        }


def _names_for_ort(graph: ModelGraph) -> list[str] | None:
    """A name per node of the model, in node-list order: the graph's node ids where they differ
    from the model's names (Constant nodes, folded into weights, get fresh names), else None."""
    names = [n.name for n in graph.model.graph.node]
    ids = {graph.nx.nodes[n]["index"]: n for n in graph.op_nodes()}
    wanted = [ids.get(i, f"__folded_constant_{i}") for i in range(len(names))]
    return None if all(names[i] == wanted[i] for i in ids) and len(set(names)) == len(names) else wanted


def real_assignment(graph: ModelGraph, providers: Sequence[str] = ("CPUExecutionProvider",)) -> Assignment:
    """Ask ONNX Runtime where it places each node of ``graph`` (optimisations off).

    Parameters
    ----------
    graph : ModelGraph
        An ONNX graph with its model.
    providers : sequence of str
        Execution providers in priority order (the CPU provider is always the last resort).

    Returns
    -------
    Assignment

    Examples
    --------
    >>> from explorer import load
    >>> real_assignment(load("zoo:resnet18")).subgraphs
    69
    """
    onnx_model(graph, "the real assignment")
    out = worker.run_on_model(
        ort_assignment,
        worker_source(graph),
        list(providers),
        _names_for_ort(graph),
        step="ONNX Runtime placement",
    )
    if "error" in out:
        return Assignment({}, 0, tuple(providers), out["error"])
    ids = set(graph.op_nodes())
    callers: dict[str, list[str]] = {}
    local = {(f.domain, f.name) for f in graph.model.functions}
    for node in graph.op_nodes():
        data = graph.nx.nodes[node]
        if (data.get("domain") or "", data["op_type"]) in local:
            callers.setdefault(data["op_type"], []).append(node)
    placed: dict[str, str] = {}
    for subgraph in out["subgraphs"]:
        for name in subgraph["nodes"]:
            for node in [name] if name in ids else _inlined_from(name, callers):
                placed.setdefault(node, subgraph["provider"])  # a folded Constant is in no list
    return Assignment(placed, len(out["subgraphs"]), tuple(providers))


def ort_assignment(
    path: str | os.PathLike[str], providers: Sequence[str], node_names: Sequence[str] | None = None
) -> dict[str, Any]:
    """Which execution provider ONNX Runtime gives each node (call it in the worker).

    The session is created with graph optimisations off, so the nodes are the model's own,
    and with ``session.record_ep_graph_assignment_info`` on.

    Parameters
    ----------
    path : path
        The model file (read only).
    providers : sequence of str
        Execution providers, in priority order.
    node_names : sequence of str, optional
        Names to give the main graph's nodes first, in node-list order (for models whose
        names are missing or repeated); the renamed copy stays in memory.

    Returns
    -------
    dict
        ``{"subgraphs": [{"provider", "nodes": [name, ...]}, ...]}``, or ``{"error": text}``
        when the session cannot be created.

    Examples
    --------
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> out = worker.run_on_model(ort_assignment, zoo.build("mlp"), ["CPUExecutionProvider"])
    >>> {s["provider"] for s in out["subgraphs"]}
    {'CPUExecutionProvider'}
    """
    import onnx
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    source: Any = os.fspath(path)
    if node_names is not None:
        model = onnx.load(source)
        for node, name in zip(model.graph.node, node_names, strict=True):
            node.name = name
        source = model.SerializeToString()
    try:
        session = ort.InferenceSession(source, sess_options=options, providers=list(providers))
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc).strip()}"}
    return {
        "subgraphs": [
            {"provider": s.ep_name, "nodes": [n.name for n in s.get_nodes()]}
            for s in session.get_provider_graph_assignment_info()
        ]
    }


def _inlined_from(name: str, callers: dict[str, list[str]]) -> list[str]:
    """The nodes calling the function a node ONNX Runtime inlined came from (``_inlfunc_FUNCTION_INNER``)."""
    if not name.startswith(INLINED_PREFIX):
        return []
    rest = name[len(INLINED_PREFIX) :]
    matches = [f for f in callers if rest.startswith(f"{f}_")]
    return callers[max(matches, key=len)] if matches else []


def compare_assignment(predicted: Partitioning, assignment: Assignment, provider: str) -> dict[str, Any]:
    """Where the prediction and ONNX Runtime agree: nodes placed on ``provider`` by each.

    Returns
    -------
    dict
        ``agree`` (bool), ``predicted_only`` and ``assigned_only`` (node ids), ``session_error``.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.targets import get_target, partition
    >>> g = load("zoo:mlp")
    >>> predicted = partition(g, get_target("ort-cpu"))
    >>> compare_assignment(predicted, real_assignment(g), "CPUExecutionProvider")["agree"]
    True
    """
    predicted_on = {n for n, s in predicted.support.items() if s.supported}
    if assignment.error is not None:
        # no session: the prediction agrees when it too found nodes the provider cannot run
        agree = predicted.fallback is None and len(predicted_on) < predicted.total_nodes
        return {"agree": agree, "predicted_only": [], "assigned_only": [], "session_error": assignment.error}
    assigned_on = {n for n, p in assignment.providers.items() if p == provider and n in predicted.support}
    order = list(predicted.support)
    return {
        "agree": predicted_on == assigned_on,
        "predicted_only": [n for n in order if n in predicted_on - assigned_on],
        "assigned_only": [n for n in order if n in assigned_on - predicted_on],
        "session_error": None,
    }

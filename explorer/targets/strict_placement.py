"""Strict placement: whether ONNX Runtime runs every node on the execution provider asked for.

ONNX Runtime quietly runs the nodes a provider does not take on its CPU provider. Its session
config ``session.disable_cpu_ep_fallback`` = ``"1"`` (:data:`STRICT_KEY`) turns that into an
error when the session is made: "This session contains graph nodes that are assigned to the
default CPU EP, but fallback to CPU EP has been explicitly disabled by the user". It names no
node, so :func:`strict_placement` makes the session with the flag and, where ONNX Runtime
refuses it, once more without the flag and with ``session.record_ep_graph_assignment_info``
on, to list the nodes each provider took (those on the CPU are the ones that would have
fallen back). The flag is for a provider other than the CPU's: with the CPU provider ONNX
Runtime refuses the flag itself ("Conflicting session configuration"), and placement is
strict trivially (the CPU provider takes every node it has a kernel for; a node without
one fails the session whatever the flag): the flag is not set, and ONNX Runtime's own
assignment is recorded to show it. Names are the nodes of the graph ONNX Runtime optimised
at the level asked (a fused node has its fusion's name).

Examples
--------
>>> from explorer import load
>>> p = strict_placement(load("zoo:mlp"))
>>> p.flag_set, p.strict, p.fallback_nodes
(False, True, ())
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from explorer.isolation import worker
from explorer.onnx_adapter.adapter import onnx_model
from explorer.onnx_adapter.model_files import worker_source
from explorer.onnx_adapter.ort_run import ORT_LEVELS
from explorer.targets.assignment import _names_for_ort

if TYPE_CHECKING:
    import pandas as pd

    from explorer.core.graph import ModelGraph

__all__ = ["STRICT_KEY", "CPU_PROVIDER", "StrictPlacement", "strict_placement", "ort_strict_placement"]

STRICT_KEY = "session.disable_cpu_ep_fallback"
"""ONNX Runtime's session config that makes a node left to the CPU provider an error."""
CPU_PROVIDER = "CPUExecutionProvider"
_ASSIGNMENT_KEY = "session.record_ep_graph_assignment_info"
_STRICT_REFUSAL = "fallback to CPU EP has been explicitly disabled"


@dataclass(frozen=True)
class StrictPlacement:
    """Where ONNX Runtime put each node with one provider, and whether that is strict.

    Attributes
    ----------
    provider : str
        The execution provider asked for.
    optimization : str
        The graph optimisation level of the session.
    flag_set : bool
        :data:`STRICT_KEY` was set (a provider other than the CPU's).
    refused : str or None
        ONNX Runtime's refusal of the session under the flag (nodes would have fallen back).
    nodes : dict
        Node name -> the provider ONNX Runtime gave it (without the flag where it refused).
    error : str or None
        Why no session could be made at all (then ``nodes`` is empty).
    """

    provider: str
    optimization: str
    flag_set: bool
    refused: str | None = None
    nodes: dict[str, str] = field(default_factory=dict)
    error: str | None = None

    @property
    def fallback_nodes(self) -> tuple[str, ...]:
        """The nodes left to the CPU provider though another was asked for (none for the CPU's own)."""
        if self.provider == CPU_PROVIDER:
            return ()
        return tuple(n for n, p in self.nodes.items() if p == CPU_PROVIDER)

    @property
    def strict(self) -> bool:
        """Every node on the provider asked for: no fallback, no refusal, a session."""
        return self.error is None and self.refused is None and not self.fallback_nodes

    @property
    def verdict(self) -> str:
        """The outcome in one sentence.

        Examples
        --------
        >>> cpu = StrictPlacement("CPUExecutionProvider", "all", False, nodes={"a": "CPUExecutionProvider"})
        >>> cpu.verdict.split("; ")[1]
        'ONNX Runtime placed all 1 nodes on CPUExecutionProvider'
        """
        if self.error is not None:
            return f"no session with {self.provider}: {self.error}"
        counts = Counter(self.nodes.values())
        if self.provider == CPU_PROVIDER:
            return (
                f"strict trivially: the CPU provider is its own fallback (ONNX Runtime refuses {STRICT_KEY} "
                f"with it); ONNX Runtime placed all {len(self.nodes)} nodes on {CPU_PROVIDER}"
                if set(counts) <= {CPU_PROVIDER}
                else f"ONNX Runtime placed the nodes on {dict(counts)}"
            )
        if self.strict:
            count = len(self.nodes)
            return f"strict: with {STRICT_KEY}=1 ONNX Runtime placed all {count} nodes on {self.provider}"
        fallen = self.fallback_nodes
        shown = ", ".join(fallen[:5]) + (", ..." if len(fallen) > 5 else "")
        return (
            f"not strict: {len(fallen)} of {len(self.nodes)} nodes would fall back to {CPU_PROVIDER} "
            f"(ONNX Runtime refused the session with {STRICT_KEY}=1): {shown}"
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per node: the provider ONNX Runtime gave it.

        Examples
        --------
        >>> cpu = StrictPlacement("CPUExecutionProvider", "all", False, nodes={"a": "CPUExecutionProvider"})
        >>> cpu.to_frame().loc["a", "provider"]
        'CPUExecutionProvider'
        """
        import pandas as pd

        rows = [{"node": n, "provider": p} for n, p in self.nodes.items()]
        return pd.DataFrame(rows, columns=["node", "provider"]).set_index("node")

    def to_dict(self) -> dict[str, Any]:
        """Plain data: the provider, the flag, strict, the refusal, the nodes per provider, the fallbacks.

        Examples
        --------
        >>> StrictPlacement("CPUExecutionProvider", "all", False).to_dict()["strict"]
        True
        """
        per_provider: dict[str, list[str]] = {}
        for node, provider in self.nodes.items():
            per_provider.setdefault(provider, []).append(node)
        return {
            "provider": self.provider,
            "optimization": self.optimization,
            "config": {STRICT_KEY: "1"} if self.flag_set else {},
            "strict": self.strict,
            "refused": self.refused,
            "error": self.error,
            "nodes_per_provider": per_provider,
            "fallback_nodes": list(self.fallback_nodes),
            "verdict": self.verdict,
        }


def strict_placement(
    graph: ModelGraph, provider: str = CPU_PROVIDER, optimization: str = "all"
) -> StrictPlacement:
    """Make ONNX Runtime sessions for ``graph`` with ``provider`` in the worker and say where its nodes go.

    Parameters
    ----------
    graph : ModelGraph
        An ONNX graph with its model.
    provider : str
        The execution provider (a provider the build lacks is dropped by ONNX Runtime with a
        warning: every node then falls back; check :func:`explorer.runtimes.ort_runtime.available_providers`
        first).
    optimization : str
        The graph optimisation level (:data:`explorer.onnx_adapter.ort_run.ORT_LEVELS`).

    Returns
    -------
    StrictPlacement

    Examples
    --------
    >>> from explorer import load
    >>> p = strict_placement(load("zoo:mlp"), "AzureExecutionProvider")  # it takes no node
    >>> p.flag_set, p.strict, len(p.fallback_nodes)
    (True, False, 6)
    """
    onnx_model(graph, "a placement")
    out = worker.run_on_model(
        ort_strict_placement,
        worker_source(graph),
        provider,
        optimization,
        _names_for_ort(graph),
        step=f"ONNX Runtime strict placement ({provider})",
    )
    nodes = {name: s["provider"] for s in out.get("subgraphs", ()) for name in s["nodes"]}
    return StrictPlacement(
        provider, optimization, out["flag_set"], out.get("refused"), nodes, out.get("error")
    )


def ort_strict_placement(
    path: str | os.PathLike[str],
    provider: str,
    optimization: str = "all",
    node_names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Make the sessions :func:`strict_placement` describes (call it in the worker).

    Returns
    -------
    dict
        ``flag_set``, ``refused`` (ONNX Runtime's message, or None), ``subgraphs``
        (``[{"provider", "nodes"}]`` of the session that was made), or ``error``.

    Examples
    --------
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> out = worker.run_on_model(ort_strict_placement, zoo.build("mlp"), "AzureExecutionProvider")
    >>> out["flag_set"], "explicitly disabled" in out["refused"], len(out["subgraphs"])
    (True, True, 6)
    """
    import onnx
    import onnxruntime as ort

    source: Any = os.fspath(path)
    if node_names is not None:
        model = onnx.load(source)
        for node, name in zip(model.graph.node, node_names, strict=True):
            node.name = name
        source = model.SerializeToString()

    def session(strict: bool, providers: list[str]) -> Any:
        options = ort.SessionOptions()
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, ORT_LEVELS[optimization])
        options.add_session_config_entry(_ASSIGNMENT_KEY, "1")
        if strict:
            options.add_session_config_entry(STRICT_KEY, "1")
        return ort.InferenceSession(source, sess_options=options, providers=providers)

    flag = provider != CPU_PROVIDER
    refused = None
    made = None
    if flag:
        try:
            made = session(
                True, [provider]
            )  # the provider alone: naming the CPU's too conflicts with the flag
        except Exception as exc:
            if _STRICT_REFUSAL not in str(exc):
                return {
                    "flag_set": flag,
                    "refused": None,
                    "error": f"{type(exc).__name__}: {str(exc).strip()}",
                }
            refused = str(exc).strip()
    if made is None:
        try:
            made = session(False, [provider, CPU_PROVIDER] if flag else [CPU_PROVIDER])
        except Exception as exc:
            return {
                "flag_set": flag,
                "refused": refused,
                "error": f"{type(exc).__name__}: {str(exc).strip()}",
            }
    subgraphs = [
        {"provider": s.ep_name, "nodes": [n.name for n in s.get_nodes()]}
        for s in made.get_provider_graph_assignment_info()
    ]
    return {"flag_set": flag, "refused": refused, "subgraphs": subgraphs}

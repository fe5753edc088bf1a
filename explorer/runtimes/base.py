"""The Runtime interface: prepare a graph once (a session kept warm in the worker), then run or time it.

A :class:`Runtime` (ONNX Runtime per execution provider, TVM per target) says whether it is
:meth:`~Runtime.available` here and :meth:`~Runtime.prepare`\\ s a graph into a
:class:`PreparedSession`. The session lives in the worker (:mod:`explorer.runtimes.sessions`)
under a key made of the model, its input shapes and the runtime's options, so preparing the
same thing again, or running and timing it again, reuses it. When the worker was restarted
(after a crash elsewhere) the session is prepared again on first use.

Examples
--------
>>> from explorer import load
>>> from explorer.runtimes.ort_runtime import OrtRuntime
>>> session = OrtRuntime().prepare(load("zoo:mlp"))
>>> import numpy as np
>>> [o.shape for o in session.run({"input": np.zeros((1, 1, 28, 28), np.float32)})]
[(1, 10)]
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from explorer.isolation import worker
from explorer.isolation.worker import ProgressEvent
from explorer.runtimes.sessions import SessionGone, run_session, time_session

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = ["Runtime", "PreparedSession", "model_key", "session_key", "prepare_in_worker"]


@runtime_checkable
class Runtime(Protocol):
    """A way to run an ONNX graph: ONNX Runtime with an execution provider, TVM for a target, ...

    Attributes
    ----------
    name : str
        Short name (``ort``, ``ort-cuda``, ``tvm``), as the CLI's ``--runtime`` takes it.
    label : str
        What a table or a plot calls it (``ONNX Runtime CPU (all)``,
        ``TVM llvm untuned (default schedules)``).
    tuned : bool
        Whether it tunes what it compiles.
    family : str
        Its kind of backend (``ort``, ``tvm``, ``iree``, ``torch``, ``ort-genai``): how its profile's
        records name kernels (:func:`explorer.runtimes.profile.profile`) and which memory factors
        apply (:mod:`explorer.runtimes.memory_budget`), read from tables keyed by it.
    places_nodes : bool
        Whether it places each node on a device of its own choosing (ONNX Runtime's providers):
        ``--strict-placement`` applies to it alone.

    A runtime may also have ``check_target()`` (refuse a user's mistaken target before any
    runtime runs) and ``explain_run_error(err, graph, shapes, given=)`` (a failure while
    running as a typed error, or None): :func:`explorer.runtimes.bench.bench` calls them where
    they exist.
    """

    name: str
    family: str
    places_nodes: bool

    @property
    def label(self) -> str: ...

    @property
    def tuned(self) -> bool: ...

    def available(self) -> bool:
        """Whether it can run here (the library is installed, the device is present)."""
        ...

    def options(self) -> dict[str, Any]:
        """Its options, JSON-ready (part of the session key)."""
        ...

    def prepare(
        self,
        graph: ModelGraph,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        *,
        progress: Callable[[ProgressEvent], object] | None = None,
    ) -> PreparedSession:
        """Create the session (or find the one prepared before) in the worker."""
        ...


def model_key(graph: ModelGraph, *, by_content: bool = False) -> str:
    """What identifies a graph's model for reuse: its file (path, size, modification time), or
    its structure and weight digests when it has no file of its own or ``by_content`` (a key
    that outlives the process: a pass's output is a new file in every worker).

    Examples
    --------
    >>> from explorer import load
    >>> model_key(load("zoo:mlp")) == model_key(load("zoo:mlp"))
    True
    """
    path = graph.model_path
    if path is not None and path.is_file() and not by_content:
        stat = path.stat()
        return f"file:{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    from explorer.core.diff import weight_digests
    from explorer.core.fingerprint import graph_fingerprint

    digests = sorted(weight_digests(graph).items())
    return (
        "graph:"
        + hashlib.blake2b(repr((graph_fingerprint(graph), digests)).encode(), digest_size=16).hexdigest()
    )


def session_key(
    runtime: Runtime,
    graph: ModelGraph,
    input_shapes: Mapping[str, Sequence[int]] | None,
    *,
    by_content: bool = False,
) -> str:
    """The key a prepared session is kept under: runtime, options, model and input shapes
    (the model by content with ``by_content``: see :func:`model_key`).

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.runtimes.ort_runtime import OrtRuntime
    >>> g = load("zoo:mlp")
    >>> session_key(OrtRuntime(), g, None) == session_key(OrtRuntime(threads=1), g, None)
    False
    """
    shapes = {k: [int(d) for d in v] for k, v in (input_shapes or {}).items()}
    model = model_key(graph, by_content=by_content)
    text = json.dumps([runtime.name, runtime.options(), model, shapes], sort_keys=True)
    return f"{runtime.name}-" + hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def prepare_in_worker(
    runtime: Runtime,
    graph: ModelGraph,
    input_shapes: Mapping[str, Sequence[int]] | None,
    prepare: Callable[..., dict[str, Any]],
    *,
    step: str,
    progress: Callable[[ProgressEvent], object] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Run ``prepare(model file, key, runtime.options())`` in the worker for an ONNX graph:
    the session's key and what ``prepare`` returned (a refusal comes back as data, ``ok`` False).

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.runtimes.ort_runtime import OrtRuntime
    >>> from explorer.runtimes.ort_prepare import prepare_ort
    >>> key, info = prepare_in_worker(OrtRuntime(), load("zoo:mlp"), None, prepare_ort, step="session")
    >>> key.startswith("ort-"), info["runtime"]
    (True, 'ort')
    """
    from explorer.onnx_adapter.adapter import onnx_model
    from explorer.onnx_adapter.model_files import worker_source

    onnx_model(graph, "a runtime")
    key = session_key(runtime, graph, input_shapes)
    info = worker.run_on_model(
        prepare, worker_source(graph), key, runtime.options(), step=step, progress=progress
    )
    return key, info


@dataclass(frozen=True)
class PreparedSession:
    """A graph prepared by a runtime, kept warm in the worker.

    Attributes
    ----------
    runtime : Runtime
        Who prepared it.
    key : str
        The key the worker keeps it under (:func:`session_key`).
    info : dict
        What preparing it measured and found: ``prepare_s`` (session creation, or compile and
        tuning), ``reused`` (it was prepared before), ``threads``, ``version``, ...
    graph : ModelGraph
        The graph (to prepare it again if the worker lost it).
    input_shapes : dict or None
        The shapes it was prepared for.
    """

    runtime: Runtime
    key: str
    info: Mapping[str, Any]
    graph: ModelGraph = field(repr=False, compare=False)
    input_shapes: Mapping[str, Sequence[int]] | None = None

    @property
    def prepare_s(self) -> float:
        """Seconds preparing it took (when it was first prepared).

        Examples
        --------
        >>> from explorer import load
        >>> from explorer.runtimes.ort_runtime import OrtRuntime
        >>> OrtRuntime().prepare(load("zoo:mlp")).prepare_s > 0
        True
        """
        return float(self.info["prepare_s"])

    def with_session(
        self, call: Callable[[], Any], progress: Callable[[ProgressEvent], object] | None = None
    ) -> Any:
        """``call()`` (a worker call on this session's key), preparing the session again once
        if the worker lost it (:class:`~explorer.runtimes.sessions.SessionGone`).

        Examples
        --------
        >>> from explorer import load
        >>> from explorer.runtimes.ort_runtime import OrtRuntime
        >>> from explorer.runtimes.sessions import has_session
        >>> session = OrtRuntime().prepare(load("zoo:mlp"))
        >>> session.with_session(lambda: worker.run(has_session, session.key))
        True
        """
        try:
            return call()
        except SessionGone:
            self.runtime.prepare(self.graph, self.input_shapes, progress=progress)
            return call()

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Run once on ``feeds``; the outputs in graph-output order.

        Examples
        --------
        >>> from explorer import load
        >>> from explorer.runtimes.ort_runtime import OrtRuntime
        >>> from explorer.onnx_adapter.inputs import random_feeds
        >>> g = load("zoo:mlp")
        >>> OrtRuntime().prepare(g).run(random_feeds(g.model))[0].shape
        (1, 10)
        """
        return list(self.with_session(lambda: worker.run(run_session, self.key, dict(feeds))))

    def time(
        self,
        feeds: Mapping[str, np.ndarray],
        *,
        warmup: int = 3,
        min_runs: int = 10,
        min_seconds: float = 1.0,
        max_seconds: float = 30.0,
        progress: Callable[[ProgressEvent], object] | None = None,
    ) -> dict[str, Any]:
        """Time it in the worker (see :func:`explorer.runtimes.sessions.time_session`).

        Returns
        -------
        dict
            ``{"times_ms", "warmup_ms", "outputs"}``.

        Examples
        --------
        >>> from explorer import load
        >>> from explorer.runtimes.ort_runtime import OrtRuntime
        >>> from explorer.onnx_adapter.inputs import random_feeds
        >>> g = load("zoo:mlp")
        >>> len(OrtRuntime().prepare(g).time(random_feeds(g.model), min_runs=4, min_seconds=0)["times_ms"])
        4
        """
        limits = {
            "warmup": warmup,
            "min_runs": min_runs,
            "min_seconds": min_seconds,
            "max_seconds": max_seconds,
        }
        return self.with_session(
            lambda: worker.run(time_session, self.key, dict(feeds), progress=progress, **limits), progress
        )

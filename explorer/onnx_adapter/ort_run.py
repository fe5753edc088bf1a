"""Run a model on ONNX Runtime, inside the worker process (a crash there is a typed error).

:func:`run_onnxruntime` is the parent's call; the rest runs in the worker:
:func:`ort_session` makes the ``InferenceSession`` every worker step uses (at one of
:data:`ORT_LEVELS`), :func:`create_ort_session` describes it and :func:`run_ort` runs
a model file once. onnxruntime is imported only when a session is made.

It sits below every stage: the passes verify a step's outputs with :func:`run_onnxruntime`
and run ONNX Runtime's own optimisation levels as steps (:func:`create_ort_session`), the
runtimes and targets open their sessions with :func:`ort_session`. It needs only the core,
the worker and the ONNX adapter.

Examples
--------
>>> from explorer import zoo
>>> from explorer.onnx_adapter.inputs import random_feeds
>>> model = zoo.build("mlp")
>>> [o.shape for o in run_onnxruntime(model, random_feeds(model))]
[(1, 10)]
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from explorer.core.errors import UsageError
from explorer.core.tensors import PROTOBUF_LIMIT
from explorer.isolation import worker
from explorer.isolation.worker import report

__all__ = ["run_onnxruntime", "ORT_LEVELS", "ort_session", "create_ort_session", "run_ort"]

PathLike = str | os.PathLike[str]

ORT_LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "layout": "ORT_ENABLE_LAYOUT",
    "all": "ORT_ENABLE_ALL",
}
"""Optimisation level names (``--optimization``) -> ONNX Runtime's ``GraphOptimizationLevel`` members."""

_ORT_DTYPES = {
    "tensor(float)": "float32",
    "tensor(double)": "float64",
    "tensor(float16)": "float16",
    "tensor(int8)": "int8",
    "tensor(int16)": "int16",
    "tensor(int32)": "int32",
    "tensor(int64)": "int64",
    "tensor(uint8)": "uint8",
    "tensor(uint16)": "uint16",
    "tensor(uint32)": "uint32",
    "tensor(uint64)": "uint64",
    "tensor(bool)": "bool",
}
"""ONNX Runtime's input type names -> numpy dtypes, for random inputs."""


def run_onnxruntime(
    model: Any,
    feeds: Mapping[str, np.ndarray],
    *,
    providers: Sequence[str] = ("CPUExecutionProvider",),
    optimization: str = "all",
    timeout: float | None = None,
    memory_mb: int | None = None,
) -> list[np.ndarray]:
    """Run ``model`` (path, bytes or ModelProto) once on ONNX Runtime in the worker.

    Parameters
    ----------
    model : path, bytes or onnx.ModelProto
        The model.
    feeds : mapping
        Input name -> array.
    providers : sequence of str
        Execution providers, in priority order.
    optimization : {"disabled", "basic", "extended", "all"}
        ONNX Runtime's graph optimisation level for the session.
    timeout, memory_mb
        Worker limits (see :func:`explorer.isolation.worker.run`).

    Returns
    -------
    list of numpy.ndarray
        The outputs, in graph-output order.

    Examples
    --------
    >>> from explorer import zoo
    >>> from explorer.onnx_adapter.inputs import random_feeds
    >>> m = zoo.build("mlp")
    >>> len(run_onnxruntime(m, random_feeds(m), optimization="disabled"))
    1
    """
    outputs = worker.run_on_model(
        run_ort,
        model,
        dict(feeds),
        providers=tuple(providers),
        optimization_level="disable" if optimization == "disabled" else optimization,
        step="onnxruntime run",
        timeout=timeout,
        memory_mb=memory_mb,
    )
    return [np.asarray(value) for value in outputs.values()]  # graph-output order


def ort_session(
    path: PathLike,
    providers: Sequence[str] | None,
    optimization_level: str,
    out_path: PathLike | None = None,
    *,
    threads: int = 0,
    profile_prefix: str | None = None,
    config: Mapping[str, str] | None = None,
) -> Any:
    """An ONNX Runtime ``InferenceSession`` for a model file (call it in the worker).

    Parameters
    ----------
    path : path
        The model file.
    providers : sequence of str or None
        Execution providers (None: the CPU).
    optimization_level : {"disable", "basic", "extended", "layout", "all"}
        The graph optimisation level.
    out_path : path, optional
        Save the optimised graph here.
    threads : int
        Intra-op threads (0: ONNX Runtime's default, one per physical core).
    profile_prefix : str, optional
        Turn ONNX Runtime's profiler on, writing its JSON trace with this prefix.
    config : mapping, optional
        Session config entries (``{"session.disable_cpu_ep_fallback": "1"}``).

    Examples
    --------
    >>> from explorer import zoo
    >>> session = ort_session(zoo.save("mlp"), None, "basic")
    >>> session.get_providers(), [i.name for i in session.get_inputs()]
    (['CPUExecutionProvider'], ['input'])
    """
    import onnxruntime as ort

    if optimization_level not in ORT_LEVELS:
        raise UsageError(
            f"optimization_level must be one of {sorted(ORT_LEVELS)}, not {optimization_level!r}"
        )
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, ORT_LEVELS[optimization_level])
    options.intra_op_num_threads = int(threads)  # 0: ONNX Runtime's default (one per physical core)
    for key, value in (config or {}).items():
        options.add_session_config_entry(key, value)
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    if out_path is not None:
        options.optimized_model_filepath = os.fspath(out_path)
        if _needs_external_output(path):
            options.add_session_config_entry(
                "session.optimized_model_external_initializers_file_name", f"{Path(out_path).name}.data"
            )
            options.add_session_config_entry(
                "session.optimized_model_external_initializers_min_size_in_bytes", str(1 << 20)
            )
    chosen = list(providers) if providers is not None else ["CPUExecutionProvider"]
    return ort.InferenceSession(os.fspath(path), sess_options=options, providers=chosen)


def _needs_external_output(path: PathLike) -> bool:
    """Whether ORT must save an optimised model's initializers to an external file.

    When the input keeps weights in external files, ONNX Runtime's saved model
    would otherwise point at the input's data file by its relative name, which
    does not exist beside the output; and a model near 2 GiB may not fit one file.
    """
    size = os.path.getsize(path)
    if size >= PROTOBUF_LIMIT // 2:  # weights inside the file: its size says it
        return True
    import onnx

    from explorer.onnx_adapter.weights import external_tensors, model_bytes

    model = onnx.load(os.fspath(path), load_external_data=False)
    return bool(external_tensors(model)) or model_bytes(model) >= PROTOBUF_LIMIT // 2


def _describe(args: Sequence[Any]) -> list[dict[str, Any]]:
    return [
        {"name": a.name, "shape": list(a.shape) if a.shape is not None else None, "type": a.type}
        for a in args
    ]


def create_ort_session(
    path: PathLike,
    out_path: PathLike | None = None,
    *,
    providers: Sequence[str] | None = None,
    optimization_level: str = "all",
) -> dict[str, Any]:
    """Create an ONNX Runtime session for a model file and describe it.

    Parameters
    ----------
    path : str or os.PathLike
        The model file (read only).
    out_path : str or os.PathLike, optional
        Save the graph as ORT optimized it here (``optimized_model_filepath``).
    providers : sequence of str, optional
        Execution providers, by default ``["CPUExecutionProvider"]``.
    optimization_level : {"disable", "basic", "extended", "layout", "all"}, optional
        ORT's graph optimization level, by default "all".

    Returns
    -------
    dict
        ``providers`` (those the session uses), ``inputs`` and ``outputs`` (name, shape, type).

    Raises
    ------
    onnxruntime.capi.onnxruntime_pybind11_state.Fail
        ORT refused the model (and other ORT errors such as ``InvalidGraph``).

    Examples
    --------
    >>> from explorer import zoo
    >>> from explorer.isolation import worker
    >>> info = worker.run_on_model(create_ort_session, zoo.single_op("Relu", ("n", 4)))
    >>> info["providers"], info["outputs"][0]["shape"]
    (['CPUExecutionProvider'], ['n', 4])
    """
    session = ort_session(path, providers, optimization_level, out_path)
    return {
        "providers": session.get_providers(),
        "inputs": _describe(session.get_inputs()),
        "outputs": _describe(session.get_outputs()),
    }


def _synthesize_inputs(session: Any, seed: int) -> dict[str, Any]:
    """Random inputs matching the session's inputs, by the project's one rule (onnx_adapter.inputs)."""
    from explorer.onnx_adapter.inputs import random_inputs

    specs = []
    for arg in session.get_inputs():
        dtype = _ORT_DTYPES.get(arg.type)
        if dtype is None:
            raise TypeError(f"cannot make a random value for input {arg.name!r} of type {arg.type}")
        specs.append((arg.name, arg.shape, dtype))
    return random_inputs(specs, seed=seed)


def _read_inputs(inputs: PathLike | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(inputs, Mapping):
        return {name: np.asarray(value) for name, value in inputs.items()}
    with np.load(os.fspath(inputs), allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def run_ort(
    path: PathLike,
    inputs_npz: PathLike | Mapping[str, Any] | None = None,
    *,
    out_path: PathLike | None = None,
    providers: Sequence[str] | None = None,
    optimization_level: str = "all",
    seed: int = 0,
) -> dict[str, Any]:
    """Run a model file once on ONNX Runtime.

    Parameters
    ----------
    path : str or os.PathLike
        The model file (read only).
    inputs_npz : str, os.PathLike or mapping, optional
        An ``.npz`` file (or a dict) of input arrays by name; None makes random inputs from
        the model's input types, with dynamic dimensions set to 1.
    out_path : str or os.PathLike, optional
        Write the outputs here as ``.npz`` and return only their shapes and dtypes.
    providers : sequence of str, optional
        Execution providers, by default ``["CPUExecutionProvider"]``.
    optimization_level : {"disable", "basic", "extended", "layout", "all"}, optional
        ORT's graph optimization level, by default "all".
    seed : int, optional
        Seed of the random inputs.

    Returns
    -------
    dict
        Output arrays by name; with ``out_path``, ``{"name": {"shape": ..., "dtype": ...}}``.

    Examples
    --------
    >>> import numpy as np
    >>> from explorer import zoo
    >>> from explorer.isolation import worker
    >>> feeds = {"x": np.array([-1.0, 0.0, 2.0], np.float32)}
    >>> worker.run_on_model(run_ort, zoo.single_op("Relu", (3,)), feeds)["y"]
    array([0., 0., 2.], dtype=float32)
    """
    session = ort_session(path, providers, optimization_level)
    feeds = _synthesize_inputs(session, seed) if inputs_npz is None else _read_inputs(inputs_npz)
    report(0.5, "running")
    names = [out.name for out in session.get_outputs()]
    outputs = dict(zip(names, session.run(names, feeds), strict=True))
    if out_path is None:
        return outputs
    with open(out_path, "wb") as handle:  # a handle: np.savez would append ".npz" to a name
        np.savez(handle, **outputs)
    return {
        name: {"shape": list(np.shape(v)), "dtype": str(np.asarray(v).dtype)} for name, v in outputs.items()
    }

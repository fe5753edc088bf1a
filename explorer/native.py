"""Native steps on model *files*, meant to run inside a worker process.

Every function here takes the path of an ONNX model first, loads it itself, calls one
native library (the onnx checker and shape inference, onnxsim, onnxoptimizer, ONNX Runtime,
TVM Relax) and returns a small picklable summary; files it produces are written to
``out_path``. They never write to the input. They are top-level functions, so they pickle
by reference, and they import their library lazily, so importing this module is cheap.
Run them through :func:`explorer.worker.run_on_model`, which stages the model as a file,
moves ``out_path`` to its destination and turns crashes into typed errors.

Examples
--------
>>> from onnx import TensorProto, helper
>>> from explorer import native, worker
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
>>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
>>> graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
>>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
>>> worker.run_on_model(native.create_ort_session, model)["inputs"]
[{'name': 'x', 'shape': [1, 4], 'type': 'tensor(float)'}]
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .tensors import PROTOBUF_LIMIT
from .worker import report

__all__ = [
    "check_model",
    "infer_shapes",
    "simplify",
    "optimize",
    "create_ort_session",
    "ort_session",
    "ORT_LEVELS",
    "run_ort",
    "tvm_import",
    "ort_assignment",
    "save_model",
    "resave",
]

PathLike = str | os.PathLike


ORT_LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "layout": "ORT_ENABLE_LAYOUT",
    "all": "ORT_ENABLE_ALL",
}

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


# --------------------------------------------------------------------------- helpers


def _load(path: PathLike, *, external_data: bool = True) -> Any:
    import onnx

    return onnx.load(os.fspath(path), load_external_data=external_data)


def save_model(model: Any, out_path: PathLike) -> None:
    """Save ``model``; tensors go to ``<name>.data`` next to it when the proto is too big for one file.

    Examples
    --------
    >>> import os, tempfile
    >>> from explorer import zoo
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     save_model(zoo.build("mlp"), os.path.join(tmp, "m.onnx"))
    ...     sorted(os.listdir(tmp))
    ['m.onnx']
    """
    import onnx

    out = Path(out_path)
    big = model.ByteSize() >= PROTOBUF_LIMIT
    onnx.save_model(model, os.fspath(out), save_as_external_data=big, location=f"{out.name}.data")


def resave(path: PathLike, *, out_path: PathLike) -> None:
    """Load a model file with its external data and save it to ``out_path`` (see :func:`save_model`).

    Examples
    --------
    >>> import os, tempfile, onnx
    >>> from explorer import zoo
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     onnx.save(zoo.build("mlp"), os.path.join(tmp, "a.onnx"))
    ...     resave(os.path.join(tmp, "a.onnx"), out_path=os.path.join(tmp, "b.onnx"))
    ...     sorted(os.listdir(tmp))
    ['a.onnx', 'b.onnx']
    """
    save_model(_load(path), out_path)


def _node_count(model: Any) -> int:
    return len(model.graph.node)


# --------------------------------------------------------------------------- onnx


def check_model(path: PathLike, full_check: bool = True) -> dict[str, Any]:
    """Run the onnx checker on a model file (with shape inference when ``full_check``).

    Parameters
    ----------
    path : str or os.PathLike
        The model file; external data is found next to it.
    full_check : bool, optional
        Also run strict shape inference, by default True.

    Returns
    -------
    dict
        ``{"valid": True, "full_check": full_check}``.

    Raises
    ------
    onnx.checker.ValidationError
        The model breaks the ONNX spec.
    onnx.shape_inference.InferenceError
        Shape inference found a contradiction (``full_check`` only).

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> from explorer import native, worker
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    >>> graph = helper.make_graph([helper.make_node("Neg", ["missing"], ["y"])], "g", [x], [x])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> try:  # no input, initializer or node makes "missing"
    ...     worker.run_on_model(native.check_model, model)
    ... except Exception as exc:
    ...     print(type(exc).__name__)
    ValidationError
    """
    import onnx

    onnx.checker.check_model(os.fspath(path), full_check=full_check)
    return {"valid": True, "full_check": full_check}


def infer_shapes(
    path: PathLike, out_path: PathLike | None = None, *, strict: bool = True, data_prop: bool = False
) -> dict[str, Any]:
    """Run onnx shape inference on a model file; write the inferred model to ``out_path``.

    Parameters
    ----------
    path : str or os.PathLike
        The model file (read only).
    out_path : str or os.PathLike, optional
        Where to write the model with inferred ``value_info``; by default a temporary file
        that is deleted (only the summary is returned).
    strict : bool, optional
        Raise on inference errors instead of skipping the node, by default True.
    data_prop : bool, optional
        Propagate constant shape values through Shape/Gather/... (slower), by default False.

    Returns
    -------
    dict
        ``value_info`` (number of intermediate tensors with a type), ``nodes`` and ``out_path``.

    Raises
    ------
    onnx.shape_inference.InferenceError
        Inference found a contradiction (``strict`` only).

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> from explorer import native, worker
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    >>> nodes = [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Neg", ["h"], ["y"])]
    >>> graph = helper.make_graph(nodes, "g", [x], [y])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> worker.run_on_model(native.infer_shapes, model)["value_info"]
    1
    """
    import onnx

    with tempfile.TemporaryDirectory(prefix="explorer-shapes-") as scratch:
        target = os.fspath(out_path) if out_path is not None else os.path.join(scratch, "inferred.onnx")
        onnx.shape_inference.infer_shapes_path(
            os.fspath(path), target, check_type=True, strict_mode=strict, data_prop=data_prop
        )
        inferred = _load(target, external_data=False)
    return {
        "value_info": len(inferred.graph.value_info),
        "nodes": _node_count(inferred),
        "out_path": None if out_path is None else os.fspath(out_path),
    }


# --------------------------------------------------------------------------- onnxsim / onnxoptimizer


def simplify(
    path: PathLike,
    out_path: PathLike | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    check_n: int = 0,
    perform_optimization: bool = True,
    skipped_optimizers: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Simplify a model file with onnxsim (constant folding, shape fixing, optimizer passes).

    Parameters
    ----------
    path : str or os.PathLike
        The model file (read only).
    out_path : str or os.PathLike, optional
        Where to write the simplified model; None keeps only the summary.
    input_shapes : mapping of str to sequence of int, optional
        Fixed shapes for dynamic inputs, e.g. ``{"x": [1, 3, 224, 224]}``.
    check_n : int, optional
        Compare outputs of the original and simplified model on this many random inputs.
    perform_optimization : bool, optional
        Run onnxoptimizer passes as part of simplification, by default True.
    skipped_optimizers : sequence of str, optional
        onnxoptimizer passes to leave out.

    Returns
    -------
    dict
        ``nodes_before``, ``nodes_after``, ``check_ok`` and ``out_path``.

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import TensorProto, helper, numpy_helper
    >>> from explorer import native, worker
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    >>> one = numpy_helper.from_array(np.ones(2, np.float32), "one")
    >>> add = helper.make_node("Add", ["one", "one"], ["two"])
    >>> nodes = [add, helper.make_node("Mul", ["x", "two"], ["y"])]
    >>> graph = helper.make_graph(nodes, "g", [x], [y], initializer=[one])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> summary = worker.run_on_model(native.simplify, model)
    >>> summary["nodes_before"], summary["nodes_after"]
    (2, 1)
    """
    import onnxsim

    model = _load(path)
    before = _node_count(model)
    report(0.1, "simplifying with onnxsim")
    shapes = None if input_shapes is None else {name: list(dims) for name, dims in input_shapes.items()}
    simplified, check_ok = onnxsim.simplify(
        model,
        check_n=check_n,
        perform_optimization=perform_optimization,
        overwrite_input_shapes=shapes,
        skipped_optimizers=None if skipped_optimizers is None else list(skipped_optimizers),
    )
    report(0.9, "saving")
    if out_path is not None:
        save_model(simplified, out_path)
    return {
        "nodes_before": before,
        "nodes_after": _node_count(simplified),
        "check_ok": bool(check_ok),
        "out_path": None if out_path is None else os.fspath(out_path),
    }


def optimize(
    path: PathLike,
    out_path: PathLike | None = None,
    passes: Sequence[str] | None = None,
    *,
    fixed_point: bool = False,
) -> dict[str, Any]:
    """Apply onnxoptimizer passes to a model file.

    Parameters
    ----------
    path : str or os.PathLike
        The model file (read only).
    out_path : str or os.PathLike, optional
        Where to write the optimized model; None keeps only the summary.
    passes : sequence of str, optional
        Pass names (``onnxoptimizer.get_available_passes()``); None runs the default set.
    fixed_point : bool, optional
        Repeat the passes until nothing changes, by default False.

    Returns
    -------
    dict
        ``nodes_before``, ``nodes_after``, ``passes`` and ``out_path``.

    Raises
    ------
    ValueError
        A pass name is unknown.

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> from explorer import native, worker
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    >>> nodes = [helper.make_node("Identity", ["x"], ["h"]), helper.make_node("Neg", ["h"], ["y"])]
    >>> graph = helper.make_graph(nodes, "g", [x], [y])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> worker.run_on_model(native.optimize, model, passes=["eliminate_identity"])["nodes_after"]
    1
    """
    import onnxoptimizer

    names = None if passes is None else list(passes)
    if names is not None:
        unknown = sorted(set(names) - set(onnxoptimizer.get_available_passes()))
        if unknown:
            raise ValueError(f"unknown onnxoptimizer pass(es) {unknown}")
    model = _load(path)
    before = _node_count(model)
    optimized = onnxoptimizer.optimize(model, names, fixed_point)
    if out_path is not None:
        save_model(optimized, out_path)
    return {
        "nodes_before": before,
        "nodes_after": _node_count(optimized),
        "passes": names,
        "out_path": None if out_path is None else os.fspath(out_path),
    }


# --------------------------------------------------------------------------- ONNX Runtime


def ort_session(
    path: PathLike,
    providers: Sequence[str] | None,
    optimization_level: str,
    out_path: PathLike | None = None,
    *,
    threads: int = 0,
    profile_prefix: str | None = None,
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

    Examples
    --------
    >>> ort_session.__name__
    'ort_session'
    """
    import onnxruntime as ort

    if optimization_level not in ORT_LEVELS:
        raise ValueError(
            f"optimization_level must be one of {sorted(ORT_LEVELS)}, not {optimization_level!r}"
        )
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, ORT_LEVELS[optimization_level])
    options.intra_op_num_threads = int(threads)  # 0: ONNX Runtime's default (one per physical core)
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

    from .weights import external_tensors, model_bytes

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
    >>> from onnx import TensorProto, helper
    >>> from explorer import native, worker
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    >>> graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [x])
    >>> graph.output[0].name = "y"
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> info = worker.run_on_model(native.create_ort_session, model)
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
    """Random inputs matching the session's inputs, by the project's one rule (runtimes.inputs)."""
    from .runtimes.inputs import random_inputs

    specs = []
    for arg in session.get_inputs():
        dtype = _ORT_DTYPES.get(arg.type)
        if dtype is None:
            raise TypeError(f"cannot make a random value for input {arg.name!r} of type {arg.type}")
        specs.append((arg.name, arg.shape, dtype))
    return random_inputs(specs, seed=seed)


def _read_inputs(inputs: PathLike | Mapping[str, Any]) -> dict[str, Any]:
    import numpy as np

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
    >>> from onnx import TensorProto, helper
    >>> from explorer import native, worker
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
    >>> graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> feeds = {"x": np.array([-1.0, 0.0, 2.0], np.float32)}
    >>> worker.run_on_model(native.run_ort, model, feeds)["y"]
    array([0., 0., 2.], dtype=float32)
    """
    import numpy as np

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


# --------------------------------------------------------------------------- TVM


def tvm_import(
    path: PathLike,
    shape_dict: Mapping[str, Sequence[int]] | None = None,
    *,
    opset: int | None = None,
    out_path: PathLike | None = None,
) -> dict[str, Any]:
    """Import a model file into TVM Relax and summarize the module.

    Parameters
    ----------
    path : str or os.PathLike
        The model file (read only).
    shape_dict : mapping of str to sequence of int, optional
        Shapes for the inputs, e.g. ``{"x": [1, 3, 224, 224]}``.
    opset : int, optional
        Override the opset the importer uses.
    out_path : str or os.PathLike, optional
        Write the module's TVMScript text here.

    Returns
    -------
    dict
        ``functions`` (global names), ``num_functions`` and ``main_bindings`` (bindings in
        ``main``'s blocks).

    Raises
    ------
    tvm.error.OpNotImplemented
        The importer does not support an operator.

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> from explorer import native, worker
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    >>> graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> worker.run_on_model(native.tvm_import, model)["functions"]
    ['main']
    """
    report(0.0, "importing tvm")
    from tvm.relax.frontend.onnx import from_onnx

    model = _load(path)
    report(0.3, "converting to Relax")
    shapes = None if shape_dict is None else {name: list(dims) for name, dims in shape_dict.items()}
    module = from_onnx(model, shape_dict=shapes, opset=opset, keep_params_in_input=False)
    if out_path is not None:
        Path(out_path).write_text(module.script())
    functions = sorted(gv.name_hint for gv in module.functions)
    main = module["main"] if "main" in functions else None
    blocks = getattr(getattr(main, "body", None), "blocks", [])
    return {
        "functions": functions,
        "num_functions": len(functions),
        "main_bindings": sum(len(block.bindings) for block in blocks),
    }


def ort_assignment(
    path: PathLike, providers: Sequence[str], node_names: Sequence[str] | None = None
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
    >>> from explorer import worker, zoo
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

"""The native work of each pass, as top-level functions that run inside the worker process.

Each takes the input model's path first and ``out_path=`` last (see
:func:`explorer.isolation.worker.run_on_model`), writes the new model there and returns
log lines. They import the native libraries lazily, so the parent process
never loads onnxoptimizer, onnxsim or ONNX Runtime's optimiser for a pass.

Examples
--------
>>> import tempfile, os, onnx
>>> from explorer import zoo
>>> with tempfile.TemporaryDirectory() as tmp:
...     src, dst = str(zoo.save("resnet18", tmp)), os.path.join(tmp, "out.onnx")
...     log = onnxoptimizer_step(src, ["fuse_bn_into_conv"], out_path=dst)
...     len(onnx.load(dst).graph.node)
49
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from explorer.core.errors import UsageError
from explorer.core.tensors import PROTOBUF_LIMIT, format_bytes
from explorer.isolation.worker import report
from explorer.onnx_adapter.files import save_model
from explorer.onnx_adapter.ort_run import create_ort_session
from explorer.onnx_adapter.weights import (
    STRIP_KEEP_BYTES,
    check_external_data,
    external_span,
    external_tensors,
    model_bytes,
)

__all__ = [
    "onnxoptimizer_step",
    "fold_constants",
    "CLEANUP_PASSES",
    "FOLDABLE_OPS",
    "FOLD_MAX_BYTES",
    "onnxsim_step",
    "ort_optimize_step",
    "version_convert_step",
    "PORTABILITY_SKIPS",
    "simplify",
    "optimize",
]

PORTABILITY_SKIPS = ("fuse_attention", "fuse_gqa")
"""onnxsim optimizers that emit ONNX Runtime-only contrib ops; skipped unless ``portable=False``."""

CLEANUP_PASSES = ("eliminate_deadend", "eliminate_unused_initializer")
"""Run after a single onnxoptimizer pass (when ``cleanup``) so dead nodes it leaves do not show."""

FOLDABLE_OPS = frozenset(
    {
        *("Abs", "Add", "Cast", "Ceil", "Concat", "Div", "Equal", "Exp", "Expand", "Flatten", "Floor"),
        *("Gather", "Greater", "Identity", "Less", "Log", "Max", "Min", "Mul", "Neg", "Not", "Pow"),
        *("Range", "Reciprocal", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum"),
        *("Reshape", "Shape", "Size", "Slice", "Split", "Sqrt", "Squeeze", "Sub", "Tile", "Transpose"),
        *("Unsqueeze", "Where"),
    }
)
"""Standard ops evaluated when all their inputs are constants (deterministic, no subgraphs)."""

FOLD_MAX_BYTES = 64 * 2**20
"""A constant node whose output would exceed this stays a node."""


def fold_constants(model: onnx.ModelProto) -> int:
    """Evaluate nodes whose inputs are all initializers and turn their outputs into initializers, in place.

    onnxoptimizer's fusions (e.g. ``fuse_bn_into_conv``) write the new weights as
    arithmetic on the old ones (Cast/Add/Sqrt/Div/Mul/...); folding it shows the
    fused weights as they really end up. Uses onnx's reference evaluator, node
    by node, main graph only. Returns the number of folded nodes.

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import helper, numpy_helper, TensorProto
    >>> g = helper.make_graph(
    ...     [helper.make_node("Add", ["a", "a"], ["b"]), helper.make_node("Mul", ["x", "b"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    ...     [numpy_helper.from_array(np.ones(2, np.float32), "a")])
    >>> m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    >>> fold_constants(m), [n.op_type for n in m.graph.node], m.graph.initializer[-1].name
    (1, ['Mul'], 'b')
    """
    import numpy as np
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator

    graph = model.graph
    values: dict[str, np.ndarray] = {}
    initializers = {t.name: t for t in graph.initializer}
    outputs = {v.name for v in graph.output}
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    kept: list[onnx.NodeProto] = []
    folded = 0
    for node in graph.node:
        constant_inputs = all(not name or name in initializers for name in node.input)
        if (
            node.domain in ("", "ai.onnx")
            and node.op_type in FOLDABLE_OPS
            and node.input
            and constant_inputs
            and not any(o in outputs for o in node.output)
        ):
            try:
                for name in node.input:
                    if name and name not in values:
                        values[name] = numpy_helper.to_array(initializers[name])
                single = onnx.helper.make_model(
                    onnx.helper.make_graph(
                        [node],
                        "fold",
                        [
                            onnx.helper.make_tensor_value_info(n, initializers[n].data_type, None)
                            for n in node.input
                            if n
                        ],
                        [onnx.helper.make_empty_tensor_value_info(o) for o in node.output],
                    ),
                    opset_imports=[onnx.helper.make_opsetid("", opset)],
                )
                results = ReferenceEvaluator(single).run(None, {n: values[n] for n in node.input if n})
            except Exception:
                kept.append(node)
                continue
            if sum(np.asarray(r).nbytes for r in results) > FOLD_MAX_BYTES:
                kept.append(node)
                continue
            for name, result in zip(node.output, results, strict=False):
                array = np.asarray(result)
                values[name] = array
                tensor = numpy_helper.from_array(array, name)
                graph.initializer.append(tensor)
                initializers[name] = tensor
            folded += 1
            continue
        kept.append(node)
    if folded:
        del graph.node[:]
        graph.node.extend(kept)
    return folded


def _has_value_info(model: onnx.ModelProto) -> bool:
    from explorer.onnx_adapter.protos import iter_graphs

    return any(len(graph.value_info) for graph, _ in iter_graphs(model.graph))


def _drop_inferred_value_info(model: onnx.ModelProto, had: bool) -> None:
    """Remove the shapes our own inference added, so a pass that did nothing leaves the model as it was."""
    from explorer.onnx_adapter.protos import iter_graphs

    if not had:
        for graph, _ in iter_graphs(model.graph):
            del graph.value_info[:]


def onnxoptimizer_step(
    path: str,
    passes: Sequence[str],
    fixed_point: bool = False,
    cleanup: bool = True,
    fold: bool = True,
    *,
    out_path: str,
) -> list[str]:
    """Run onnxoptimizer ``passes`` on the model at ``path``; write the result to ``out_path``.

    Shape inference runs first (several passes only fire on tensors whose
    shape or type is known). With ``fold``, arithmetic a fusion left on
    constants is evaluated (:func:`fold_constants`); with ``cleanup``, dead
    nodes and unused initializers the pass left behind are removed.

    A model over protobuf's 2 GiB with its weights cannot go through
    ``onnxoptimizer.optimize`` as one message; it goes to onnxoptimizer's own file entry
    point instead (``optimize_from_path``, what ``optimize`` itself falls back to), which reads
    the weights from the external-data file, holds them all in memory and writes the result's
    weights to ``<out_path>.data``. The folding is skipped there (it would read the weights
    again in Python); the log says so.

    Examples
    --------
    >>> import os, tempfile, onnx
    >>> from onnx import TensorProto, helper
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    >>> nodes = [helper.make_node("Identity", ["x"], ["h"]), helper.make_node("Neg", ["h"], ["y"])]
    >>> graph = helper.make_graph(nodes, "g", [x], [y])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> src, dst = os.path.join(tempfile.mkdtemp(), "in.onnx"), os.path.join(tempfile.mkdtemp(), "out.onnx")
    >>> onnx.save(model, src)
    >>> log = onnxoptimizer_step(src, ["eliminate_identity"], out_path=dst)
    >>> [n.op_type for n in onnx.load(dst).graph.node]
    ['Neg']
    """
    import onnxoptimizer

    log = [
        f"onnxoptimizer {onnxoptimizer.__version__}: {', '.join(passes)}"
        + (" (fixed point)" if fixed_point else "")
    ]
    structure = onnx.load(path, load_external_data=False)
    if model_bytes(structure) >= PROTOBUF_LIMIT:
        return log + _onnxoptimizer_from_path(path, structure, passes, fixed_point, cleanup, fold, out_path)
    model = onnx.load(path) if external_tensors(structure) else structure
    had_value_info = _has_value_info(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception as err:
        inferred = model
        log.append(
            f"shape inference before the pass failed ({type(err).__name__}); "
            "shape-based rewrites may not fire"
        )
    optimized = onnxoptimizer.optimize(inferred, list(passes), fixed_point)
    if fold:
        count = fold_constants(optimized)
        if count:
            log.append(f"folded {count} nodes computing on constants into initializers")
    if cleanup and _nodes_changed(optimized, model):
        optimized = onnxoptimizer.optimize(optimized, list(CLEANUP_PASSES), False)
        log.append("removed what the pass left unused (" + ", ".join(CLEANUP_PASSES) + ")")
    _drop_inferred_value_info(optimized, had_value_info)
    save_model(optimized, out_path)
    return log


def _onnxoptimizer_from_path(
    path: str,
    structure: onnx.ModelProto,
    passes: Sequence[str],
    fixed_point: bool,
    cleanup: bool,
    fold: bool,
    out_path: str,
) -> list[str]:
    """:func:`onnxoptimizer_step` for a model over 2 GiB: onnxoptimizer reads and writes files.

    ``structure`` is the model at ``path`` without its external weights. Shape inference runs on
    it (small weights read, large ones left out), and onnxoptimizer is given that model, its large
    weights pointing at their checked files by absolute path, through ``optimize_from_path``: the
    entry point ``onnxoptimizer.optimize`` falls back to when a model does not fit one message.
    """
    from onnxoptimizer import onnx_opt_cpp2py_export as native

    log = [
        f"the model is {format_bytes(model_bytes(structure))} with its weights, over protobuf's 2 GiB: "
        "onnxoptimizer reads it from its file with external data (optimize_from_path), every weight in memory"
    ]
    had_value_info = _has_value_info(structure)
    run = native.optimize_fixedpoint_from_path if fixed_point else native.optimize_from_path
    data_name = os.path.basename(out_path) + ".data"
    with tempfile.TemporaryDirectory(prefix="onnxoptimizer-input-", dir=os.path.dirname(out_path)) as tmp:
        source = os.path.join(tmp, "input.onnx")
        log += _inferred_with_weights_in_place(structure, os.path.dirname(os.path.abspath(path)), source)
        run(source, out_path, list(passes), data_name)
        result = onnx.load(out_path, load_external_data=False)
        changed = _nodes_changed(result, structure)
        if fold and changed:
            log.append("constant folding after the pass skipped: above 2 GiB it would read the weights again")
        if cleanup and changed:
            cleaned = os.path.join(tmp, "cleaned.onnx")
            native.optimize_from_path(out_path, cleaned, list(CLEANUP_PASSES), data_name)
            os.replace(os.path.join(tmp, data_name), os.path.join(os.path.dirname(out_path), data_name))
            os.replace(cleaned, out_path)
            result = onnx.load(out_path, load_external_data=False)
            log.append("removed what the pass left unused (" + ", ".join(CLEANUP_PASSES) + ")")
    if not had_value_info and _has_value_info(result):
        _drop_inferred_value_info(result, had_value_info)
        with open(out_path, "wb") as handle:  # the structure only: the weights stay in their file
            handle.write(result.SerializeToString())
    return log


def _inferred_with_weights_in_place(structure: onnx.ModelProto, base_dir: str, target: str) -> list[str]:
    """Write ``structure`` with inferred shapes to ``target``; its external weights stay where they are.

    Weights under :data:`~explorer.onnx_adapter.weights.STRIP_KEEP_BYTES` are read into the model
    (shape inference and the passes read such constants); larger ones point at their checked file
    by absolute path, so onnxoptimizer reads them from there. onnxoptimizer reads the external
    data of the main graph's tensors only: a large weight in a subgraph is refused.
    """
    from onnx.external_data_helper import load_external_data_for_tensor

    model = onnx.ModelProto()
    model.CopyFrom(structure)
    graph = model.graph
    main = [*graph.initializer, *(a.t for n in graph.node for a in n.attribute if a.type == a.TENSOR)]
    placed: set[str] = set()
    for tensor in (t for t in main if t.data_location == onnx.TensorProto.EXTERNAL):
        span = external_span(tensor, Path(base_dir))
        if span.length >= STRIP_KEEP_BYTES:
            next(e for e in tensor.external_data if e.key == "location").value = os.fspath(span.path)
            placed.add(os.fspath(span.path))
    for tensor in external_tensors(model):
        location = next(e.value for e in tensor.external_data if e.key == "location")
        if location in placed:
            continue
        if external_span(tensor, Path(base_dir)).length >= STRIP_KEEP_BYTES:
            raise ValueError(
                f"tensor {tensor.name!r} is in a subgraph and stored externally: onnxoptimizer reads the "
                "external data of the main graph's tensors only"
            )
        load_external_data_for_tensor(tensor, base_dir)
        tensor.data_location = onnx.TensorProto.DEFAULT
        del tensor.external_data[:]
    log: list[str] = []
    try:
        model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception as err:
        log.append(
            f"shape inference before the pass failed ({type(err).__name__}); "
            "shape-based rewrites may not fire"
        )
    with open(target, "wb") as handle:
        handle.write(model.SerializeToString())
    return log


def _nodes_changed(optimized: onnx.ModelProto, original: onnx.ModelProto) -> bool:
    """Whether the pass touched the graph's nodes (so a clean-up may be due)."""
    if len(optimized.graph.node) != len(original.graph.node):
        return True
    return [n.SerializeToString() for n in optimized.graph.node] != [
        n.SerializeToString() for n in original.graph.node
    ]


def _fixed_shapes(
    model: onnx.ModelProto, given: Mapping[str, Sequence[int]] | None
) -> tuple[dict, list[str]]:
    """Input shapes for onnxsim: the given ones, and the rest sized as every random input is.

    :func:`explorer.onnx_adapter.inputs.concrete_input_shapes` sizes them (1 for batch-like
    names, else 32; one size per symbol; a decoder's call consistent), so the verification's
    random inputs fit the fixed model.
    """
    from explorer.onnx_adapter.inputs import concrete_input_shapes
    from explorer.onnx_adapter.tensor_protos import shape_from_type

    concrete = concrete_input_shapes(model, given)
    shapes: dict[str, list[int]] = {k: list(v) for k, v in (given or {}).items()}
    log: list[str] = []
    initializers = {t.name for t in model.graph.initializer}
    for value in model.graph.input:
        if value.name in shapes or value.name in initializers:
            continue
        declared, _ = shape_from_type(value.type)  # -1 (paddle2onnx) and unnamed dims read as None
        if declared is not None and any(not isinstance(d, int) for d in declared):
            shapes[value.name] = concrete[value.name]
            log.append(
                f"input {value.name!r}: dynamic dims fixed -> {shapes[value.name]} "
                "(pass input_shapes to choose)"
            )
    return shapes, log


def onnxsim_step(
    path: str,
    mode: str = "full",
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    portable: bool = True,
    *,
    out_path: str,
) -> list[str]:
    """Run onnxsim on the model at ``path``; write the result to ``out_path``.

    Parameters
    ----------
    path : str
        The input model.
    mode : {"full", "constant_folding", "shape_ops"}
        ``full``: the whole simplifier (with ``input_shapes`` when given).
        ``constant_folding``: folding and shape inference only, dynamic dims kept.
        ``shape_ops``: folding with every input dim fixed (given, or 1 for batch
        dims and 32 for other symbolic dims), so Shape/Gather/Concat chains become constants.
    input_shapes : mapping, optional
        Input name -> shape to fix.
    portable : bool
        Skip onnxsim's fusions into ONNX Runtime contrib ops (``com.microsoft::Attention``,
        ``GroupQueryAttention``), which only ONNX Runtime runs.
    out_path : str
        Where to write the simplified model.

    Examples
    --------
    >>> import os, tempfile, onnx
    >>> import numpy as np
    >>> from onnx import TensorProto, helper, numpy_helper
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    >>> one = numpy_helper.from_array(np.ones(2, np.float32), "one")
    >>> add = helper.make_node("Add", ["one", "one"], ["two"])
    >>> nodes = [add, helper.make_node("Mul", ["x", "two"], ["y"])]
    >>> graph = helper.make_graph(nodes, "g", [x], [y], initializer=[one])
    >>> src, dst = os.path.join(tempfile.mkdtemp(), "in.onnx"), os.path.join(tempfile.mkdtemp(), "out.onnx")
    >>> onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), src)
    >>> onnxsim_step(src, "constant_folding", out_path=dst)
    ['onnxsim constant_folding: check passed']
    >>> [n.op_type for n in onnx.load(dst).graph.node]  # 1 + 1 folded into a weight
    ['Mul']
    """
    log: list[str] = []
    shapes = {k: list(v) for k, v in input_shapes.items()} if input_shapes else None
    if mode == "shape_ops":
        shapes, log = _fixed_shapes(onnx.load(path, load_external_data=False), input_shapes)
    elif mode not in ("full", "constant_folding"):
        raise UsageError(f"unknown onnxsim mode {mode!r}; use full, constant_folding or shape_ops")
    with tempfile.TemporaryDirectory(prefix="onnxsim-input-", dir=os.path.dirname(out_path)) as tmp:
        source, notes = _trusted_input(path, tmp)
        if shapes and mode != "constant_folding":
            source, folded = _empty_input_shapes_folded(source, shapes, tmp)
            notes += folded
        summary = simplify(
            source,
            out_path,
            (shapes or None) if mode != "constant_folding" else None,
            check_n=0,
            perform_optimization=mode == "full",
            skipped_optimizers=list(PORTABILITY_SKIPS) if portable else None,
        )
    return [*log, *notes, f"onnxsim {mode}: check {'passed' if summary['check_ok'] else 'FAILED'}"]


def _trusted_input(path: str, folder: str) -> tuple[str, list[str]]:
    """The model onnxsim should see: ``path`` itself, or a copy in ``folder`` as inference sees it.

    onnxsim trusts declared shapes (a stale rank-2 ``value_info`` made it drop a
    Flatten that was not a no-op) and reads paddle2onnx's ``-1`` dims as sizes. When
    the model has either, the copy hides what
    :func:`explorer.onnx_adapter.shape_inference.inference_view` hides (outputs keep their declared
    shapes); otherwise onnxsim gets ``path`` as it is. The input file is never changed.
    """
    from explorer.onnx_adapter.shape_inference import declaration_conflicts, inference_view

    structure = onnx.load(path, load_external_data=False)
    conflicts = declaration_conflicts(structure)
    with inference_view(structure, outputs=False) as (_, dynamic):
        pass
    if not conflicts and not dynamic:
        return path, []
    model = onnx.load(path)
    target = os.path.join(folder, "input.onnx")
    with inference_view(model, outputs=False):  # onnxsim's checker refuses outputs without a shape
        save_model(model, target)
    notes = [f"{conflicts[0]}; onnxsim is given the model without them"] if conflicts else []
    if dynamic:
        notes.append(f"{dynamic} dims written as a negative dim_value given to onnxsim as dynamic")
    return target, notes


def _empty_input_shapes_folded(
    path: str, shapes: Mapping[str, Sequence[int]], folder: str
) -> tuple[str, list[str]]:
    """``path``, or a copy in ``folder`` whose inputs fixed to an empty size declare it, and whose
    ``Shape`` of each is a constant.

    onnxsim folds nothing that reads an empty tensor: a decoder's first call (a past of 0
    tokens) kept its ``Shape`` -> ``Range`` chains, and compilers that need static shapes refused
    them. Nor does it write a 0 it is given as an input's dim (the input keeps its symbolic dim,
    so every shape computed from the cache stays unknown). The shape of an input with fixed dims is
    known, empty or not, so the copy says it.
    """
    structure = onnx.load(path, load_external_data=False)
    declared = {v.name for v in structure.graph.input}
    empty = {name: list(shape) for name, shape in shapes.items() if 0 in shape and name in declared}
    if not empty:
        return path, []
    folds = [
        n
        for n in structure.graph.node
        if n.op_type == "Shape" and n.domain in ("", "ai.onnx") and n.input and n.input[0] in empty
    ]
    model = onnx.load(path)
    for value in model.graph.input:
        if value.name in empty:
            del value.type.tensor_type.shape.dim[:]
            for size in empty[value.name]:
                value.type.tensor_type.shape.dim.add().dim_value = int(size)
    for node in model.graph.node:
        if (
            node.op_type == "Shape"
            and node.domain in ("", "ai.onnx")
            and node.input
            and node.input[0] in empty
        ):
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            dims = empty[node.input[0]]
            value = np.array(dims[slice(attrs.get("start", 0), attrs.get("end"))], dtype=np.int64)
            tensor = numpy_helper.from_array(value, name=f"{node.name}_value")
            folded = onnx.helper.make_node("Constant", [], list(node.output), name=node.name, value=tensor)
            node.CopyFrom(folded)
    target = os.path.join(folder, "empty-shapes-folded.onnx")
    save_model(model, target)
    notes = [f"{len(empty)} input(s) with an empty dim declared at their fixed shapes for onnxsim"]
    if folds:
        notes.append(f"{len(folds)} Shape of an input with an empty dim written as a constant for onnxsim")
    return target, notes


def ort_optimize_step(path: str, level: str, *, out_path: str) -> list[str]:
    """Optimise the model with ONNX Runtime's offline graph optimisation at ``level``.

    Parameters
    ----------
    path : str
        The input model.
    level : {"basic", "extended", "layout", "all"}
        The ``GraphOptimizationLevel``.
    out_path : str
        Where ONNX Runtime saves the optimised model (``optimized_model_filepath``).

    Examples
    --------
    >>> import os, tempfile, onnx
    >>> from explorer import zoo
    >>> src, dst = str(zoo.save("mlp")), os.path.join(tempfile.mkdtemp(), "out.onnx")
    >>> log = ort_optimize_step(src, "extended", out_path=dst)
    >>> [n.op_type for n in onnx.load(dst).graph.node]  # Gemm + Relu fused
    ['Flatten', 'FusedGemm', 'FusedGemm', 'Gemm']
    """
    import onnxruntime as ort

    info = create_ort_session(path, out_path, optimization_level=level)
    return [f"onnxruntime {ort.__version__}: {level} level on {', '.join(info['providers'])}"]


def version_convert_step(path: str, opset: int, *, out_path: str) -> list[str]:
    """Convert the model at ``path`` to ``opset`` with onnx's version converter.

    Examples
    --------
    >>> import os, tempfile
    >>> from explorer import zoo
    >>> src, dst = str(zoo.save("mlp")), os.path.join(tempfile.mkdtemp(), "out.onnx")
    >>> version_convert_step(src, 18, out_path=dst)
    ['opset 17 -> 18']
    """
    from onnx import version_converter

    model = onnx.load(path)
    before = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    converted = version_converter.convert_version(model, int(opset))
    save_model(converted, out_path)
    return [f"opset {before} -> {opset}"]


def simplify(
    path: str | os.PathLike[str],
    out_path: str | os.PathLike[str] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    check_n: int = 0,
    perform_optimization: bool = True,
    skipped_optimizers: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Simplify a model file with onnxsim (constant folding, shape fixing, optimizer passes).

    onnxsim is given the file, not a ``ModelProto``: it reads the weights from their external-data
    files itself, so a model over protobuf's 2 GiB goes through (every weight in memory), and with
    ``out_path`` and no ``check_n`` it writes the result itself, its weights in an external-data
    file beside it when the result is over 2 GiB.

    Parameters
    ----------
    path : str or os.str | os.PathLike[str]
        The model file (read only).
    out_path : str or os.str | os.PathLike[str], optional
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
    >>> from explorer.isolation import worker
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    >>> one = numpy_helper.from_array(np.ones(2, np.float32), "one")
    >>> add = helper.make_node("Add", ["one", "one"], ["two"])
    >>> nodes = [add, helper.make_node("Mul", ["x", "two"], ["y"])]
    >>> graph = helper.make_graph(nodes, "g", [x], [y], initializer=[one])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> summary = worker.run_on_model(simplify, model)
    >>> summary["nodes_before"], summary["nodes_after"]
    (2, 1)
    """
    import onnxsim

    structure = onnx.load(os.fspath(path), load_external_data=False)
    # onnxsim's own reader follows any location and reads past a file's end without a word: check first
    check_external_data(external_tensors(structure), Path(path).parent, label=os.fspath(path))
    before = len(structure.graph.node)
    report(0.1, "simplifying with onnxsim")
    shapes = None if input_shapes is None else {name: list(dims) for name, dims in input_shapes.items()}
    direct = out_path is not None and check_n == 0  # onnxsim writes the file itself (its fast path)
    simplified, check_ok = onnxsim.simplify(
        os.fspath(path),  # the file: onnxsim reads its external data, any size
        check_n=check_n,
        perform_optimization=perform_optimization,
        overwrite_input_shapes=shapes,
        skipped_optimizers=None if skipped_optimizers is None else list(skipped_optimizers),
        output_path=os.fspath(out_path) if direct else None,
    )
    report(0.9, "saving")
    if out_path is not None and not direct:
        save_model(simplified, out_path)
    return {
        "nodes_before": before,
        "nodes_after": len(simplified.graph.node),
        "check_ok": bool(check_ok),
        "out_path": None if out_path is None else os.fspath(out_path),
    }


def optimize(
    path: str | os.PathLike[str],
    out_path: str | os.PathLike[str] | None = None,
    passes: Sequence[str] | None = None,
    *,
    fixed_point: bool = False,
) -> dict[str, Any]:
    """Apply onnxoptimizer passes to a model file and summarize it (passes use :func:`onnxoptimizer_step`).

    Parameters
    ----------
    path : str or os.str | os.PathLike[str]
        The model file (read only).
    out_path : str or os.str | os.PathLike[str], optional
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
    UsageError
        A pass name is unknown.

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> from explorer.isolation import worker
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    >>> nodes = [helper.make_node("Identity", ["x"], ["h"]), helper.make_node("Neg", ["h"], ["y"])]
    >>> graph = helper.make_graph(nodes, "g", [x], [y])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> worker.run_on_model(optimize, model, passes=["eliminate_identity"])["nodes_after"]
    1
    """
    import onnxoptimizer

    names = None if passes is None else list(passes)
    if names is not None:
        available = onnxoptimizer.get_available_passes()
        unknown = sorted(set(names) - set(available))
        if unknown:
            raise UsageError(
                f"passes: unknown onnxoptimizer pass(es) {unknown}; the passes are {', '.join(available)}"
            )
    model = onnx.load(os.fspath(path))
    before = len(model.graph.node)
    optimized = onnxoptimizer.optimize(model, names, fixed_point)
    if out_path is not None:
        save_model(optimized, out_path)
    return {
        "nodes_before": before,
        "nodes_after": len(optimized.graph.node),
        "passes": names,
        "out_path": None if out_path is None else os.fspath(out_path),
    }

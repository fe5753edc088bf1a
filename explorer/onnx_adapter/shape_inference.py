"""Shape and dtype of every tensor: ONNX shape inference, with ONNX Runtime's symbolic inference as fallback.

Examples
--------
>>> from explorer import zoo
>>> types, notes = infer_types(zoo.build("mlp"))
>>> types[()]["logits"][0]
('batch', 10)
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import onnx
from onnx import ModelProto

from explorer.core.tensors import PROTOBUF_LIMIT, Shape, format_shape, over_protobuf_limit
from explorer.onnx_adapter.input_shapes import fix_input_shapes
from explorer.onnx_adapter.model_wire import read_model_lazily
from explorer.onnx_adapter.protos import GraphPath, has_schema, iter_graph_paths, iter_graphs
from explorer.onnx_adapter.tensor_protos import dim_from_proto, shape_from_type
from explorer.onnx_adapter.weights import (
    STRIP_KEEP_BYTES,
    has_strippable_tensors,
    stripped_copy,
)

__all__ = [
    "infer_types",
    "inference_view",
    "declaration_conflicts",
    "infer_types_isolated",
    "infer_types_file",
    "infer_shapes",
    "BackgroundInference",
    "unknown_tensors",
    "SYMBOLIC_FALLBACK_MAX_NODES",
    "PROTOBUF_LIMIT",
]

SYMBOLIC_FALLBACK_MAX_NODES = 20_000
"""Above this many nodes the (pure-Python) symbolic fallback is skipped: it would take too long."""


Types = dict[str, tuple[Shape | None, int]]
PerGraphTypes = dict[GraphPath, Types]


def _collect(model: ModelProto) -> PerGraphTypes:
    """Declared types of every graph, keyed by graph path (names are scoped per graph)."""
    tables: PerGraphTypes = {}
    for path, graph in iter_graph_paths(model.graph):
        types: Types = {}
        for value in (*graph.input, *graph.output, *graph.value_info):
            shape, elem_type = shape_from_type(value.type)
            old = types.get(value.name)
            if old is None or (old[0] is None and shape is not None):
                types[value.name] = (shape, elem_type)
        tables[path] = types
    return tables


def _merge(into: PerGraphTypes, found: PerGraphTypes) -> list[str]:
    """Add inferred types (``found``) to the declared ones (``into``); return notes on contradictions.

    The more telling shape is kept (see :func:`_score`), except where inference
    contradicts a declaration (another rank, or another size for a dim both give as
    a size): then the inferred shape wins, since it is what the operators compute
    (a declaration left behind by an edit, an exporter's stale ``value_info``).
    """
    conflicts: list[str] = []
    for path, table in found.items():
        target = into.setdefault(path, {})
        for name, value in table.items():
            old = target.get(name)
            if old is not None and _contradicts(old[0], value[0]):
                conflicts.append(
                    f"{name!r} declared {format_shape(old[0])}, inferred {format_shape(value[0])}"
                )
                target[name] = value
            elif old is None or _score(value[0]) > _score(old[0]):
                target[name] = value
    if not conflicts:
        return []
    shown = "; ".join(conflicts[:3]) + (f"; and {len(conflicts) - 3} more" if len(conflicts) > 3 else "")
    return [
        f"the model declares shapes that shape inference contradicts for {len(conflicts)} tensors "
        f"(stale value_info or outputs); the inferred shapes are used: {shown}"
    ]


def _contradicts(declared: Shape | None, inferred: Shape | None) -> bool:
    """Whether two shapes cannot both be right: other ranks, or other sizes of one dim."""
    if declared is None or inferred is None:
        return False
    if len(declared) != len(inferred):
        return True
    return any(
        isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(declared, inferred, strict=True)
    )


@contextlib.contextmanager
def inference_view(model: ModelProto, *, outputs: bool = True) -> Iterator[tuple[int, int]]:
    """Show shape inference only what it should trust; the model is put back afterwards.

    Inside the ``with`` block, ``value_info`` of tensors that an operator with an
    ONNX schema produces is hidden (inference recomputes it, and a stale entry
    would win over the computed shape); negative ``dim_value`` (paddle2onnx's
    ``-1``) reads as an unnamed dim, not a size; with ``outputs``, declared output
    shapes are cleared too (so fixed input shapes propagate to them). Yields how
    many ``value_info`` entries were hidden and how many negative dims cleared.

    Examples
    --------
    >>> from onnx import helper, TensorProto
    >>> g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 3])],
    ...     value_info=[helper.make_tensor_value_info("y", TensorProto.FLOAT, [5])])
    >>> m = helper.make_model(g)
    >>> batch = m.graph.input[0].type.tensor_type.shape.dim[0]
    >>> with inference_view(m) as (hidden, dynamic):
    ...     hidden, dynamic, len(m.graph.value_info), batch.HasField("dim_value")
    (1, 1, 0, False)
    >>> len(m.graph.value_info), batch.dim_value
    (1, -1)
    """
    saved_outputs = [onnx.TypeProto() for _ in model.graph.output] if outputs else []
    for kept, value in zip(saved_outputs, model.graph.output, strict=False):
        kept.CopyFrom(value.type)
        if value.type.HasField("tensor_type"):
            value.type.tensor_type.ClearField("shape")
    hidden: list[tuple[onnx.GraphProto, list[onnx.ValueInfoProto]]] = []
    count = 0
    negative: list[tuple[onnx.TensorShapeProto.Dimension, int]] = []
    for graph, _ in iter_graphs(model.graph):
        inferable = {
            out for node in graph.node if has_schema(node.op_type, node.domain) for out in node.output
        }
        if any(v.name in inferable for v in graph.value_info):
            hidden.append((graph, [_copy(v) for v in graph.value_info]))
            kept_info = [_copy(v) for v in graph.value_info if v.name not in inferable]
            count += len(graph.value_info) - len(kept_info)
            del graph.value_info[:]
            graph.value_info.extend(kept_info)
        for value in (*graph.input, *graph.output, *graph.value_info):
            if value.type.HasField("tensor_type"):
                negative.extend(
                    (d, d.dim_value) for d in value.type.tensor_type.shape.dim if _sized_dynamic(d)
                )
    for dim, _ in negative:
        dim.ClearField("dim_value")
    try:
        yield count, len(negative)
    finally:
        for dim, size in negative:
            dim.dim_value = size
        for graph, everything in hidden:
            del graph.value_info[:]
            graph.value_info.extend(everything)
        for kept, value in zip(saved_outputs, model.graph.output, strict=False):
            value.type.CopyFrom(kept)


def declaration_conflicts(model: ModelProto) -> list[str]:
    """Notes on the declared shapes (``value_info``, outputs) that onnx's shape inference contradicts.

    Empty when there are none (or inference fails). The model is not changed.

    Examples
    --------
    >>> from onnx import helper, TensorProto
    >>> g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])])
    >>> declaration_conflicts(helper.make_model(g))[0].split(": ", 1)[1]
    "'y' declared [2, 5], inferred [2, 3]"
    """
    declared = _collect(model)
    with inference_view(model):
        try:
            inferred = onnx.shape_inference.infer_shapes(
                model, check_type=False, strict_mode=False, data_prop=True
            )
        except Exception:
            return []
    return _merge(declared, _collect(inferred))


def _sized_dynamic(dim: onnx.TensorShapeProto.Dimension) -> bool:
    """A ``dim_value`` that :func:`~explorer.onnx_adapter.tensor_protos.dim_from_proto` reads as dynamic."""
    return dim.WhichOneof("value") == "dim_value" and dim_from_proto(dim) is None


def _copy(value: onnx.ValueInfoProto) -> onnx.ValueInfoProto:
    copy = onnx.ValueInfoProto()
    copy.CopyFrom(value)
    return copy


def _known(shape: Shape | None) -> bool:
    return shape is not None and all(d is not None for d in shape)


def _score(shape: Shape | None) -> tuple[bool, int, int]:
    """Rank shapes by how much they tell: known rank, then concrete dims, then named dims."""
    if shape is None:
        return (False, 0, 0)
    return (True, sum(isinstance(d, int) for d in shape), sum(d is not None for d in shape))


def unknown_tensors(model: ModelProto, types: Types) -> list[str]:
    """Names of main-graph node outputs whose rank or some dimension is still unknown.

    Examples
    --------
    >>> from explorer import zoo
    >>> m = zoo.build("mlp")
    >>> unknown_tensors(m, infer_types(m)[0][()])
    []
    """
    return [
        name
        for node in model.graph.node
        for name in node.output
        if name and not _known(types.get(name, (None, 0))[0])
    ]


def infer_types(model: ModelProto) -> tuple[PerGraphTypes, list[str]]:
    """Infer the shape and element type of every tensor the model can tell.

    Runs ``onnx.shape_inference`` with data propagation; where it leaves shapes
    unknown in the main graph, runs ONNX Runtime's symbolic shape inference and
    fills the gaps. Never raises for a model that parsed: failures become notes.
    Both see a weight-stripped copy (:func:`explorer.onnx_adapter.weights.stripped_copy`):
    large weights keep their dims and dtype but not their values, so inference
    costs the same whatever the weights weigh, and works above 2 GiB.

    Parameters
    ----------
    model : onnx.ModelProto
        The model (not modified).

    Returns
    -------
    types : dict
        Graph path -> {tensor name -> (shape, ONNX element type)}; ``()`` is
        the main graph (see :func:`explorer.core.graph.iter_graph_paths`).
    notes : list of str
        What fell back or failed, for the summary.

    Examples
    --------
    >>> from explorer import zoo
    >>> types, notes = infer_types(zoo.build("resnet18"))
    >>> types[()]["logits"][0]
    ('batch', 1000)
    """
    notes: list[str] = []
    tables = _collect(model)
    if has_strippable_tensors(model):  # the worker gets a stripped copy already: do not copy it again
        model = stripped_copy(model)
    if over_protobuf_limit(model):
        notes.append("shape inference skipped: the model's structure alone is over 2 GiB")
        return tables, notes
    # Declared output shapes and value_info would stop inference from refining them (e.g.
    # after input_shapes fixed "batch"): infer with them hidden, then keep the better one.
    with inference_view(model):
        try:
            inferred = onnx.shape_inference.infer_shapes(
                model, check_type=False, strict_mode=False, data_prop=True
            )
        except Exception as err:  # a node whose inference throws even in lenient mode
            notes.append(f"onnx shape inference failed: {_first_line(err)}")
            inferred = model
    notes.extend(_merge(tables, _collect(inferred)))
    types = tables[()]
    missing = unknown_tensors(model, types)
    if not missing:
        return tables, notes
    if len(model.graph.node) > SYMBOLIC_FALLBACK_MAX_NODES:
        notes.append(
            f"{len(missing)} tensors have unknown shapes; symbolic shape inference skipped "
            f"(over {SYMBOLIC_FALLBACK_MAX_NODES:,} nodes)"
        )
        return tables, notes
    symbolic = _symbolic(inferred, notes)
    if symbolic is not None:
        filled = 0
        for name, value in _collect(symbolic).get((), {}).items():
            if (name not in types or not _known(types[name][0])) and _score(value[0]) > _score(
                types.get(name, (None, 0))[0]
            ):
                filled += _known(value[0]) and name in missing
                types[name] = value
        left = len(unknown_tensors(model, types))
        notes.append(
            f"onnx shape inference left {len(missing)} tensors unknown; ONNX Runtime's symbolic "
            f"inference resolved {filled}" + (f", {left} still unknown" if left else "")
        )
    return tables, notes


def _symbolic(model: ModelProto, notes: list[str]) -> ModelProto | None:
    """ONNX Runtime's symbolic shape inference, keeping partial results.

    Its public ``infer_shapes`` raises when some shapes stay unknown, after saving
    a temp model (and external data) into the current folder; so the steps are
    driven here, which keeps what it did find and writes nothing.
    """
    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
    except ImportError:
        notes.append("onnxruntime's symbolic shape inference is not available")
        return None
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            engine = SymbolicShapeInference(2**31 - 1, True, True, 0)
            engine._preprocess(model)
            while engine.run_:
                engine._infer_impl()
            engine._update_output_from_vi()
            return engine.out_mp_
    except Exception as err:
        notes.append(f"ONNX Runtime's symbolic shape inference failed: {_first_line(err)}")
        return None


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]


def infer_types_file(
    path: str, input_shapes: Mapping[str, Sequence[int]] | None = None
) -> tuple[PerGraphTypes, list[str]]:
    """:func:`infer_types` of the model file at ``path``, ``input_shapes`` fixed first: what the worker runs.

    The worker runs it on a staged copy (:func:`infer_types_isolated`) or on
    the user's file itself while the caller parses it too (:class:`BackgroundInference`).

    Examples
    --------
    >>> import tempfile
    >>> from explorer import zoo
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = str(zoo.save("mlp", tmp))
    ...     infer_types_file(path)[0][()]["logits"]
    ...     infer_types_file(path, {"input": [3, 1, 28, 28]})[0][()]["logits"]
    (('batch', 10), 1)
    ((3, 10), 1)
    """
    # the large tensors stay in the file (their values are not inferred from): the worker holds the structure
    model = read_model_lazily(path, STRIP_KEEP_BYTES)  # inference reads no larger values (stripped_copy)
    if model is None:  # not a protobuf the scan walks: onnx's parser says what is wrong
        model = onnx.load(path, load_external_data=False)
    if input_shapes:
        fix_input_shapes(model, input_shapes, path)
    return infer_types(model)


def infer_shapes(
    path: str | os.PathLike[str],
    out_path: str | os.PathLike[str] | None = None,
    *,
    strict: bool = True,
    data_prop: bool = False,
) -> dict[str, Any]:
    """Run onnx shape inference on a model file; write the inferred model to ``out_path`` (a worker step).

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
    >>> from explorer.isolation import worker
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    >>> nodes = [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Neg", ["h"], ["y"])]
    >>> graph = helper.make_graph(nodes, "g", [x], [y])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> worker.run_on_model(infer_shapes, model)["value_info"]
    1
    """
    with tempfile.TemporaryDirectory(prefix="explorer-shapes-") as scratch:
        target = os.fspath(out_path) if out_path is not None else os.path.join(scratch, "inferred.onnx")
        onnx.shape_inference.infer_shapes_path(
            os.fspath(path), target, check_type=True, strict_mode=strict, data_prop=data_prop
        )
        inferred = onnx.load(target, load_external_data=False)
    return {
        "value_info": len(inferred.graph.value_info),
        "nodes": len(inferred.graph.node),
        "out_path": None if out_path is None else os.fspath(out_path),
    }


def infer_types_isolated(
    model: ModelProto, *, timeout: float | None = None
) -> tuple[PerGraphTypes, list[str]]:
    """Run :func:`infer_types` in the worker process, so a crash in onnx's C++ inference is only a note.

    onnx's shape inference has known segfaults on malformed models (e.g. a
    GatherND whose indices have a dimension of -1). When the worker crashes,
    times out or runs out of memory, the declared types are used and a note says why.

    Examples
    --------
    >>> from explorer import zoo
    >>> types, notes = infer_types_isolated(zoo.build("mlp"))
    >>> types[()]["logits"][0], notes
    (('batch', 10), [])
    """
    from explorer.core.errors import UnguardedMainError
    from explorer.isolation import worker

    try:  # the worker gets the weight-stripped copy: a few MB whatever the weights weigh
        return worker.run_on_model(
            infer_types_file, stripped_copy(model), step="shape inference", timeout=timeout
        )
    except UnguardedMainError:  # the script's mistake, not the model's: no worker runs until it is fixed
        raise
    except (
        Exception
    ) as err:  # WorkerCrashed (signal_name), WorkerTimeout, WorkerOutOfMemory, or a Python error
        return _collect(model), [_failure_note(err)]


class BackgroundInference:
    """Shape inference of a model file, started in the worker before the caller parses the file.

    The worker reads and parses the file itself (on the other core) while this
    process parses it too, so inference costs little beyond the parse. A crash,
    time-out or error in the worker is a note with the declared shapes, as in
    :func:`infer_types_isolated`.

    Parameters
    ----------
    path : path
        The model file.
    input_shapes : mapping, optional
        Input shapes the caller fixes too.
    timeout : float, optional
        Seconds the worker may take.

    Examples
    --------
    >>> import onnx
    >>> from explorer import zoo
    >>> path = str(zoo.save("mlp"))
    >>> job = BackgroundInference(path)
    >>> types, notes = job.result(onnx.load(path))
    >>> types[()]["logits"][0], notes
    (('batch', 10), [])
    """

    def __init__(
        self,
        path: str,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        self._outcome: tuple[PerGraphTypes, list[str]] | None = None
        self._error: BaseException | None = None
        shapes = {k: list(v) for k, v in input_shapes.items()} if input_shapes else None
        self._thread = threading.Thread(
            target=self._run, args=(str(path), shapes, timeout), name="explorer-shape-inference", daemon=True
        )
        self._thread.start()

    def _run(self, path: str, shapes: dict[str, list[int]] | None, timeout: float | None) -> None:
        from explorer.isolation import worker

        try:
            self._outcome = worker.run_on_model(
                infer_types_file, path, shapes, step="shape inference", timeout=timeout
            )
        except BaseException as err:  # reported to the caller by result()
            self._error = err

    def result(self, model: ModelProto) -> tuple[PerGraphTypes, list[str]]:
        """Wait for the worker; on failure, the types ``model`` declares and a note why (a script
        that starts the worker at import time: :class:`~explorer.core.errors.UnguardedMainError`)."""
        from explorer.core.errors import UnguardedMainError

        self._thread.join()
        if self._outcome is not None:
            return self._outcome
        if isinstance(self._error, UnguardedMainError):
            raise self._error
        return _collect(model), [_failure_note(self._error)]


def _failure_note(err: BaseException | None) -> str:
    reason = getattr(err, "signal_name", None) or type(err).__name__
    return f"shape inference failed in the worker ({reason}); shapes are the ones declared in the model"

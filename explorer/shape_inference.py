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
import threading
from collections.abc import Mapping, Sequence

import onnx
from onnx import ModelProto

from .graph import GraphPath, iter_graph_paths
from .tensors import PROTOBUF_LIMIT, Shape, shape_from_type
from .weights import stripped_copy

__all__ = [
    "infer_types",
    "infer_types_isolated",
    "infer_types_file",
    "infer_types_path",
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


def _merge(into: PerGraphTypes, found: PerGraphTypes) -> None:
    for path, table in found.items():
        target = into.setdefault(path, {})
        for name, value in table.items():
            if name not in target or _score(value[0]) > _score(target[name][0]):
                target[name] = value


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
    Both see a weight-stripped copy (:func:`explorer.weights.stripped_copy`):
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
        the main graph (see :func:`explorer.graph.iter_graph_paths`).
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
    model = stripped_copy(model)
    if model.ByteSize() >= PROTOBUF_LIMIT:
        notes.append("shape inference skipped: the model's structure alone is over 2 GiB")
        return tables, notes
    # Declared output shapes would stop inference from refining them (e.g. after
    # input_shapes fixed "batch"): infer with them cleared, then keep the better one.
    saved = [onnx.TypeProto() for _ in model.graph.output]
    for kept, value in zip(saved, model.graph.output, strict=True):
        kept.CopyFrom(value.type)
        if value.type.HasField("tensor_type"):
            value.type.tensor_type.ClearField("shape")
    try:
        inferred = onnx.shape_inference.infer_shapes(
            model, check_type=False, strict_mode=False, data_prop=True
        )
    except Exception as err:  # a node whose inference throws even in lenient mode
        notes.append(f"onnx shape inference failed: {_first_line(err)}")
        inferred = model
    finally:
        for kept, value in zip(saved, model.graph.output, strict=True):
            value.type.CopyFrom(kept)
    _merge(tables, _collect(inferred))
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


def infer_types_file(path: str) -> tuple[PerGraphTypes, list[str]]:
    """:func:`infer_types` of the model file at ``path`` (the form the worker runs).

    Examples
    --------
    >>> import tempfile, os, onnx
    >>> from explorer import zoo
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     onnx.save(zoo.build("mlp"), os.path.join(tmp, "m.onnx"))
    ...     infer_types_file(os.path.join(tmp, "m.onnx"))[0][()]["logits"]
    (('batch', 10), 1)
    """
    return infer_types(onnx.load(path, load_external_data=False))


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
    from . import worker

    try:  # the worker gets the weight-stripped copy: a few MB whatever the weights weigh
        return worker.run_on_model(
            infer_types_file, stripped_copy(model), step="shape inference", timeout=timeout
        )
    except (
        Exception
    ) as err:  # WorkerCrashed (signal_name), WorkerTimeout, WorkerOutOfMemory, or a Python error
        return _collect(model), [_failure_note(err)]


def infer_types_path(
    path: str, input_shapes: Mapping[str, Sequence[int]] | None = None
) -> tuple[PerGraphTypes, list[str]]:
    """:func:`infer_types` of a model file read here, with ``input_shapes`` fixed first.

    What the worker runs when it reads the model itself (:class:`BackgroundInference`),
    while the caller parses the same file.

    Examples
    --------
    >>> import tempfile, os, onnx
    >>> from explorer import zoo
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     onnx.save(zoo.build("mlp"), os.path.join(tmp, "m.onnx"))
    ...     infer_types_path(os.path.join(tmp, "m.onnx"), {"input": [3, 1, 28, 28]})[0][()]["logits"]
    ((3, 10), 1)
    """
    model = onnx.load(path, load_external_data=False)
    if input_shapes:
        from .load import fix_input_shapes

        fix_input_shapes(model, input_shapes, path)
    return infer_types(model)


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
    >>> import tempfile, os, onnx
    >>> from explorer import zoo
    >>> folder = tempfile.mkdtemp()
    >>> onnx.save(zoo.build("mlp"), os.path.join(folder, "m.onnx"))
    >>> job = BackgroundInference(os.path.join(folder, "m.onnx"))
    >>> types, notes = job.result(onnx.load(os.path.join(folder, "m.onnx")))
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
        from . import worker

        try:
            self._outcome = worker.run_on_model(
                infer_types_path, path, shapes, step="shape inference", timeout=timeout
            )
        except BaseException as err:  # reported to the caller by result()
            self._error = err

    def result(self, model: ModelProto) -> tuple[PerGraphTypes, list[str]]:
        """Wait for the worker; on failure, the types ``model`` declares and a note why."""
        self._thread.join()
        if self._outcome is not None:
            return self._outcome
        return _collect(model), [_failure_note(self._error)]


def _failure_note(err: BaseException | None) -> str:
    reason = getattr(err, "signal_name", None) or type(err).__name__
    return f"shape inference failed in the worker ({reason}); shapes are the ones declared in the model"

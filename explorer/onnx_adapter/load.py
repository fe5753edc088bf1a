"""Safe loading of ONNX models into a :class:`~explorer.core.graph.ModelGraph`.

:func:`load` accepts a path, ``bytes``, an ``onnx.ModelProto``, a built-in
sample (``"zoo:NAME"``) or a ``torch.nn.Module`` with example inputs. It never
writes to the input, refuses external-data locations that escape the model's
folder before reading anything, and turns every way a model can be broken into
a typed :class:`~explorer.core.errors.ModelLoadError` that names the file and the reason.

Examples
--------
>>> from explorer import load
>>> g = load("zoo:mlp", input_shapes={"input": [2, 1, 28, 28]})
>>> g.summary().inputs[0].shape
(2, 1, 28, 28)
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx
from google.protobuf.message import DecodeError
from onnx import ModelProto, TensorProto

from explorer.core.errors import (
    EmptyModelError,
    ExternalDataError,
    MissingDependencyError,
    ModelLoadError,
    ModelNotFoundError,
    ModelParseError,
    UnsupportedOpsetError,
)
from explorer.core.tensors import PROTOBUF_LIMIT, format_bytes
from explorer.isolation.io import check_model_file, open_model_file
from explorer.onnx_adapter.input_shapes import fix_input_shapes
from explorer.onnx_adapter.model_wire import in_model_file, read_model_lazily
from explorer.onnx_adapter.shape_inference import BackgroundInference, infer_types, infer_types_isolated
from explorer.onnx_adapter.weights import (
    LAZY_EXTERNAL_BYTES,
    STRIP_KEEP_BYTES,
    FileStamp,
    check_declared_sizes,
    check_external_data,
    check_stored_sizes,
    external_tensors,
    read_span,
)

if TYPE_CHECKING:  # the graph model (networkx) is imported by load(), not by importing this module
    from explorer.core.graph import ModelGraph

__all__ = ["load", "read_model", "external_tensors", "ZOO_PREFIX"]

ZOO_PREFIX = "zoo:"
"""Sources starting with this name a built-in sample model (see :mod:`explorer.zoo`)."""

Source = str | os.PathLike[str] | bytes | ModelProto | Any


def load(
    source: Source,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    external_data: bool = True,
    example_inputs: Any = None,
    constants_as_nodes: bool = False,
    shape_inference: bool = True,
    isolate: bool = True,
    model_path: str | os.PathLike[str] | None = None,
    while_inferring: Callable[[], Any] | None = None,
    name: str | None = None,
) -> ModelGraph:
    """Load an ONNX model into a ModelGraph.

    Parameters
    ----------
    source : path, bytes, onnx.ModelProto, str or torch.nn.Module
        A model file, its serialized bytes, a model object (copied, never
        modified), ``"zoo:NAME"`` for a built-in sample, or a PyTorch module
        (then ``example_inputs`` is required and the ``torch`` extra must be installed).
    input_shapes : mapping, optional
        Fixes input dimensions, e.g. ``{"x": [1, 3, 224, 224]}``.
    external_data : bool
        Make tensors stored in external files available: their locations and
        byte ranges are checked, small ones are read, and large ones (at least
        :data:`~explorer.onnx_adapter.weights.LAZY_EXTERNAL_BYTES`) stay in their files and are
        memory-mapped when something needs their values (statistics, digests,
        runtimes). With ``False`` the structure loads and weights keep their
        shapes but no values.
    example_inputs : tuple, optional
        Example inputs for exporting a ``torch.nn.Module``.
    constants_as_nodes : bool
        Draw initializers' consumers' ``Constant`` nodes as nodes instead of
        folding them into the nodes that read them.
    shape_inference : bool
        Run ONNX shape inference (with ONNX Runtime's symbolic shape inference
        as a fallback for what it leaves unknown).
    isolate : bool
        Run shape inference in the worker process (:mod:`explorer.isolation.worker`), so
        a crash in onnx's C++ code becomes a note instead of killing the
        kernel. ``False`` runs it in this process (faster for many tiny models).
        Either way inference sees a weight-stripped copy
        (:func:`~explorer.onnx_adapter.weights.stripped_copy`), so it costs the same for 8 MB
        and 3 GiB of weights.
    model_path : path, optional
        With a ``ModelProto`` source: the file it was read from. Workers then read
        that file instead of a re-serialized copy, and its external data resolves
        beside it.
    while_inferring : callable, optional
        Called once, with no arguments, after the graph is built and before
        ``load`` waits for the worker's shape inference: work that does not need
        the graph (imports, a view's set-up) overlaps the inference instead of
        following it. Called in any case, also when nothing is inferred in the
        background.
    name : str, optional
        What titles and messages call the model (the graph's ``source``). Default: the
        path, ``"zoo:NAME"``, or for a model made in memory (``ModelProto``, bytes) its
        graph's name (``"resnet18"`` for ``zoo.build("resnet18")``). The file a worker
        reads stays in ``model_path``, whatever the name.

    Returns
    -------
    ModelGraph

    Raises
    ------
    ModelLoadError
        Or one of its subclasses, naming the file and the problem.
    MissingDependencyError
        A torch module was given but the ``torch`` extra is not installed.

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:resnet18")
    >>> g.summary().ops["Conv"]
    20
    >>> from explorer import zoo
    >>> load(zoo.build("mlp")).source  # a model made in memory reads by its graph's name
    'mlp'
    """
    from explorer.onnx_adapter.graph_builder import apply_types, build_graph

    background = None
    if shape_inference and isolate and _is_model_file(source):
        # the worker parses the file and infers shapes on the other core while this process parses it
        background = BackgroundInference(os.fspath(source), input_shapes)
    model, label, base_dir = read_model(source, example_inputs=example_inputs, weights_in_file=external_data)
    file = Path(source).resolve() if isinstance(source, (str, os.PathLike)) and base_dir is not None else None
    if model_path is not None and isinstance(source, ModelProto):
        file = Path(model_path).resolve()
        base_dir, label = file.parent, str(model_path)
    if name:
        label = name
    _check_versions(model, label)
    externals = external_tensors(model)
    notes: list[str] = []
    weights_dir = None
    in_file = [t for t in externals if in_model_file(t, file)]
    if in_file:  # left in the model file by read_model: checked as external data is, read on demand
        check_external_data(in_file, base_dir, label)
        externals = [t for t in externals if not in_model_file(t, file)]
        weights_dir = base_dir
    lazy_file = FileStamp.of(file) if in_file and file is not None else None
    if externals:
        if external_data:
            if base_dir is None:
                raise ExternalDataError(
                    f"the model keeps {len(externals)} tensors in external files, but it was not "
                    "given as a path, so there is no folder to read them from; load it from its "
                    "file, or pass external_data=False to load the structure only",
                    path=label,
                )
            notes.extend(_attach_external_data(externals, base_dir, label))
            weights_dir = base_dir
        else:
            notes.append(f"{len(externals)} external tensors not loaded (external_data=False)")
            file = None  # a worker reading the file would read the weights the caller left out
    if input_shapes:
        fix_input_shapes(model, input_shapes, label)
        file = None  # the model now differs from the file
    types: dict[str, Any] = {}
    if shape_inference and background is None:
        types, inference_notes = infer_types_isolated(model) if isolate else infer_types(model)
        notes.extend(inference_notes)
    graph = build_graph(
        model, types=types, constants_as_nodes=constants_as_nodes, source=label, weights_dir=weights_dir
    )
    if while_inferring is not None:
        while_inferring()
    if background is not None:  # built while the worker inferred: now draw the inferred shapes
        types, inference_notes = background.result(model)
        apply_types(graph, types)
        notes.extend(inference_notes)
    graph.notes.extend(notes)
    graph.model_path = file
    graph.lazy_file = lazy_file
    if lazy_file is not None and file is None:
        # its input shapes were fixed: write now the file workers read (beside a copy of the weights),
        # so that every step, passes included, reads a file that holds the whole model
        from explorer.onnx_adapter.model_files import worker_source

        worker_source(graph)
    return graph


def _is_model_file(source: Source) -> bool:
    if isinstance(source, str) and source.startswith(ZOO_PREFIX):
        return False
    return isinstance(source, (str, os.PathLike)) and Path(source).is_file()


def _attach_external_data(externals: list[TensorProto], base_dir: Path, label: str) -> list[str]:
    """Check every external tensor, read the small ones into the model; large ones stay on disk."""
    spans = check_external_data(externals, base_dir, label)
    lazy = 0
    lazy_bytes = 0
    for tensor, span in zip(externals, spans, strict=True):
        if span.length >= LAZY_EXTERNAL_BYTES:
            lazy += 1
            lazy_bytes += span.length
            continue
        tensor.raw_data = read_span(span)
        del tensor.external_data[:]
        tensor.data_location = TensorProto.DEFAULT
    if not lazy:
        return []
    return [
        f"{lazy} external tensors ({format_bytes(lazy_bytes)}) stay in their files and are read on demand"
    ]


def read_model(
    source: Source, *, example_inputs: Any = None, weights_in_file: bool = False
) -> tuple[ModelProto, str, Path | None]:
    """Read a model from any supported source into a private ``ModelProto``.

    External data is *not* loaded here. With ``weights_in_file``, the large tensors of a
    model file stay in the file (:func:`explorer.onnx_adapter.model_wire.read_model_lazily`): they read
    as external data pointing into it, so this process holds the model's structure only.

    Returns
    -------
    model : onnx.ModelProto
        A copy the caller may change.
    label : str
        The source as named in messages: the path, ``"zoo:NAME"``, or for a model
        made in memory its graph's name (``"<ModelProto>"`` / ``"<bytes>"`` when it has none).
    base_dir : Path or None
        The folder external data is resolved against (``None`` when not from a file).

    Raises
    ------
    ModelNotFoundError
        The path is missing, or is a folder, a FIFO, a device or a socket (checked before
        anything opens it: :func:`explorer.isolation.io.check_model_file`).
    ModelLoadError
        Or another of its subclasses: the bytes are not a model, a tensor declares more
        values than the file (or the bytes given) could hold, or holds more or fewer values than
        its shape needs (:func:`~explorer.onnx_adapter.weights.check_stored_sizes`).

    Examples
    --------
    >>> model, label, base = read_model("zoo:mlp")
    >>> label, base is None
    ('zoo:mlp', True)
    >>> from explorer import zoo
    >>> read_model(zoo.build("resnet18"))[1]
    'resnet18'
    >>> import os
    >>> path = zoo.save("resnet18")
    >>> model = read_model(path, weights_in_file=True)[0]
    >>> model.ByteSize() < os.path.getsize(path) / 10, len(external_tensors(model)) > 0
    (True, True)
    """
    if isinstance(source, ModelProto):
        model = ModelProto()
        model.CopyFrom(source)
        label = _in_memory_label(model, "<ModelProto>")
        check_stored_sizes(model, label)
        return model, label, None
    if isinstance(source, (bytes, bytearray, memoryview)):
        model = _parse(bytes(source), "<bytes>")
        label = _in_memory_label(model, "<bytes>")
        check_declared_sizes(model, len(source), label)
        check_stored_sizes(model, label)
        return model, label, None
    if isinstance(source, str) and source.startswith(ZOO_PREFIX):
        from explorer import zoo

        name = source[len(ZOO_PREFIX) :]
        try:
            return zoo.build(name), source, None
        except zoo.UnknownModelError as err:
            raise ModelNotFoundError(str(err), path=source) from None
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        size = check_model_file(path).st_size  # a FIFO, a device, a folder: refused before anything opens it
        model = None
        if weights_in_file:
            # named by the resolved file, which lies in base_dir; tensors up to 64 KiB load (their values
            # are read to draw them, and shape inference reads them)
            model = read_model_lazily(path.resolve(), STRIP_KEEP_BYTES)
            if model is None or not model.HasField("graph") or model.ir_version <= 0:
                model = None
        if model is None:
            model = _parse(_read_file(path), str(path))
        check_declared_sizes(model, size, str(path))  # before anything trusts a shape the file cannot hold
        check_stored_sizes(model, str(path))  # values their shape disagrees with: ORT refuses, others misread
        return model, str(path), path.resolve().parent
    if _is_torch_module(source):
        return _export_torch(source, example_inputs), f"<torch {type(source).__name__}>", None
    raise TypeError(
        "load() takes a path, bytes, an onnx.ModelProto, 'zoo:NAME' or a torch.nn.Module, "
        f"not {type(source).__name__}"
    )


def _in_memory_label(model: ModelProto, fallback: str) -> str:
    """What a model with no file is called: its graph's name (as a zoo model or an exporter set it)."""
    return model.graph.name.strip() or fallback


def _read_file(path: Path) -> bytes:
    """The bytes of a model file, read only when it is a regular file that one protobuf message can hold."""
    with open_model_file(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size == 0:
            raise EmptyModelError("the file is empty (0 bytes)", path=path)
        if size > PROTOBUF_LIMIT:
            raise ModelParseError(
                f"not an ONNX model: the file is {format_bytes(size)}, larger than the 2 GiB one protobuf "
                "message can hold, and it does not parse as a model whose weights stay in the file "
                "(an ONNX model that large keeps its weights in external data files)",
                path=path,
            )
        try:
            data = handle.read(size)  # at most its length: a file that grows is not read without end
        except OSError as err:
            raise ModelLoadError(f"cannot read the file: {err.strerror or err}", path=path) from None
    if not data:
        raise EmptyModelError("the file is empty (0 bytes)", path=path)
    return data


def _parse(data: bytes, label: str) -> ModelProto:
    if not data:
        raise EmptyModelError("the model is empty (0 bytes)", path=label)
    model = ModelProto()
    try:
        model.ParseFromString(data)
    except DecodeError as err:
        if "MaxDepth" in str(err):
            raise ModelParseError(
                "the protobuf nests messages deeper than protobuf's limit of 100 levels "
                "(about 30 levels of If/Loop subgraphs); it cannot be parsed",
                path=label,
            ) from None
        raise ModelParseError(
            f"not a valid ONNX protobuf ({len(data):,} bytes; truncated or not a model): {err}",
            path=label,
        ) from None
    except RecursionError:
        raise ModelParseError("the protobuf is nested too deeply to parse", path=label) from None
    if not model.HasField("graph") or model.ir_version <= 0:
        missing = "no graph" if not model.HasField("graph") else "no IR version"
        raise ModelParseError(
            f"not an ONNX model: the {len(data):,} bytes parse as a protobuf but it has {missing} "
            "(random bytes, a truncated file, or another format)",
            path=label,
        )
    return model


def _check_versions(model: ModelProto, label: str) -> None:
    if model.ir_version > onnx.IR_VERSION:
        raise UnsupportedOpsetError(
            f"IR version {model.ir_version} is newer than the installed onnx {onnx.__version__} "
            f"knows (up to {onnx.IR_VERSION}); upgrade onnx",
            path=label,
        )
    known = {"": onnx.defs.onnx_opset_version(), "ai.onnx": onnx.defs.onnx_opset_version()}
    known["ai.onnx.ml"] = onnx.helper.VERSION_TABLE[-1][3]
    for opset in model.opset_import:
        limit = known.get(opset.domain)
        if limit is not None and opset.version > limit:
            raise UnsupportedOpsetError(
                f"opset {opset.version} of domain {opset.domain or 'ai.onnx'!r} is newer than the "
                f"installed onnx {onnx.__version__} knows (up to {limit}); upgrade onnx or convert "
                "the model to an older opset",
                path=label,
            )


def _is_torch_module(obj: Any) -> bool:
    return any(
        cls.__module__.startswith("torch.nn") and cls.__name__ == "Module" for cls in type(obj).__mro__
    )


def _export_torch(module: Any, example_inputs: Any) -> ModelProto:
    try:
        import torch
    except ImportError:
        raise MissingDependencyError(
            "exporting a PyTorch module needs PyTorch: pip install 'onnx-graph-explorer[torch]'"
        ) from None
    if example_inputs is None:
        raise TypeError("load(torch_module) needs example_inputs=(tensor, ...) to trace the module")
    args = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    with tempfile.TemporaryDirectory(prefix="onnx-explorer-export-") as tmp:
        target = Path(tmp) / "model.onnx"
        module.eval()
        try:  # not under no_grad: it sends nn.Transformer* down fused kernels the exporter cannot export
            with warnings.catch_warnings():
                # the TorchScript exporter is deprecated but names nodes by module path (/layer1/conv/Conv);
                # the dynamo exporter (the fallback below) keeps scopes in metadata, which we read too
                warnings.simplefilter("ignore")
                torch.onnx.export(module, args, str(target), dynamo=False)
        except Exception as first:  # the TorchScript exporter is deprecated; try the dynamo one
            try:
                torch.onnx.export(module, args, str(target), dynamo=True, external_data=False)
            except ImportError as err:
                raise MissingDependencyError(
                    f"exporting with torch.onnx needs {err.name or 'onnxscript'}: "
                    "pip install 'onnx-graph-explorer[torch]'"
                ) from None
            except Exception as second:
                raise ModelLoadError(
                    f"torch.onnx.export failed: {first}; the dynamo exporter also failed: {second}",
                    path=f"<torch {type(module).__name__}>",
                ) from None
        return onnx.load_model(str(target), load_external_data=True)

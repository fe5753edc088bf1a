"""(worker) Large weights as an IREE parameter archive (``.irpa``) beside the VM module, not inside it.

Inlined into the MLIR module, every weight is held by the importer, again by ``iree-compile``
(which keeps its own copy while it folds and packs them) and once more in the VM module: a
0.46 GiB model took 1.2 GiB inside ``iree-compile`` alone, and weights over 2 GiB could not go
through at all. With parameters, the importer writes each large initializer as a global whose
value is ``#stream.parameter.named<"model"::"name">`` (IREE's own ``iree-import-onnx
--externalize-params`` importer), the compiler never sees the bytes, and the runtime maps the
archive when the module is loaded.

- :func:`uses_parameters`: whether a model's weights go to an archive (from
  :data:`PARAMETERS_FROM_BYTES` on: small models keep the weights in the module, which the
  compiler can fold and pack ahead of time).
- :func:`encode_parameters` runs the encoder module ``iree-compile`` splits out
  (``--iree-parameter-encoder-output-file``: the weights' repacking for the CPU's data-tiled
  kernels, which would otherwise run when the module loads, holding every original and every
  packed copy at once) one weight at a time, reading the originals straight from the ONNX
  external-data file, and writes the packed weights, consolidated with the rest, to the archive:
  the module loads them mapped, ready to use. IREE's own ``iree-encode-parameters`` tool does
  this; its Python wheels do not ship it.
- :func:`write_parameter_archive` writes the original weights as an archive (where no encoder was
  made), copied file to file by IREE's runtime.
- :func:`parameters_path`: where the archive of a VM module lives (``model.vmfb`` ->
  ``model.irpa``); every loader (:func:`explorer.runtimes.iree_vm.load_iree_function`, the
  profiling tools) takes it from there, under both scopes (:data:`PARAMETER_SCOPES`).

Examples
--------
>>> parameters_path("/tmp/x/model.vmfb")
'/tmp/x/model.irpa'
>>> PARAMETER_SCOPE
'model'
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from onnx import ModelProto, TensorProto, numpy_helper

from explorer.core.errors import ExternalDataError

__all__ = [
    "PARAMETER_SCOPE",
    "ENCODED_SCOPE",
    "PARAMETER_SCOPES",
    "PARAMETERS_FROM_BYTES",
    "MIN_PARAMETER_ELEMENTS",
    "parameters_path",
    "uses_parameters",
    "encoder_flags",
    "parameter_index",
    "write_parameter_archive",
    "encode_parameters",
]

PARAMETER_SCOPE = "model"
"""The scope of every parameter the importer names (``--params-scope``'s default)."""

ENCODED_SCOPE = "encoded"
"""The scope of the encoder's output: the packed weights and the others, consolidated."""

PARAMETER_SCOPES = (PARAMETER_SCOPE, ENCODED_SCOPE)
"""The scopes an archive is offered under when a module is loaded (a module asks for one of them)."""

PARAMETERS_FROM_BYTES = 256 * 2**20
"""A model whose weights (external data included) reach this size is imported with parameters."""

MIN_PARAMETER_ELEMENTS = 4096
"""Initializers with fewer elements stay inline (shapes, biases, scales: constants the compiler
folds); larger ones become parameters."""


def parameters_path(vmfb: str | os.PathLike[str]) -> str:
    """The parameter archive that goes with a VM module: the same path, ending ``.irpa``.

    Examples
    --------
    >>> parameters_path("out/m.vmfb")
    'out/m.irpa'
    """
    return os.fspath(Path(vmfb).with_suffix(".irpa"))


def uses_parameters(model: ModelProto, from_bytes: int = PARAMETERS_FROM_BYTES) -> bool:
    """Whether :func:`explorer.lower.iree.iree_compile.import_onnx` puts this model's large weights in an
    archive: when they come to ``from_bytes`` or more (read from the structure; external data is
    not loaded).

    Examples
    --------
    >>> from explorer import zoo
    >>> uses_parameters(zoo.build("mlp")), uses_parameters(zoo.build("mlp"), from_bytes=0)
    (False, True)
    """
    from explorer.onnx_adapter.weights import model_bytes

    return model_bytes(model) >= from_bytes


def _inline_bytes(tensor: TensorProto) -> Any:
    """An in-memory tensor's bytes as a buffer IREE can copy (raw data without a further copy)."""
    if tensor.HasField("raw_data"):
        return np.frombuffer(tensor.raw_data, dtype=np.uint8)
    return np.ascontiguousarray(numpy_helper.to_array(tensor)).view(np.uint8).reshape(-1)


def encoder_flags(encoder_path: str | os.PathLike[str]) -> list[str]:
    """The ``iree-compile`` flags that split the weights' encoding out into a module of its own at
    ``encoder_path``, its output consolidated in scope :data:`ENCODED_SCOPE`.

    Examples
    --------
    >>> encoder_flags("/tmp/e.mlirbc")[1]
    '--iree-parameter-encoder-output-scope=encoded'
    """
    return [
        f"--iree-parameter-encoder-output-file={os.fspath(encoder_path)}",
        f"--iree-parameter-encoder-output-scope={ENCODED_SCOPE}",
    ]


@contextlib.contextmanager
def parameter_index(
    parameters: Sequence[tuple[str, TensorProto]],
    base_dir: str | os.PathLike[str] | None,
    label: str = "<model>",
) -> Iterator[Any]:
    """An IREE parameter index of ``parameters`` (archive key, initializer), reading nothing:
    external tensors are byte ranges of their (checked) files, opened for as long as the index is
    in use; in-memory tensors are their bytes.

    Examples
    --------
    >>> w = numpy_helper.from_array(np.arange(6, dtype=np.float32), "w")
    >>> with parameter_index([("w", w)], None) as index:
    ...     [(key, entry.length) for key, entry in index.items()]
    [('w', 24)]
    """
    import iree.runtime as rt

    from explorer.onnx_adapter.weights import external_span

    index = rt.ParameterIndex()
    handles: dict[Path, Any] = {}
    descriptors: list[int] = []
    try:
        for key, tensor in parameters:
            if tensor.data_location == TensorProto.EXTERNAL:
                if base_dir is None:
                    raise ExternalDataError(
                        f"tensor {tensor.name!r} is external and no folder was given", path=label
                    )
                span = external_span(tensor, Path(base_dir), label)
                if span.path not in handles:
                    descriptor = os.open(span.path, os.O_RDONLY)
                    descriptors.append(descriptor)
                    handles[span.path] = rt.FileHandle.wrap_fd(descriptor)
                index.add_from_file_handle(key, handles[span.path], span.length, span.offset)
            else:
                index.add_buffer(key, _inline_bytes(tensor))
        yield index
    finally:
        del index, handles
        for descriptor in descriptors:
            os.close(descriptor)


def write_parameter_archive(
    parameters: Sequence[tuple[str, TensorProto]],
    base_dir: str | os.PathLike[str] | None,
    out_path: str | os.PathLike[str],
    label: str = "<model>",
) -> int:
    """Write ``parameters`` (archive key, initializer) into an IREE parameter archive at ``out_path``,
    copied by IREE's runtime from the files (:func:`parameter_index`).

    Returns
    -------
    int
        The bytes of parameter data written.

    Examples
    --------
    >>> import os, tempfile
    >>> import iree.runtime as rt
    >>> w = numpy_helper.from_array(np.arange(6, dtype=np.float32), "w")
    >>> out = os.path.join(tempfile.mkdtemp(), "m.irpa")
    >>> write_parameter_archive([("w", w)], None, out)
    24
    >>> index = rt.ParameterIndex()
    >>> index.load(out)
    >>> [key for key, _ in index.items()]
    ['w']
    """
    with parameter_index(parameters, base_dir, label) as index:
        written = sum(entry.length for _, entry in index.items())
        index.create_archive_file(os.fspath(out_path))
    return written


_INDICES = "__encode_parameter_indices_"


def _text(values: Any, position: int) -> str:
    """A string (a VM byte buffer) of a VM list."""
    import iree.runtime as rt

    return bytes(memoryview(values.get_as_object(position, rt.VmBuffer))).decode("utf-8")


def _output_entries(indices: Any) -> dict[str, list[tuple[str, int]]]:
    """The encoder's ``indices`` result, as scope -> [(key, length)] of its data entries (splats,
    patterns the archive needs no storage for, are refused: none is made here)."""
    scopes: dict[str, list[tuple[str, int]]] = {}
    for s in range(indices.size):
        scope = indices.get_as_list(s)
        entries = scope.get_as_list(1)
        found = scopes.setdefault(_text(scope, 0), [])
        for e in range(entries.size):
            entry = entries.get_as_list(e)
            if int(entry.get_variant(0)) != 1:
                raise RuntimeError(
                    "the IREE encoder asked for a splat output parameter, which is not supported here"
                )
            found.append((_text(entry, 1), int(entry.get_variant(3))))
    return scopes


def encode_parameters(
    encoder_vmfb: str | os.PathLike[str],
    parameters: Sequence[tuple[str, TensorProto]],
    base_dir: str | os.PathLike[str] | None,
    out_path: str | os.PathLike[str],
    label: str = "<model>",
) -> int:
    """Run an encoder module (``iree-compile --iree-parameter-encoder-output-file``, compiled) on the
    original weights and write what it makes, scope :data:`ENCODED_SCOPE`, to the archive ``out_path``.

    The encoder takes one weight at a time (read from its file into a transient buffer, encoded,
    written to the archive with ``pwrite``), so the memory it needs is a few weights, not all of
    them; it runs on IREE's single-threaded ``local-sync`` device, which leaves the size of the
    process's ``local-task`` thread pool (:func:`explorer.runtimes.iree_vm.iree_driver`) unset.

    Parameters
    ----------
    encoder_vmfb : path
        The compiled encoder module.
    parameters : sequence of (str, onnx.TensorProto)
        The original weights by archive key (scope :data:`PARAMETER_SCOPE`), as the importer named them.
    base_dir : path or None
        The model's folder, which external data resolves against.
    out_path : path
        The archive to write.
    label : str
        The model's name in error messages.

    Returns
    -------
    int
        The bytes of parameter data in the archive.

    Examples
    --------
    >>> import os, tempfile
    >>> from explorer import zoo
    >>> from explorer.onnx_adapter.files import save_model
    >>> from explorer.lower.iree.iree_compile import compile_mlir, import_onnx
    >>> folder = tempfile.mkdtemp()
    >>> path, module, encoder = (os.path.join(folder, n) for n in ("m.onnx", "m.mlirbc", "e.mlirbc"))
    >>> save_model(zoo.build("mlp"), path)
    >>> named = import_onnx(path, None, module, parameters_from=0)["parameters"]
    >>> flags = ["--iree-opt-data-tiling", *encoder_flags(encoder)]
    >>> _ = compile_mlir(module, os.path.join(folder, "m.vmfb"), extra_flags=flags)
    >>> _ = compile_mlir(encoder, os.path.join(folder, "e.vmfb"))
    >>> encode_parameters(os.path.join(folder, "e.vmfb"), named, folder, os.path.join(folder, "m.irpa")) > 0
    True
    """
    import iree.runtime as rt

    config = rt.Config("local-sync")
    instance = config.vm_instance
    encoder = rt.VmModule.mmap(instance, os.fspath(encoder_vmfb))
    targets = [n.removeprefix(_INDICES) for n in encoder.function_names if n.startswith(_INDICES)]
    if not targets:
        raise RuntimeError(f"{os.fspath(encoder_vmfb)} is not an IREE parameter encoder module")
    target = "all" if "all" in targets else targets[0]
    functions = {kind: f"__encode_parameter_{kind}_{target}" for kind in ("indices", "steps")} | {
        "encode": f"__encode_parameters_{target}"
    }
    with parameter_index(parameters, base_dir, label) as originals:
        inputs = originals.create_provider(scope=PARAMETER_SCOPE)
        context = rt.SystemContext(
            vm_modules=[rt.create_io_parameters_module(instance, inputs), encoder], config=config
        )
        indices = rt.VmVariantList(1)
        context.vm_context.invoke(encoder.lookup_function(functions["indices"]), rt.VmVariantList(0), indices)
        entries = _output_entries(indices.get_as_list(0)).get(ENCODED_SCOPE, [])
        if not entries:
            raise RuntimeError(f"the IREE encoder makes nothing in scope {ENCODED_SCOPE!r}")
        with tempfile.TemporaryDirectory(dir=Path(out_path).parent) as scratch:
            layout = rt.ParameterIndex()  # the archive's entries, zeros (a sparse file) until encoded
            zeros = os.path.join(scratch, "zeros")
            with open(zeros, "wb") as handle:
                handle.truncate(max(length for _, length in entries))
            descriptor = os.open(zeros, os.O_RDONLY)
            try:
                for key, length in entries:
                    layout.add_from_file_handle(key, rt.FileHandle.wrap_fd(descriptor), length)
                layout.create_archive_file(os.fspath(out_path))
            finally:
                os.close(descriptor)
        writable = os.open(os.fspath(out_path), os.O_RDWR)
        try:
            output = rt.ParameterIndex()
            output.load_from_file_handle(
                rt.FileHandle.wrap_fd(writable, readable=True, writable=True), "irpa"
            )
            module = rt.create_io_parameters_module(
                instance,
                originals.create_provider(scope=PARAMETER_SCOPE),
                output.create_provider(scope=ENCODED_SCOPE),
            )
            context = rt.SystemContext(vm_modules=[module, encoder], config=config)
            steps = rt.VmVariantList(1)
            context.vm_context.invoke(encoder.lookup_function(functions["steps"]), rt.VmVariantList(0), steps)
            semaphore = config.device.create_semaphore(0)
            done = rt.HalFence.create_at(semaphore, 1)
            arguments = rt.VmVariantList(3)
            arguments.push_list(steps.get_as_list(0))
            arguments.push_ref(rt.HalFence.create_at(semaphore, 0))  # nothing to wait for
            arguments.push_ref(done)
            context.vm_context.invoke(
                encoder.lookup_function(functions["encode"]), arguments, rt.VmVariantList(0)
            )
            done.wait()
            del context, module, output
        finally:
            os.close(writable)
    return sum(length for _, length in entries)

"""(worker) IREE's ONNX importer and compiler: an ONNX file into MLIR, a VM module, and snapshots.

Everything here runs in the worker (:mod:`explorer.isolation.worker`): the importer uses the
MLIR Python bindings in-process, and ``iree-compile`` runs as a child of the worker, so a crash
of either never reaches the notebook's kernel, and stopping the worker stops the compiler.

- :func:`import_onnx` writes the model's torch-dialect MLIR (one ``torch.operator "onnx.Conv"``
  per node, located by the node's name, so every later op can be traced back to it). The model
  is converted to opset 17 first when older (IREE's ONNX lowering legalizes BatchNormalization
  and others only at newer opsets), its inputs are given fixed shapes, and ONNX shape
  inference runs with data propagation, as IREE's own ``iree-import-onnx`` does.
- :func:`compile_mlir` runs ``iree-compile`` for a target (:data:`TARGETS`), optionally writing
  the module after every compilation phase (``--dump-compilation-phases-to``) or after every
  module-level pass that changed it (``--mlir-print-ir-tree-dir``), weights elided; it reports
  each phase as its snapshot appears. A failure becomes a :class:`LoweringError` naming the
  phase (and the pass, where IREE says), the op and its ONNX node.
- :func:`build_vmfb` does both for a runtime: the VM module (``.vmfb``) IREE's runtime loads.

Examples
--------
>>> import tempfile, os
>>> from explorer import zoo
>>> from explorer.onnx_adapter.files import save_model
>>> folder = tempfile.mkdtemp()
>>> path = os.path.join(folder, "mlp.onnx")
>>> save_model(zoo.build("mlp"), path)
>>> out = build_vmfb(path, None, os.path.join(folder, "mlp.vmfb"))
>>> out["inputs"], os.path.getsize(out["vmfb"]) > 0
({'input': [1, 1, 28, 28]}, True)
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from explorer.core.errors import LoweringError
from explorer.isolation import worker
from explorer.lower.iree.iree_parameters import (
    MIN_PARAMETER_ELEMENTS,
    PARAMETER_SCOPE,
    PARAMETERS_FROM_BYTES,
    encode_parameters,
    encoder_flags,
    parameters_path,
    uses_parameters,
    write_parameter_archive,
)
from explorer.lower.rewrites import NO_CONVERSION, UNTYPED

__all__ = [
    "PHASES",
    "TARGETS",
    "IMPORT_OPSET",
    "CPU_FLAGS",
    "ELIDE_FLAGS",
    "target_flags",
    "import_onnx",
    "compile_mlir",
    "build_vmfb",
    "elided_text",
    "compiler_version",
    "module_sections",
    "lower_iree",
]

PHASES = (
    "input",
    "abi",
    "preprocessing",
    "global-optimization",
    "dispatch-creation",
    "flow",
    "stream",
    "executable-sources",
    "executable-configurations",
    "executable-targets",
    "hal",
    "vm",
)
"""The phases of ``iree-compile`` (3.13) that ``--dump-compilation-phases-to`` writes, in order."""

TARGETS = {
    "llvm-cpu": (
        "--iree-hal-target-device=local",
        "--iree-hal-local-target-device-backends=llvm-cpu",
    ),
}
"""Compiler targets by name -> their ``iree-compile`` flags (the CPU is added by :func:`target_flags`)."""

CPU_FLAGS = ("--iree-opt-data-tiling", "--iree-global-opt-use-im2col-for-convs=true")
"""What the runtime compiles with on a CPU beyond ``iree-compile``'s defaults: data tiling (packed
operands for matmuls) and convolutions as im2col + matmul. On 2 cores here ResNet-18 ran 86 -> 38 ms
and MobileNetV2 27 -> 16 ms with them (docs/performance.md); the lowering view keeps the defaults."""

IMPORT_OPSET = 17
"""Models of an older opset are converted to this one before import (IREE legalizes more at 17)."""

ELIDE_FLAGS = ("--mlir-elide-elementsattrs-if-larger=16", "--mlir-elide-resource-strings-if-larger=64")
"""Keep dumps small: weights printed as ``dense_resource<__elided__>`` (still parseable)."""

_PRINT_LIMITS = {"large_elements_limit": 16, "large_resource_limit": 64}


def target_flags(target: str = "llvm-cpu", cpu: str = "host") -> list[str]:
    """The ``iree-compile`` flags of a target (:data:`TARGETS`) for a CPU (``host``: this one).

    Examples
    --------
    >>> target_flags()[-1]
    '--iree-llvmcpu-target-cpu=host'
    """
    if target not in TARGETS:
        from explorer.core.errors import UsageError

        raise UsageError(f"no IREE target {target!r}: the targets are {', '.join(TARGETS)}")
    return [*TARGETS[target], f"--iree-llvmcpu-target-cpu={cpu}"]


def compiler_version() -> str:
    """The installed IREE compiler's version (``3.13.0rc...``).

    Examples
    --------
    >>> compiler_version().startswith("3.")
    True
    """
    from iree.compiler import version

    return str(version.VERSION)


def elided_text(module: Any) -> str:
    """An MLIR module's text with locations and its weights elided (what snapshots keep).

    Examples
    --------
    >>> from iree.compiler import ir
    >>> with ir.Context():
    ...     m = ir.Module.parse("func.func @f() -> tensor<64xf32> {"
    ...         "%c = arith.constant dense<1.0> : tensor<64xf32> return %c : tensor<64xf32> }")
    ...     "dense<1.000000e+00>" in elided_text(m)
    True
    """
    return module.operation.get_asm(enable_debug_info=True, assume_verified=True, **_PRINT_LIMITS)


def _load_for_import(
    path: str, input_shapes: Mapping[str, Sequence[int]] | None, parameters_from: int | None = None
) -> tuple[Any, dict, bool]:
    """The model ready for IREE's importer: opset, fixed shapes, inferred types; and whether its
    large weights go to a parameter archive (when they reach ``parameters_from`` bytes; None: never),
    in which case only the small external tensors are read (the archive copies the others file to
    file)."""
    import onnx

    from explorer.onnx_adapter.input_shapes import fix_input_shapes
    from explorer.onnx_adapter.inputs import concrete_input_shapes
    from explorer.onnx_adapter.weights import external_tensors

    model = onnx.load(path, load_external_data=False)
    parameters = parameters_from is not None and uses_parameters(model, parameters_from)
    external = bool(external_tensors(model))  # inferred on the structure alone, the weights read once after
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), IMPORT_OPSET)
    if opset < IMPORT_OPSET and external:  # the converter may rewrite a weight: it gets them all
        onnx.load_external_data_for_model(model, os.path.dirname(os.path.abspath(path)))
        external = False
    if opset < IMPORT_OPSET:
        try:
            model = onnx.version_converter.convert_version(model, IMPORT_OPSET)
        except Exception as err:  # the model's: an op the converter cannot move
            raise LoweringError(
                f"{type(err).__name__}: {err}".strip(),
                pass_name=f"ONNX version conversion {opset} -> {IMPORT_OPSET}",
                compiler="IREE",
                fix=f"export the model at opset {IMPORT_OPSET} or newer",
            ) from None
    shapes = concrete_input_shapes(model, input_shapes)
    fix_input_shapes(model, shapes, path, allow_empty=True)  # a decoder's prompt: a past of 0
    try:
        model = onnx.shape_inference.infer_shapes(model, data_prop=True)
        if external and parameters:  # only what stays inline; the archive takes the rest from the file
            _load_small_external(model, os.path.dirname(os.path.abspath(path)))
        elif external:
            onnx.load_external_data_for_model(model, os.path.dirname(os.path.abspath(path)))
    except ValueError:  # over the protobuf limit: infer on the file, as iree-import-onnx does
        with tempfile.TemporaryDirectory() as folder:
            staged = os.path.join(folder, "model.onnx")
            onnx.save(model, staged, save_as_external_data=True)
            onnx.shape_inference.infer_shapes_path(staged, staged, data_prop=True)
            model = onnx.load(staged)
    return model, shapes, parameters


def _load_small_external(model: Any, base_dir: str) -> None:
    """Read into the model the external tensors that stay inline (under :data:`MIN_PARAMETER_ELEMENTS`)."""
    import math

    from explorer.onnx_adapter.weights import external_span, external_tensors, read_span

    for tensor in external_tensors(model):
        if math.prod(tensor.dims) < MIN_PARAMETER_ELEMENTS:
            tensor.raw_data = read_span(external_span(tensor, Path(base_dir)))
            tensor.data_location = tensor.DEFAULT
            del tensor.external_data[:]


def import_onnx(
    path: str,
    input_shapes: Mapping[str, Sequence[int]] | None,
    out_path: str,
    parameters_from: int | None = PARAMETERS_FROM_BYTES,
) -> dict[str, Any]:
    """Import an ONNX file into IREE's torch dialect and write the module to ``out_path`` as MLIR
    bytecode (``iree-compile`` reads it; the weights stay bytes, not hex text twice their size).

    The weights go inside the module, unless they reach ``parameters_from`` bytes
    (:data:`~explorer.lower.iree.iree_parameters.PARAMETERS_FROM_BYTES`; None: never): then every
    initializer of :data:`~explorer.lower.iree.iree_parameters.MIN_PARAMETER_ELEMENTS` or more becomes
    a parameter of scope ``model`` (:mod:`explorer.lower.iree.iree_parameters`), named in the module and
    never read here: the compiler does not need the values, and :func:`build_vmfb` writes them for
    the runtime.

    Returns
    -------
    dict
        ``inputs`` (the fixed input shapes), ``seconds``, ``text``: the module with its
        weights elided and its locations (the ONNX node names), and ``parameters``: the
        (archive key, initializer) pairs the module names (empty when the weights are inside it).

    Raises
    ------
    LoweringError
        The importer refused the model (``pass_name`` "ONNX import"), or the opset conversion failed.

    Examples
    --------
    >>> import tempfile, os
    >>> from explorer import zoo
    >>> from explorer.onnx_adapter.files import save_model
    >>> folder = tempfile.mkdtemp()
    >>> save_model(zoo.build("mlp"), os.path.join(folder, "m.onnx"))
    >>> out = import_onnx(os.path.join(folder, "m.onnx"), None, os.path.join(folder, "m.mlirbc"))
    >>> 'torch.operator "onnx.Gemm"' in out["text"], out["parameters"]
    (True, [])
    >>> named = import_onnx(os.path.join(folder, "m.onnx"), None, os.path.join(folder, "p.mlirbc"), 0)
    >>> [key for key, _ in named["parameters"]]
    ['fc1.weight', 'fc2.weight']
    """
    from iree.compiler import ir
    from iree.compiler.extras import onnx_importer

    from explorer.isolation.process_memory import release_freed_memory

    started = time.perf_counter()
    model, shapes, parameters = _load_for_import(path, input_shapes, parameters_from)
    context = ir.Context()
    try:
        info = onnx_importer.ModelInfo(model)
        module = info.create_module(context=context).operation
        if parameters:
            importer = _parameter_importer(info, module)
        else:
            importer = onnx_importer.NodeImporter.define_function(info.main_graph, module)
        importer.import_all()
        module.verify()
    except (onnx_importer.OnnxImportError, ir.MLIRError, ValueError, KeyError) as err:
        raise LoweringError(
            f"{type(err).__name__}: {err}".strip(), pass_name="ONNX import", compiler="IREE"
        ) from None
    text = module.get_asm(enable_debug_info=True, assume_verified=True, **_PRINT_LIMITS)
    named = []
    if parameters:  # the initializers the module names (their values stay where they are)
        initializers = info.main_graph.initializer_map
        named = [(key, initializers[name]) for name, key in importer.globals]
    del importer, info, model  # the ONNX weights: the module holds its own copy now
    with open(out_path, "wb") as handle:  # bytecode: the weights as bytes, not as hex text twice their size
        module.write_bytecode(handle)
    del module, context
    release_freed_memory()  # before iree-compile starts beside this process
    return {
        "inputs": shapes,
        "seconds": time.perf_counter() - started,
        "text": text,
        "parameters": named,
    }


def _parameter_importer(info: Any, module: Any) -> Any:
    """IREE's own externalising importer (``iree-import-onnx --externalize-params``'s), set to our scope
    and threshold; it only names the parameters (the archive is written by us, from the file)."""
    from iree.compiler.tools.import_onnx.importer_externalization_overrides import IREENodeImporter, ParamData

    settings = ParamData(
        param_bit_threshold=None,
        num_elements_threshold=MIN_PARAMETER_ELEMENTS,
        params_scope=PARAMETER_SCOPE,
        data_dir="",
        param_path="",
        input_index_threshold=None,
    )
    return IREENodeImporter.define_function(info.main_graph, module, settings)


def compile_mlir(
    mlir_path: str,
    out_path: str,
    *,
    target: str = "llvm-cpu",
    cpu: str = "host",
    phases_dir: str | None = None,
    passes_dir: str | None = None,
    extra_flags: Sequence[str] = (),
) -> dict[str, Any]:
    """Run ``iree-compile`` on a module; optionally dump it after each phase or each changed pass.

    Parameters
    ----------
    mlir_path, out_path : str
        The module, and where the VM module goes.
    target, cpu : str
        See :func:`target_flags`.
    phases_dir : str, optional
        Write ``module.<N>.<phase>.mlir`` after each phase there (weights elided); each phase
        is reported (:func:`~explorer.isolation.worker.report`) as its file appears. Without it
        the phases are written to a scratch folder all the same (a failure names its phase).
    passes_dir : str, optional
        Write the module after every module-level pass that changed it there
        (``--mlir-print-ir-tree-dir``; nested passes dump only their op, in subfolders).
    extra_flags : sequence of str
        More ``iree-compile`` flags.

    Returns
    -------
    dict
        ``seconds`` (the whole compile), ``phase_seconds`` (phase -> seconds from the previous
        phase's dump to its own), ``flags``.

    Raises
    ------
    LoweringError
        The compiler failed: the phase, the pass (where the diagnostics name it), the op and its
        ONNX node (its location), in IREE's own words.

    Examples
    --------
    >>> import tempfile, os
    >>> from explorer import zoo
    >>> from explorer.onnx_adapter.files import save_model
    >>> folder = tempfile.mkdtemp()
    >>> save_model(zoo.build("mlp"), os.path.join(folder, "m.onnx"))
    >>> _ = import_onnx(os.path.join(folder, "m.onnx"), None, os.path.join(folder, "m.mlirbc"))
    >>> out = compile_mlir(os.path.join(folder, "m.mlirbc"), os.path.join(folder, "m.vmfb"))
    >>> list(out["phase_seconds"])[:2], os.path.getsize(os.path.join(folder, "m.vmfb")) > 0
    (['input', 'abi'], True)
    """
    if phases_dir is None:
        with tempfile.TemporaryDirectory() as scratch:
            return compile_mlir(
                mlir_path,
                out_path,
                target=target,
                cpu=cpu,
                phases_dir=scratch,
                passes_dir=passes_dir,
                extra_flags=extra_flags,
            )
    from iree.compiler.tools import binaries

    flags = [*target_flags(target, cpu), "--mlir-print-debuginfo", *ELIDE_FLAGS]
    flags.append(f"--dump-compilation-phases-to={phases_dir}")
    if passes_dir:
        flags += [
            "--mlir-print-ir-after-change",
            "--mlir-print-ir-after-all",
            f"--mlir-print-ir-tree-dir={passes_dir}",
        ]
    else:  # (printing after a failure replaces printing after every pass)
        flags.append("--mlir-print-ir-after-failure")
    flags += list(extra_flags)
    command = [binaries.find_tool("iree-compile"), mlir_path, *flags, "-o", out_path]
    started = time.perf_counter()
    seen: dict[str, float] = {}
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            while process.poll() is None:
                time.sleep(0.05)
                _note_phases(phases_dir, seen, started)
        finally:
            if process.poll() is None:  # stopped from outside: never leave the compiler running
                process.kill()
                process.wait()
        _note_phases(phases_dir, seen, started)
        stderr.seek(0)
        diagnostics = stderr.read().decode("utf-8", "replace")
    if process.returncode < 0:  # killed by a signal: a crash of the compiler, not a diagnostic
        import signal

        name = (
            signal.Signals(-process.returncode).name if -process.returncode in signal.valid_signals() else ""
        )
        phase = next((p for p in PHASES if p not in seen), "output")
        raise LoweringError(
            f"iree-compile crashed with signal {-process.returncode} {name}".strip(),
            pass_name=f"phase {phase}",
            compiler="IREE",
        )
    if process.returncode != 0:
        raise _compile_error(diagnostics, process.returncode, [p for p in PHASES if p in seen])
    elapsed = time.perf_counter() - started
    finished = [seen[p] for p in PHASES if p in seen]
    phase_seconds = {
        phase: seen[phase] - (finished[i - 1] if i else 0.0)
        for i, phase in enumerate(p for p in PHASES if p in seen)
    }
    return {"seconds": elapsed, "phase_seconds": phase_seconds, "flags": flags}


_PHASE_FILE = re.compile(r"^[^.]+\.(\d+)\.([\w-]+)\.mlir$")


def _note_phases(folder: str, seen: dict[str, float], started: float) -> None:
    """Record (and report) each phase whose dump has appeared since the last look."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in sorted(names):
        found = _PHASE_FILE.match(name)
        if found is None or found.group(2) in seen:
            continue
        phase = found.group(2)
        seen[phase] = time.perf_counter() - started
        done = PHASES.index(phase) + 1 if phase in PHASES else len(seen)
        worker.report(done / (len(PHASES) + 1), f"IREE phase {phase} done ({done}/{len(PHASES)})")


_FAILED_PASS = re.compile(r"IR Dump After (\S+) Failed")
_ERROR_LINE = re.compile(r'error: (?:loc\("(?P<node>[^"]*)"\): )?(?P<message>.*)')
_OPERATION = re.compile(r'"?(?P<op>[a-z_]+\.[\w.]+)"?\(')
_TORCH_OP = re.compile(r'name = "onnx\.(\w+)"')


def _compile_error(diagnostics: str, code: int, phases_done: list[str]) -> LoweringError:
    """The compiler's diagnostics as a LoweringError: phase, pass, op, ONNX node, message."""
    failed_pass = _FAILED_PASS.search(diagnostics)
    error = _ERROR_LINE.search(diagnostics)
    message = error.group("message").strip() if error else _last_error_text(diagnostics, code)
    message = message.split(": %", 1)[0].split(' loc("', 1)[0]  # without the op IREE prints after it
    node = error.group("node") if error and error.group("node") else None
    phase = PHASES[len(phases_done)] if len(phases_done) < len(PHASES) else "output"
    where = f"phase {phase}"
    if failed_pass is not None:
        where += f", pass {failed_pass.group(1)}"
    op = None
    current = diagnostics.split("see current operation:", 1)
    if len(current) == 2:
        onnx_op = _TORCH_OP.search(current[1][:400])
        found = _OPERATION.search(current[1][:400])
        op = f"onnx.{onnx_op.group(1)}" if onnx_op else (found.group("op") if found else None)
    fix = None
    if "failed to legalize operation 'torch.operator'" in message:
        if len(current) == 2 and "-> !torch.none" in current[1].split("\n", 1)[0]:
            from explorer.lower.rewrites import FIX

            message += f" ({UNTYPED}, and IREE lowers only typed ops)"
            fix = FIX
        else:
            fix = NO_CONVERSION
    return LoweringError(
        message[:500],
        pass_name=where,
        binding=op,
        onnx_nodes=(node,) if node else (),
        fix=fix,
        compiler="IREE",
    )


def _last_error_text(diagnostics: str, code: int) -> str:
    lines = [line for line in diagnostics.splitlines() if "error" in line.lower()]
    if lines:
        return lines[0].strip()
    tail = diagnostics.strip().splitlines()[-1:] or [f"iree-compile exited with code {code}"]
    return tail[0]


def build_vmfb(
    path: str,
    input_shapes: Mapping[str, Sequence[int]] | None,
    out_path: str,
    *,
    target: str = "llvm-cpu",
    cpu: str = "host",
    extra_flags: Sequence[str] = (),
    parameters_from: int = PARAMETERS_FROM_BYTES,
) -> dict[str, Any]:
    """Import an ONNX file and compile it into an IREE VM module at ``out_path`` (the runtime's input);
    weights of ``parameters_from`` bytes or more go to a parameter archive beside it (:func:`import_onnx`).

    Returns
    -------
    dict
        ``vmfb`` (the path), ``parameters`` (the parameter archive beside it,
        :func:`~explorer.lower.iree.iree_parameters.parameters_path`, or None when the weights are inside
        the module), ``inputs`` (fixed input shapes), ``import_seconds``, ``compile_seconds``,
        ``function`` (the entry point's name: the ONNX graph's).

    Raises
    ------
    LoweringError
        As :func:`import_onnx` and :func:`compile_mlir`.

    Examples
    --------
    >>> import tempfile, os
    >>> from explorer import zoo
    >>> from explorer.onnx_adapter.files import save_model
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "m.onnx")
    >>> save_model(zoo.build("mlp"), path)
    >>> built = build_vmfb(path, {"input": [2, 1, 28, 28]}, os.path.join(folder, "m.vmfb"))
    >>> built["function"], built["inputs"]
    ('mlp', {'input': [2, 1, 28, 28]})
    """
    folder = Path(out_path).parent
    archive = parameters_path(out_path)
    if os.path.lexists(archive):  # an earlier build's: never loaded with this module
        os.unlink(archive)
    with tempfile.TemporaryDirectory(dir=folder) as scratch:
        mlir_path = os.path.join(scratch, "model.mlirbc")
        imported = import_onnx(path, input_shapes, mlir_path, parameters_from)
        named = imported["parameters"]
        encoder = os.path.join(scratch, "encoder.mlirbc")
        flags = [*extra_flags, *(encoder_flags(encoder) if named else [])]
        compiled = compile_mlir(mlir_path, out_path, target=target, cpu=cpu, extra_flags=flags)
        if named:
            base_dir = os.path.dirname(os.path.abspath(path))
            worker.report(None, "IREE: writing the weights as parameters")
            if os.path.exists(encoder):  # packed ahead of time, one weight at a time
                compile_mlir(encoder, os.path.join(scratch, "encoder.vmfb"), target=target, cpu=cpu)
                encode_parameters(os.path.join(scratch, "encoder.vmfb"), named, base_dir, archive, path)
            else:
                write_parameter_archive(named, base_dir, archive, path)
    function = re.search(r"func\.func @\"?([^\"(\s]+)", imported["text"])
    return {
        "vmfb": out_path,
        "parameters": archive if named else None,
        "inputs": imported["inputs"],
        "import_seconds": imported["seconds"],
        "compile_seconds": compiled["seconds"],
        "function": function.group(1) if function else "main",
    }


def module_sections(text: Any) -> dict[str, str]:
    """An MLIR module's top-level ops, each as text without locations: the functions and the
    executables the compiler outlines kernels into (``util.func @main$async``, ``flow.executable
    @main$async_dispatch_0``), by symbol; ops without one (``util.initializer``) numbered by kind.
    Weights elided. ``text`` may be a module already parsed
    (:func:`~explorer.lower.iree.mlir_graph_data.parse_module`).

    Examples
    --------
    >>> sorted(module_sections("func.func @f() { return }  func.func @g() { return }"))
    ['func.func @f', 'func.func @g']
    """
    from explorer.lower.iree.mlir_graph_data import parse_module

    if isinstance(text, str):
        context, module = parse_module(text)
        with context:
            return module_sections(module)
    sections: dict[str, str] = {}
    for op in text.body.operations:
        operation = op.operation
        symbol = operation.attributes.get("sym_name", None)
        if symbol is not None:
            name = f"{operation.name} @{getattr(symbol, 'value', str(symbol))}"
        else:
            name = f"{operation.name} #{sum(1 for n in sections if n.startswith(operation.name + ' #'))}"
        sections[name] = operation.get_asm(assume_verified=True, **_PRINT_LIMITS)
    return sections


def _snapshot(text: str, onnx_nodes: Sequence[str]) -> dict[str, Any]:
    from explorer.lower.iree.mlir_graph_data import dialects_in_text, mlir_graph_data, parse_module

    try:
        context, module = parse_module(text)  # once: the graph and the sections both read it
    except ValueError as err:  # a dump MLIR's printer wrote but its parser refuses (vm after conversion)
        counted = dialects_in_text(text)
        return {"graph": None, "dialects": counted, "sections": {"module": text}, "error": str(err)[:300]}
    with context:
        graph = mlir_graph_data(module, onnx_nodes=onnx_nodes)
        return {
            "graph": graph,
            "dialects": graph["dialects"],
            "sections": module_sections(module),
            "error": None,
        }


_PASS_FILE = re.compile(r"^(\d+)_([\w.-]+)\.mlir$")


def _pass_dumps(folder: Path) -> list[tuple[str, Path, int]]:
    """Module-level pass dumps of ``--mlir-print-ir-tree-dir``, in order: (pass, file, nested dumps)."""
    top = folder / "builtin_module_no-symbol-name"
    if not top.is_dir():
        return []
    nested: dict[int, int] = {}
    for path in top.rglob("*.mlir"):
        if path.parent != top:
            nested[int(path.name.split("_", 1)[0])] = nested.get(int(path.name.split("_", 1)[0]), 0) + 1
    dumps = []
    for path in top.glob("*.mlir"):
        found = _PASS_FILE.match(path.name)
        if found is not None:
            dumps.append((int(found.group(1)), found.group(2), path))
    return [(name, path, nested.get(number, 0)) for number, name, path in sorted(dumps)]


def lower_iree(
    path: str,
    input_shapes: Mapping[str, Sequence[int]] | None,
    onnx_nodes: Sequence[str] = (),
    *,
    target: str = "llvm-cpu",
    detail: str = "phases",
    extra_flags: Sequence[str] = (),
) -> dict[str, Any]:
    """Import and compile a model, returning the module after the import and after each phase (or pass).

    Parameters
    ----------
    path : str
        The ONNX file.
    input_shapes : mapping, optional
        Fixed input shapes (others: :func:`~explorer.onnx_adapter.inputs.concrete_input_shapes`).
    onnx_nodes : sequence of str
        The ONNX graph's node names (what locations are traced back to).
    target : str
        A :data:`TARGETS` name.
    detail : {"phases", "passes"}
        One snapshot per compilation phase (:data:`PHASES`), or per module-level pass that changed
        the module (many: for small models).
    extra_flags : sequence of str
        More ``iree-compile`` flags (:data:`CPU_FLAGS`: what the runtime compiles with).

    Returns
    -------
    dict
        ``inputs``, ``import`` (``graph``, ``dialects``, ``sections``, ``seconds``), ``steps``
        (one per phase or pass: ``name``, ``graph``, ``dialects``, ``sections``, ``elapsed``,
        ``nested``), ``compile_seconds``, ``vmfb_bytes``, ``version``.

    Examples
    --------
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> out = worker.run_on_model(lower_iree, zoo.build("mlp"), None, ["/fc1/Gemm"])
    >>> [s["name"] for s in out["steps"]][:3], "linalg" in out["steps"][0]["dialects"]
    (['input', 'abi', 'preprocessing'], True)
    """
    if detail not in ("phases", "passes"):
        from explorer.core.errors import UsageError

        raise UsageError(f"detail must be 'phases' or 'passes', not {detail!r}")
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        worker.report(0.0, "IREE: importing the ONNX model into the torch dialect")
        imported = import_onnx(path, input_shapes, str(folder / "model.mlirbc"))
        first = _snapshot(imported["text"], onnx_nodes)
        dumps = folder / ("phases" if detail == "phases" else "passes")
        dumps.mkdir()
        compiled = compile_mlir(
            str(folder / "model.mlirbc"),
            str(folder / "model.vmfb"),
            target=target,
            phases_dir=str(dumps) if detail == "phases" else None,
            passes_dir=str(dumps) if detail == "passes" else None,
            extra_flags=extra_flags,
        )
        if detail == "phases":
            files = {m.group(2): dumps / name for name in os.listdir(dumps) if (m := _PHASE_FILE.match(name))}
            found = [(phase, files[phase], 0) for phase in PHASES if phase in files]
            seconds = compiled["phase_seconds"]
        else:
            found = _pass_dumps(dumps)
            seconds = {}
        steps = []
        previous_time = None
        for number, (name, file, nested) in enumerate(found, start=1):
            worker.report(number / (len(found) + 1), f"IREE: reading the module after {name}")
            text = file.read_text(encoding="utf-8")
            stamp = file.stat().st_mtime
            elapsed = seconds.get(name, stamp - previous_time if previous_time is not None else 0.0)
            previous_time = stamp
            steps.append({"name": name, **_snapshot(text, onnx_nodes), "elapsed": elapsed, "nested": nested})
        size = (folder / "model.vmfb").stat().st_size
    return {
        "inputs": imported["inputs"],
        "import": {**first, "seconds": imported["seconds"]},
        "steps": steps,
        "compile_seconds": compiled["seconds"],
        "vmfb_bytes": size,
        "version": compiler_version(),
    }

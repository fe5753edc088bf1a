"""What runs in the worker for TVM Relax: import an ONNX file, and read a Relax function as graph data.

TVM is imported here only, inside the worker: a crash in its C++ code never reaches the
notebook, and the notebook never pays TVM's import (seconds). What crosses the pipe is plain
data: node and edge records of :mod:`explorer.graph_schema`, the module as TVMScript text,
and for a failed import the ONNX nodes that failed and why.

Examples
--------
>>> import os, tempfile, onnx
>>> from explorer import worker, zoo
>>> path = os.path.join(tempfile.mkdtemp(), "mlp.onnx")
>>> onnx.save(zoo.build("mlp"), path)
>>> out = worker.run(import_relax, path, {"input": [1, 1, 28, 28]})
>>> out["ok"], out["graph"]["name"]
(True, 'main')
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from .. import worker
from ..cpu_cores import size_tvm_thread_pool
from ..graph_schema import edge_data, node_data
from ..node_ids import INPUT_PREFIX, OUTPUT_PREFIX
from ..tensors import TensorInfo
from ..unique_names import UniqueNames
from .pass_failures import PassWatch

__all__ = [
    "build_relax",
    "run_relax_library",
    "import_relax",
    "lower_relax",
    "relax_graph_data",
    "module_counts",
    "IMPORTER",
    "ZERO_PIPELINE",
    "PIPELINES",
    "compile_relax",
    "relax_outputs",
    "ALLOC_TENSOR",
    "pipeline_passes",
    "relax_pass",
    "relax_pass_names",
    "importer_ops",
]

IMPORTER = "TVM's Relax ONNX importer (tvm.relax.frontend.onnx.from_onnx)"
"""Who converts ONNX to Relax, as named in failure reasons."""

_HANDLED_OUTSIDE_THE_MAP = {"If", "Constant"}

ZERO_PIPELINE = ("LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR")
"""The module-level passes of TVM's ``zero`` pipeline (``relax.get_pipeline("zero")``), in order."""

PIPELINES = ("default", "zero")
"""Named pipelines: ``default`` is the target's default pipeline (``relax.get_default_pipeline``:
library dispatch, legalization and fusion, dataflow lowering, memory planning and VM
finalization), what :func:`compile_relax` compiles with; ``zero`` is :data:`ZERO_PIPELINE`.
(``tvm.compile(mod, target="llvm")`` by itself runs TVM 0.27's generic build pipeline, which
does not fuse on the CPU.)"""


def import_relax(path: str, input_shapes: Mapping[str, Sequence[int]] | None = None) -> dict[str, Any]:
    """Import the ONNX model at ``path`` into Relax (``keep_params_in_input=False``).

    Returns
    -------
    dict
        ``{"ok": True, "graph": relax_graph_data(...), "text": TVMScript, "elapsed": s,
        "tvm": version}``, or ``{"ok": False, "missing": bool, "failures": [{"node", "op_type",
        "reason"}], "error": str, "tvm": version}`` naming each ONNX node the importer could not
        convert (``missing``: operators it has no converter for, all of them; else the one
        node it stopped at).

    Examples
    --------
    >>> import os, tempfile, onnx
    >>> from explorer import worker, zoo
    >>> path = os.path.join(tempfile.mkdtemp(), "m.onnx")
    >>> onnx.save(zoo.build("custom_domain"), path)
    >>> out = worker.run(import_relax, path)
    >>> out["ok"], out["missing"], sorted({f["op_type"] for f in out["failures"]})
    (False, True, ['FusedMatMul', 'Swish'])
    """
    import tvm

    imported = _import_module(path, input_shapes)
    if not imported["ok"]:
        return imported
    mod = imported.pop("module")
    origins = _import_origins(imported.pop("model"), imported.pop("importer"), mod)
    return {
        **imported,
        "graph": relax_graph_data(mod, origins=origins),
        "counts": module_counts(mod),
        "text": mod.script(show_meta=False),
        "tvm": tvm.__version__,
    }


def importer_ops() -> frozenset[str]:
    """The ONNX op types TVM's importer converts: its converter table and the ops it handles
    outside the table (call it where TVM is imported: the worker).

    Examples
    --------
    >>> from explorer import worker
    >>> {"Conv", "If"} <= worker.run(importer_ops)
    True
    """
    from tvm.relax.frontend.onnx import onnx_frontend

    return frozenset(onnx_frontend._get_convert_map()) | _HANDLED_OUTSIDE_THE_MAP


def _import_module(path: str, input_shapes: Mapping[str, Sequence[int]] | None) -> dict[str, Any]:
    """Run the importer: ``{"ok": True, "module", "model", "importer", "elapsed"}`` (for this
    process only: a module does not cross the pipe), or the failure :func:`import_relax` returns."""
    import onnx
    import tvm
    from tvm.relax.frontend.onnx import from_onnx, onnx_frontend

    model = onnx.load(path)
    converted = importer_ops()
    missing = [
        {
            "node": node.name,
            "op_type": node.op_type,
            "reason": f"{_qualified(node)} is not an operator {IMPORTER} converts (TVM {tvm.__version__})",
        }
        for node in model.graph.node
        if node.op_type not in converted
    ]
    if missing:
        ops = sorted({f["op_type"] for f in missing})
        return {
            "ok": False,
            "missing": True,
            "failures": missing,
            "error": f"unsupported operators: {', '.join(ops)}",
            "tvm": tvm.__version__,
        }
    current: dict[str, str] = {}
    importer = onnx_frontend.ONNXGraphImporter
    original = importer._convert_operator

    def tracked(self: Any, op_name: str, inputs: Any, attrs: dict[str, Any], opset: int) -> Any:
        current.update(node=str(attrs.get("tvm_custom", {}).get("name", "")), op_type=op_name)
        return original(self, op_name, inputs, attrs, opset)

    shapes = {k: [int(d) for d in v] for k, v in input_shapes.items()} if input_shapes else None
    started = time.perf_counter()
    importers: list[Any] = []
    original_from_onnx = importer.from_onnx

    def keep(self: Any, graph: Any, opset: int) -> Any:
        importers.append(self)  # its tensor table maps ONNX outputs to Relax expressions: origins
        return original_from_onnx(self, graph, opset)

    importer._convert_operator = tracked  # the worker's own copy of TVM: nothing else sees it
    importer.from_onnx = keep
    try:
        mod = from_onnx(model, shape_dict=shapes, keep_params_in_input=False)
    except Exception as err:  # the node being converted is the one that failed
        text = " ".join(str(err).split())
        node, op_type = current.get("node", ""), current.get("op_type", "")
        named = _NODE_IN_MESSAGE.search(text)  # some checks fail before the converter is called
        if named is not None:
            node = named.group(1)
            op_type = next((n.op_type for n in model.graph.node if n.name == node), op_type)
        failure = {"node": node, "op_type": op_type, "reason": f"{type(err).__name__}: {text[:400]}"}
        return {
            "ok": False,
            "missing": False,
            "failures": [failure],
            "error": failure["reason"],
            "tvm": tvm.__version__,
        }
    finally:
        importer._convert_operator = original
        importer.from_onnx = original_from_onnx
    elapsed = time.perf_counter() - started
    importer_used = importers[0] if importers else None
    return {"ok": True, "module": mod, "model": model, "importer": importer_used, "elapsed": elapsed}


_BACKENDS = {"llvm": "cpu_generic", "cuda": "cuda", "rocm": "rocm"}
"""Target kind -> the ``tvm.relax.backend`` package whose pipeline it uses (other GPUs: gpu_generic)."""


def pipeline_passes(pipeline: str | Sequence[str], target: Any) -> list[Any]:
    """The module-level passes of ``pipeline`` for ``target`` (a ``tvm.target.Target``), as pass objects.

    ``"default"`` is the target backend's default pipeline, pass by pass (its library
    dispatch, legalize, dataflow lower and finalize passes: ``relax.get_default_pipeline``);
    ``"zero"`` is :data:`ZERO_PIPELINE`; a sequence names passes
    of ``relax.transform`` (or ``relax.backend``). Runs where TVM is (the worker).

    Raises
    ------
    ValueError
        A name that is neither a pipeline nor a pass (the message lists the pipelines).

    Examples
    --------
    >>> pipeline_passes.__name__
    'pipeline_passes'
    """
    import importlib

    if isinstance(pipeline, str):
        if pipeline == "default":
            # the backend's own pipeline module: TVM 0.27's relax.pipeline.dataflow_lower_passes
            # asks the cpu_generic package for a function only its pipeline module exports
            backend = _BACKENDS.get(target.kind.name, "gpu_generic")
            stages = importlib.import_module(f"tvm.relax.backend.{backend}.pipeline")
            return [
                *stages.library_dispatch_passes(target),
                *stages.legalize_passes(target),
                *stages.dataflow_lower_passes(target),
                *stages.finalize_passes(target),
            ]
        if pipeline != "zero":
            raise ValueError(
                f"no pipeline {pipeline!r}: the pipelines are {', '.join(PIPELINES)}, or a list of passes"
            )
        pipeline = ZERO_PIPELINE
    return [relax_pass(name) for name in pipeline]


def relax_pass_names() -> list[str]:
    """The names :func:`relax_pass` takes: every pass of ``relax.transform`` and ``relax.backend``
    made without arguments, and the project's own (run it where TVM is: the worker).

    Examples
    --------
    >>> from explorer import worker
    >>> {"LegalizeOps", "FuseOps", "DispatchSortScan", "FastGelu"} <= set(worker.run(relax_pass_names))
    True
    """
    import tvm
    from tvm import relax

    from .fast_math import EXPLORER_RELAX_PASSES

    names: list[str] = []
    for space in (relax.transform, relax.backend):
        for name in dir(space):
            factory = getattr(space, name)
            if not name[:1].isupper() or not callable(factory) or name in names:
                continue
            try:
                made = factory()
            except Exception:  # a pass that needs arguments: the runner cannot make it by name
                continue
            if isinstance(made, tvm.transform.Pass):
                names.append(name)
    return [*names, *(n for n in EXPLORER_RELAX_PASSES if n not in names)]


def relax_pass(name: str) -> Any:
    """The Relax pass called ``name``: ``relax.transform``'s, ``relax.backend``'s, or the
    project's own (:data:`explorer.lower.fast_math.EXPLORER_RELAX_PASSES`).

    Examples
    --------
    >>> relax_pass("FoldConstant").info.name, relax_pass("FastGelu").info.name
    ('FoldConstant', 'FastGelu')
    """
    import tvm
    from tvm import relax

    from .fast_math import EXPLORER_RELAX_PASSES

    factory = (
        getattr(relax.transform, name, None)
        or getattr(relax.backend, name, None)
        or EXPLORER_RELAX_PASSES.get(name)
    )
    if factory is None:
        raise ValueError(f"relax.transform has no pass {name!r} in TVM {tvm.__version__}")
    return factory()


def lower_relax(
    path: str,
    input_shapes: Mapping[str, Sequence[int]] | None,
    passes: str | Sequence[str] = "default",
    target: str = "llvm",
) -> dict[str, Any]:
    """Import ``path`` and run the module-level Relax passes of a pipeline one by one, capturing the
    module after each (``passes``: see :func:`pipeline_passes`; each runs within ``target``).

    Every step runs under a ``PassContext`` whose instrument counts the passes it ran inside
    (FoldConstant compiles small TIR modules, with dozens of TIR passes each): those are
    reported as the step's nested passes, not as steps of their own.

    Returns
    -------
    dict
        The import's outcome (:func:`import_relax`: graph data, counts and text of the
        imported module, or the failure) plus ``"steps"``: one
        ``{"name", "changed", "elapsed", "nested", "graph", "tir", "counts"}`` per pass (``graph``
        and ``tir``, PrimFunc name -> TVMScript, only where the pass changed the module).

    Examples
    --------
    >>> import os, tempfile, onnx
    >>> from explorer import worker, zoo
    >>> path = os.path.join(tempfile.mkdtemp(), "m.onnx")
    >>> onnx.save(zoo.build("mlp"), path)
    >>> out = worker.run(lower_relax, path, {"input": [1, 1, 28, 28]}, ["LegalizeOps"])
    >>> out["steps"][0]["name"], out["steps"][0]["changed"], out["steps"][0]["counts"]["prim_funcs"] > 0
    ('LegalizeOps', True, True)
    """
    import tvm
    import tvm_ffi

    imported = _import_module(path, input_shapes)
    if not imported["ok"]:
        return imported
    mod = imported.pop("module")
    origins = _import_origins(imported.pop("model"), imported.pop("importer"), mod)
    imported.update(
        graph=relax_graph_data(mod, origins=origins),
        counts=module_counts(mod),
        text=mod.script(show_meta=False),
        tvm=tvm.__version__,
    )
    steps = []
    built_for = _target(target)
    chosen = list(pipeline_passes(passes, built_for))
    watch = PassWatch(origins)
    for number, step in enumerate(chosen, start=1):
        name = step.info.name
        worker.report((number - 1) / max(1, len(chosen)), f"pass {number} of {len(chosen)}: {name}")
        counter = _PassNames()
        started = time.perf_counter()
        with built_for, tvm.transform.PassContext(opt_level=3, instruments=[counter.instrument()]):
            try:
                with watch.watching():
                    after = step(mod)
            except MemoryError:
                raise
            except Exception as err:  # the model's fault, not ours: say where (LoweringError)
                raise watch.error(err, mod, name) from None
        elapsed = time.perf_counter() - started
        changed = not tvm_ffi.structural_equal(mod, after)
        mod = after
        inner = [n for n in counter.names if n != name]
        steps.append(
            {
                "name": name,
                "changed": changed,
                "elapsed": elapsed,
                "nested": len(inner),
                "nested_kinds": sorted({n.split(".")[0] for n in inner}),
                "graph": relax_graph_data(mod, origins=origins) if changed else None,
                "tir": _prim_func_scripts(mod) if changed else None,
                "counts": module_counts(mod),
            }
        )
    imported["steps"] = steps
    return imported


def _prim_func_scripts(mod: Any) -> dict[str, str]:
    """PrimFunc name -> its TVMScript, for every PrimFunc of ``mod``."""
    from tvm import relax

    return {gv.name_hint: f.script() for gv, f in mod.functions.items() if not isinstance(f, relax.Function)}


class _PassNames:
    """Every pass a step runs, nested ones included, by name (a TVM pass instrument)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def instrument(self) -> Any:
        import tvm

        names = self.names

        @tvm.instrument.pass_instrument
        class _Record:
            def run_after_pass(self, _mod: Any, info: Any) -> None:
                names.append(info.name)

        return _Record()


def _target(kind: str) -> Any:
    import tvm

    if kind != "llvm":
        raise ValueError(f"only the llvm (CPU) target is built here, not {kind!r}")
    cores = size_tvm_thread_pool()  # MetaSchedule needs num-cores: the threads the kernels will run on
    return tvm.target.Target(
        {"kind": "llvm", "mcpu": tvm.target.codegen.llvm_get_system_cpu(), "num-cores": int(cores)}
    )


def build_relax(
    path: str,
    input_shapes: Mapping[str, Sequence[int]] | None,
    feeds: Mapping[str, Any],
    *,
    out_path: str,
    target: str = "llvm",
) -> dict[str, Any]:
    """Import ``path``, compile it with ``tvm.compile`` (untuned), export the library to
    ``out_path`` and run it once on ``feeds``.

    Returns
    -------
    dict
        ``{"ok": True, "compile_s", "run_s", "outputs": [arrays], "tvm"}``, or the import's
        failure (:func:`import_relax`).

    Examples
    --------
    >>> import os, tempfile, numpy as np, onnx
    >>> from explorer import worker, zoo
    >>> folder = tempfile.mkdtemp()
    >>> onnx.save(zoo.build("mlp"), os.path.join(folder, "m.onnx"))
    >>> feeds = {"input": np.zeros((1, 1, 28, 28), np.float32)}
    >>> lib = os.path.join(folder, "m.so")
    >>> out = worker.run(build_relax, os.path.join(folder, "m.onnx"), None, feeds, out_path=lib)
    >>> out["outputs"][0].shape, [o.shape for o in worker.run(run_relax_library, lib, feeds)]
    ((1, 10), [(1, 10)])
    """
    compiled = compile_relax(path, input_shapes, target)
    if not compiled["ok"]:
        return compiled
    import tvm
    from tvm import relax

    executable, compile_s = compiled["executable"], compiled["compile_s"]
    executable.export_library(out_path)
    machine = relax.VirtualMachine(executable, tvm.cpu())
    started = time.perf_counter()
    outputs = relax_outputs(machine["main"](*[tvm.runtime.tensor(v) for v in feeds.values()]))
    return {
        "ok": True,
        "compile_s": compile_s,
        "run_s": time.perf_counter() - started,
        "outputs": outputs,
        "tvm": tvm.__version__,
    }


def compile_relax(
    path: str, input_shapes: Mapping[str, Sequence[int]] | None, target: str = "llvm"
) -> dict[str, Any]:
    """Import ``path`` and compile it (untuned) for ``target`` with the target's default pipeline
    (fusion included), in this process (the worker).

    Returns
    -------
    dict
        ``{"ok": True, "executable", "compile_s", "tvm", "target"}`` (the executable stays in
        this process), or the import's failure (:func:`import_relax`).

    Examples
    --------
    >>> compile_relax.__name__
    'compile_relax'
    """
    imported = _import_module(path, input_shapes)  # no graph data or text: only the module is built
    if not imported["ok"]:
        return imported
    import tvm
    from tvm import relax

    built_for = _target(target)
    started = time.perf_counter()
    module = imported["module"]
    watch = PassWatch(lambda: _import_origins(imported["model"], imported["importer"], module))
    try:
        with watch.watching():
            # the default pipeline, with fusion: TVM 0.27's tvm.compile alone does not fuse on the CPU
            executable = tvm.compile(
                module, target=built_for, relax_pipeline=relax.get_default_pipeline(built_for)
            )
    except MemoryError:
        raise
    except Exception as err:  # a pass failed on the model: say which, where and the fix (LoweringError)
        raise watch.error(err) from None
    return {
        "ok": True,
        "executable": executable,
        "compile_s": time.perf_counter() - started,
        "tvm": tvm.__version__,
        "target": str(built_for),
    }


def run_relax_library(library: str, feeds: Mapping[str, Any]) -> list[Any]:
    """Load a library :func:`build_relax` exported and run its ``main`` on ``feeds`` (in order).

    Examples
    --------
    >>> run_relax_library.__module__  # used with worker.run: see build_relax
    'explorer.lower.relax_steps'
    """
    import tvm
    from tvm import relax

    machine = relax.VirtualMachine(tvm.runtime.load_module(library), tvm.cpu())
    return relax_outputs(machine["main"](*[tvm.runtime.tensor(v) for v in feeds.values()]))


def relax_outputs(result: Any) -> list[Any]:
    """A Relax function's result (a tensor or nested tuples of them) as a flat list of numpy arrays.

    Examples
    --------
    >>> relax_outputs([])
    []
    """
    if hasattr(result, "numpy"):
        return [result.numpy()]
    return [item for value in result for item in relax_outputs(value)]


_NODE_IN_MESSAGE = re.compile(r"Node (\S+) cannot handle")


def _import_origins(model: Any, importer: Any, mod: Any) -> dict[Any, str]:
    """Relax variable -> the ONNX node it was converted from, where that can be traced.

    The importer's tensor table maps each ONNX output to the Relax expression that holds it:
    a binding whose variable or value is that expression comes from the node producing the
    output. Bindings a converter emitted on the way (tuple parts, reshapes of weights) take
    the origin of the bindings that read them, or else of those they read, when that is one
    node.
    """
    from tvm import relax

    if importer is None:
        return {}
    from ..graph import onnx_node_ids

    nodes = list(model.graph.node)
    ids = onnx_node_ids(nodes)
    producer = {out: node_id for node_id, node in zip(ids, nodes, strict=True) for out in node.output}
    by_expr: dict[Any, str] = {}
    for tensor, expr in getattr(importer, "_nodes", {}).items():
        if tensor in producer:
            by_expr.setdefault(expr, producer[tensor])
    bindings = [b for block in mod["main"].body.blocks for b in block.bindings]
    origins: dict[Any, str] = {}
    reads: dict[Any, list[Any]] = {}
    for binding in bindings:
        found = by_expr.get(binding.var) or by_expr.get(binding.value)
        if found is not None:
            origins[binding.var] = found
        reads[binding.var] = [a for a in _operands(binding.value) if isinstance(a, relax.Var)]
    readers: dict[Any, list[Any]] = {}
    for var, used in reads.items():
        for u in used:
            readers.setdefault(u, []).append(var)
    for _ in range(3):  # a few rounds reach helpers of helpers
        for binding in bindings:
            var = binding.var
            if var in origins:
                continue
            after = {origins[r] for r in readers.get(var, ()) if r in origins}
            before = {origins[u] for u in reads.get(var, ()) if u in origins}
            for candidates in (after, before):
                if len(candidates) == 1:
                    origins[var] = next(iter(candidates))
                    break
    return origins


def _qualified(node: Any) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"


def _dims(ty: Any) -> tuple[Any, ...] | None:
    shape = getattr(ty, "shape", None)
    if shape is None:
        return None
    values = getattr(shape, "values", shape)
    try:
        return tuple(int(d) if hasattr(d, "value") or isinstance(d, int) else str(d) for d in values)
    except TypeError:
        return None


def _dtype(ty: Any) -> str | None:
    dtype = getattr(ty, "dtype", None)
    return str(dtype) if dtype not in (None, "") else None


def _attributes(call: Any) -> dict[str, Any]:
    attrs = getattr(call, "attrs", None)
    if attrs is None:
        return {}
    found: dict[str, Any] = {}
    for key in dir(attrs):
        if key.startswith("_") or key in ("id_", "is_", "same_as", "get_int", "get_int_tuple", "get_str"):
            continue
        try:
            value = getattr(attrs, key)
        except Exception:
            continue
        if callable(value):
            continue
        if isinstance(value, (int, float, str, bool)) or value is None:
            found[key] = value
        elif isinstance(value, (tuple, list)) or hasattr(value, "__len__"):
            try:
                found[key] = [_scalar(v) for v in value]
            except TypeError:
                found[key] = str(value)
        else:
            found[key] = str(value)
    return found


def _scalar(value: Any) -> Any:
    """A Python scalar from an attribute element: ints and floats as they are, TIR immediates by value."""
    if isinstance(value, (int, float, str, bool)):
        return value
    inner = getattr(value, "value", None)
    return inner if isinstance(inner, (int, float)) else str(value)


def _is_var(expr: Any) -> bool:
    from tvm import relax

    return isinstance(expr, relax.Var)


def _prim_func(value: Any) -> str | None:
    """The PrimFunc a ``call_tir`` binding calls, by name (None for any other binding)."""
    from tvm import relax

    args = getattr(value, "args", ())
    if _op_name(value) == "relax.call_tir" and args and isinstance(args[0], relax.GlobalVar):
        return args[0].name_hint
    return None


def _operands(value: Any) -> list[Any]:
    """What a binding reads: a tuple part's tuple, an alias's variable, a ``call_tir``'s arguments
    (not its PrimFunc), any other call's arguments (a direct PrimFunc call's include the tensor
    it writes)."""
    from tvm import relax

    if isinstance(value, relax.TupleGetItem):
        return [value.tuple_value]
    if isinstance(value, relax.Var):  # an alias reads the variable it names
        return [value]
    args = list(getattr(value, "args", ()))
    if _prim_func(value) is not None:
        fields = getattr(args[1], "fields", None) if len(args) > 1 else None
        return list(fields) if fields is not None else args[1:]
    return args


_CALL_PRIM_FUNC = "relax.call_prim_func"
"""The op of a direct call of a PrimFunc (destination-passing style, after CallTIRRewrite)."""


def _op_name(value: Any) -> str:
    """A binding's op: a Relax operator's name, a called function's name, ``relax.extern.SYMBOL``
    for a packed function of the runtime (``vm.builtin.reshape``), ``relax.alias`` for ``y = x``."""
    from tvm import relax

    op = getattr(value, "op", None)
    if isinstance(op, relax.ExternFunc):
        return f"relax.extern.{op.global_symbol}"
    if op is not None:
        return str(getattr(op, "name", None) or getattr(op, "name_hint", None) or op)
    if isinstance(value, relax.Var):
        return "relax.alias"
    return f"relax.{type(value).__name__}"


def relax_graph_data(
    mod: Any, function: str = "main", *, origins: Mapping[Any, str] | None = None
) -> dict[str, Any]:
    """A Relax function's bindings as graph-model records: one node per binding, edges by variable use.

    Constants a binding reads become its weights (TensorInfo); shapes and dtypes come from
    the variables' types; the function's parameters and its result are the input and output
    nodes. A ``call_tir`` node is named by the PrimFunc it calls (``conv2d``,
    ``fused_conv2d_add_relu``); a call of a fused Relax function (what FuseOps makes) is drawn
    as its member bindings, each with the fused function as its ``scope``, so the group
    collapses into one box and expands into what FuseOps merged. Runs where TVM is (the worker).

    Examples
    --------
    >>> import os, tempfile, onnx
    >>> from explorer import worker, zoo
    >>> path = os.path.join(tempfile.mkdtemp(), "m.onnx")
    >>> onnx.save(zoo.build("mlp"), path)
    >>> data = worker.run(import_relax, path)["graph"]  # made by relax_graph_data in the worker
    >>> [node for node, _ in data["nodes"]][:2]
    ['input:input', 'lv']
    """
    func = mod[function]
    builder = _GraphBuilder(mod, origins or {})
    env: dict[Any, str] = {}  # Relax variable (by identity: names repeat) -> the graph's tensor name
    for param in func.params:
        shape, dtype = _dims(param.ty), _dtype(param.ty)
        name = builder.unique(param.name)
        data = node_data("input", "Input", param.name, outputs=[name], shape=shape, dtype=dtype)
        builder.add_node(INPUT_PREFIX + name, data, name, shape, dtype)
        env[param] = name
    builder.bindings(func, env, ())
    result = func.body.body
    out_name = getattr(result, "name", "output")
    tensor = env.get(result, out_name)
    shape, dtype = builder.types.get(tensor, (None, None))
    out_id = OUTPUT_PREFIX + out_name
    builder.nodes.append(
        (out_id, node_data("output", "Output", out_name, inputs=[out_name], shape=shape, dtype=dtype))
    )
    if tensor in builder.producer:
        builder.edge(tensor, out_id, 0)
    return {"name": function, "nodes": builder.nodes, "edges": builder.edges}


def module_counts(mod: Any) -> dict[str, int]:
    """``bindings`` of ``main``, ``prim_funcs`` and ``fused`` functions (fused Relax functions and
    fused PrimFuncs) of a module: what a lowering step changed, in numbers.

    Examples
    --------
    >>> module_counts.__name__
    'module_counts'
    """
    from tvm import relax

    funcs = list(mod.functions.items())
    prim = [gv for gv, f in funcs if not isinstance(f, relax.Function)]
    fused = [
        gv
        for gv, f in funcs
        if (isinstance(f, relax.Function) and f.attrs is not None and "Primitive" in f.attrs)
        or (not isinstance(f, relax.Function) and gv.name_hint.startswith("fused_"))
    ]
    main = mod["main"]
    bindings = [b for block in main.body.blocks for b in block.bindings]
    storages = [b.value for b in bindings if _op_name(b.value) in _ALLOC_STORAGE]
    tensors = [b.value for b in bindings if _op_name(b.value) in ALLOC_TENSOR]
    return {
        "bindings": len(bindings),
        "prim_funcs": len(prim),
        "fused": len(fused),
        "tensor_allocations": len(tensors),
        "tensor_bytes": sum(_tensor_bytes(call) for call in tensors),
        "storages": len(storages),
        "storage_bytes": sum(_storage_bytes(call) for call in storages),
    }


_ALLOC_STORAGE = frozenset({"relax.memory.alloc_storage", "relax.vm.alloc_storage"})
"""The ops that allocate a storage (a buffer tensors are placed in), before and after VM lowering."""

ALLOC_TENSOR = frozenset({"relax.builtin.alloc_tensor", "relax.memory.alloc_tensor", "relax.vm.alloc_tensor"})
"""The ops that allocate a tensor a kernel writes (after CallTIRRewrite), as the graph names them."""


def _storage_bytes(call: Any) -> int:
    """The bytes an ``alloc_storage`` allocates (its size is in bytes), where that size is static (else 0)."""
    from tvm import relax

    size = call.args[0]
    values = getattr(size, "values", None) if isinstance(size, relax.ShapeExpr) else None
    if not values or not all(hasattr(v, "value") for v in values):
        return 0
    return math.prod(int(v.value) for v in values)


def _tensor_bytes(call: Any) -> int:
    """The bytes of the tensor an ``alloc_tensor`` allocates (shape and dtype arguments), where static."""
    import tvm
    from tvm import relax

    shape = next((a for a in call.args if isinstance(a, relax.ShapeExpr)), None)
    dtypes = (_DTYPE_ARG.fullmatch(str(a)) for a in call.args)  # printed R.dtype("float32")
    dtype = next((m.group(1) for m in dtypes if m is not None), None)
    if shape is None or dtype is None or not all(hasattr(v, "value") for v in shape.values):
        return 0
    element = tvm.DataType(dtype)
    return math.prod(int(v.value) for v in shape.values) * element.bits * element.lanes // 8


_DTYPE_ARG = re.compile(r'R\.dtype\("(\w+)"\)')


class _GraphBuilder:
    """Collects node and edge records while walking bindings (fused functions inline)."""

    def __init__(self, mod: Any, origins: Mapping[Any, str]) -> None:
        self.mod = mod
        self.origins = origins
        self.nodes: list[tuple[str, dict[str, Any]]] = []
        self.edges: list[tuple[str, str, str, dict[str, Any]]] = []
        self.producer: dict[str, str] = {}
        self.types: dict[str, tuple[Any, str | None]] = {}
        self.index = 0
        self.unique = UniqueNames(separator="#")  # Relax variables share name hints

    def add_node(
        self, node_id: str, data: dict[str, Any], tensor: str, shape: Any, dtype: str | None
    ) -> None:
        self.nodes.append((node_id, data))
        self.producer[tensor] = node_id
        self.types[tensor] = (shape, dtype)

    def edge(self, tensor: str, target: str, slot: int) -> None:
        shape, dtype = self.types.get(tensor, (None, None))
        nbytes = _nbytes(shape, dtype)
        self.edges.append(
            (self.producer[tensor], target, tensor, edge_data(tensor, shape, dtype, nbytes, slots=(slot,)))
        )

    def bindings(
        self,
        func: Any,
        env: dict[Any, str],
        scope: tuple[str, ...],
        constants: Mapping[Any, Any] | None = None,
    ) -> None:
        """Walk ``func``'s bindings; ``env`` maps its variables to tensor names of the graph,
        ``constants`` those of its parameters that a caller bound to constants (a fused function)."""
        from tvm import relax

        prefix = f"{scope[-1]}/" if scope else ""
        for block in func.body.blocks:
            for binding in block.bindings:
                var, value = binding.var, binding.value
                callee = getattr(value, "op", None)
                target = None
                if isinstance(callee, relax.GlobalVar) and callee in self.mod.functions:
                    target = self.mod[callee]
                if isinstance(target, relax.Function) and not scope:  # a fused function: its members
                    inner_env: dict[Any, str] = {}
                    consts: dict[Any, Any] = {}
                    for param, arg in zip(target.params, value.args, strict=False):
                        if _is_var(arg) and arg in env:
                            inner_env[param] = env[arg]
                        else:
                            consts[param] = arg
                    group = (self.unique(callee.name_hint),)  # one box per call
                    self.bindings(target, inner_env, group, consts)
                    result = target.body.body
                    if result in inner_env:
                        env[var] = inner_env[result]
                    continue
                node_id = self.unique(prefix + var.name)
                self._op_node(node_id, var, value, env, scope, constants or {})
                env[var] = node_id

    def _op_node(
        self,
        node_id: str,
        var: Any,
        value: Any,
        env: dict[Any, str],
        scope: tuple[str, ...],
        constants: Mapping[Any, Any],
    ) -> None:
        from tvm import relax

        shape, dtype = _dims(var.ty), _dtype(var.ty)
        op = _op_name(value)
        op_type = op.removeprefix("relax.")
        args = _operands(value)
        attributes = _attributes(value)
        if isinstance(value, relax.TupleGetItem):
            attributes["index"] = int(value.index)
        callee = _prim_func(value)
        direct = getattr(value, "op", None)
        if isinstance(direct, relax.GlobalVar) and not isinstance(
            self.mod.functions.get(direct), relax.Function
        ):
            op, callee = (
                _CALL_PRIM_FUNC,
                direct.name_hint,
            )  # after CallTIRRewrite: it writes its last argument
        if callee is not None:
            op_type = callee  # the PrimFunc: conv2d, fused_conv2d_add_relu, ...
            attributes["prim_func"] = callee
        weights = []
        reads: list[tuple[str, int]] = []
        for slot, arg in enumerate(args):
            if _is_var(arg) and arg in constants:
                arg = constants[arg]
            if _is_var(arg) and arg in env and env[arg] in self.producer:
                reads.append((env[arg], slot))
            elif hasattr(arg, "value") and hasattr(arg, "ty") and _dims(arg.ty) is not None:
                wshape, wdtype = _dims(arg.ty), _dtype(arg.ty)
                numel = math.prod(d for d in wshape or () if isinstance(d, int))
                weights.append(
                    TensorInfo(
                        f"{node_id}.const{slot}",
                        tuple(wshape or ()),
                        wdtype or "",
                        numel,
                        _nbytes(wshape, wdtype) or 0,
                        source="constant",
                    )
                )
            else:
                attributes[f"arg{slot}"] = " ".join(str(arg).split())[:80]
        data = node_data(
            "op",
            op_type,
            var.name,
            op=op,
            index=self.index,
            attributes=attributes,
            inputs=[n for n, _ in reads],
            outputs=[node_id],
            scope=scope,
            weights=weights,
            origin=(self.origins[var],) if var in self.origins else (),
        )
        self.add_node(node_id, data, node_id, shape, dtype)
        for tensor, slot in reads:
            self.edge(tensor, node_id, slot)
        self.index += 1


def _nbytes(shape: Any, dtype: str | None) -> int | None:
    if shape is None or dtype is None or any(not isinstance(d, int) for d in shape):
        return None
    import numpy as np

    try:
        itemsize = np.dtype(dtype).itemsize
    except TypeError:
        return None
    return math.prod(shape) * itemsize

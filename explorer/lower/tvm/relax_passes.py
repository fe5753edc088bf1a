"""Relax passes by name, the named pipelines, and lowering a module one pass at a time in the worker.

:func:`lower_relax` imports an ONNX file (:mod:`explorer.lower.tvm.relax_frontend`) and runs the
module-level passes of a pipeline one by one, capturing the module after each as graph data
(:mod:`explorer.lower.tvm.relax_graph_data`), its PrimFuncs as TVMScript, and the passes each
step ran inside; :func:`explorer.lower.tvm.relax_pipeline.relax_pipeline` is the notebook's side.
A pass that fails on the model is reported where it failed
(:class:`~explorer.lower.pass_failures.PassWatch`).

Examples
--------
>>> [p.info.name for p in pipeline_passes("zero", None)] == list(ZERO_PIPELINE)
True
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from explorer.core.errors import UsageError
from explorer.isolation import worker
from explorer.lower.pass_failures import PassWatch
from explorer.lower.tvm.relax_frontend import import_relax_module
from explorer.lower.tvm.relax_graph_data import module_counts, prim_func_scripts, relax_graph_data
from explorer.lower.tvm.relax_target import cpu_target

__all__ = [
    "pass_started",
    "read_pass_started",
    "ZERO_PIPELINE",
    "PIPELINES",
    "pipeline_passes",
    "relax_pass",
    "relax_pass_names",
    "lower_relax",
]

ZERO_PIPELINE = ("LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR")
"""The module-level passes of TVM's ``zero`` pipeline (``relax.get_pipeline("zero")``), in order."""

PIPELINES = ("default", "zero")
"""Named pipelines: ``default`` is the target's default pipeline (``relax.get_default_pipeline``:
library dispatch, legalization and fusion, dataflow lowering, memory planning and VM
finalization), what :func:`explorer.lower.tvm.relax_compile.compile_relax` compiles with; ``zero``
is :data:`ZERO_PIPELINE`.
(``tvm.compile(mod, target="llvm")`` by itself runs TVM 0.27's generic build pipeline, which
does not fuse on the CPU.)"""


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
    UsageError
        A name that is neither a pipeline nor a pass (the message lists the pipelines).

    Examples
    --------
    >>> from explorer.lower.tvm.relax_target import cpu_target
    >>> [p.info.name for p in pipeline_passes(["FoldConstant", "FuseOps"], None)]
    ['FoldConstant', 'FuseOps']
    >>> passes = [p.info.name for p in pipeline_passes("default", cpu_target())]
    >>> passes.index("LegalizeOps") < passes.index("FuseOps") < passes.index("CallTIRRewrite")
    True
    >>> pipeline_passes("fast", None)
    Traceback (most recent call last):
    ...
    explorer.core.errors.UsageError: no pipeline 'fast': the pipelines are default, zero, or a list of passes
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
            raise UsageError(
                f"no pipeline {pipeline!r}: the pipelines are {', '.join(PIPELINES)}, or a list of passes"
            )
        pipeline = ZERO_PIPELINE
    return [relax_pass(name) for name in pipeline]


def relax_pass_names() -> list[str]:
    """The names :func:`relax_pass` takes: every pass of ``relax.transform`` and ``relax.backend``
    made without arguments, and the project's own (run it where TVM is: the worker).

    Examples
    --------
    >>> from explorer.isolation import worker
    >>> {"LegalizeOps", "FuseOps", "DispatchSortScan", "FastGelu"} <= set(worker.run(relax_pass_names))
    True
    """
    import tvm
    from tvm import relax

    from explorer.lower.tvm.fast_math import EXPLORER_RELAX_PASSES

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
    project's own (:data:`explorer.lower.tvm.fast_math.EXPLORER_RELAX_PASSES`).

    Examples
    --------
    >>> relax_pass("FoldConstant").info.name, relax_pass("FastGelu").info.name
    ('FoldConstant', 'FastGelu')
    """
    import tvm
    from tvm import relax

    from explorer.lower.tvm.fast_math import EXPLORER_RELAX_PASSES

    factory = (
        getattr(relax.transform, name, None)
        or getattr(relax.backend, name, None)
        or EXPLORER_RELAX_PASSES.get(name)
    )
    if factory is None:
        raise UsageError(
            f"relax.transform has no pass {name!r} in TVM {tvm.__version__}; "
            "relax_pass_names() lists the passes it takes (e.g. FoldConstant, LegalizeOps, FuseOps)"
        )
    return factory()


_PASS_STARTED = re.compile(r"pass (\d+) of (\d+): (.+)")


def pass_started(number: int, total: int, name: str) -> str:
    """The progress message the worker sends as pass ``number`` of ``total`` starts.

    Examples
    --------
    >>> pass_started(2, 5, "FuseOps")
    'pass 2 of 5: FuseOps'
    """
    return f"pass {number} of {total}: {name}"


def read_pass_started(message: str | None) -> tuple[int, int, str] | None:
    """``(number, total, name)`` of a :func:`pass_started` message; None for any other message.

    Examples
    --------
    >>> read_pass_started(pass_started(2, 5, "FuseOps")), read_pass_started("importing")
    ((2, 5, 'FuseOps'), None)
    """
    match = _PASS_STARTED.fullmatch(message or "")
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), match.group(3)


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
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> out = worker.run_on_model(lower_relax, zoo.build("mlp"), {"input": [1, 1, 28, 28]}, ["LegalizeOps"])
    >>> out["steps"][0]["name"], out["steps"][0]["changed"], out["steps"][0]["counts"]["prim_funcs"] > 0
    ('LegalizeOps', True, True)
    """
    import tvm
    import tvm_ffi

    imported, mod, origins = import_relax_module(path, input_shapes)
    if not imported["ok"]:
        return imported
    steps = []
    built_for = cpu_target(target)
    chosen = list(pipeline_passes(passes, built_for))
    watch = PassWatch(origins)
    for number, step in enumerate(chosen, start=1):
        name = step.info.name
        worker.report((number - 1) / max(1, len(chosen)), pass_started(number, len(chosen), name))
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
                "tir": prim_func_scripts(mod) if changed else None,
                "counts": module_counts(mod),
            }
        )
    imported["steps"] = steps
    return imported


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

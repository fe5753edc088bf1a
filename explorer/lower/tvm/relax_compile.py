"""Compile an imported Relax module in the worker (untuned, the target's default pipeline), export and run it.

:func:`compile_relax` keeps the executable in this process (the runtimes' sessions time it
there); :func:`build_relax` exports it as a library and runs it once, and
:func:`run_relax_library` runs such a library again: both are what
:func:`explorer.lower.tvm.relax_build.relax_build` asks the worker for.

Examples
--------
>>> import numpy as np, tvm
>>> from tvm import relax
>>> from explorer import zoo
>>> vm = relax.VirtualMachine(compile_relax(zoo.build("mlp"), None)["executable"], tvm.cpu())
>>> [o.shape for o in relax_outputs(vm["main"](tvm.runtime.tensor(np.ones((1, 1, 28, 28), "float32"))))]
[(1, 10)]
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from explorer.lower.pass_failures import PassWatch
from explorer.lower.tvm.relax_frontend import import_origins, run_importer
from explorer.lower.tvm.relax_target import cpu_target

__all__ = ["compile_relax", "build_relax", "run_relax_library", "relax_outputs"]


def compile_relax(
    path: str, input_shapes: Mapping[str, Sequence[int]] | None, target: str = "llvm"
) -> dict[str, Any]:
    """Import ``path`` and compile it (untuned) for ``target`` with the target's default pipeline
    (fusion included), in this process (the worker).

    Returns
    -------
    dict
        ``{"ok": True, "executable", "compile_s", "tvm", "target"}`` (the executable stays in
        this process), or the import's failure (:func:`explorer.lower.tvm.relax_frontend.import_relax`).

    Examples
    --------
    >>> import json
    >>> from explorer import zoo
    >>> compiled = compile_relax(zoo.build("mlp"), {"input": [1, 1, 28, 28]})
    >>> compiled["ok"], json.loads(compiled["target"])["kind"], compiled["compile_s"] > 0
    (True, 'llvm', True)
    """
    imported = run_importer(path, input_shapes)  # no graph data or text: only the module is built
    if not imported["ok"]:
        return imported
    import tvm
    from tvm import relax

    built_for = cpu_target(target)
    started = time.perf_counter()
    module = imported["module"]
    watch = PassWatch(lambda: import_origins(imported["model"], imported["importer"], module))
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
        failure (:func:`explorer.lower.tvm.relax_frontend.import_relax`).

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> feeds = {"input": np.zeros((1, 1, 28, 28), np.float32)}
    >>> library = os.path.join(tempfile.mkdtemp(), "mlp.so")
    >>> out = worker.run_on_model(build_relax, zoo.build("mlp"), None, feeds, output=library)
    >>> out["outputs"][0].shape, os.path.isfile(library)
    ((1, 10), True)
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


def run_relax_library(library: str, feeds: Mapping[str, Any]) -> list[Any]:
    """Load a library :func:`build_relax` exported and run its ``main`` on ``feeds`` (in order).

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> library = os.path.join(tempfile.mkdtemp(), "mlp.so")
    >>> feeds = {"input": np.ones((1, 1, 28, 28), np.float32)}
    >>> _ = worker.run_on_model(build_relax, zoo.build("mlp"), None, feeds, output=library)
    >>> [o.shape for o in worker.run(run_relax_library, library, feeds)]
    [(1, 10)]
    """
    import tvm
    from tvm import relax

    machine = relax.VirtualMachine(tvm.runtime.load_module(library), tvm.cpu())
    return relax_outputs(machine["main"](*[tvm.runtime.tensor(v) for v in feeds.values()]))


def relax_outputs(result: Any) -> list[Any]:
    """A Relax function's result (a tensor or nested tuples of them) as a flat list of numpy arrays.

    Examples
    --------
    >>> import numpy as np, tvm
    >>> one, two = tvm.runtime.tensor(np.zeros(2, "float32")), tvm.runtime.tensor(np.ones((1, 3), "int64"))
    >>> [o.shape for o in relax_outputs([one, [two]])], relax_outputs([])
    ([(2,), (1, 3)], [])
    """
    if hasattr(result, "numpy"):
        return [result.numpy()]
    return [item for value in result for item in relax_outputs(value)]

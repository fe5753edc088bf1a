"""IREE's worker-side preparation: import, iree-compile for llvm-cpu, the VM module kept warm.

Examples
--------
>>> prepare_iree.__name__
'prepare_iree'
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from explorer.isolation import worker
from explorer.isolation.cpu_cores import physical_cores
from explorer.runtimes.sessions import _get, _keep, _Session, has_session

__all__ = ["prepare_iree"]


def prepare_iree(
    path: str, key: str, input_shapes: Mapping[str, Sequence[int]] | None, options: Mapping[str, Any]
) -> dict[str, Any]:
    """Import the model at ``path`` with IREE, compile it into a VM module
    (:func:`explorer.lower.iree.iree_compile.build_vmfb`, in this process's scratch folder) and load it
    under ``key`` (:mod:`explorer.runtimes.iree_vm`).

    ``options``: ``target`` (default ``llvm-cpu``: this CPU), ``threads`` (0 = one per physical
    core, as ONNX Runtime and TVM run here; 1 runs IREE's ``local-sync`` driver).

    Returns
    -------
    dict
        ``{"runtime": "iree", "prepare_s", "import_s", "compile_s", "target", "driver", "threads",
        "function", "version", "reused"}``.

    Raises
    ------
    LoweringError
        IREE's importer or compiler refused the model (the phase, the pass, the op, its ONNX node).

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> path = str(zoo.save("mlp"))
    >>> info = worker.run(prepare_iree, path, "doc-prepare-iree", None, {"threads": 1})
    >>> info["runtime"], info["driver"], info["function"]
    ('iree', 'local-sync', 'mlp')
    """
    if has_session(key):
        return {**_get(key).info, "reused": True}
    import iree.runtime  # noqa: F401  (IREE's own import is the process's cost, not the model's)

    from explorer.lower.iree.iree_compile import build_vmfb
    from explorer.onnx_adapter.model_files import new_model_dir
    from explorer.runtimes.iree_vm import (
        bind_iree_inputs,
        iree_driver,
        iree_outputs,
        load_iree_function,
        runtime_version,
    )

    threads = int(options.get("threads", 0) or 0) or physical_cores()
    driver = iree_driver(threads)  # before the first device: IREE sizes its pool once
    target = str(options.get("target", "llvm-cpu"))
    started = time.perf_counter()
    worker.report(None, "IREE: import and compile")
    vmfb = str(new_model_dir("iree-") / "model.vmfb")
    flags = [str(f) for f in options.get("flags", ())]
    built = build_vmfb(path, input_shapes, vmfb, target=target, extra_flags=flags)
    function, device = load_iree_function(built["vmfb"], built["function"], driver)
    names = list(built["inputs"])
    info = {
        "runtime": "iree",
        "ok": True,
        "prepare_s": time.perf_counter() - started,
        "import_s": built["import_seconds"],
        "compile_s": built["compile_seconds"],
        "target": target,
        "driver": driver,
        "threads": threads,
        "function": built["function"],
        "version": runtime_version(),
    }
    sites: list[dict[str, Any]] = []  # the dispatches' call sites, compiled once on first profile

    def profile(model_path: str, bound: Any, runs: int) -> list[dict[str, Any]]:
        from explorer.runtimes.iree_dispatches import dispatch_sites, profile_dispatches

        if not sites:
            sites.append(dispatch_sites(model_path, built["inputs"], target=target, extra_flags=flags))
        inputs = [np.asarray(value.to_host()) for value in bound]
        return profile_dispatches(
            model_path,
            built["vmfb"],
            built["function"],
            built["inputs"],
            inputs,
            runs,
            driver=driver,
            threads=threads,
            sites=sites[0],
        )

    return _keep(
        key,
        _Session(
            bind=lambda feeds: bind_iree_inputs(device, feeds, names),
            call=lambda args: function(*args),
            outputs=iree_outputs,
            info=info,
            profile=profile,
        ),
    )

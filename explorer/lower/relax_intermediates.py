"""Intermediate tensors of a model run through TVM Relax: the value each ONNX node's output gets.

Runs where TVM is (the worker). The imported ``main`` is rewritten to also return, for every
ONNX node the import traced (``origin``), the bindings made from it (the node's output as
Relax computes it is one of them, often the last; a batch norm's is the first item of a
tuple whose others are statistics). The module is then compiled untuned with the target's default pipeline and
run once. Returning a tensor keeps it alive, so fusion may change around it: this is a build
for finding where two runtimes disagree, not for timing.

Examples
--------
>>> run_relax_intermediates.__name__
'run_relax_intermediates'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["run_relax_intermediates"]


def run_relax_intermediates(
    path: str,
    input_shapes: Mapping[str, Sequence[int]] | None,
    feeds: Mapping[str, Any],
    target: str = "llvm",
) -> dict[str, Any]:
    """Import ``path``, return every traced node's output too, compile and run once on ``feeds``.

    Returns
    -------
    dict
        ``{"ok": True, "values": {onnx node: [arrays, in binding order]}, "tvm"}``, or the import's failure
        (:func:`explorer.lower.relax_steps.import_relax`).

    Examples
    --------
    >>> import os, tempfile, numpy as np, onnx
    >>> from explorer import zoo
    >>> path = os.path.join(tempfile.mkdtemp(), "mlp.onnx")
    >>> onnx.save(zoo.build("mlp"), path)
    >>> out = run_relax_intermediates(path, None, {"input": np.ones((1, 1, 28, 28), np.float32)})
    >>> [v.shape for v in out["values"]["/fc1/Gemm"]][-1]
    (1, 256)
    """
    import numpy as np
    import tvm
    from tvm import relax

    from .relax_steps import _dims, _import_module, _import_origins, _target

    imported = _import_module(path, input_shapes)
    if not imported["ok"]:
        return imported
    mod = imported["module"]
    origins = _import_origins(imported["model"], imported["importer"], mod)
    by_name = {str(var.name): node for var, node in origins.items()}
    mod = relax.transform.ToNonDataflow()(mod)  # a dataflow var cannot leave its block
    main = mod["main"]
    made: list[tuple[str, Any]] = []  # (ONNX node, a tensor binding made from it), in order
    for block in main.body.blocks:
        for binding in block.bindings:
            node = by_name.get(str(binding.var.name))
            if node is not None and _dims(binding.var.ty) is not None:  # a tensor of known rank
                made.append((node, binding.var))
    returned = [main.body.body, *(var for _, var in made)]
    body = relax.SeqExpr(main.body.blocks, relax.Tuple(returned))
    mod["main"] = relax.Function(
        main.params,
        body,
        ret_ty=relax.TupleType([e.ty for e in returned]),
        is_pure=main.is_pure,
        attrs=main.attrs,
    )
    built_for = _target(target)
    executable = tvm.compile(mod, target=built_for, relax_pipeline=relax.get_default_pipeline(built_for))
    machine = relax.VirtualMachine(executable, tvm.cpu())
    args = [tvm.runtime.tensor(np.ascontiguousarray(v)) for v in feeds.values()]
    result = machine["main"](*args)
    values: dict[str, list[Any]] = {}
    for i, (node, _) in enumerate(made):
        values.setdefault(node, []).append(result[i + 1].numpy())
    return {"ok": True, "values": values, "tvm": tvm.__version__}

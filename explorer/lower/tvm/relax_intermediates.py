"""Intermediate tensors of a model run through TVM Relax: the value each ONNX node's output gets.

Runs where TVM is (the worker). The imported ``main`` is rewritten to also return, for every
ONNX node the import traced (``origin``), the bindings made from it (the node's output as
Relax computes it is one of them, often the last; a batch norm's is the first item of a
tuple whose others are statistics). The module is then compiled untuned with the target's default pipeline and
run once. Returning a tensor keeps it alive, so fusion may change around it: this is a build
for finding where two runtimes disagree, not for timing.

Examples
--------
>>> import numpy as np
>>> from explorer.isolation import worker
>>> from explorer import zoo
>>> feeds = {"input": np.ones((1, 1, 28, 28), np.float32)}
>>> out = worker.run_on_model(run_relax_intermediates, zoo.build("mlp"), None, feeds)
>>> out["ok"], sorted(out["values"])
(True, ['/Flatten', '/fc1/Gemm', '/fc2/Gemm', '/fc3/Gemm', '/relu1/Relu', '/relu2/Relu'])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from explorer.lower.tvm.relax_exprs import tensor_dims
from explorer.lower.tvm.relax_frontend import import_origins, run_importer
from explorer.lower.tvm.relax_target import cpu_target

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
        (:func:`explorer.lower.tvm.relax_frontend.import_relax`).

    Examples
    --------
    >>> import numpy as np
    >>> from explorer import zoo
    >>> out = run_relax_intermediates(zoo.build("mlp"), None, {"input": np.ones((1, 1, 28, 28), np.float32)})
    >>> [v.shape for v in out["values"]["/fc1/Gemm"]][-1]
    (1, 256)
    """
    import numpy as np
    import tvm
    from tvm import relax

    imported = run_importer(path, input_shapes)
    if not imported["ok"]:
        return imported
    mod = imported["module"]
    origins = import_origins(imported["model"], imported["importer"], mod)
    by_name = {str(var.name): node for var, node in origins.items()}
    mod = relax.transform.ToNonDataflow()(mod)  # a dataflow var cannot leave its block
    main = mod["main"]
    made: list[tuple[str, Any]] = []  # (ONNX node, a tensor binding made from it), in order
    for block in main.body.blocks:
        for binding in block.bindings:
            node = by_name.get(str(binding.var.name))
            if node is not None and tensor_dims(binding.var.ty) is not None:  # a tensor of known rank
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
    built_for = cpu_target(target)
    executable = tvm.compile(mod, target=built_for, relax_pipeline=relax.get_default_pipeline(built_for))
    machine = relax.VirtualMachine(executable, tvm.cpu())
    args = [tvm.runtime.tensor(np.ascontiguousarray(v)) for v in feeds.values()]
    result = machine["main"](*args)
    values: dict[str, list[Any]] = {}
    for i, (node, _) in enumerate(made):
        values.setdefault(node, []).append(result[i + 1].numpy())
    return {"ok": True, "values": values, "tvm": tvm.__version__}

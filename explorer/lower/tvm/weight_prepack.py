"""(worker) Repack a tuned build's weights one at a time, each original let go once its copy is made.

A CPU kernel scheduled with a layout rewrite (MetaSchedule's, or a default schedule's) wants its
weight in a packed layout; ``SplitLayoutRewritePreproc`` splits that rewrite out as its own kernel,
``R.call_tir(NAME_weight_prepack, (weight,))``, and TVM's ``FoldConstant`` then evaluates every such
call on the constant weights in one pass, holding every original and every packed copy until the
pass ends: twice the weights. :func:`fold_weight_prepacks` evaluates them one by one instead, and
after each hands the original's pages back (:func:`explorer.lower.tvm.relax_frontend.release_constant`:
an external weight is a copy-on-write mapping of its file, so its pages are dropped and read again
if anything needs them), so the build holds the packed weights plus one original at a time.

Examples
--------
>>> PREPACK_SUFFIX
'_weight_prepack'
"""

from __future__ import annotations

from typing import Any

__all__ = ["PREPACK_SUFFIX", "fold_weight_prepacks"]

PREPACK_SUFFIX = "_weight_prepack"
"""How ``SplitLayoutRewritePreproc`` names a weight's layout-rewrite kernel (``matmul1_weight_prepack``)."""


def _prepack_weight(call: Any, module: Any) -> tuple[Any, Any] | None:
    """``(kernel, constant)`` when ``call`` is ``R.call_tir(NAME_weight_prepack, (constant,))``."""
    from tvm import ir, relax

    if not isinstance(call.op, ir.Op) or call.op.name != "relax.call_tir" or len(call.args) < 2:
        return None
    kernel, arguments = call.args[0], call.args[1]
    if not isinstance(kernel, ir.GlobalVar) or not kernel.name_hint.endswith(PREPACK_SUFFIX):
        return None
    if not isinstance(arguments, relax.Tuple) or len(arguments.fields) != 1:
        return None
    (weight,) = arguments.fields
    if not isinstance(weight, ir.GenericConst) or kernel not in module.functions:
        return None
    return kernel, weight


def fold_weight_prepacks(module: Any, target: Any) -> Any:
    """Replace every ``R.call_tir(NAME_weight_prepack, (constant,))`` in ``module``'s Relax functions by
    its value, evaluated one weight at a time, each original released once packed.

    Parameters
    ----------
    module : tvm.IRModule
        A module after ``SplitLayoutRewritePreproc``.
    target : tvm.target.Target
        The CPU the packing kernels are compiled for (this machine's: they run here).

    Returns
    -------
    tvm.IRModule
        The module with the packed weights as constants (the packing kernels left for
        ``DeadCodeElimination`` or ``FoldConstant`` to drop).

    Examples
    --------
    >>> import numpy as np
    >>> import tvm
    >>> from tvm.script import from_source
    >>> module = from_source('''
    ... @I.ir_module
    ... class Module:
    ...     @T.prim_func
    ...     def w_weight_prepack(a: T.Buffer((2, 2), "float32"), b: T.Buffer((2, 2), "float32")):
    ...         for i, j in T.grid(2, 2):
    ...             b[j, i] = a[i, j]
    ...     @R.function
    ...     def main(x: R.Tensor((2, 2), "float32"), w: R.Tensor((2, 2), "float32")):
    ...         cls = Module
    ...         p = R.call_tir(cls.w_weight_prepack, (w,), out_ty=R.Tensor((2, 2), "float32"))
    ...         return R.add(x, p)
    ... ''')
    >>> weight = np.arange(4, dtype="float32").reshape(2, 2)
    >>> bound = tvm.relax.transform.BindParams("main", {"w": weight})(module)
    >>> folded = fold_weight_prepacks(bound, tvm.target.Target("llvm"))
    >>> folded["main"].body.blocks[0].bindings[0].value.value.numpy().tolist()
    [[0.0, 2.0], [1.0, 3.0]]
    """
    import tvm
    from tvm import relax

    from explorer.lower.tvm.relax_frontend import release_constant

    kernels: dict[str, Any] = {}

    @relax.expr_functor.mutator
    class _Fold(relax.PyExprMutator):
        def visit_call_(self, call: Any) -> Any:
            call = super().visit_call_(call)
            found = _prepack_weight(call, module)
            if found is None:
                return call
            kernel, weight = found
            if kernel.name_hint not in kernels:
                function = module[kernel].with_attr("global_symbol", "main")
                kernels[kernel.name_hint] = tvm.compile(tvm.IRModule({"main": function}), target=target)
            out = call.ty_args[0] if call.ty_args else call.ty
            packed = tvm.runtime.empty(tuple(int(d) for d in out.shape), out.dtype, tvm.cpu())
            kernels[kernel.name_hint]["main"](weight.value, packed)
            release_constant(weight.value)  # packed: the original's pages go back
            return relax.const(packed)

    folder = _Fold(module)
    for global_var, function in module.functions.items():
        if isinstance(function, relax.Function):
            folder.builder_.update_func(global_var, folder.visit_expr(function))
    return folder.builder_.get()

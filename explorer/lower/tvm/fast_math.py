"""GELU in TVM's fast, vectorisable erf and tanh, for tuned CPU builds.

Runs where TVM is (the worker). On ``llvm``, TVM lowers ``erf`` to a call of the C library's
``erff``, one scalar call per element: the GELU after a transformer's FFN matmul then costs
about as much as the matmul (32 x 1024 elements: 0.47 ms on one core of this machine).
TVM's ``FastMathTransform`` rewrites ``relax.erf``, ``exp``, ``tanh`` and ``softmax`` into
polynomial versions (``topi.fast_erf``, ...) that vectorise, but not ``relax.nn.gelu``,
which keeps its ``erf`` inside the op until legalisation. :func:`FastGelu` writes GELU (and
its tanh form) with the fast functions first; the tuned pipeline runs both
(:data:`explorer.lower.tvm.relax_tuning.TUNING_PASSES`). The approximations stay within float32
tolerances of ONNX Runtime's outputs (the benchmark checks agreement).

Examples
--------
>>> FastGelu().info.name
'FastGelu'
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["FastGelu", "EXPLORER_RELAX_PASSES"]


def FastGelu() -> Any:  # named like the relax.transform passes it sits among
    """A module pass: ``relax.nn.gelu`` and ``relax.nn.gelu_tanh`` in ``topi.fast_erf`` / ``fast_tanh``.

    Examples
    --------
    >>> import tvm
    >>> from tvm import relax
    >>> bb = relax.BlockBuilder()
    >>> x = relax.Var("x", relax.TensorType((4,), "float32"))
    >>> with bb.function("main", [x]):
    ...     _ = bb.emit_func_output(bb.emit(relax.op.nn.gelu(x)))
    >>> text = FastGelu()(bb.get()).script()
    >>> "R.nn.gelu" in text, "fast_erf" in text
    (False, True)
    """
    import tvm
    from tvm import relax, te, topi
    from tvm.relax import PyExprMutator, expr_functor

    def gelu(x: Any) -> Any:
        half = tvm.tirx.const(0.5, x.dtype)
        scaled = te.compute(x.shape, lambda *i: x(*i) * tvm.tirx.const(1 / math.sqrt(2), x.dtype))
        erf = topi.fast_erf(scaled)
        return te.compute(x.shape, lambda *i: x(*i) * (half + half * erf(*i)), name="fast_gelu")

    def gelu_tanh(x: Any) -> Any:
        c = tvm.tirx.const(math.sqrt(2 / math.pi), x.dtype)
        k = tvm.tirx.const(0.044715, x.dtype)
        inner = te.compute(x.shape, lambda *i: c * (x(*i) + k * x(*i) * x(*i) * x(*i)))
        tanh = topi.fast_tanh(inner)
        half = tvm.tirx.const(0.5, x.dtype)
        return te.compute(x.shape, lambda *i: half * x(*i) * (half + half + tanh(*i)), name="fast_gelu_tanh")

    rules = {"relax.nn.gelu": gelu, "relax.nn.gelu_tanh": gelu_tanh}

    @expr_functor.mutator
    class Rewrite(PyExprMutator):
        def visit_call_(self, call: Any) -> Any:
            rule = rules.get(getattr(call.op, "name", ""))
            if rule is not None and str(getattr(call.args[0].ty, "dtype", "")) in ("float32", "float16"):
                return self.builder_.call_te(rule, self.visit_expr(call.args[0]))
            return super().visit_call_(call)

    @tvm.transform.module_pass(opt_level=0, name="FastGelu")
    def fast_gelu(mod: Any, _ctx: Any) -> Any:
        rewriter = Rewrite(mod)
        for gv, func in mod.functions_items():
            if isinstance(func, relax.Function):
                rewriter.builder_.update_func(gv, rewriter.visit_expr(func))
        return rewriter.builder_.get()

    return fast_gelu


EXPLORER_RELAX_PASSES = {"FastGelu": FastGelu}
"""Relax passes of the project's own, found by name beside ``relax.transform``'s."""

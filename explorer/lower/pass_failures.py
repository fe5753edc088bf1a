"""When a TVM pass fails on a model: which pass, on which Relax binding, from which ONNX node, and the fix.

A TVM pass that raises (LegalizeOps or FoldConstant meeting a tensor whose shape it does
not know: ``emit_te now only supports Tensor that has ShapeExpr shape``) is a fact about
the model, not a bug of ours: :class:`PassWatch` watches the passes run in the worker (a
pass instrument keeps the stack of passes running and the module each was given; a hook
on ``BlockBuilder.call_te`` keeps what the last legalization was computing) and turns the
exception into a :class:`~explorer.core.errors.LoweringError` that names the pass, the binding
(the call being legalized, else the first tensor of unknown shape), the ONNX nodes it came
from (the import's ``origin`` of each binding) and, when a shape is unknown, the fix:
:data:`~explorer.lower.rewrites.FIX` (fixed input shapes and onnxsim, which turn the
shape computations into constants). It crosses the worker's pipe typed; :func:`located`
puts the model's source in it on the parent's side.

Examples
--------
>>> from explorer.core.errors import LoweringError
>>> err = located(LoweringError("shape unknown", pass_name="FoldConstant"), "zoo:yolov8")
>>> str(err)
'zoo:yolov8: TVM pass FoldConstant failed: shape unknown'
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from explorer.core.errors import LoweringError

__all__ = ["PassWatch", "located", "SHAPE_UNKNOWN"]

SHAPE_UNKNOWN = "emit_te now only supports Tensor that has ShapeExpr shape"
"""What TVM's legalization says when it meets a tensor whose shape it does not know."""

_WRAPPERS = frozenset({"sequential", "_pipeline"})
"""Names of the passes that only run others (a ``Sequential``, a pipeline function)."""


def located(err: LoweringError, path: str | None) -> LoweringError:
    """The same error, naming the model's source ``path`` (what the worker could not know).

    Examples
    --------
    >>> located(LoweringError("x", pass_name="FuseOps", binding="lv"), "m.onnx").binding
    'lv'
    """
    return err.replace(path=path) if path is not None else err


class PassWatch:
    """Watch the TVM passes run in this process (the worker), to say where one failed.

    Parameters
    ----------
    origins : mapping or callable, optional
        Relax variable -> the ONNX node it was converted from
        (:func:`explorer.lower.tvm.relax_frontend.import_origins`), or a
        function making that mapping (called only when a pass failed).

    Examples
    --------
    >>> PassWatch().running
    []
    """

    def __init__(self, origins: Mapping[Any, str] | Callable[[], Mapping[Any, str]] | None = None) -> None:
        self._origins = origins
        self.running: list[tuple[str, Any]] = []
        self.last_call_te: tuple[Any, tuple[Any, ...]] | None = None

    def instrument(self) -> Any:
        """A pass instrument keeping the stack of the passes running and the module each was given.

        Examples
        --------
        >>> import tvm
        >>> from explorer import zoo
        >>> from explorer.lower.tvm.relax_frontend import run_importer
        >>> mod = run_importer(zoo.build("mlp"), None)["module"]
        >>> @tvm.transform.module_pass(opt_level=0, name="Broken")
        ... def broken(mod, ctx):
        ...     raise ValueError("no")
        >>> watch = PassWatch()
        >>> with tvm.transform.PassContext(instruments=[watch.instrument()]):
        ...     try:
        ...         _ = broken(mod)
        ...     except ValueError:
        ...         pass
        >>> [name for name, _ in watch.running]  # the pass that raised never finished
        ['Broken']
        """
        import tvm

        running = self.running

        @tvm.instrument.pass_instrument
        class _Running:
            def run_before_pass(self, mod: Any, info: Any) -> None:
                running.append((info.name, mod))

            def run_after_pass(self, _mod: Any, _info: Any) -> None:
                if running:
                    running.pop()

        return _Running()

    @contextlib.contextmanager
    def watching(self) -> Iterator[PassWatch]:
        """Within it, remember the arguments of each ``BlockBuilder.call_te`` (what a legalization
        is computing) and run passes under a PassContext like the current one plus :meth:`instrument`.

        Examples
        --------
        >>> import tvm
        >>> from tvm import relax
        >>> from explorer import zoo
        >>> from explorer.lower.tvm.relax_frontend import run_importer
        >>> mod = run_importer(zoo.build("mlp"), None)["module"]
        >>> watch = PassWatch()
        >>> with watch.watching():
        ...     _ = relax.transform.LegalizeOps()(mod)
        >>> watch.running, watch.last_call_te[0].__name__  # every pass ended; the last op legalized
        ([], 'add')
        >>> @tvm.transform.module_pass(opt_level=0, name="Broken")
        ... def broken(mod, ctx):
        ...     raise ValueError("no")
        >>> with watch.watching():
        ...     try:
        ...         _ = broken(mod)
        ...     except ValueError as err:
        ...         failure = watch.error(err)
        >>> str(failure)
        'TVM pass Broken failed: ValueError: no'
        """
        import tvm
        from tvm import relax

        original = relax.BlockBuilder.call_te
        watch = self

        def call_te(builder: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
            watch.last_call_te = (func, args)
            return original(builder, func, *args, **kwargs)

        current = tvm.transform.PassContext.current()
        context = tvm.transform.PassContext(
            opt_level=current.opt_level,
            required_pass=list(current.required_pass),
            disabled_pass=list(current.disabled_pass),
            instruments=[*current.instruments, self.instrument()],
            config=dict(current.config) or None,
        )
        relax.BlockBuilder.call_te = call_te  # the worker's own copy of TVM: nothing else sees it
        try:
            with context:
                yield self
        finally:
            relax.BlockBuilder.call_te = original

    def failed_pass(self) -> tuple[str | None, Any]:
        """The module-level pass that was running when an exception came (the outermost one not a
        mere sequence of others) and the module it was given; ``(None, None)`` when none was.

        Examples
        --------
        >>> PassWatch().failed_pass()
        (None, None)
        """
        for name, mod in self.running:
            if name not in _WRAPPERS and "." not in name:  # tirx.* passes run inside a Relax pass
                return name, mod
        return self.running[-1] if self.running else (None, None)

    def error(self, err: BaseException, mod: Any = None, pass_name: str | None = None) -> LoweringError:
        """The :class:`~explorer.core.errors.LoweringError` saying where ``err`` (raised by a pass) happened.

        ``mod`` and ``pass_name``: the module the pass was given and its name, when the caller
        ran it alone; else those the instrument saw.

        Examples
        --------
        >>> PassWatch().error(ValueError("no"), pass_name="FuseOps").pass_name
        'FuseOps'
        """
        from explorer.lower.rewrites import FIX  # the notebook's side: the worker loads it only on failure

        seen_name, seen_mod = self.failed_pass()
        name = pass_name or seen_name or "(unknown pass)"
        mod = mod if mod is not None else seen_mod
        text = " ".join(str(err).split())
        kind = type(err).__name__
        message = f"{kind}: {text[:400]}" if text else f"{kind} (TVM gave no message)"
        legalizing = self.last_call_te if _through_call_te(err) else None
        about_shapes = legalizing is not None or "shape" in text.lower()
        binding, unknown = _culprit(mod, legalizing) if mod is not None and about_shapes else (None, [])
        if unknown:
            shapes = ", ".join(f"{_name(var)}: {_type_text(var)}" for var in unknown[:3])
            message += f" (a tensor whose shape TVM does not know: {shapes})"
        origins = self._origins() if callable(self._origins) else (self._origins or {})
        nodes: list[str] = []
        for var in [binding, *unknown] if binding is not None else unknown:
            origin = _origin(origins, var)
            if origin and origin not in nodes:
                nodes.append(origin)
        fix = FIX if unknown or SHAPE_UNKNOWN in text else None
        op = _op_of(mod, binding) if binding is not None else None
        return LoweringError(
            f"{op}: {message}" if op else message,
            pass_name=name,
            binding=_name(binding) if binding is not None else None,
            onnx_nodes=tuple(nodes),
            fix=fix,
        )


def _through_call_te(err: BaseException) -> bool:
    """Whether ``err`` was raised under ``BlockBuilder.call_te`` (a legalization computing a call)."""
    tb = err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "call_te":
            return True
        tb = tb.tb_next
    return False


def _bindings(mod: Any) -> list[Any]:
    main = next((f for gv, f in mod.functions.items() if gv.name_hint == "main"), None)
    blocks = getattr(getattr(main, "body", None), "blocks", ())
    return [b for block in blocks for b in block.bindings]


def _op_of(mod: Any, var: Any) -> str | None:
    """The operator ``var`` is bound to in ``main`` (``relax.nn.prelu``), or None."""
    for binding in _bindings(mod):
        if binding.var.same_as(var):
            op = getattr(getattr(binding.value, "op", None), "name", None)
            return str(op) if op else None
    return None


def _shape_unknown(var: Any) -> bool:
    """Whether ``var`` is a tensor whose shape is not written out (no ``ShapeExpr``)."""
    from tvm import relax

    ty = getattr(var, "ty", None)
    return isinstance(ty, relax.TensorType) and not isinstance(ty.shape, relax.ShapeExpr)


def _flat_args(value: Any) -> list[Any]:
    args = []
    for arg in getattr(value, "args", ()):
        fields = getattr(arg, "fields", None)
        args.extend(fields if fields is not None else [arg])
    return args


def _culprit(mod: Any, call_te: tuple[Any, tuple[Any, ...]] | None) -> tuple[Any, list[Any]]:
    """The binding a pass failed on and the tensors of unknown shape it read.

    The binding whose call reads every variable the last ``call_te`` was given (the call being
    legalized), with those of its arguments whose shape is unknown; else the first binding of
    ``main`` of unknown shape reading only tensors of known shape (where the shape got lost).
    """
    bindings = _bindings(mod)
    if call_te is not None:
        given = [a for a in _flat_args_of(call_te[1]) if _is_var(a)]
        for binding in bindings:
            args = _flat_args(binding.value)
            if given and all(any(a.same_as(g) for a in args) for g in given):
                unknown = [a for a in args if _is_var(a) and _shape_unknown(a)]
                return binding.var, unknown
    lost = [b for b in bindings if _shape_unknown(b.var)]
    for binding in lost:
        if not any(_is_var(a) and _shape_unknown(a) for a in _flat_args(binding.value)):
            return binding.var, [binding.var]
    return (lost[0].var, [lost[0].var]) if lost else (None, [])


def _flat_args_of(args: tuple[Any, ...]) -> list[Any]:
    flat: list[Any] = []
    for arg in args:
        if isinstance(arg, (list, tuple)):
            flat.extend(_flat_args_of(tuple(arg)))
        else:
            fields = getattr(arg, "fields", None)
            flat.extend(fields if fields is not None else [arg])
    return flat


def _is_var(expr: Any) -> bool:
    from tvm import relax

    return isinstance(expr, relax.Var)


def _name(var: Any) -> str:
    return str(getattr(var, "name", None) or getattr(var, "name_hint", None) or var)


def _type_text(var: Any) -> str:
    return " ".join(str(getattr(var, "ty", "")).split())


def _origin(origins: Mapping[Any, str], var: Any) -> str | None:
    """The ONNX node ``var`` came from: by the variable, else by its name (a pass made it anew)."""
    if var in origins:
        return origins[var]
    name = _name(var)
    return next((node for known, node in origins.items() if _name(known) == name), None)

"""Read pieces of a Relax module as plain values: a type's shape and dtype, a binding's op and operands.

What the graph data (:mod:`explorer.lower.tvm.relax_graph_data`), the import's origins
(:mod:`explorer.lower.tvm.relax_frontend`), the tuner and the intermediates read from a Relax
expression, in one place. TVM is imported inside each function: these run where TVM is (the
worker), on objects TVM made.

Examples
--------
>>> from explorer import zoo
>>> from explorer.lower.tvm.relax_frontend import run_importer
>>> main = run_importer(zoo.build("mlp"), {"input": [1, 1, 28, 28]})["module"]["main"]
>>> binding = main.body.blocks[0].bindings[0]
>>> op_name(binding.value), tensor_dims(binding.var.ty), tensor_dtype(binding.var.ty)
('relax.reshape', (1, 784), 'float32')
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CALL_PRIM_FUNC",
    "tensor_dims",
    "tensor_dtype",
    "is_var",
    "op_name",
    "operands",
    "called_prim_func",
    "call_attributes",
]

CALL_PRIM_FUNC = "relax.call_prim_func"
"""The op of a direct call of a PrimFunc (destination-passing style, after CallTIRRewrite)."""


def tensor_dims(ty: Any) -> tuple[Any, ...] | None:
    """The shape of a Relax type: ints where static, a symbolic dimension's text elsewhere; None if unknown.

    Examples
    --------
    >>> from tvm import relax
    >>> tensor_dims(relax.TensorType([1, 3], "float32")), tensor_dims(relax.TensorType(ndim=2))
    ((1, 3), None)
    """
    shape = getattr(ty, "shape", None)
    if shape is None:
        return None
    values = getattr(shape, "values", shape)
    try:
        return tuple(int(d) if hasattr(d, "value") or isinstance(d, int) else str(d) for d in values)
    except TypeError:
        return None


def tensor_dtype(ty: Any) -> str | None:
    """The dtype of a Relax type (``"float32"``), or None when it has none.

    Examples
    --------
    >>> from tvm import relax
    >>> tensor_dtype(relax.TensorType([1], "int64")), tensor_dtype(relax.ShapeType(ndim=1))
    ('int64', None)
    """
    dtype = getattr(ty, "dtype", None)
    return str(dtype) if dtype not in (None, "") else None


def is_var(expr: Any) -> bool:
    """Whether ``expr`` is a Relax variable (dataflow variables included).

    Examples
    --------
    >>> from tvm import relax
    >>> is_var(relax.Var("x", relax.TensorType([1], "float32"))), is_var(relax.const(1.0))
    (True, False)
    """
    from tvm import relax

    return isinstance(expr, relax.Var)


def called_prim_func(value: Any) -> str | None:
    """The PrimFunc a ``call_tir`` binding calls, by name (None for any other binding).

    Examples
    --------
    >>> from tvm import relax
    >>> called_prim_func(relax.op.add(relax.const(1.0), relax.const(2.0))) is None
    True
    """
    from tvm import relax

    args = getattr(value, "args", ())
    if op_name(value) == "relax.call_tir" and args and isinstance(args[0], relax.GlobalVar):
        return args[0].name_hint
    return None


def operands(value: Any) -> list[Any]:
    """What a binding reads: a tuple part's tuple, an alias's variable, a ``call_tir``'s arguments
    (not its PrimFunc), any other call's arguments (a direct PrimFunc call's include the tensor
    it writes).

    Examples
    --------
    >>> from tvm import relax
    >>> x = relax.Var("x", relax.TensorType([2], "float32"))
    >>> [str(a.name) for a in operands(relax.op.add(x, x))], operands(x) == [x]
    (['x', 'x'], True)
    """
    from tvm import relax

    if isinstance(value, relax.TupleGetItem):
        return [value.tuple_value]
    if isinstance(value, relax.Var):  # an alias reads the variable it names
        return [value]
    args = list(getattr(value, "args", ()))
    if called_prim_func(value) is not None:
        fields = getattr(args[1], "fields", None) if len(args) > 1 else None
        return list(fields) if fields is not None else args[1:]
    return args


def op_name(value: Any) -> str:
    """A binding's op: a Relax operator's name, a called function's name, ``relax.extern.SYMBOL``
    for a packed function of the runtime (``vm.builtin.reshape``), ``relax.alias`` for ``y = x``.

    Examples
    --------
    >>> from tvm import relax
    >>> x = relax.Var("x", relax.TensorType([2], "float32"))
    >>> op_name(relax.op.nn.relu(x)), op_name(x), op_name(relax.Tuple([x]))
    ('relax.nn.relu', 'relax.alias', 'relax.Tuple')
    """
    from tvm import relax

    op = getattr(value, "op", None)
    if isinstance(op, relax.ExternFunc):
        return f"relax.extern.{op.global_symbol}"
    if op is not None:
        return str(getattr(op, "name", None) or getattr(op, "name_hint", None) or op)
    if isinstance(value, relax.Var):
        return "relax.alias"
    return f"relax.{type(value).__name__}"


def call_attributes(call: Any) -> dict[str, Any]:
    """A call's attributes as plain values: scalars as they are, sequences as lists, anything else as text.

    Examples
    --------
    >>> from tvm import relax
    >>> x = relax.Var("x", relax.TensorType([2, 3], "float32"))
    >>> call_attributes(relax.op.sum(x, axis=[1]))
    {'axis': [1], 'keepdims': False}
    """
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

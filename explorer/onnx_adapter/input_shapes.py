"""Input shapes given by the user: check them against a model's inputs, then fix them in the model.

:func:`check_input_shapes` is the one check of ``--input-shape`` and ``input_shapes=`` (names,
rank, fixed dimensions, size); :func:`fix_input_shapes` writes the checked shapes into a
model's graph inputs. :func:`explorer.load`, the shape-inference worker step and the cost
model use them.

Examples
--------
>>> from explorer import zoo
>>> m = zoo.build("mlp")
>>> fix_input_shapes(m, {"input": [8, 1, 28, 28]})
>>> [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
[8, 1, 28, 28]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx
from onnx import ModelProto

from explorer.core.errors import ModelLoadError, UsageError
from explorer.core.tensors import format_bytes, format_shape
from explorer.onnx_adapter.tensor_protos import dim_from_proto, dtype_name, shape_bytes, shape_from_type

__all__ = ["check_input_shapes", "fix_input_shapes", "parse_input_shape", "parse_input_shapes"]


def parse_input_shape(text: str) -> tuple[str, list[int]]:
    """Parse ``NAME=1,3,224,224`` (or ``NAME=1x3x224x224``) into a name and a shape.

    The one parser of a user's input shape: ``--input-shape`` (through the CLI's argparse type)
    and the Explorer's shapes box.

    Raises
    ------
    UsageError
        The text is not ``NAME=D1,D2,...`` with positive integer dimensions (the message quotes it).

    Examples
    --------
    >>> parse_input_shape("input=1,3,224,224")
    ('input', [1, 3, 224, 224])
    >>> parse_input_shape("x:0=2x8")
    ('x:0', [2, 8])
    """
    name, sep, dims = text.rpartition("=")
    if not sep or not name or not dims:
        raise UsageError(f"expected NAME=D1,D2,... (e.g. input=1,3,224,224), got {text!r}")
    try:
        shape = [int(d) for d in dims.replace("x", ",").split(",") if d.strip()]
    except ValueError:
        raise UsageError(f"dimensions must be integers in {text!r}") from None
    if not shape or any(d <= 0 for d in shape):
        raise UsageError(f"dimensions must be positive integers in {text!r}")
    return name, shape


def parse_input_shapes(text: str) -> dict[str, list[int]] | None:
    """Every ``NAME=D1,D2,...`` of ``text`` (separated by spaces or ``;``), by name; None when empty.

    Examples
    --------
    >>> parse_input_shapes("input=1,3,64,64; mask=1x64")
    {'input': [1, 3, 64, 64], 'mask': [1, 64]}
    >>> parse_input_shapes("  ") is None
    True
    """
    entries = text.replace(";", " ").split()
    return dict(parse_input_shape(entry) for entry in entries) or None


def check_input_shapes(
    model: ModelProto,
    input_shapes: Mapping[str, Sequence[int]],
    label: str = "<model>",
    *,
    allow_empty: bool = False,
) -> None:
    """Check ``input_shapes`` against ``model``'s inputs without changing anything.

    Every entry must name a graph input (not a weight), give its rank in positive
    integers, keep its fixed dimensions (dynamic ones, named, unnamed or paddle2onnx's
    ``-1``, take any size), and the input alone must fit in the memory a worker may use
    (:func:`explorer.isolation.worker.default_memory_mb`): a shape of terabytes is refused before
    anything allocates it. Messages list the model's inputs with their shapes. With
    ``allow_empty``, a dynamic dimension may be 0 (a decoder's first call: a past of 0 tokens).

    Parameters
    ----------
    model : onnx.ModelProto
        The model (only read).
    input_shapes : mapping
        Input name -> full shape.
    label : str
        Name of the model in error messages.
    allow_empty : bool
        Take 0 for a dynamic dimension (the runtimes' own calls; ``--input-shape`` never does).

    Raises
    ------
    ModelLoadError
        Naming the entry, what is wrong and the model's inputs.

    Examples
    --------
    >>> from explorer import zoo
    >>> m = zoo.build("mlp")
    >>> check_input_shapes(m, {"input": [4, 1, 28, 28]})
    >>> try:
    ...     check_input_shapes(m, {"image": [4, 1, 28, 28]}, "mlp.onnx")
    ... except ModelLoadError as err:
    ...     print(err)  # doctest: +NORMALIZE_WHITESPACE
    mlp.onnx: input_shapes names 'image', which is not an input;
    the model's inputs are: input float32 [batch, 1, 28, 28]
    """
    weights = {t.name for t in model.graph.initializer}
    by_name = {v.name: v for v in model.graph.input if v.name not in weights}
    known = "; ".join(_describe_input(v) for v in by_name.values()) or "none"
    inputs = f"the model's inputs are: {known}"
    for name, shape in input_shapes.items():
        if name not in by_name:
            what = (
                "a weight (an initializer also listed among the graph inputs, as exporters for "
                "IR < 4 write them), not an input that takes a shape"
                if name in weights
                else "not an input"
            )
            raise ModelLoadError(f"input_shapes names {name!r}, which is {what}; {inputs}", path=label)
        tensor_type = by_name[name].type.tensor_type
        dims = tensor_type.shape.dim
        shape = [int(d) for d in shape]
        if any(d < 0 or (d == 0 and not allow_empty) for d in shape):
            raise ModelLoadError(
                f"input_shapes for {name!r} must be positive integers, got {shape}; {inputs}", path=label
            )
        if tensor_type.HasField("shape") and len(dims) != len(shape):
            raise ModelLoadError(
                f"input {name!r} has rank {len(dims)}, but input_shapes gives {len(shape)} dims {shape}; "
                f"{inputs}",
                path=label,
            )
        for i, (dim, value) in enumerate(zip(dims, shape, strict=False)):
            if isinstance(dim_from_proto(dim), int) and dim.dim_value != value:  # -1 is dynamic, not fixed
                raise ModelLoadError(
                    f"input {name!r} dim {i} is fixed to {dim.dim_value}; input_shapes asks for {value}; "
                    f"{inputs}",
                    path=label,
                )
        _check_input_size(name, shape, tensor_type.elem_type, label)


def _describe_input(value: onnx.ValueInfoProto) -> str:
    shape, elem_type = shape_from_type(value.type)
    return f"{value.name} {dtype_name(elem_type)} {format_shape(shape) if shape is not None else '[?]'}"


def _check_input_size(name: str, shape: Sequence[int], elem_type: int, label: str) -> None:
    """Refuse a shape whose input alone is larger than the memory a worker may use."""
    from explorer.isolation.worker import default_memory_mb

    limit_mb = default_memory_mb()
    size = shape_bytes(tuple(shape), elem_type)
    if limit_mb is None or size is None or size <= limit_mb * 2**20:
        return
    raise ModelLoadError(
        f"input_shapes gives {name!r} the shape {list(shape)}: that input alone would take "
        f"{format_bytes(size)} ({size:,} bytes), more than the {format_bytes(limit_mb * 2**20)} a worker "
        "may use on this machine (75% of its memory); give a smaller shape",
        path=label,
    )


def fix_input_shapes(
    model: ModelProto,
    input_shapes: Mapping[str, Sequence[int]],
    label: str = "<model>",
    *,
    allow_empty: bool = False,
) -> None:
    """Set the dimensions of graph inputs in place (on a private copy of a model).

    Parameters
    ----------
    model : onnx.ModelProto
        The model to change (never the caller's original: :func:`explorer.load` copies first).
    input_shapes : mapping
        Input name -> full shape of positive ints (0 too where ``allow_empty``: an empty
        dynamic dimension, as a decoder's past at its first call).
    label : str
        Name of the model in error messages.
    allow_empty : bool
        As :func:`check_input_shapes`.

    Raises
    ------
    ModelLoadError
        When :func:`check_input_shapes` refuses the shapes (nothing is changed then).

    Examples
    --------
    >>> from explorer import zoo
    >>> m = zoo.build("mlp")
    >>> fix_input_shapes(m, {"input": [4, 1, 28, 28]})
    >>> [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    [4, 1, 28, 28]
    """
    check_input_shapes(model, input_shapes, label, allow_empty=allow_empty)
    by_name = {v.name: v for v in model.graph.input}
    for name, shape in input_shapes.items():
        tensor_type = by_name[name].type.tensor_type
        tensor_type.shape.ClearField("dim")
        for value in shape:
            tensor_type.shape.dim.add().dim_value = int(value)

"""An ONNX graph run the way PyTorch eager runs a model: one ``torch`` call per node, from Python.

What people run before they compile is PyTorch eager: Python calls an operator, the operator
runs its kernel and returns a new tensor, Python calls the next. :func:`torch_program` turns an
ONNX graph into exactly that: each node becomes the matching ``torch`` / ``torch.nn.functional``
call, run in graph order on tensors kept by name. Nothing is fused, folded or planned:
BatchNormalization stays a kernel of its own, as in a module in ``eval()`` mode, and every
intermediate is a new tensor. Weights become torch tensors once, when the program is made.

The ops are those of :data:`TORCH_OPS` (the zoo's CNNs, transformer, detectors and decoders); a node of
any other op, or an attribute value this translation does not follow, is refused when the
program is made (:class:`TorchUnsupported`), never run wrong.

Runs where PyTorch is (the worker, :func:`explorer.runtimes.torch_prepare.prepare_torch`).

Examples
--------
>>> import numpy as np, torch
>>> from explorer import zoo
>>> from explorer.onnx_adapter.inputs import random_feeds
>>> from explorer.onnx_adapter.ort_run import run_onnxruntime
>>> model = zoo.build("mlp")
>>> feeds = random_feeds(model)
>>> program = torch_program(model)
>>> with torch.inference_mode():
...     got = program({k: torch.from_numpy(v) for k, v in feeds.items()})
>>> bool(np.allclose(got[0].numpy(), run_onnxruntime(model, feeds)[0], atol=1e-5))
True
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["TORCH_OPS", "TorchUnsupported", "torch_program", "unsupported_nodes"]


class TorchUnsupported(ValueError):
    """A node this translation cannot run: its op, or an attribute value it does not follow.

    Attributes
    ----------
    op_type, node : str
        The node's op and name.
    """

    def __init__(self, message: str, op_type: str, node: str) -> None:
        super().__init__(message)
        self.op_type, self.node = op_type, node

    def __reduce__(self) -> tuple[Any, tuple[str, str, str]]:  # across the worker's pipe, whole
        return type(self), (str(self), self.op_type, self.node)


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def _dtype(onnx_type: int) -> Any:
    import torch
    from onnx import helper

    return torch.from_numpy(np.zeros(0, helper.tensor_dtype_to_np_dtype(onnx_type))).dtype


def _ints(tensor: Any) -> list[int]:
    return [int(v) for v in tensor.reshape(-1).tolist()]


def _pads(pads: Sequence[int], spatial: int) -> tuple[list[int], list[int] | None]:
    """ONNX pads (all begins, then all ends) as a symmetric padding, or the torch ``F.pad`` order."""
    pads = list(pads) or [0] * (2 * spatial)
    begins, ends = pads[:spatial], pads[spatial:]
    if begins == ends:
        return begins, None
    flat: list[int] = []
    for b, e in zip(reversed(begins), reversed(ends), strict=True):  # F.pad: last dimension first
        flat += [b, e]
    return [0] * spatial, flat


def _conv(node: Any, a: dict[str, Any], x: Any, w: Any, b: Any = None) -> Any:
    import torch.nn.functional as F

    spatial = w.dim() - 2
    if _text(a.get("auto_pad", "NOTSET")) not in ("NOTSET", "VALID"):
        raise _refuse(node, f"auto_pad={_text(a['auto_pad'])}")
    padding, explicit = _pads(a.get("pads", []), spatial)
    if explicit is not None:
        x = F.pad(x, explicit)
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[spatial]
    return conv(
        x,
        w,
        b,
        stride=a.get("strides", [1] * spatial),
        padding=padding,
        dilation=a.get("dilations", [1] * spatial),
        groups=a.get("group", 1),
    )


def _pool(node: Any, a: dict[str, Any], x: Any, kind: str) -> Any:
    import torch.nn.functional as F

    kernel = a["kernel_shape"]
    spatial = len(kernel)
    if _text(a.get("auto_pad", "NOTSET")) not in ("NOTSET", "VALID") or spatial != 2:
        raise _refuse(node, "auto_pad or a pool that is not 2-D")
    padding, explicit = _pads(a.get("pads", []), spatial)
    if explicit is not None:
        x = F.pad(x, explicit, value=float("-inf") if kind == "max" else 0.0)
    strides, ceil = a.get("strides", [1] * spatial), bool(a.get("ceil_mode", 0))
    if kind == "max":
        return F.max_pool2d(x, kernel, strides, padding, a.get("dilations", [1] * spatial), ceil_mode=ceil)
    return F.avg_pool2d(
        x, kernel, strides, padding, ceil, count_include_pad=bool(a.get("count_include_pad", 0))
    )


def _gemm(a: dict[str, Any], x: Any, w: Any, c: Any = None) -> Any:
    x = x.transpose(0, 1) if a.get("transA", 0) else x
    w = w.transpose(0, 1) if a.get("transB", 0) else w
    y = (x @ w) * a.get("alpha", 1.0)
    return y if c is None else y + c * a.get("beta", 1.0)


def _gather(a: dict[str, Any], data: Any, index: Any) -> Any:
    import torch

    axis = a.get("axis", 0) % data.dim()
    size = data.shape[axis]
    flat = torch.where(index < 0, index + size, index).reshape(-1).long()
    picked = torch.index_select(data, axis, flat)
    return picked.reshape((*data.shape[:axis], *index.shape, *data.shape[axis + 1 :]))


def _slice(data: Any, starts: Any, ends: Any, axes: Any = None, steps: Any = None) -> Any:
    begin, end = _ints(starts), _ints(ends)
    axes_ = _ints(axes) if axes is not None else list(range(len(begin)))
    steps_ = _ints(steps) if steps is not None else [1] * len(begin)
    index: list[Any] = [slice(None)] * data.dim()
    for b, e, axis, step in zip(begin, end, axes_, steps_, strict=True):
        if step < 0:
            raise ValueError("a Slice with a negative step")
        index[axis % data.dim()] = slice(b, e, step)
    return data[tuple(index)]


def _resize(
    node: Any, a: dict[str, Any], x: Any, roi: Any = None, scales: Any = None, sizes: Any = None
) -> Any:
    import torch.nn.functional as F

    mode = _text(a.get("mode", "nearest"))
    transform = _text(a.get("coordinate_transformation_mode", "half_pixel"))
    if sizes is not None and sizes.numel():
        if sizes.numel() != x.dim():
            raise _refuse(node, f"{sizes.numel()} sizes for a rank-{x.dim()} input")
        size = _ints(sizes)[2:]
    elif scales is not None and scales.numel():
        size = [int(d * s) for d, s in zip(x.shape[2:], scales.reshape(-1).tolist()[2:], strict=True)]
    else:
        raise _refuse(node, "neither scales nor sizes")
    if mode == "nearest":
        given = scales.reshape(-1).tolist()[2:] if scales is not None and scales.numel() else None
        return _nearest(node, x, size, given, transform, _text(a.get("nearest_mode", "round_prefer_floor")))
    if (
        mode == "linear"
        and x.dim() == 4
        and transform in ("half_pixel", "pytorch_half_pixel", "align_corners")
    ):
        return F.interpolate(x, size=size, mode="bilinear", align_corners=transform == "align_corners")
    raise _refuse(node, f"mode {mode} with {transform}")


def _nearest(
    node: Any, x: Any, size: Sequence[int], scales: Sequence[float] | None, transform: str, rounding: str
) -> Any:
    """Nearest-neighbour Resize as ONNX defines it: each output index mapped back by the
    coordinate transformation, rounded by ``nearest_mode``, clamped, then gathered per axis."""
    import math

    import torch

    rounders = {
        "floor": math.floor,
        "ceil": math.ceil,
        "round_prefer_floor": lambda v: math.ceil(v - 0.5),
        "round_prefer_ceil": lambda v: math.floor(v + 0.5),
    }
    if rounding not in rounders:
        raise _refuse(node, f"nearest_mode {rounding}")
    for axis, out in enumerate(size, start=2):
        length = x.shape[axis]
        scale = scales[axis - 2] if scales else out / length
        if transform in ("half_pixel", "pytorch_half_pixel"):
            flat = transform == "pytorch_half_pixel" and out == 1
            where = [0.0 if flat else (i + 0.5) / scale - 0.5 for i in range(out)]
        elif transform == "asymmetric":
            where = [i / scale for i in range(out)]
        elif transform == "align_corners":
            where = [i * (length - 1) / (out - 1) if out > 1 else 0.0 for i in range(out)]
        else:
            raise _refuse(node, f"coordinate_transformation_mode {transform}")
        index = [min(max(int(rounders[rounding](v)), 0), length - 1) for v in where]
        x = torch.index_select(x, axis, torch.tensor(index, dtype=torch.int64))
    return x


def _reduce(a: dict[str, Any], x: Any, axes: Any, how: str) -> Any:
    dims = _ints(axes) if axes is not None else a.get("axes")
    keep = bool(a.get("keepdims", 1))
    if not dims:
        if a.get("noop_with_empty_axes", 0):
            return x
        dims = list(range(x.dim()))
    return getattr(x, how)(dim=tuple(dims), keepdim=keep)


def _split(a: dict[str, Any], x: Any, split: Any = None, outputs: int = 1) -> Any:
    axis = a.get("axis", 0)
    sizes = _ints(split) if split is not None else a.get("split")
    if not sizes:
        parts = a.get("num_outputs", outputs)
        step = -(-x.shape[axis] // parts)
        sizes = [max(0, min(step, x.shape[axis] - i * step)) for i in range(parts)]
    return list(x.split(sizes, dim=axis))


def _constant(a: dict[str, Any]) -> Any:
    import torch
    from onnx import numpy_helper

    if "value" in a:
        return torch.from_numpy(np.array(numpy_helper.to_array(a["value"])))
    for name, dtype in (("value_float", np.float32), ("value_int", np.int64)):
        if name in a:
            return torch.from_numpy(np.array(a[name], dtype))
    for name, dtype in (("value_floats", np.float32), ("value_ints", np.int64)):
        if name in a:
            return torch.from_numpy(np.array(list(a[name]), dtype))
    raise ValueError(f"a Constant with {sorted(a)}")


def _ops() -> dict[str, Callable[..., Any]]:
    """ONNX op -> ``fn(node, attributes, *inputs)`` returning a tensor or a list of tensors."""
    import torch
    import torch.nn.functional as F

    def clip(n: Any, a: dict[str, Any], x: Any, low: Any = None, high: Any = None) -> Any:
        low = a.get("min") if low is None else low.item()
        high = a.get("max") if high is None else high.item()
        return x if low is None and high is None else torch.clamp(x, low, high)

    return {
        "Add": lambda n, a, x, y: x + y,
        "Sub": lambda n, a, x, y: x - y,
        "Mul": lambda n, a, x, y: x * y,
        "Div": lambda n, a, x, y: (
            torch.div(x, y, rounding_mode="trunc") if not x.is_floating_point() else x / y
        ),
        "Pow": lambda n, a, x, y: torch.pow(x, y),
        "Sqrt": lambda n, a, x: torch.sqrt(x),
        "Exp": lambda n, a, x: torch.exp(x),
        "Neg": lambda n, a, x: -x,
        "Relu": lambda n, a, x: torch.relu(x),
        "Sigmoid": lambda n, a, x: torch.sigmoid(x),
        "Tanh": lambda n, a, x: torch.tanh(x),
        "Erf": lambda n, a, x: torch.erf(x),
        "Gelu": lambda n, a, x: F.gelu(x, approximate=_text(a.get("approximate", "none"))),
        "Clip": clip,
        "Identity": lambda n, a, x: x,
        "Conv": _conv,
        "BatchNormalization": lambda n, a, x, scale, bias, mean, var: F.batch_norm(
            x, mean, var, scale, bias, training=False, eps=a.get("epsilon", 1e-5)
        ),
        "MaxPool": lambda n, a, x: _pool(n, a, x, "max"),
        "AveragePool": lambda n, a, x: _pool(n, a, x, "avg"),
        "GlobalAveragePool": lambda n, a, x: x.mean(dim=tuple(range(2, x.dim())), keepdim=True),
        "Flatten": lambda n, a, x: x.reshape(int(np.prod(x.shape[: a.get("axis", 1)])), -1),
        "Gemm": lambda n, a, *xs: _gemm(a, *xs),
        "MatMul": lambda n, a, x, y: x @ y,
        "Reshape": lambda n, a, x, shape: x.reshape(
            [x.shape[i] if d == 0 and not a.get("allowzero", 0) else d for i, d in enumerate(_ints(shape))]
        ),
        "Transpose": lambda n, a, x: x.permute(a.get("perm", list(range(x.dim() - 1, -1, -1)))),
        "Softmax": lambda n, a, x: _softmax(a, x),
        "Concat": lambda n, a, *xs: torch.cat(xs, dim=a["axis"]),
        "Constant": lambda n, a: _constant(a),
        "Shape": lambda n, a, x: torch.tensor(
            list(x.shape)[a.get("start", 0) : a.get("end")], dtype=torch.int64
        ),
        "Gather": lambda n, a, x, i: _gather(a, x, i),
        "Unsqueeze": lambda n, a, x, axes=None: _unsqueeze(x, _ints(axes) if axes is not None else a["axes"]),
        "Squeeze": lambda n, a, x, axes=None: _squeeze(x, _ints(axes) if axes is not None else a.get("axes")),
        "Range": lambda n, a, start, limit, delta: torch.arange(
            start.item(), limit.item(), delta.item(), dtype=start.dtype
        ),
        "LayerNormalization": lambda n, a, x, scale, bias=None: F.layer_norm(
            x, x.shape[a.get("axis", -1) % x.dim() :], scale, bias, a.get("epsilon", 1e-5)
        ),
        "Slice": lambda n, a, *xs: _slice(*xs),
        "Resize": _resize,
        "Cast": lambda n, a, x: x.to(_dtype(a["to"])),
        "ReduceMean": lambda n, a, x, axes=None: _reduce(a, x, axes, "mean"),
        "ReduceSum": lambda n, a, x, axes=None: _reduce(a, x, axes, "sum"),
        "Split": lambda n, a, x, split=None: _split(a, x, split, len(n.output)),
        "Expand": lambda n, a, x, shape: x.expand(torch.broadcast_shapes(x.shape, tuple(_ints(shape)))),
        "ConstantOfShape": lambda n, a, shape: (
            torch.full(tuple(_ints(shape)), 0.0, dtype=torch.float32)
            if "value" not in a
            else _constant(a).reshape(-1)[0].expand(tuple(_ints(shape))).clone()
        ),
        "Where": lambda n, a, c, x, y: torch.where(c, x, y),
        "Equal": lambda n, a, x, y: x == y,
        "Greater": lambda n, a, x, y: x > y,
        "Less": lambda n, a, x, y: x < y,
        "LessOrEqual": lambda n, a, x, y: x <= y,
        "GreaterOrEqual": lambda n, a, x, y: x >= y,
        "And": lambda n, a, x, y: torch.logical_and(x, y),
        "Or": lambda n, a, x, y: torch.logical_or(x, y),
        "Not": lambda n, a, x: torch.logical_not(x),
        "IsNaN": lambda n, a, x: torch.isnan(x),
        "Reciprocal": lambda n, a, x: torch.reciprocal(x),
        "Cos": lambda n, a, x: torch.cos(x),
        "Sin": lambda n, a, x: torch.sin(x),
        "Abs": lambda n, a, x: torch.abs(x),
        "Log": lambda n, a, x: torch.log(x),
    }


def _softmax(a: dict[str, Any], x: Any) -> Any:
    """Softmax as the model's opset defines it: over ``axis`` (default -1) from opset 13; before,
    over the input flattened to 2-D at ``axis`` (default 1)."""
    import torch

    if a.get("_opset", 13) >= 13:
        return torch.softmax(x, dim=a.get("axis", -1))
    axis = a.get("axis", 1) % max(x.dim(), 1)
    rows = int(np.prod(x.shape[:axis])) if axis else 1
    return torch.softmax(x.reshape(rows, -1), dim=1).reshape(x.shape)


def _unsqueeze(x: Any, axes: Sequence[int]) -> Any:
    rank = x.dim() + len(axes)
    for axis in sorted(a % rank for a in axes):
        x = x.unsqueeze(axis)
    return x


def _squeeze(x: Any, axes: Sequence[int] | None) -> Any:
    if not axes:
        return x.squeeze()
    return x.squeeze(tuple(a % x.dim() for a in axes))


TORCH_OPS = (
    "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Neg", "Relu", "Sigmoid", "Tanh", "Erf", "Gelu",
    "Clip", "Identity", "Conv", "BatchNormalization", "MaxPool", "AveragePool", "GlobalAveragePool",
    "Flatten", "Gemm", "MatMul", "Reshape", "Transpose", "Softmax", "Concat", "Constant", "Shape",
    "Gather", "Unsqueeze", "Squeeze", "Range", "LayerNormalization", "Slice", "Resize", "Cast",
    "ReduceMean", "ReduceSum", "Split", "Expand", "ConstantOfShape", "Where", "Equal", "Greater", "Less",
    "LessOrEqual", "GreaterOrEqual", "And", "Or", "Not", "IsNaN", "Reciprocal", "Cos", "Sin", "Abs", "Log",
)  # fmt: skip
"""The ONNX ops (default domain) :func:`torch_program` runs."""


def _refuse(node: Any, why: str) -> TorchUnsupported:
    name = node.name or node.output[0]
    return TorchUnsupported(
        f"PyTorch eager here cannot run {node.op_type} node {name!r}: {why}", node.op_type, name
    )


def _attribute_refusal(node: Any, a: dict[str, Any]) -> str | None:
    """Why this translation cannot follow a node's attributes (checked when the program is made)."""
    op = node.op_type
    if op in ("Conv", "MaxPool", "AveragePool") and _text(a.get("auto_pad", "NOTSET")) not in (
        "NOTSET",
        "VALID",
    ):
        return f"auto_pad={_text(a['auto_pad'])}"
    if op in ("MaxPool", "AveragePool") and len(a.get("kernel_shape", ())) != 2:
        return "a pool that is not 2-D"
    if op == "AveragePool" and not a.get("count_include_pad", 0):
        pads = list(a.get("pads", ())) or [0, 0, 0, 0]
        if pads[:2] != pads[2:]:
            return "uneven pads that the average must leave out (count_include_pad=0)"
    if op == "Resize":
        if (
            a.get("axes")
            or a.get("antialias", 0)
            or _text(a.get("keep_aspect_ratio_policy", "stretch")) != "stretch"
        ):
            return "axes, antialias or keep_aspect_ratio_policy (opset 18)"
        mode = _text(a.get("mode", "nearest"))
        transform = _text(a.get("coordinate_transformation_mode", "half_pixel"))
        if mode == "cubic" or (
            mode == "linear" and transform not in ("half_pixel", "pytorch_half_pixel", "align_corners")
        ):
            return f"mode {mode} with {transform}"
    return None


def unsupported_nodes(model: Any) -> list[tuple[str, str]]:
    """``(op_type, node name)`` of each top-level node :func:`torch_program` has no translation for.

    Examples
    --------
    >>> from explorer import zoo
    >>> unsupported_nodes(zoo.build("resnet18")), unsupported_nodes(zoo.build("control_flow"))[0][0]
    ([], 'If')
    """
    return [
        (n.op_type, n.name or n.output[0])
        for n in model.graph.node
        if n.domain not in ("", "ai.onnx") or n.op_type not in TORCH_OPS
    ]


def torch_program(model: Any) -> Callable[..., list[Any]]:
    """The graph as eager PyTorch: ``program(inputs by name) -> outputs``, one ``torch`` call per node.

    ``program(inputs, times)`` also appends ``(node name, op, ms)`` per node to the list ``times``
    (each call timed from Python, as an eager profiler sees it).

    Raises
    ------
    TorchUnsupported
        The first node whose op (or domain) has no translation (:func:`unsupported_nodes`).

    Examples
    --------
    >>> from explorer import zoo
    >>> try:
    ...     torch_program(zoo.build("custom_domain"))
    ... except TorchUnsupported as err:
    ...     print(err.op_type)
    FusedMatMul
    """
    import torch
    from onnx import numpy_helper

    missing = unsupported_nodes(model)
    if missing:
        op, name = missing[0]
        found = next(n for n in model.graph.node if (n.name or n.output[0]) == name)
        domain = f" (domain {found.domain})" if found.domain else ""
        raise TorchUnsupported(
            f"PyTorch eager here has no translation for {op}{domain} (node {name!r}; "
            f"{len(missing)} node(s) in all); it runs {len(TORCH_OPS)} ops: {', '.join(TORCH_OPS)}",
            op,
            name,
        )
    for node in model.graph.node:
        why = _attribute_refusal(node, _attrs(node))
        if why is not None:
            raise _refuse(node, why)
    opset = next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    ops = _ops()
    weights = {t.name: torch.from_numpy(np.array(numpy_helper.to_array(t))) for t in model.graph.initializer}
    steps = [
        (ops[n.op_type], n, {**_attrs(n), "_opset": opset}, list(n.input), list(n.output))
        for n in model.graph.node
    ]
    outputs = [o.name for o in model.graph.output]

    def program(inputs: Mapping[str, Any], times: list[tuple[str, str, float]] | None = None) -> list[Any]:
        values = {**weights, **inputs}
        for fn, node, attrs, names, produced in steps:
            started = time.perf_counter() if times is not None else 0.0
            args = [values[i] if i else None for i in names]
            while args and args[-1] is None:  # trailing optional inputs left out
                args.pop()
            try:
                result = fn(node, attrs, *args)
            except TorchUnsupported:
                raise
            except (ValueError, KeyError, TypeError) as err:
                raise _refuse(node, f"{type(err).__name__}: {err}") from None
            for name, value in zip(produced, result if isinstance(result, list) else [result], strict=False):
                values[name] = value
            if times is not None:  # the node's call, as a profiler around each op sees it
                spent_ms = (time.perf_counter() - started) * 1e3
                times.append((node.name or node.output[0], node.op_type, spent_ms))
        return [values[name] for name in outputs]

    return program

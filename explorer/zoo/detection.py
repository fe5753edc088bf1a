"""Object detectors of the zoo: ``detection_head`` (RetinaNet-like) and ``yolov8``.

Both compute shapes at run time as their exports do: the FPN's ``Resize`` sizes from
``Shape``/``Slice``/``Concat``, YOLOv8's anchors from the feature maps' sizes, and both keep
their post-processing (per-level reshapes, DFL, boxes and scores) in the graph.

Examples
--------
>>> from explorer import zoo
>>> [o.name for o in zoo.build("detection_head").graph.output]
['scores', 'boxes', 'mask_logits']
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from onnx import TensorProto, numpy_helper

from explorer.zoo.parts import (
    _Built,
    _check_positive,
    _conv,
    _dynamic_dim,
    _GraphBuilder,
    _image_input,
    _scope,
    _unsqueeze0,
    _value,
)

__all__: list[str] = []


def _conv_relu(b: _GraphBuilder, x: str, path: str, cin: int, cout: int, kernel: int, stride: int = 1) -> str:
    """Conv with bias (BatchNormalization folded, as exporters do in eval mode) and Relu."""
    y = _conv(b, x, path, cin, cout, kernel, stride, bias=True)
    return b.op("Relu", [y], _scope(path))


def _resize_like(b: _GraphBuilder, x: str, like: str, scope: str) -> str:
    """Nearest ``Resize`` of ``x`` to the spatial size of ``like``, computed at run time."""
    shape_x = b.op("Shape", [x], scope)
    shape_like = b.op("Shape", [like], scope)
    lead = b.op("Slice", [shape_x, b.const(scope, [0]), b.const(scope, [2]), b.const(scope, [0])], scope)
    spatial = b.op(
        "Slice", [shape_like, b.const(scope, [2]), b.const(scope, [4]), b.const(scope, [0])], scope
    )
    sizes = b.op("Concat", [lead, spatial], scope, axis=0)
    return b.op(
        "Resize",
        [x, "", "", sizes],
        scope,
        coordinate_transformation_mode="asymmetric",
        mode="nearest",
        nearest_mode="floor",
    )


def _flatten_level(b: _GraphBuilder, x: str, scope: str, channels: int) -> str:
    """``[N, A*C, H, W]`` to ``[N, H*W*A, C]`` with a run-time reshape target."""
    y = b.op("Transpose", [x], scope, perm=[0, 2, 3, 1])
    batch = _unsqueeze0(b, _dynamic_dim(b, x, 0, scope), scope)
    shape = b.op("Concat", [batch, b.const(scope, [-1]), b.const(scope, [channels])], scope, axis=0)
    return b.op("Reshape", [y, shape], scope)


def _shared_head_params(
    b: _GraphBuilder, channels: int, num_classes: int, num_anchors: int
) -> dict[str, tuple[str, str]]:
    """Weights and biases of the head convs shared by all pyramid levels."""
    params = {}
    for name, cout, kernel in (
        ("conv", channels, 3),
        ("cls", num_anchors * num_classes, 1),
        ("box", num_anchors * 4, 1),
    ):
        std = math.sqrt(2.0 / (channels * kernel * kernel)) if name == "conv" else 0.01
        weight = b.normal(f"head.{name}.weight", (cout, channels, kernel, kernel), std)
        # RetinaNet's prior: class scores start near 0.01.
        bias = b.param(
            f"head.{name}.bias", np.full(cout, -math.log(99.0) if name == "cls" else 0.0, np.float32)
        )
        params[name] = (weight, bias)
    return params


def _detection_head(
    *, width: int = 16, fpn_channels: int = 64, num_classes: int = 80, num_anchors: int = 3, seed: int = 0
) -> _Built:
    """A RetinaNet-like detector: strided backbone, FPN top-down path, shared heads."""
    _check_positive(width=width, fpn_channels=fpn_channels, num_classes=num_classes, num_anchors=num_anchors)
    b = _GraphBuilder(np.random.default_rng(seed))
    x = _conv_relu(b, "image", "backbone.stem", 3, width, 3, 2)
    features, cin = [], width
    for stage in range(2, 6):
        cout = width * 2 ** (stage - 1)
        x = _conv_relu(b, x, f"backbone.layer{stage}.0", cin, cout, 3, 2)
        x = _conv_relu(b, x, f"backbone.layer{stage}.1", cout, cout, 3)
        features.append((x, cout))
        cin = cout
    laterals = [
        _conv(b, f, f"fpn.lateral{i + 3}", c, fpn_channels, 1, bias=True)
        for i, (f, c) in enumerate(features[1:])
    ]
    pyramid = [laterals[-1]]
    for i in (1, 0):
        up = _resize_like(b, pyramid[0], laterals[i], _scope(f"fpn.upsample{i + 3}"))
        pyramid.insert(0, b.op("Add", [laterals[i], up], _scope(f"fpn.merge{i + 3}")))
    pyramid = [
        _conv(b, p, f"fpn.output{i + 3}", fpn_channels, fpn_channels, 3, bias=True)
        for i, p in enumerate(pyramid)
    ]
    heads = _shared_head_params(b, fpn_channels, num_classes, num_anchors)
    scores, boxes = [], []
    for level, p in enumerate(pyramid):
        # Every level reads the same head initializers, as RetinaNet shares its heads.
        scope = _scope(f"head.level{level + 3}")
        h = b.op(
            "Relu", [b.op("Conv", [p, *heads["conv"]], scope, kernel_shape=[3, 3], pads=[1, 1, 1, 1])], scope
        )
        cls = b.op("Sigmoid", [b.op("Conv", [h, *heads["cls"]], scope, kernel_shape=[1, 1])], scope)
        box = b.op("Conv", [h, *heads["box"]], scope, kernel_shape=[1, 1])
        scores.append(_flatten_level(b, cls, scope, num_classes))
        boxes.append(_flatten_level(b, box, scope, 4))
    b.node("Concat", scores, _scope("head"), outputs=["scores"], axis=1)
    b.node("Concat", boxes, _scope("head"), outputs=["boxes"], axis=1)
    scope = _scope("mask")
    up = b.op(
        "Resize", [pyramid[0], "", b.const(scope, [1.0, 1.0, 2.0, 2.0], np.float32)], scope, mode="linear"
    )
    b.node(
        "Conv", [up, b.normal("mask.weight", (1, fpn_channels, 1, 1), 0.1)], scope, outputs=["mask_logits"]
    )
    graph = b.graph(
        "detection_head",
        [_value("image", TensorProto.FLOAT, ["batch", 3, "height", "width"])],
        [
            _value("scores", TensorProto.FLOAT, ["batch", "anchors", num_classes]),
            _value("boxes", TensorProto.FLOAT, ["batch", "anchors", 4]),
            _value("mask_logits", TensorProto.FLOAT, ["batch", 1, "mask_height", "mask_width"]),
        ],
        "RetinaNet-style detector: FPN with Resize sizes computed from Shape/Slice/Concat at run time, "
        "shared conv heads, per-level Transpose/Reshape and Concat of all anchors.",
    )
    return _Built(graph, 17)


def _yolo_scope(path: str) -> str:
    """ultralytics' node scope: ``model.2.m.0.cv1`` becomes ``/model.2/m.0/cv1`` (numbered children
    stay with their parent, as its exports name them)."""
    segments: list[str] = []
    for part in path.split("."):
        if part.isdigit() and segments:
            segments[-1] += f".{part}"
        else:
            segments.append(part)
    return "/" + "/".join(segments)


def _yolo_conv(b: _GraphBuilder, x: str, path: str, cin: int, cout: int, kernel: int, stride: int = 1) -> str:
    """ultralytics' ``Conv``: a Conv with its BatchNormalization folded in (a bias), then SiLU as the
    exporter writes it (``Sigmoid`` and ``Mul``)."""
    scope = _yolo_scope(path)
    weight = b.normal(f"{path}.conv.weight", (cout, cin, kernel, kernel), math.sqrt(2.0 / (cin * kernel**2)))
    bias = b.normal(f"{path}.conv.bias", (cout,), 0.01)
    pad = kernel // 2
    y = b.op(
        "Conv",
        [x, weight, bias],
        f"{scope}/conv",
        dilations=[1, 1],
        group=1,
        kernel_shape=[kernel, kernel],
        pads=[pad, pad, pad, pad],
        strides=[stride, stride],
    )
    return b.op("Mul", [y, b.op("Sigmoid", [y], f"{scope}/act")], f"{scope}/act")


def _c2f(b: _GraphBuilder, x: str, path: str, cin: int, cout: int, shortcut: bool) -> str:
    """ultralytics' ``C2f`` with one bottleneck: a 1x1 conv split in two halves (``chunk``), a
    bottleneck on the second, the three concatenated and mixed by a 1x1 conv."""
    half = cout // 2
    y = _yolo_conv(b, x, f"{path}.cv1", cin, 2 * half, 1)
    parts = b.node(
        "Split", [y, b.const(_yolo_scope(path), [half, half])], _yolo_scope(path), n_outputs=2, axis=1
    )
    h = _yolo_conv(b, parts[1], f"{path}.m.0.cv1", half, half, 3)
    h = _yolo_conv(b, h, f"{path}.m.0.cv2", half, half, 3)
    if shortcut:
        h = b.op("Add", [parts[1], h], _yolo_scope(f"{path}.m.0"))
    y = b.op("Concat", [*parts, h], _yolo_scope(path), axis=1)
    return _yolo_conv(b, y, f"{path}.cv2", 3 * half, cout, 1)


def _sppf(b: _GraphBuilder, x: str, path: str, channels: int) -> str:
    """ultralytics' ``SPPF``: a 1x1 conv, three 5x5 max pools in a row, their concatenation, a 1x1 conv."""
    half = channels // 2
    pooled = [_yolo_conv(b, x, f"{path}.cv1", channels, half, 1)]
    for _ in range(3):
        pooled.append(
            b.op("MaxPool", [pooled[-1]], f"{_yolo_scope(path)}/m", kernel_shape=[5, 5], pads=[2, 2, 2, 2])
        )
    return _yolo_conv(
        b, b.op("Concat", pooled, _yolo_scope(path), axis=1), f"{path}.cv2", 4 * half, channels, 1
    )


def _make_anchors(
    b: _GraphBuilder, features: Sequence[str], strides: Sequence[int], scope: str
) -> tuple[str, str]:
    """ultralytics' ``make_anchors`` as its export with dynamic axes computes it, from each feature
    map's run-time size: ``torch.arange`` over the width and height (``Shape``, ``Gather``,
    ``Cast``, ``Range``), ``torch.meshgrid`` (a ``Reshape`` and an ``Expand`` to a shape made by
    ``Concat`` of ``Shape``s), ``torch.stack`` and ``torch.full((h * w, 1), stride)``
    (``ConstantOfShape``). Returns the anchor points ``[2, anchors]`` and strides ``[1, anchors]``."""
    points, stride_columns = [], []
    for feature, stride in zip(features, strides, strict=True):
        shape = b.op("Shape", [feature], scope)
        h = b.op("Gather", [shape, b.const(scope, 2)], scope, axis=0)
        w = b.op("Gather", [shape, b.const(scope, 3)], scope, axis=0)
        grid = []
        for size in (w, h):  # arange(end=size, dtype=float32) + 0.5
            end = b.op("Cast", [size], scope, to=TensorProto.FLOAT)
            steps = b.op(
                "Range", [b.const(scope, 0.0, np.float32), end, b.const(scope, 1.0, np.float32)], scope
            )
            grid.append(b.op("Add", [steps, b.const(scope, 0.5, np.float32)], scope))
        sx, sy = grid
        flat = [b.op("Reshape", [t, b.const(scope, [-1])], scope) for t in (sy, sx)]  # meshgrid(sy, sx, "ij")
        sizes = [b.op("Shape", [t], scope) for t in flat]
        full = b.op("Concat", sizes, scope, axis=0)
        one = b.const(scope, [1])
        yy = b.op(
            "Expand",
            [b.op("Reshape", [flat[0], b.op("Concat", [sizes[0], one], scope, axis=0)], scope), full],
            scope,
        )
        xx = b.op(
            "Expand",
            [b.op("Reshape", [flat[1], b.op("Concat", [one, sizes[1]], scope, axis=0)], scope), full],
            scope,
        )
        stacked = b.op(
            "Concat", [b.op("Unsqueeze", [t, b.const(scope, [-1])], scope) for t in (xx, yy)], scope, axis=-1
        )
        points.append(b.op("Reshape", [stacked, b.const(scope, [-1, 2])], scope))
        count = b.op("Unsqueeze", [b.op("Mul", [h, w], scope), b.const(scope, [0])], scope)
        stride_value = numpy_helper.from_array(np.array([stride], np.float32), name="value")
        stride_columns.append(
            b.op("ConstantOfShape", [b.op("Concat", [count, one], scope, axis=0)], scope, value=stride_value)
        )
    anchors = b.op("Transpose", [b.op("Concat", points, scope, axis=0)], scope, perm=[1, 0])
    strides_out = b.op("Transpose", [b.op("Concat", stride_columns, scope, axis=0)], scope, perm=[1, 0])
    return anchors, strides_out


def _yolov8(
    *, width: int = 8, num_classes: int = 80, reg_max: int = 16, image_size: int | None = None, seed: int = 0
) -> _Built:
    """A YOLOv8-style detector as ultralytics exports it with ``dynamic=True``: a C2f backbone and
    SPPF, a PAN neck, a decoupled head at strides 8, 16 and 32, and the post-processing in the
    graph (anchors from the feature maps' run-time sizes, DFL, boxes, class scores)."""
    _check_positive(width=width, num_classes=num_classes, reg_max=reg_max, image_size=image_size)
    b = _GraphBuilder(np.random.default_rng(seed))
    c1, c2, c3, c4, c5 = (width * k for k in (1, 2, 4, 8, 16))
    x = _yolo_conv(b, "images", "model.0", 3, c1, 3, 2)
    x = _yolo_conv(b, x, "model.1", c1, c2, 3, 2)
    x = _c2f(b, x, "model.2", c2, c2, True)
    x = _yolo_conv(b, x, "model.3", c2, c3, 3, 2)
    p3 = _c2f(b, x, "model.4", c3, c3, True)
    x = _yolo_conv(b, p3, "model.5", c3, c4, 3, 2)
    p4 = _c2f(b, x, "model.6", c4, c4, True)
    x = _yolo_conv(b, p4, "model.7", c4, c5, 3, 2)
    x = _c2f(b, x, "model.8", c5, c5, True)
    p5 = _sppf(b, x, "model.9", c5)
    scales = b.const("/model.10", [1.0, 1.0, 2.0, 2.0], np.float32)
    up = b.op("Resize", [p5, "", scales], "/model.10", mode="nearest", nearest_mode="floor")
    n4 = _c2f(b, b.op("Concat", [up, p4], "/model.11", axis=1), "model.12", c5 + c4, c4, False)
    up = b.op("Resize", [n4, "", scales], "/model.13", mode="nearest", nearest_mode="floor")
    out3 = _c2f(b, b.op("Concat", [up, p3], "/model.14", axis=1), "model.15", c4 + c3, c3, False)
    down = _yolo_conv(b, out3, "model.16", c3, c3, 3, 2)
    out4 = _c2f(b, b.op("Concat", [down, n4], "/model.17", axis=1), "model.18", c3 + c4, c4, False)
    down = _yolo_conv(b, out4, "model.19", c4, c4, 3, 2)
    out5 = _c2f(b, b.op("Concat", [down, p5], "/model.20", axis=1), "model.21", c4 + c5, c5, False)
    # the Detect head: box (4 * reg_max distances) and class branches per level
    head, scope = "model.22", "/model.22"
    box_ch, cls_ch, outputs = (
        max(16, c3 // 4, 4 * reg_max),
        max(c3, min(num_classes, 100)),
        4 * reg_max + num_classes,
    )
    levels = []
    for i, (feature, channels) in enumerate(((out3, c3), (out4, c4), (out5, c5))):
        branches = []
        for branch, mid, cout in (("cv2", box_ch, 4 * reg_max), ("cv3", cls_ch, num_classes)):
            y = _yolo_conv(b, feature, f"{head}.{branch}.{i}.0", channels, mid, 3)
            y = _yolo_conv(b, y, f"{head}.{branch}.{i}.1", mid, mid, 3)
            w = b.normal(f"{head}.{branch}.{i}.2.weight", (cout, mid, 1, 1), 0.01)
            bias = b.normal(f"{head}.{branch}.{i}.2.bias", (cout,), 0.01)
            branches.append(
                b.op("Conv", [y, w, bias], _yolo_scope(f"{head}.{branch}.{i}.2"), kernel_shape=[1, 1])
            )
        levels.append(b.op("Concat", branches, scope, axis=1))
    batch = b.op(
        "Unsqueeze",
        [
            b.op("Gather", [b.op("Shape", [levels[0]], scope), b.const(scope, 0)], scope, axis=0),
            b.const(scope, [0]),
        ],
        scope,
    )
    flat_shape = b.op("Concat", [batch, b.const(scope, [outputs]), b.const(scope, [-1])], scope, axis=0)
    x_cat = b.op("Concat", [b.op("Reshape", [lv, flat_shape], scope) for lv in levels], scope, axis=2)
    anchors, strides = _make_anchors(b, levels, (8, 16, 32), scope)
    box, cls = b.node(
        "Split", [x_cat, b.const(scope, [4 * reg_max, num_classes])], scope, n_outputs=2, axis=1
    )
    # DFL: a softmax over reg_max bins per side, and their expectation as a 1x1 conv with weights 0..reg_max-1
    dfl = f"{scope}/dfl"
    shape = b.op("Shape", [box], dfl)
    n = b.op("Unsqueeze", [b.op("Gather", [shape, b.const(dfl, 0)], dfl, axis=0), b.const(dfl, [0])], dfl)
    a = b.op("Unsqueeze", [b.op("Gather", [shape, b.const(dfl, 2)], dfl, axis=0), b.const(dfl, [0])], dfl)
    bins = b.op(
        "Reshape", [box, b.op("Concat", [n, b.const(dfl, [4]), b.const(dfl, [reg_max]), a], dfl, axis=0)], dfl
    )
    probs = b.op("Softmax", [b.op("Transpose", [bins], dfl, perm=[0, 2, 1, 3])], dfl, axis=1)
    arange = b.param(
        f"{head}.dfl.conv.weight", np.arange(reg_max, dtype=np.float32).reshape(1, reg_max, 1, 1)
    )
    expected = b.op("Conv", [probs, arange], f"{dfl}/conv", kernel_shape=[1, 1])
    distances = b.op("Reshape", [expected, b.op("Concat", [n, b.const(dfl, [4]), a], dfl, axis=0)], dfl)
    # dist2bbox(xywh=True) times the strides
    left_top, right_bottom = b.node("Split", [distances, b.const(scope, [2, 2])], scope, n_outputs=2, axis=1)
    points = b.op("Unsqueeze", [anchors, b.const(scope, [0])], scope)
    top_left = b.op("Sub", [points, left_top], scope)
    bottom_right = b.op("Add", [points, right_bottom], scope)
    centre = b.op(
        "Div", [b.op("Add", [top_left, bottom_right], scope), b.const(scope, 2.0, np.float32)], scope
    )
    size = b.op("Sub", [bottom_right, top_left], scope)
    boxes = b.op("Mul", [b.op("Concat", [centre, size], scope, axis=1), strides], scope)
    b.node("Concat", [boxes, b.op("Sigmoid", [cls], scope)], scope, outputs=["output0"], axis=1)
    graph = b.graph(
        "yolov8",
        [_image_input("images", image_size)],
        [_value("output0", TensorProto.FLOAT, ["batch", 4 + num_classes, "anchors"])],
        "YOLOv8-style detector (ultralytics layout, dynamic=True export): C2f backbone, SPPF, PAN neck, "
        "Detect head at strides 8/16/32 with anchors made from the feature maps' run-time sizes "
        "(Shape/Gather/Range/Expand/ConstantOfShape), DFL and the boxes and scores concatenated.",
    )
    return _Built(graph, 17)

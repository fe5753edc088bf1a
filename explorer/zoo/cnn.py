"""Image classifiers of the zoo: ``mlp``, ``resnet18`` and ``mobilenetv2``.

Float32 convolutional (and one fully connected) networks in torchvision's layout and
parameter names, BatchNormalization kept as its own node (not folded into the convs).

Examples
--------
>>> from explorer import zoo
>>> [n.op_type for n in zoo.build("mlp", hidden=(8,)).graph.node]
['Flatten', 'Gemm', 'Relu', 'Gemm']
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from onnx import TensorProto

from explorer.zoo.parts import (
    _batch_norm,
    _Built,
    _check_positive,
    _conv,
    _GraphBuilder,
    _image_input,
    _linear,
    _scope,
    _value,
)

__all__: list[str] = []


def _mlp(
    *, hidden: Sequence[int] = (256, 128), num_classes: int = 10, image_size: int = 28, seed: int = 0
) -> _Built:
    """Flatten, then ``Gemm``/``Relu`` pairs and a final ``Gemm`` (an MNIST classifier)."""
    _check_positive(num_classes=num_classes, image_size=image_size)
    _check_positive(**{f"hidden[{i}]": size for i, size in enumerate(hidden)})
    b = _GraphBuilder(np.random.default_rng(seed))
    x = b.op("Flatten", ["input"], "", axis=1)
    width = image_size * image_size
    for i, size in enumerate(hidden):
        x = _linear(b, x, f"fc{i + 1}", width, size)
        x = b.op("Relu", [x], _scope(f"relu{i + 1}"))
        width = size
    _linear(b, x, f"fc{len(hidden) + 1}", width, num_classes, output="logits")
    graph = b.graph(
        "mlp",
        [_value("input", TensorProto.FLOAT, ["batch", 1, image_size, image_size])],
        [_value("logits", TensorProto.FLOAT, ["batch", num_classes])],
        "Multi-layer perceptron: Flatten, Gemm+Relu stack, Gemm classifier.",
    )
    return _Built(graph, 17)


def _basic_block(b: _GraphBuilder, x: str, path: str, cin: int, cout: int, stride: int) -> str:
    """A ResNet BasicBlock: two 3x3 conv+BN, a 1x1 conv+BN shortcut when the shape changes."""
    y = _batch_norm(b, _conv(b, x, f"{path}.conv1", cin, cout, 3, stride), f"{path}.bn1", cout)
    y = b.op("Relu", [y], _scope(f"{path}.relu"))
    y = _batch_norm(b, _conv(b, y, f"{path}.conv2", cout, cout, 3), f"{path}.bn2", cout)
    shortcut = x
    if stride != 1 or cin != cout:
        shortcut = _conv(b, x, f"{path}.downsample.0", cin, cout, 1, stride)
        shortcut = _batch_norm(b, shortcut, f"{path}.downsample.1", cout)
    y = b.op("Add", [y, shortcut], _scope(path))
    return b.op("Relu", [y], _scope(f"{path}.relu"))


def _resnet18(
    *, width: int = 64, image_size: int | None = 224, num_classes: int = 1000, seed: int = 0
) -> _Built:
    """torchvision's ResNet-18 (BatchNormalization kept, not folded into the convs)."""
    _check_positive(width=width, image_size=image_size, num_classes=num_classes)
    b = _GraphBuilder(np.random.default_rng(seed))
    x = _batch_norm(b, _conv(b, "input", "conv1", 3, width, 7, 2), "bn1", width)
    x = b.op("Relu", [x], _scope("relu"))
    x = b.op("MaxPool", [x], _scope("maxpool"), kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
    cin = width
    for stage in range(4):
        cout = width * 2**stage
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            x = _basic_block(b, x, f"layer{stage + 1}.{block}", cin, cout, stride)
            cin = cout
    x = b.op("GlobalAveragePool", [x], _scope("avgpool"))
    x = b.op("Flatten", [x], "", axis=1)
    _linear(b, x, "fc", cin, num_classes, output="logits")
    graph = b.graph(
        "resnet18",
        [_image_input("input", image_size)],
        [_value("logits", TensorProto.FLOAT, ["batch", num_classes])],
        "ResNet-18 (He et al. 2015), torchvision layout, eval-mode BatchNormalization.",
    )
    return _Built(graph, 17)


def _make_divisible(value: float, divisor: int = 8) -> int:
    """Round channels the way torchvision's MobileNetV2 does."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def _conv_bn_relu6(
    b: _GraphBuilder, x: str, path: str, cin: int, cout: int, kernel: int, stride: int = 1, group: int = 1
) -> str:
    """torchvision's ``Conv2dNormActivation``: Conv, BatchNormalization, ``Clip(0, 6)``."""
    y = _conv(b, x, f"{path}.0", cin, cout, kernel, stride, group)
    y = _batch_norm(b, y, f"{path}.1", cout)
    return b.op("Clip", [y, "relu6.min", "relu6.max"], _scope(f"{path}.2"))


def _inverted_residual(
    b: _GraphBuilder, x: str, path: str, cin: int, cout: int, stride: int, expand: int
) -> str:
    """MobileNetV2 block: 1x1 expand, 3x3 depthwise, 1x1 linear projection, maybe a residual."""
    hidden = cin * expand
    y, index = x, 0
    if expand != 1:
        y = _conv_bn_relu6(b, y, f"{path}.conv.0", cin, hidden, 1)
        index = 1
    y = _conv_bn_relu6(b, y, f"{path}.conv.{index}", hidden, hidden, 3, stride, group=hidden)
    y = _conv(b, y, f"{path}.conv.{index + 1}", hidden, cout, 1)
    y = _batch_norm(b, y, f"{path}.conv.{index + 2}", cout)
    if stride == 1 and cin == cout:
        y = b.op("Add", [x, y], _scope(path))
    return y


_MOBILENETV2_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1))
_MOBILENETV2_SETTINGS += ((6, 160, 3, 2), (6, 320, 1, 1))


def _mobilenetv2(
    *, width_mult: float = 1.0, image_size: int | None = 224, num_classes: int = 1000, seed: int = 0
) -> _Built:
    """torchvision's MobileNetV2 (Sandler et al. 2018), Relu6 exported as ``Clip``."""
    _check_positive(width_mult=width_mult, image_size=image_size, num_classes=num_classes)
    b = _GraphBuilder(np.random.default_rng(seed))
    b.param("relu6.min", np.array(0.0, dtype=np.float32))
    b.param("relu6.max", np.array(6.0, dtype=np.float32))
    cin = _make_divisible(32 * width_mult)
    x = _conv_bn_relu6(b, "input", "features.0", 3, cin, 3, 2)
    index = 1
    for expand, channels, repeats, first_stride in _MOBILENETV2_SETTINGS:
        cout = _make_divisible(channels * width_mult)
        for i in range(repeats):
            x = _inverted_residual(
                b, x, f"features.{index}", cin, cout, first_stride if i == 0 else 1, expand
            )
            cin, index = cout, index + 1
    last = _make_divisible(1280 * max(1.0, width_mult))
    x = _conv_bn_relu6(b, x, f"features.{index}", cin, last, 1)
    x = b.op("GlobalAveragePool", [x], "")
    x = b.op("Flatten", [x], "", axis=1)
    _linear(b, x, "classifier.1", last, num_classes, output="logits")
    graph = b.graph(
        "mobilenetv2",
        [_image_input("input", image_size)],
        [_value("logits", TensorProto.FLOAT, ["batch", num_classes])],
        f"MobileNetV2 (width_mult={width_mult}), torchvision layout, Relu6 as Clip(0, 6).",
    )
    return _Built(graph, 17)

"""A zoo of realistic ONNX models, built in code.

Every model is made with :mod:`onnx.helper` and :mod:`numpy` from a fixed seed
(:func:`numpy.random.default_rng`), so building one needs no download, takes well under
a second at the default sizes, and gives byte-identical results each time. They are real
architectures at realistic sizes, named the way the PyTorch exporter names things: node
names carry the module scope (``/layer1/layer1.0/conv1/Conv``), intermediate tensors are
``<node name>_output_<i>`` and weights use the parameter names of the original module
(``layer1.0.conv1.weight``). Graph inputs and outputs carry dtypes and shapes with
symbolic dimensions (``"batch"``, ``"seq"``, ``"height"``) as ``dim_param`` strings.

=================  ============================================================  ======
name               what it is                                                    nodes
=================  ============================================================  ======
``mlp``            Flatten and a Gemm/Relu stack over 28x28 images                    6
``resnet18``       torchvision ResNet-18 with BatchNormalization (11.7M params)      69
``mobilenetv2``    MobileNetV2: inverted residuals, depthwise convs, Relu6 Clip     152
``transformer``    pre-LN encoder with the exporter's Shape/Gather/Concat chains    173
``detection_head`` backbone, FPN with run-time ``Resize`` sizes, shared heads       130
``yolov8``         YOLOv8-style: C2f/SPPF/PAN, anchors from run-time shapes, DFL     387
``control_flow``   an ``If`` on ``ReduceSum(x) > 0`` and a three-step ``Loop``        7
``custom_domain``  ``com.microsoft`` contrib ops and a model-local function           6
``qdq_cnn``        a small CNN quantized in QDQ format (int8 weights)                33
``elementwise``    ``x * scale + shift``, then an activation, repeated               12
=================  ============================================================  ======

(Node counts are of the main graph at the default options; ``control_flow`` has 10
more inside its ``If`` branches and ``Loop`` body.)

Choosing the size of ``transformer``: the graph has ``81 * layers + 11`` nodes
(``88 * layers + 11`` with ``gelu="erf"``), so ``layers=12`` gives about 1k nodes,
``layers=123`` about 10k and ``layers=617`` about 50k. For the big ones pass a small
``hidden`` (say 32) to keep the weights small: ``layers=617, hidden=32`` builds in well
under a second and is about 42 MB serialized.

Examples
--------
>>> from explorer import zoo
>>> "resnet18" in zoo.names()
True
>>> model = zoo.build("transformer", layers=1, hidden=32, heads=2)
>>> [i.name for i in model.graph.input]
['input_ids']
>>> model.graph.node[0].name
'/embeddings/word_embeddings/Gather'
"""

from __future__ import annotations

import inspect
import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from explorer.errors import UnknownNameError
from explorer.io import write_bytes_atomic

__all__ = ["UnknownModelError", "names", "build", "defaults", "ELEMENTWISE_ACTIVATIONS"]

_PRODUCER_NAME = "onnx-graph-explorer.zoo"
_PRODUCER_VERSION = "1"

_Dim = int | str | None


class _Built(NamedTuple):
    """What a model function returns: the graph and the opsets and functions it needs."""

    graph: onnx.GraphProto
    opset: int
    extra_opsets: dict[str, int] = {}  # noqa: RUF012 - never mutated
    functions: tuple[onnx.FunctionProto, ...] = ()


class UnknownModelError(UnknownNameError, ValueError):
    """The name given to :func:`build` is not a model of the zoo.

    It is both a :class:`KeyError` and a :class:`ValueError`, and its message lists the
    valid names.
    """


# --------------------------------------------------------------------------------------
# Graph building helpers
# --------------------------------------------------------------------------------------


# Containers that are ``nn.ModuleList``s: never called, so they leave no scope of their own.
_MODULE_LISTS = frozenset({"layers"})


def _scope(path: str) -> str:
    """Turn a module path into the exporter's node-name scope.

    Numbered children of a called container (``nn.Sequential``) are named
    ``parent.index`` inside the parent's scope, as ``torch.onnx`` does:
    ``"layer1.0.downsample.0"`` becomes ``"/layer1/layer1.0/downsample/downsample.0"``.
    An ``nn.ModuleList`` is not called, so ``"encoder.layers.0.self_attn"`` becomes
    ``"/encoder/layers.0/self_attn"``.
    """
    if not path:
        return ""
    segments: list[str] = []
    for part in path.split("."):
        if part.isdigit() and segments:
            parent = segments.pop() if segments[-1] in _MODULE_LISTS else segments[-1]
            part = f"{parent}.{part}"
        segments.append(part)
    return "/" + "/".join(segments)


class _GraphBuilder:
    """Collects the nodes and initializers of one (sub)graph and names them uniquely.

    Children made with :meth:`child` (for ``If`` and ``Loop`` bodies) share the name
    counters, so node names stay unique across the whole model.
    """

    def __init__(self, rng: np.random.Generator, counts: dict[str, int] | None = None) -> None:
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self._counts: dict[str, int] = {} if counts is None else counts
        self._param_names: set[str] = set()

    def child(self) -> _GraphBuilder:
        """A builder for a subgraph that shares this one's random generator and names."""
        return _GraphBuilder(self.rng, self._counts)

    def _unique(self, base: str) -> str:
        count = self._counts.get(base, 0)
        self._counts[base] = count + 1
        return base if count == 0 else f"{base}_{count}"

    def node(
        self,
        op_type: str,
        inputs: Sequence[str],
        scope: str = "",
        *,
        n_outputs: int = 1,
        outputs: Sequence[str] | None = None,
        domain: str = "",
        **attrs: Any,
    ) -> list[str]:
        """Add a node named ``<scope>/<op_type>[_<k>]`` and return its output names."""
        name = self._unique(f"{scope}/{op_type}")
        outs = list(outputs) if outputs is not None else [f"{name}_output_{i}" for i in range(n_outputs)]
        self.nodes.append(
            helper.make_node(op_type, list(inputs), outs, name=name, domain=domain or None, **attrs)
        )
        return outs

    def op(self, op_type: str, inputs: Sequence[str], scope: str = "", **attrs: Any) -> str:
        """Add a single-output node and return the name of its output."""
        return self.node(op_type, inputs, scope, **attrs)[0]

    def const(self, scope: str, value: Any, dtype: type = np.int64) -> str:
        """Add a ``Constant`` node holding ``value`` and return its output."""
        name = self._unique(f"{scope}/Constant")
        out = f"{name}_output_0"
        tensor = numpy_helper.from_array(np.asarray(value, dtype=dtype), name="value")
        self.nodes.append(helper.make_node("Constant", [], [out], name=name, value=tensor))
        return out

    def param(self, name: str, array: np.ndarray) -> str:
        """Add an initializer and return its name (which must be new)."""
        if name in self._param_names:
            raise AssertionError(f"duplicate initializer {name!r}")
        self._param_names.add(name)
        self.initializers.append(numpy_helper.from_array(array, name=name))
        return name

    def normal(self, name: str, shape: Sequence[int], std: float, mean: float = 0.0) -> str:
        """Add a float32 initializer drawn from a normal distribution."""
        data = self.rng.standard_normal(tuple(shape), dtype=np.float32)
        if std != 1.0:
            data *= np.float32(std)
        if mean:
            data += np.float32(mean)
        return self.param(name, data)

    def uniform(self, name: str, shape: Sequence[int], low: float, high: float) -> str:
        """Add a float32 initializer drawn uniformly from ``[low, high)``."""
        return self.param(name, self.rng.uniform(low, high, tuple(shape)).astype(np.float32))

    def graph(
        self,
        name: str,
        inputs: Sequence[onnx.ValueInfoProto],
        outputs: Sequence[onnx.ValueInfoProto],
        doc_string: str = "",
    ) -> onnx.GraphProto:
        """Wrap what was collected into a ``GraphProto``."""
        return helper.make_graph(
            self.nodes, name, list(inputs), list(outputs), self.initializers, doc_string=doc_string or None
        )


def _value(name: str, elem_type: int, shape: Sequence[_Dim] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, None if shape is None else list(shape))


def _model(
    graph: onnx.GraphProto,
    name: str,
    options: dict[str, Any],
    opset: int,
    extra_opsets: dict[str, int] | None = None,
    functions: Sequence[onnx.FunctionProto] = (),
) -> onnx.ModelProto:
    """Wrap a graph into a model with producer, opsets, IR version and zoo metadata."""
    opsets = [helper.make_opsetid("", opset)]
    opsets += [helper.make_opsetid(domain, version) for domain, version in (extra_opsets or {}).items()]
    model = helper.make_model(
        graph,
        opset_imports=opsets,
        producer_name=_PRODUCER_NAME,
        producer_version=_PRODUCER_VERSION,
        doc_string=f"explorer.zoo model {name!r}",
        functions=list(functions),
    )
    model.ir_version = helper.find_min_ir_version_for(opsets, ignore_unknown=True)
    helper.set_model_props(
        model, {"zoo.name": name, "zoo.options": json.dumps(options, sort_keys=True, default=str)}
    )
    return model


def _conv(
    b: _GraphBuilder,
    x: str,
    path: str,
    cin: int,
    cout: int,
    kernel: int,
    stride: int = 1,
    group: int = 1,
    bias: bool = False,
) -> str:
    """A ``Conv`` with He-initialised weights named ``<path>.weight`` (and ``.bias``)."""
    fan_in = cin // group * kernel * kernel
    w = b.normal(f"{path}.weight", (cout, cin // group, kernel, kernel), math.sqrt(2.0 / fan_in))
    inputs = [x, w]
    if bias:
        inputs.append(b.normal(f"{path}.bias", (cout,), 0.01))
    pad = kernel // 2
    return b.op(
        "Conv",
        inputs,
        _scope(path),
        dilations=[1, 1],
        group=group,
        kernel_shape=[kernel, kernel],
        pads=[pad, pad, pad, pad],
        strides=[stride, stride],
    )


def _batch_norm(b: _GraphBuilder, x: str, path: str, channels: int) -> str:
    """An inference-mode ``BatchNormalization`` with trained-looking statistics."""
    scale = b.uniform(f"{path}.weight", (channels,), 0.5, 1.5)
    shift = b.normal(f"{path}.bias", (channels,), 0.1)
    mean = b.normal(f"{path}.running_mean", (channels,), 0.1)
    var = b.uniform(f"{path}.running_var", (channels,), 0.5, 1.5)
    return b.op("BatchNormalization", [x, scale, shift, mean, var], _scope(path), epsilon=1e-5, momentum=0.9)


def _linear(b: _GraphBuilder, x: str, path: str, cin: int, cout: int, output: str | None = None) -> str:
    """A ``Gemm`` with ``transB=1``, as ``nn.Linear`` exports on 2-D inputs."""
    w = b.normal(f"{path}.weight", (cout, cin), 1.0 / math.sqrt(cin))
    bias = b.normal(f"{path}.bias", (cout,), 0.01)
    outputs = None if output is None else [output]
    return b.node("Gemm", [x, w, bias], _scope(path), outputs=outputs, alpha=1.0, beta=1.0, transB=1)[0]


def _image_input(name: str, image_size: int | None) -> onnx.ValueInfoProto:
    spatial: list[_Dim] = ["height", "width"] if image_size is None else [image_size, image_size]
    return _value(name, TensorProto.FLOAT, ["batch", 3, *spatial])


def _check_positive(**values: float | None) -> None:
    """Raise ``ValueError`` for the first option that is not positive (``None`` is allowed)."""
    for key, value in values.items():
        if value is not None and value <= 0:
            raise ValueError(f"{key} must be positive, got {value!r}")


# --------------------------------------------------------------------------------------
# The models
# --------------------------------------------------------------------------------------


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


def _dynamic_dim(b: _GraphBuilder, x: str, index: int, scope: str) -> str:
    """``Gather(Shape(x), index)``: one dimension of ``x`` as a run-time int64 scalar."""
    shape = b.op("Shape", [x], scope)
    return b.op("Gather", [shape, b.const(scope, index)], scope, axis=0)


def _unsqueeze0(b: _GraphBuilder, x: str, scope: str) -> str:
    """``Unsqueeze(x, [0])``: an int64 scalar turned into a 1-element shape piece."""
    return b.op("Unsqueeze", [x, b.const(scope, [0])], scope)


def _runtime_shape(b: _GraphBuilder, x: str, scope: str, tail: Sequence[int]) -> str:
    """``[batch, seq, *tail]`` computed from ``x`` the way the PyTorch exporter does."""
    batch = _unsqueeze0(b, _dynamic_dim(b, x, 0, scope), scope)
    seq = _unsqueeze0(b, _dynamic_dim(b, x, 1, scope), scope)
    return b.op("Concat", [batch, seq, *(b.const(scope, [t]) for t in tail)], scope, axis=0)


def _layer_norm(b: _GraphBuilder, x: str, path: str, hidden: int, output: str | None = None) -> str:
    scale = b.normal(f"{path}.weight", (hidden,), 0.02, mean=1.0)
    bias = b.normal(f"{path}.bias", (hidden,), 0.02)
    outputs = None if output is None else [output]
    return b.node(
        "LayerNormalization", [x, scale, bias], _scope(path), outputs=outputs, axis=-1, epsilon=1e-5
    )[0]


def _dense(b: _GraphBuilder, x: str, path: str, cin: int, cout: int) -> str:
    """``nn.Linear`` on a 3-D input: ``MatMul`` with a ``[in, out]`` weight, then ``Add``."""
    w = b.normal(f"{path}.weight", (cin, cout), 0.02)
    bias = b.normal(f"{path}.bias", (cout,), 0.02)
    scope = _scope(path)
    return b.op("Add", [b.op("MatMul", [x, w], scope), bias], scope)


def _self_attention(b: _GraphBuilder, x: str, path: str, hidden: int, heads: int) -> str:
    head_dim = hidden // heads
    scope = _scope(path)
    split = {}
    for proj, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        y = _dense(b, x, f"{path}.{proj}_proj", hidden, hidden)
        y = b.op("Reshape", [y, _runtime_shape(b, y, scope, [heads, head_dim])], scope)
        split[proj] = b.op("Transpose", [y], scope, perm=perm)
    scores = b.op("MatMul", [split["q"], split["k"]], scope)
    scores = b.op("Div", [scores, b.const(scope, math.sqrt(head_dim), np.float32)], scope)
    probs = b.op("Softmax", [scores], scope, axis=-1)
    context = b.op("Transpose", [b.op("MatMul", [probs, split["v"]], scope)], scope, perm=[0, 2, 1, 3])
    context = b.op("Reshape", [context, _runtime_shape(b, context, scope, [hidden])], scope)
    return _dense(b, context, f"{path}.out_proj", hidden, hidden)


def _gelu(b: _GraphBuilder, x: str, path: str, how: str) -> str:
    scope = _scope(path)
    if how == "op":
        return b.op("Gelu", [x], scope)
    y = b.op("Erf", [b.op("Div", [x, b.const(scope, math.sqrt(2.0), np.float32)], scope)], scope)
    y = b.op("Mul", [x, b.op("Add", [y, b.const(scope, 1.0, np.float32)], scope)], scope)
    return b.op("Mul", [y, b.const(scope, 0.5, np.float32)], scope)


def _encoder_layer(b: _GraphBuilder, x: str, path: str, hidden: int, heads: int, ffn: int, gelu: str) -> str:
    """A pre-LN Transformer encoder layer (``nn.TransformerEncoderLayer(norm_first=True)``)."""
    y = _layer_norm(b, x, f"{path}.norm1", hidden)
    x = b.op("Add", [x, _self_attention(b, y, f"{path}.self_attn", hidden, heads)], _scope(path))
    y = _layer_norm(b, x, f"{path}.norm2", hidden)
    y = _gelu(b, _dense(b, y, f"{path}.linear1", hidden, ffn), f"{path}.activation", gelu)
    y = _dense(b, y, f"{path}.linear2", ffn, hidden)
    return b.op("Add", [x, y], _scope(path))


def _transformer(
    *,
    layers: int = 2,
    hidden: int = 256,
    heads: int = 4,
    ffn: int | None = None,
    vocab: int = 1000,
    max_positions: int = 512,
    gelu: str = "op",
    seed: int = 0,
) -> _Built:
    """A pre-LN Transformer encoder over token ids, exported PyTorch-style."""
    _check_positive(layers=layers, hidden=hidden, heads=heads, vocab=vocab, max_positions=max_positions)
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
    if gelu not in ("op", "erf"):
        raise ValueError(f"gelu must be 'op' (opset-20 Gelu) or 'erf' (Div/Erf/Add/Mul/Mul), got {gelu!r}")
    ffn = 4 * hidden if ffn is None else ffn
    _check_positive(ffn=ffn)
    b = _GraphBuilder(np.random.default_rng(seed))
    scope = _scope("embeddings")
    words = b.normal("embeddings.word_embeddings.weight", (vocab, hidden), 0.02)
    x = b.op("Gather", [words, "input_ids"], _scope("embeddings.word_embeddings"), axis=0)
    seq = _dynamic_dim(b, "input_ids", 1, scope)
    positions = b.op("Range", [b.const(scope, 0), seq, b.const(scope, 1)], scope)
    table = b.normal("embeddings.position_embeddings.weight", (max_positions, hidden), 0.02)
    x = b.op(
        "Add",
        [x, b.op("Gather", [table, positions], _scope("embeddings.position_embeddings"), axis=0)],
        scope,
    )
    x = _layer_norm(b, x, "embeddings.LayerNorm", hidden)
    for i in range(layers):
        x = _encoder_layer(b, x, f"encoder.layers.{i}", hidden, heads, ffn, gelu)
    _layer_norm(b, x, "encoder.norm", hidden, output="last_hidden_state")
    graph = b.graph(
        "transformer",
        [_value("input_ids", TensorProto.INT64, ["batch", "seq"])],
        [_value("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", hidden])],
        f"Pre-LN Transformer encoder: {layers} layers, hidden {hidden}, {heads} heads, FFN {ffn}.",
    )
    return _Built(graph, 20 if gelu == "op" else 17)


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


def _control_flow(*, features: int = 16, trip_count: int = 3, seed: int = 0) -> _Built:
    """An ``If`` on the sign of ``ReduceSum(x)`` and a ``Loop`` with a fixed trip count."""
    _check_positive(features=features, trip_count=trip_count)
    b = _GraphBuilder(np.random.default_rng(seed))
    f = features
    total = b.op("ReduceSum", ["x"], "", keepdims=0)
    cond = b.op("Greater", [total, b.const("", 0.0, np.float32)], "")
    w_then = b.normal("branch.then.weight", (f, f), 1.0 / math.sqrt(f))
    b_then = b.normal("branch.then.bias", (f,), 0.01)

    then = b.child()  # reads x and its weights from the outer scope
    y = then.op("Add", [then.op("MatMul", ["x", w_then], "/branch/then"), b_then], "/branch/then")
    then.node("Relu", [y], "/branch/then", outputs=["then_out"])
    other = b.child()  # owns its weight as a subgraph initializer
    w_else = other.normal("branch.else.weight", (f, f), 1.0 / math.sqrt(f))
    other.node(
        "Neg", [other.op("MatMul", ["x", w_else], "/branch/else")], "/branch/else", outputs=["else_out"]
    )
    branch_shape: list[_Dim] = ["batch", f]
    h = b.op(
        "If",
        [cond],
        "/branch",
        then_branch=then.graph("then_branch", [], [_value("then_out", TensorProto.FLOAT, branch_shape)]),
        else_branch=other.graph("else_branch", [], [_value("else_out", TensorProto.FLOAT, branch_shape)]),
    )

    body = b.child()
    w_loop = b.normal("loop.weight", (f, f), 1.0 / math.sqrt(f))
    b_loop = b.normal("loop.bias", (f,), 0.01)
    body.node("Identity", ["cond_in"], "/loop/body", outputs=["cond_out"])
    y = body.op("Add", [body.op("MatMul", ["state_in", w_loop], "/loop/body"), b_loop], "/loop/body")
    body.node("Tanh", [y], "/loop/body", outputs=["state_out"])
    body.node("ReduceMean", ["state_out"], "/loop/body", outputs=["step_mean"], axes=[1], keepdims=0)
    body_graph = body.graph(
        "loop_body",
        [
            _value("iteration", TensorProto.INT64, []),
            _value("cond_in", TensorProto.BOOL, []),
            _value("state_in", TensorProto.FLOAT, ["batch", f]),
        ],
        [
            _value("cond_out", TensorProto.BOOL, []),
            _value("state_out", TensorProto.FLOAT, ["batch", f]),
            _value("step_mean", TensorProto.FLOAT, ["batch"]),
        ],
    )
    trips = b.const("/loop", trip_count)
    keep_going = b.const("/loop", True, np.bool_)
    b.node("Loop", [trips, keep_going, h], "/loop", outputs=["output", "trace"], body=body_graph)
    graph = b.graph(
        "control_flow",
        [_value("x", TensorProto.FLOAT, ["batch", f])],
        [
            _value("output", TensorProto.FLOAT, ["batch", f]),
            _value("trace", TensorProto.FLOAT, [trip_count, "batch"]),
        ],
        "If on ReduceSum(x) > 0 (then: MatMul/Add/Relu with outer-scope weights; else: MatMul/Neg with "
        f"its own initializer), then a Loop of {trip_count} Tanh(MatMul+Add) steps with a scan output.",
    )
    return _Built(graph, 17)


_LOCAL_DOMAIN = "zoo.local"


def _swish_function() -> onnx.FunctionProto:
    """A model-local function ``zoo.local::Swish(X) = X * Sigmoid(X)``."""
    nodes = [
        helper.make_node("Sigmoid", ["X"], ["S"], name="Sigmoid"),
        helper.make_node("Mul", ["X", "S"], ["Y"], name="Mul"),
    ]
    return helper.make_function(
        _LOCAL_DOMAIN,
        "Swish",
        ["X"],
        ["Y"],
        nodes,
        [helper.make_opsetid("", 17)],
        doc_string="x * sigmoid(x)",
    )


def _custom_domain(*, features: int = 64, hidden: int = 128, seed: int = 0) -> _Built:
    """A model using ``com.microsoft`` contrib ops and a model-local function domain."""
    _check_positive(features=features, hidden=hidden)
    b = _GraphBuilder(np.random.default_rng(seed))
    w1 = b.normal("fc1.weight", (hidden, features), 1.0 / math.sqrt(features))
    y = b.op("FusedMatMul", ["input", w1], "/fc1", domain="com.microsoft", alpha=1.0, transA=0, transB=1)
    y = b.op("BiasGelu", [y, b.normal("fc1.bias", (hidden,), 0.01)], "/fc1", domain="com.microsoft")
    w2 = b.normal("fc2.weight", (hidden, hidden), 1.0 / math.sqrt(hidden))
    y = b.op("Add", [b.op("MatMul", [y, w2], "/fc2"), b.normal("fc2.bias", (hidden,), 0.01)], "/fc2")
    y = b.op("Swish", [y], "/act", domain=_LOCAL_DOMAIN)
    w3 = b.normal("head.weight", (features, hidden), 1.0 / math.sqrt(hidden))
    b.node("FusedMatMul", [y, w3], "/head", outputs=["output"], domain="com.microsoft", alpha=0.5, transB=1)
    graph = b.graph(
        "custom_domain",
        [_value("input", TensorProto.FLOAT, ["batch", features])],
        [_value("output", TensorProto.FLOAT, ["batch", features])],
        "Contrib ops from com.microsoft (FusedMatMul, BiasGelu) next to standard ops, and a call to the "
        "model-local function zoo.local::Swish.",
    )
    return _Built(graph, 17, {"com.microsoft": 1, _LOCAL_DOMAIN: 1}, (_swish_function(),))


def _qdq(b: _GraphBuilder, x: str, scope: str, scale: float) -> str:
    """Activation fake-quantization: ``QuantizeLinear`` then ``DequantizeLinear`` (uint8)."""
    s = b.const(scope, scale, np.float32)
    zp = b.const(scope, 128, np.uint8)
    return b.op("DequantizeLinear", [b.op("QuantizeLinear", [x, s, zp], scope), s, zp], scope)


def _int8_weight(b: _GraphBuilder, path: str, shape: Sequence[int], fan_in: int) -> str:
    """Per-output-channel symmetric int8 weights, dequantized by a ``DequantizeLinear``."""
    w = b.rng.standard_normal(tuple(shape)) * math.sqrt(2.0 / fan_in)
    scale = np.abs(w.reshape(shape[0], -1)).max(axis=1) / 127.0
    q = np.round(w / scale.reshape((-1,) + (1,) * (len(shape) - 1))).clip(-127, 127).astype(np.int8)
    inputs = [
        b.param(f"{path}.weight_quantized", q),
        b.param(f"{path}.weight_scale", scale.astype(np.float32)),
        b.param(f"{path}.weight_zero_point", np.zeros(shape[0], dtype=np.int8)),
    ]
    return b.op("DequantizeLinear", inputs, _scope(path), axis=0)


def _qdq_cnn(*, width: int = 32, image_size: int | None = 32, num_classes: int = 10, seed: int = 0) -> _Built:
    """A small CIFAR-style CNN in QDQ format, as ONNX Runtime's static quantizer writes it."""
    _check_positive(width=width, image_size=image_size, num_classes=num_classes)
    b = _GraphBuilder(np.random.default_rng(seed))
    x, cin = _qdq(b, "input", "/input", 0.02), 3
    for i, (cout, stride) in enumerate(((width, 1), (2 * width, 2), (4 * width, 2))):
        path = f"conv{i + 1}"
        w = _int8_weight(b, path, (cout, cin, 3, 3), cin * 9)
        bias = b.normal(f"{path}.bias", (cout,), 0.01)
        y = b.op(
            "Conv",
            [x, w, bias],
            _scope(path),
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
            strides=[stride, stride],
        )
        x, cin = _qdq(b, b.op("Relu", [y], _scope(f"relu{i + 1}")), _scope(f"relu{i + 1}"), 0.05), cout
    x = _qdq(b, b.op("GlobalAveragePool", [x], ""), "/pool", 0.05)
    x = b.op("Flatten", [x], "", axis=1)
    w = _int8_weight(b, "fc", (num_classes, cin), cin)
    b.node(
        "Gemm", [x, w, b.normal("fc.bias", (num_classes,), 0.01)], _scope("fc"), outputs=["logits"], transB=1
    )
    graph = b.graph(
        "qdq_cnn",
        [_image_input("input", image_size)],
        [_value("logits", TensorProto.FLOAT, ["batch", num_classes])],
        "Three-conv CNN quantized in QDQ format: uint8 activations, per-channel int8 weights.",
    )
    return _Built(graph, 17)


ELEMENTWISE_ACTIVATIONS = ("Relu", "Sigmoid", "Tanh", "Abs")
"""The activations ``elementwise`` takes (ONNX unary operators without attributes)."""


def _elementwise(
    *, ops: int = 12, features: int | None = 1024, activation: str = "Relu", seed: int = 0
) -> _Built:
    """``ops`` elementwise operators in a row: ``Mul`` by a scale, ``Add`` a shift, the activation, repeated.

    What an eager framework runs one kernel at a time and a compiler fuses into one: every
    operator reads and writes a whole tensor, and the scales and shifts are scalars, so the
    only bytes moved are the activations'.
    """
    _check_positive(ops=ops, features=features)
    if activation not in ELEMENTWISE_ACTIVATIONS:
        choices = ", ".join(ELEMENTWISE_ACTIVATIONS)
        raise ValueError(f"activation must be one of {choices}, got {activation!r}")
    b = _GraphBuilder(np.random.default_rng(seed))
    x = "x"
    for i in range(ops):
        path = f"blocks.{i // 3}"
        outputs = ["y"] if i == ops - 1 else None
        if i % 3 == 0:
            inputs = [x, b.uniform(f"{path}.scale", (), 0.5, 1.5)]
        elif i % 3 == 1:
            inputs = [x, b.normal(f"{path}.shift", (), 0.1)]
        else:
            inputs = [x]
        x = b.node(("Mul", "Add", activation)[i % 3], inputs, _scope(path), outputs=outputs)[0]
    width: _Dim = "features" if features is None else features
    graph = b.graph(
        "elementwise",
        [_value("x", TensorProto.FLOAT, ["batch", width])],
        [_value("y", TensorProto.FLOAT, ["batch", width])],
        f"{ops} elementwise ops in a row: x * scale + shift, then {activation}, repeated (scalar weights).",
    )
    return _Built(graph, 17)


_Builder = Callable[..., _Built]

_MODELS: dict[str, _Builder] = {
    "mlp": _mlp,
    "resnet18": _resnet18,
    "mobilenetv2": _mobilenetv2,
    "transformer": _transformer,
    "detection_head": _detection_head,
    "yolov8": _yolov8,
    "control_flow": _control_flow,
    "custom_domain": _custom_domain,
    "qdq_cnn": _qdq_cnn,
    "elementwise": _elementwise,
}


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------


def names() -> list[str]:
    """The names of the models :func:`build` can make, smallest architectures first.

    Returns
    -------
    list of str
        A fresh list; changing it does not change the zoo.

    Examples
    --------
    >>> from explorer import zoo
    >>> zoo.names()[:3]
    ['mlp', 'resnet18', 'mobilenetv2']
    >>> "transformer" in zoo.names()
    True
    """
    return list(_MODELS)


def _builder(name: str) -> _Builder:
    try:
        return _MODELS[name]
    except (KeyError, TypeError):
        raise UnknownModelError(
            f"unknown zoo model {name!r}; valid names are: {', '.join(_MODELS)}"
        ) from None


def defaults(name: str) -> dict[str, Any]:
    """The options a zoo model accepts, with their default values.

    Parameters
    ----------
    name : str
        One of :func:`names`.

    Returns
    -------
    dict
        Option name to default value, in signature order.

    Raises
    ------
    UnknownModelError
        ``name`` is not in the zoo (also a ``KeyError`` and a ``ValueError``).

    Examples
    --------
    >>> from explorer import zoo
    >>> zoo.defaults("transformer")["layers"]
    2
    >>> zoo.defaults("resnet18")
    {'width': 64, 'image_size': 224, 'num_classes': 1000, 'seed': 0}
    """
    params = inspect.signature(_builder(name)).parameters.values()
    return {p.name: p.default for p in params}


def build(name: str, **options: Any) -> onnx.ModelProto:
    """Build a zoo model.

    Parameters
    ----------
    name : str
        One of :func:`names`.
    **options
        Model options; every model takes ``seed`` (default 0). See :func:`defaults`.

        ``mlp``: ``hidden`` (layer sizes, default ``(256, 128)``), ``num_classes`` (10),
        ``image_size`` (28).
        ``resnet18``: ``width`` (base channels, 64), ``image_size`` (224; ``None`` makes
        height and width symbolic), ``num_classes`` (1000).
        ``mobilenetv2``: ``width_mult`` (1.0), ``image_size`` (224 or ``None``),
        ``num_classes`` (1000).
        ``transformer``: ``layers`` (2), ``hidden`` (256), ``heads`` (4), ``ffn``
        (``4 * hidden``), ``vocab`` (1000), ``max_positions`` (512, the longest sequence
        it accepts), ``gelu`` (``"op"``: the opset-20 ``Gelu``; ``"erf"``: the exporter's
        ``Div/Erf/Add/Mul/Mul`` at opset 17). Nodes: ``81 * layers + 11`` (``88 * layers
        + 11`` with ``gelu="erf"``).
        ``detection_head``: ``width`` (16), ``fpn_channels`` (64), ``num_classes`` (80),
        ``num_anchors`` (3).
        ``yolov8``: ``width`` (8; ultralytics' yolov8n is 16), ``num_classes`` (80),
        ``reg_max`` (16, the DFL bins), ``image_size`` (``None``: input ``images`` is
        ``[batch, 3, height, width]``, symbolic as ``dynamic=True`` exports it; fix it with
        ``images=1,3,320,320``).
        ``control_flow``: ``features`` (16), ``trip_count`` (3).
        ``custom_domain``: ``features`` (64), ``hidden`` (128).
        ``qdq_cnn``: ``width`` (32), ``image_size`` (32 or ``None``), ``num_classes`` (10).
        ``elementwise``: ``ops`` (12), ``features`` (1024; ``None`` makes it symbolic),
        ``activation`` (``"Relu"``, or another of :data:`ELEMENTWISE_ACTIVATIONS`).

    Returns
    -------
    onnx.ModelProto
        A new model; its ``metadata_props`` record ``zoo.name`` and ``zoo.options``.

    Raises
    ------
    UnknownModelError
        ``name`` is not in the zoo (also a ``KeyError`` and a ``ValueError``); the
        message lists the valid names.
    TypeError
        An option the model does not take.
    ValueError
        An option with an impossible value (e.g. ``hidden`` not a multiple of ``heads``).

    Examples
    --------
    >>> from explorer import zoo
    >>> model = zoo.build("resnet18", width=8, image_size=64)
    >>> model.graph.node[0].name
    '/conv1/Conv'
    >>> [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    ['batch', 3, 64, 64]
    >>> len(zoo.build("transformer", layers=10, hidden=32).graph.node)
    821
    >>> [n.op_type for n in zoo.build("elementwise", ops=5, activation="Sigmoid").graph.node]
    ['Mul', 'Add', 'Sigmoid', 'Mul', 'Add']
    >>> try:
    ...     zoo.build("alexnet")
    ... except KeyError as err:
    ...     print(err)  # doctest: +ELLIPSIS
    unknown zoo model 'alexnet'; valid names are: mlp, resnet18, ...
    """
    builder = _builder(name)
    signature = inspect.signature(builder)
    unknown = sorted(set(options) - set(signature.parameters))
    if unknown:
        raise TypeError(
            f"zoo model {name!r} does not take option(s) {', '.join(unknown)}; "
            f"it takes: {', '.join(signature.parameters)}"
        )
    built = builder(**options)
    resolved = {**defaults(name), **options}
    return _model(built.graph, name, resolved, built.opset, built.extra_opsets, built.functions)


def write_external_chain(
    folder: str | os.PathLike[str],
    *,
    hidden: int = 16384,
    layers: int = 3,
    fill: str = "sparse",
    seed: int = 0,
) -> Path:
    """Write a model whose weights live in an external-data file: ``layers`` MatMuls of ``hidden²``.

    At the defaults the three float32 weights take 1 GiB each (3 GiB in all), the
    size of models that must keep their weights outside the protobuf, as today's
    PyTorch exports of LLMs, diffusion UNets or ViT-L do. The model cannot be
    built in memory as one ``ModelProto`` (protobuf's 2 GiB limit), so it is
    written straight to ``folder/model.onnx`` and ``folder/model.onnx.data``.

    Parameters
    ----------
    folder : path
        Where to write (created if missing).
    hidden : int
        Width of every layer; each weight holds ``hidden * hidden`` floats.
    layers : int
        Number of MatMuls.
    fill : {"sparse", "random"}
        ``"sparse"``: a sparse file of zeros (instant, no disk space) in which
        weight ``i`` starts with ``i + 1`` and ends with ``-(i + 1)``, so
        statistics are checkable; ``"random"``: real random weights (written in
        chunks; about 3 s per GiB).
    seed : int
        Seed of the random weights.

    Returns
    -------
    Path
        The model file.

    Examples
    --------
    >>> import tempfile
    >>> path = write_external_chain(tempfile.mkdtemp(), hidden=64, layers=2)
    >>> m = onnx.load(path, load_external_data=False)
    >>> [t.data_location == TensorProto.EXTERNAL for t in m.graph.initializer]
    [True, True]
    """
    _check_positive(hidden=hidden, layers=layers)
    if fill not in ("sparse", "random"):
        raise ValueError(f"fill must be 'sparse' or 'random', not {fill!r}")
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    path, data = target / "model.onnx", target / "model.onnx.data"
    size = hidden * hidden * 4
    rng = np.random.default_rng(seed)
    with open(data, "wb") as handle:
        handle.truncate(size * layers)
        for i in range(layers):
            if fill == "random":
                handle.seek(i * size)
                rows = max(1, (64 << 20) // (hidden * 4))
                for start in range(0, hidden, rows):
                    count = min(rows, hidden - start)
                    block = rng.standard_normal((count, hidden), dtype=np.float32) / math.sqrt(hidden)
                    handle.write(block.tobytes())
            marker = np.float32(i + 1)
            handle.seek(i * size)
            handle.write(marker.tobytes())
            handle.seek((i + 1) * size - 4)
            handle.write((-marker).tobytes())
    nodes, initializers = [], []
    x = "input"
    for i in range(layers):
        weight = TensorProto(name=f"layers.{i}.weight", data_type=TensorProto.FLOAT, dims=[hidden, hidden])
        weight.data_location = TensorProto.EXTERNAL
        for key, value in (("location", data.name), ("offset", str(i * size)), ("length", str(size))):
            entry = weight.external_data.add()
            entry.key, entry.value = key, value
        initializers.append(weight)
        out = "output" if i == layers - 1 else f"/layers.{i}/MatMul_output_0"
        nodes.append(helper.make_node("MatMul", [x, weight.name], [out], name=f"/layers.{i}/MatMul"))
        x = out
    graph = helper.make_graph(
        nodes,
        "external_chain",
        [_value("input", TensorProto.FLOAT, ["batch", hidden])],
        [_value("output", TensorProto.FLOAT, ["batch", hidden])],
        initializers,
    )
    model = _model(graph, "external_chain", {"hidden": hidden, "layers": layers, "fill": fill}, 17)
    return write_bytes_atomic(model.SerializeToString(), path)


__all__ += ["write_external_chain"]

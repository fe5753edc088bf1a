"""The building blocks every zoo model is made of.

:class:`_GraphBuilder` collects nodes and initializers and names them the way the PyTorch
exporter does (``<scope>/<op_type>[_<k>]``, ``<node name>_output_<i>``); :func:`_scope` turns a
module path into that scope; :func:`_model` wraps a graph into a model with the zoo's producer,
opsets and metadata. The layer helpers (:func:`_conv`, :func:`_batch_norm`, :func:`_linear`,
:func:`_dynamic_dim` ...) are shared by several model families. Everything here is private to
:mod:`explorer.zoo`.

Examples
--------
>>> import numpy as np
>>> from explorer.zoo.parts import _GraphBuilder, _scope
>>> _scope("layer1.0.downsample.0")
'/layer1/layer1.0/downsample/downsample.0'
>>> b = _GraphBuilder(np.random.default_rng(0))
>>> b.op("Relu", ["x"], _scope("act")), b.op("Relu", ["x"], _scope("act"))
('/act/Relu_output_0', '/act/Relu_1_output_0')
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from explorer.core.errors import UsageError

__all__: list[str] = []


_PRODUCER_NAME = "onnx-graph-explorer.zoo"
_PRODUCER_VERSION = "1"

_Dim = int | str | None


class _Built(NamedTuple):
    """What a model function returns: the graph and the opsets and functions it needs."""

    graph: onnx.GraphProto
    opset: int
    extra_opsets: dict[str, int] = {}  # noqa: RUF012 - never mutated
    functions: tuple[onnx.FunctionProto, ...] = ()


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
    """Raise :class:`~explorer.core.errors.UsageError` for the first option that is not positive
    (``None`` is allowed)."""
    for key, value in values.items():
        if value is not None and value <= 0:
            raise UsageError(f"{key} must be positive, got {value!r}")


def _dynamic_dim(b: _GraphBuilder, x: str, index: int, scope: str) -> str:
    """``Gather(Shape(x), index)``: one dimension of ``x`` as a run-time int64 scalar."""
    shape = b.op("Shape", [x], scope)
    return b.op("Gather", [shape, b.const(scope, index)], scope, axis=0)


def _unsqueeze0(b: _GraphBuilder, x: str, scope: str) -> str:
    """``Unsqueeze(x, [0])``: an int64 scalar turned into a 1-element shape piece."""
    return b.op("Unsqueeze", [x, b.const(scope, [0])], scope)

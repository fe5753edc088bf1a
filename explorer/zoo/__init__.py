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
``llama``          Llama-style decoder LLM with a KV cache (GQA, rotary, SwiGLU)    191
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

:func:`save` writes a zoo model to a file (a fresh temporary folder unless given one), and
:func:`single_op` makes the tiniest valid model, one operator from ``x`` to ``y``, for
examples that need just some model. :func:`write_external_chain` writes a model whose
weights live in an external-data file, too big to build in memory. :func:`genai_decoder`
(:mod:`~explorer.zoo.decoders`, the ``llm`` extra) has onnxruntime-genai's model builder write a
decoder LLM from random weights: a folder with ``model.onnx``, its external data and
``genai_config.json``. Neither is a registered model (:func:`names`); nor are the PyTorch
exporter's models of :mod:`~explorer.zoo.torch_exports` (among them ``llama_kv_decoder``, a
Llama decoder with its KV cache as inputs and outputs).

The builders live in one module per family: :mod:`~explorer.zoo.cnn` (``mlp``, ``resnet18``,
``mobilenetv2``), :mod:`~explorer.zoo.transformer`, :mod:`~explorer.zoo.detection`
(``detection_head``, ``yolov8``), :mod:`~explorer.zoo.graph_features` (``control_flow``,
``custom_domain``, ``qdq_cnn``), :mod:`~explorer.zoo.elementwise`, all made of the building
blocks of :mod:`~explorer.zoo.parts`; this module keeps the registry.

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
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx

from explorer.core.errors import UnknownNameError
from explorer.isolation.io import save_model_atomic
from explorer.zoo.cnn import _mlp, _mobilenetv2, _resnet18
from explorer.zoo.decoders import genai_decoder
from explorer.zoo.detection import _detection_head, _yolov8
from explorer.zoo.elementwise import ELEMENTWISE_ACTIVATIONS, _elementwise
from explorer.zoo.external import write_external_chain
from explorer.zoo.graph_features import _control_flow, _custom_domain, _qdq_cnn
from explorer.zoo.llama import _llama
from explorer.zoo.parts import _Built, _model
from explorer.zoo.tiny import single_op
from explorer.zoo.transformer import _transformer

__all__ = [
    "UnknownModelError",
    "names",
    "build",
    "defaults",
    "save",
    "single_op",
    "ELEMENTWISE_ACTIVATIONS",
    "write_external_chain",
    "genai_decoder",
]


class UnknownModelError(UnknownNameError, ValueError):
    """The name given to :func:`build` is not a model of the zoo.

    It is both a :class:`KeyError` and a :class:`ValueError`, and its message lists the
    valid names.
    """


_Builder = Callable[..., _Built]

_MODELS: dict[str, _Builder] = {
    "mlp": _mlp,
    "resnet18": _resnet18,
    "mobilenetv2": _mobilenetv2,
    "transformer": _transformer,
    "llama": _llama,
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
    UsageError
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


def save(name: str, folder: str | os.PathLike[str] | None = None, **options: Any) -> Path:
    """Build a zoo model and write it to ``folder/<name>.onnx``, atomically.

    The one way examples and tests put a zoo model on disk: what :func:`build` makes,
    written with :func:`explorer.isolation.io.save_model_atomic` (a reader never sees half
    a file; a file of that name already there is replaced).

    Parameters
    ----------
    name : str
        One of :func:`names`.
    folder : str or os.PathLike, optional
        Where to write (created if missing); None makes a fresh temporary folder
        (:func:`tempfile.mkdtemp`), which the caller may remove.
    **options
        Model options, as :func:`build` takes them.

    Returns
    -------
    Path
        The model file, ``folder/<name>.onnx``.

    Raises
    ------
    UnknownModelError
        ``name`` is not in the zoo.
    TypeError
        An option the model does not take.

    Examples
    --------
    >>> import onnx
    >>> from explorer import zoo
    >>> path = zoo.save("mlp")
    >>> path.name, len(onnx.load(path).graph.node)
    ('mlp.onnx', 6)
    >>> zoo.save("transformer", path.parent, layers=1, hidden=32, heads=2).name
    'transformer.onnx'
    >>> sorted(p.name for p in path.parent.iterdir())
    ['mlp.onnx', 'transformer.onnx']
    """
    model = build(name, **options)
    target = Path(tempfile.mkdtemp(prefix=f"zoo-{name}-") if folder is None else folder)
    return save_model_atomic(model, target / f"{name}.onnx")

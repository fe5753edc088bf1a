"""Random inputs for a model: the project's one generator (ONNX Runtime runs, verification, benchmarks).

One rule everywhere, reproducible by ``seed``: a fixed dimension keeps its size, a symbolic
or unknown one takes the size ``input_shapes`` gives it or :func:`symbolic_dim_default`;
floats are standard normal, integers lie in ``[0, 8)`` (safe as indices and small
sizes), booleans are random, anything else is zeros.

A symbol is one size across the inputs: a shape given for one input sizes that symbol in
every other input too. A decoder LLM (:mod:`explorer.onnx_adapter.decoder`) gets one
consistent call: ``sequence`` new tokens after ``past`` cached ones (32 and 32 unless shapes
say otherwise), an ``attention_mask`` of ones over both, positions counting on from the past,
and the head size wherever the graph leaves it symbolic.

Examples
--------
>>> import numpy as np
>>> feeds = random_inputs([("ids", ["batch", "seq"], np.int64), ("x", [2, 3], np.float32)])
>>> {k: (v.shape, v.dtype.name) for k, v in feeds.items()}
{'ids': ((1, 32), 'int64'), 'x': ((2, 3), 'float32')}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from explorer.onnx_adapter.decoder import DecoderSpec, decoder_spec, decoder_symbols, evaluate_dim
from explorer.onnx_adapter.tensor_protos import shape_from_type

__all__ = [
    "symbolic_dim_default",
    "input_shape",
    "symbol_sizes",
    "concrete_input_shapes",
    "random_array",
    "random_inputs",
    "random_feeds",
]

_BATCH_NAMES = ("batch", "n", "b", "unk__", "n_batch", "batch_size", "p2o.dynamicdimension")

InputSpec = tuple[str, Sequence[Any] | None, Any]
"""``(name, declared dims, numpy dtype)``: a dim is an int, a symbol (str) or None (unknown)."""


def symbolic_dim_default(name: str | None) -> int:
    """The size given to a symbolic dimension when none is specified: 1 for batch-like names, else 32.

    Examples
    --------
    >>> symbolic_dim_default("batch"), symbolic_dim_default("seq"), symbolic_dim_default(None)
    (1, 32, 32)
    """
    if name and any(name.lower().startswith(b) for b in _BATCH_NAMES):
        return 1
    return 32


def input_shape(
    dims: Sequence[Any] | None,
    given: Sequence[int] | None = None,
    symbols: Mapping[str, int] | None = None,
) -> tuple[int, ...]:
    """The concrete shape of an input: ``given`` if any, else fixed dims kept and the others sized.

    A dimension that is not a positive int (a symbol, None, or an exporter's ``-1``) is dynamic:
    a symbol takes its size in ``symbols`` (or a sum of sized symbols, ``past + seq``), else
    :func:`symbolic_dim_default`.

    Examples
    --------
    >>> input_shape(["batch", 3, -1, None]), input_shape(["n", 4], given=[8, 4])
    ((1, 3, 32, 32), (8, 4))
    >>> input_shape(["batch", "past + 1"], symbols={"past": 7})
    (1, 8)
    """
    if given is not None:
        return tuple(int(d) for d in given)
    sizes = symbols or {}

    def size(d: Any) -> int:
        if isinstance(d, int) and d > 0:
            return d
        if isinstance(d, str):
            known = evaluate_dim(d, sizes)
            if known is not None and known >= 0:
                return known
            return symbolic_dim_default(d)
        return symbolic_dim_default(None)

    return tuple(size(d) for d in (dims or ()))


def _declared_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    initializers = {t.name for t in model.graph.initializer}
    return [v for v in model.graph.input if v.name not in initializers]


def symbol_sizes(
    model: onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    sequence: int = 32,
    past: int = 32,
    spec: DecoderSpec | None = None,
) -> dict[str, int]:
    """The size of each symbolic input dimension: from the shapes given, then a decoder's roles.

    Parameters
    ----------
    model : onnx.ModelProto
    input_shapes : mapping, optional
        Shapes given for some inputs: each sizes the symbols it stands for, in every input.
    sequence, past : int
        A decoder's new and cached tokens, where the shapes given do not say.
    spec : DecoderSpec, optional
        The decoder's (:func:`~explorer.onnx_adapter.decoder.decoder_spec`), if already read.

    Examples
    --------
    >>> from explorer import zoo
    >>> symbol_sizes(zoo.build("transformer"), {"input_ids": [2, 16]})
    {'batch': 2, 'seq': 16}
    >>> symbol_sizes(zoo.build("llama"), sequence=1, past=9)["total_sequence_length"]
    10
    """
    bound: dict[str, int] = {}
    given = input_shapes or {}
    for value in _declared_inputs(model):
        if value.name not in given:
            continue
        declared = shape_from_type(value.type)[0] or []
        for dim, size in zip(declared, given[value.name], strict=False):
            if isinstance(dim, str) and dim not in bound:
                bound[dim] = int(size)
    spec = spec if spec is not None else decoder_spec(model)
    if spec is None:
        return bound
    return decoder_symbols(spec, bound, sequence, past)


def concrete_input_shapes(
    model: onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    sequence: int = 32,
    past: int = 32,
    spec: DecoderSpec | None = None,
) -> dict[str, list[int]]:
    """Every graph input's concrete shape (initializers excluded), by :func:`input_shape`'s rule.

    Symbols are sized once for all inputs (:func:`symbol_sizes`); ``sequence`` and ``past``
    size a decoder's call. ``spec``: the decoder's, when already read (with the model's file:
    its ``genai_config.json`` says the head size where the graph leaves it symbolic).

    Examples
    --------
    >>> from explorer import zoo
    >>> model = zoo.build("mlp")
    >>> concrete_input_shapes(model), concrete_input_shapes(model, {"input": [4, 1, 28, 28]})
    ({'input': [1, 1, 28, 28]}, {'input': [4, 1, 28, 28]})
    >>> shapes = concrete_input_shapes(zoo.build("llama"), sequence=1, past=7)
    >>> shapes["input_ids"], shapes["attention_mask"], shapes["past_key_values.0.key"]
    ([1, 1], [1, 8], [1, 2, 7, 8])
    """
    given = input_shapes or {}
    symbols = symbol_sizes(model, given, sequence, past, spec=spec)
    return {
        value.name: list(input_shape(shape_from_type(value.type)[0], given.get(value.name), symbols))
        for value in _declared_inputs(model)
    }


def random_array(shape: Sequence[int], dtype: Any, rng: np.random.Generator) -> np.ndarray:
    """One random value of ``shape`` and ``dtype`` by the module's rule.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> int(random_array([100], np.int64, rng).max()) < 8, random_array([2], np.bool_, rng).dtype.name
    (True, 'bool')
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 8, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) > 0.5
    return np.zeros(shape, dtype=dtype)


def random_inputs(
    specs: Iterable[InputSpec], input_shapes: Mapping[str, Sequence[int]] | None = None, seed: int = 0
) -> dict[str, np.ndarray]:
    """Random values for ``(name, dims, dtype)`` specs, in order, reproducible by ``seed``.

    Examples
    --------
    >>> a = random_inputs([("x", ["n", 2], np.float32)], {"x": [3, 2]}, seed=1)
    >>> b = random_inputs([("x", ["n", 2], np.float32)], {"x": [3, 2]}, seed=1)
    >>> a["x"].shape, bool((a["x"] == b["x"]).all())
    ((3, 2), True)
    """
    rng = np.random.default_rng(seed)
    given = input_shapes or {}
    return {name: random_array(input_shape(dims, given.get(name)), dtype, rng) for name, dims, dtype in specs}


def random_feeds(
    model: onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    seed: int = 0,
    sequence: int = 32,
    past: int = 32,
    spec: DecoderSpec | None = None,
) -> dict[str, np.ndarray]:
    """Random inputs for every graph input of ``model`` (initializers excluded), reproducible by ``seed``.

    Shapes follow :func:`concrete_input_shapes`. A decoder LLM's inputs are one call's: token
    ids below its vocabulary, an attention mask of ones, positions counting on from the past,
    a random KV cache (``spec``: the decoder's, when already read).

    Examples
    --------
    >>> from explorer import zoo
    >>> {k: v.shape for k, v in random_feeds(zoo.build("resnet18")).items()}
    {'input': (1, 3, 224, 224)}
    >>> feeds = random_feeds(zoo.build("llama"), sequence=2, past=3)
    >>> feeds["attention_mask"].tolist(), feeds["input_ids"].shape
    ([[1, 1, 1, 1, 1]], (1, 2))
    """
    spec = spec if spec is not None else decoder_spec(model)
    given = input_shapes or {}
    symbols = symbol_sizes(model, given, sequence, past, spec=spec)
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for value in _declared_inputs(model):
        declared, elem_type = shape_from_type(value.type)
        dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type or onnx.TensorProto.FLOAT)
        shape = input_shape(declared, given.get(value.name), symbols)
        feeds[value.name] = (
            _decoder_value(value.name, shape, dtype, spec, rng, _past_tokens(spec, symbols))
            if spec is not None
            else random_array(shape, dtype, rng)
        )
    return feeds


def _past_tokens(spec: DecoderSpec, symbols: Mapping[str, int]) -> int:
    return next((symbols[s] for s, role in spec.symbols.items() if role == "past" and s in symbols), 0)


def _decoder_value(
    name: str, shape: Sequence[int], dtype: Any, spec: DecoderSpec, rng: np.random.Generator, past: int
) -> np.ndarray:
    """One input of a decoder's call: ids below the vocabulary, a mask of ones, positions after the past."""
    if name == spec.attention_mask:
        return np.ones(shape, dtype=dtype)
    if name == spec.input_ids and np.dtype(dtype).kind in "iu":
        return rng.integers(0, max(1, min(8, spec.vocab_size or 8)), size=shape).astype(dtype)
    if name == spec.position_ids and len(shape) >= 1:
        return np.broadcast_to(np.arange(past, past + shape[-1], dtype=dtype), shape).copy()
    return random_array(shape, dtype, rng)

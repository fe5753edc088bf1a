"""Decoder LLMs: recognise one, read its shape (layers, heads, KV cache), give its inputs consistent sizes.

A decoder is recognised from ``genai_config.json`` beside the model file (onnxruntime-genai's
builder writes one) or from its inputs and outputs alone: a KV cache fed back from
``present.N.key`` to ``past_key_values.N.key`` (and the other spellings exporters use). Its
figures come from the model itself (the KV inputs' fixed dims, ``GroupQueryAttention``'s
attributes, the weights' shapes, the logits' width) and from the config where the graph
leaves a size symbolic (``kv_cache_dim`` is the head size, and ``GroupQueryAttention`` refuses
any other value).

:func:`decoder_symbols` sizes every symbolic dimension of one call consistently: ``sequence``
new tokens after ``past`` cached ones, a total of ``past + sequence``, the head size where the
graph leaves it symbolic. The inputs' values follow in :mod:`explorer.onnx_adapter.inputs`.

Examples
--------
>>> from explorer import zoo
>>> spec = decoder_spec(zoo.build("llama"))
>>> spec.layers, spec.kv_heads, spec.head_size, spec.kv_bytes_per_token
(2, 2, 8, 256)
>>> decoder_spec(zoo.build("mlp")) is None
True
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx

from explorer.core.summary import llm_lines
from explorer.onnx_adapter.tensor_protos import dtype_name, shape_bytes, shape_from_type

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "GENAI_CONFIG",
    "KV_PATTERNS",
    "DecoderSpec",
    "decoder_spec",
    "decoder_symbols",
    "evaluate_dim",
    "read_genai_config",
]

GENAI_CONFIG = "genai_config.json"
"""The file onnxruntime-genai's builder writes beside the model."""

KV_PATTERNS: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] = (
    (re.compile(r"^past_key_values\.(\d+)\.(key|value)$"), re.compile(r"^present\.(\d+)\.(key|value)$")),
    (
        re.compile(r"^past_key_values\.(\d+)\.(key|value)$"),
        re.compile(r"^present_key_values\.(\d+)\.(key|value)$"),
    ),
    (re.compile(r"^past\.(\d+)\.(key|value)$"), re.compile(r"^present\.(\d+)\.(key|value)$")),
    (re.compile(r"^past_(key|value)_(\d+)$"), re.compile(r"^present_(key|value)_(\d+)$")),
    (re.compile(r"^cache\.(\d+)\.(key|value)$"), re.compile(r"^cache_out\.(\d+)\.(key|value)$")),
)
"""(past input, present output) name patterns: a layer number and ``key``/``value``, in either order."""

_ATTENTION_OPS = ("GroupQueryAttention", "MultiHeadAttention", "Attention")
_QUANTIZED_WEIGHT_OPS = {"MatMulNBits": 1, "GatherBlockQuantized": 0}  # op -> the packed weight's input
_QUANTIZED_SCALE_INPUT = {"MatMulNBits": 2, "GatherBlockQuantized": 2}


@dataclass(frozen=True)
class DecoderSpec:
    """What a decoder LLM is: its sizes, its weights and its KV cache.

    Attributes
    ----------
    source : str
        Where the sizes came from: ``"genai_config.json"`` or ``"inputs and outputs"``.
    model_type : str or None
        The config's ``model.type`` (``"llama"``, ...), else None.
    layers, heads, kv_heads, head_size, hidden_size, vocab_size, context_length : int or None
        The architecture; None where neither the graph nor a config says.
    weight_bytes : int
        Bytes of every initializer.
    weight_dtype : str
        The dtype holding most weight bytes (``"int4"`` for blocks packed in ``uint8``).
    weight_block_size : int or None
        The quantisation block of the int4/int8 weights, else None.
    weight_bytes_by_dtype : dict
        Bytes per weight kind: ``int4``, ``int4 scales (float32)``, ``float32``, ...
    gathered_bytes : int
        Bytes of weights only ever gathered by token (an embedding table no MatMul reads): a
        decode step reads a row of them, not all.
    kv_dtype : str
        The KV cache's dtype.
    kv_bytes_per_token : int
        KV-cache bytes one token adds (every layer's key and value, batch 1).
    kv_bytes_at_context : int or None
        KV-cache bytes at ``context_length`` tokens.
    past_inputs, present_outputs : tuple
        Per layer, the ``(key, value)`` input and output names.
    input_ids, attention_mask, position_ids : str or None
        The names of those inputs, where the model has them.
    logits : str or None
        The logits output's name.
    symbols : dict
        The role of each symbolic dimension of the inputs: ``batch``, ``sequence``, ``past``,
        ``total`` (past + sequence), ``kv_heads`` or ``head_size``.
    """

    source: str
    model_type: str | None
    layers: int
    heads: int | None
    kv_heads: int | None
    head_size: int | None
    hidden_size: int | None
    vocab_size: int | None
    context_length: int | None
    weight_bytes: int
    weight_dtype: str
    weight_block_size: int | None
    weight_bytes_by_dtype: dict[str, int]
    gathered_bytes: int
    kv_dtype: str
    kv_bytes_per_token: int
    kv_bytes_at_context: int | None
    past_inputs: tuple[tuple[str, str], ...]
    present_outputs: tuple[tuple[str, str], ...]
    input_ids: str | None
    attention_mask: str | None
    position_ids: str | None
    logits: str | None
    symbols: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form (``info --json``'s ``llm`` object).

        Examples
        --------
        >>> from explorer import zoo
        >>> d = decoder_spec(zoo.build("llama")).to_dict()
        >>> d["layers"], d["kv_bytes_per_token"], d["past_inputs"][0]
        (2, 256, ['past_key_values.0.key', 'past_key_values.0.value'])
        """
        return {
            "source": self.source,
            "model_type": self.model_type,
            "layers": self.layers,
            "heads": self.heads,
            "kv_heads": self.kv_heads,
            "head_size": self.head_size,
            "hidden_size": self.hidden_size,
            "vocab_size": self.vocab_size,
            "context_length": self.context_length,
            "weight_bytes": self.weight_bytes,
            "weight_dtype": self.weight_dtype,
            "weight_block_size": self.weight_block_size,
            "weight_bytes_by_dtype": dict(self.weight_bytes_by_dtype),
            "gathered_bytes": self.gathered_bytes,
            "kv_dtype": self.kv_dtype,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_bytes_at_context": self.kv_bytes_at_context,
            "past_inputs": [list(p) for p in self.past_inputs],
            "present_outputs": [list(p) for p in self.present_outputs],
            "input_ids": self.input_ids,
            "attention_mask": self.attention_mask,
            "position_ids": self.position_ids,
            "logits": self.logits,
            "symbols": dict(self.symbols),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per figure (``field``, ``value``), the lists left out.

        Examples
        --------
        >>> from explorer import zoo
        >>> frame = decoder_spec(zoo.build("llama")).to_frame()
        >>> frame.set_index("field").loc["kv_heads", "value"]
        2
        """
        import pandas as pd

        rows = [(k, v) for k, v in self.to_dict().items() if not isinstance(v, list | dict)]
        return pd.DataFrame(rows, columns=["field", "value"])

    def to_lines(self) -> list[str]:
        """The figures in words, as ``onnx-explorer info`` prints them.

        Examples
        --------
        >>> from explorer import zoo
        >>> print(decoder_spec(zoo.build("llama")).to_lines()[0])
        decoder: 2 layers, 4 heads (2 KV heads) of 8, hidden 32, vocab 128, context 128
        """
        return llm_lines(self.to_dict())


def read_genai_config(model_path: str | Path | None) -> dict[str, Any] | None:
    """The ``genai_config.json`` beside ``model_path``, parsed; None when there is none or it is unreadable.

    Only a regular file of at most 1 MiB is read: a config is a few kilobytes.

    Examples
    --------
    >>> read_genai_config(None) is None, read_genai_config("/no/such/model.onnx") is None
    (True, True)
    """
    if model_path is None:
        return None
    config = Path(model_path).parent / GENAI_CONFIG
    try:
        if not config.is_file() or config.stat().st_size > 1 << 20:
            return None
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _kv_names(names: Sequence[str], pattern: re.Pattern[str]) -> dict[int, dict[str, str]]:
    """Layer -> {"key": name, "value": name} for the names matching ``pattern``."""
    layers: dict[int, dict[str, str]] = {}
    for name in names:
        match = pattern.match(name)
        if match is None:
            continue
        a, b = match.groups()
        layer, kind = (int(a), b) if a.isdigit() else (int(b), a)
        layers.setdefault(layer, {})[kind] = name
    return {k: v for k, v in layers.items() if set(v) == {"key", "value"}}


def _config_patterns(config: Mapping[str, Any]) -> tuple[re.Pattern[str], re.Pattern[str]] | None:
    """The config's own KV names (``past_key_values.%d.key`` ...) as a pattern pair."""
    decoder = config.get("model", {}).get("decoder", {})
    ins, outs = decoder.get("inputs", {}), decoder.get("outputs", {})
    past, present = ins.get("past_key_names"), outs.get("present_key_names")
    if not isinstance(past, str) or not isinstance(present, str) or "%d" not in past:
        return None

    def pattern(template: str) -> re.Pattern[str]:
        head, _, tail = template.rpartition("key")  # the last "key" names the kind
        parts = [re.escape(p) for p in f"{head}\0{tail}".split("%d")]
        body = r"(\d+)".join(parts).replace("\0", "(key|value)")
        return re.compile(f"^{body}$")

    return pattern(past), pattern(present)


def _kv_layers(
    inputs: Sequence[str], outputs: Sequence[str], config: Mapping[str, Any] | None
) -> tuple[dict[int, dict[str, str]], dict[int, dict[str, str]]] | None:
    candidates = list(KV_PATTERNS)
    configured = _config_patterns(config) if config else None
    if configured is not None:
        candidates.insert(0, configured)
    for past_pattern, present_pattern in candidates:
        past = _kv_names(inputs, past_pattern)
        present = _kv_names(outputs, present_pattern)
        if past and set(past) == set(present):
            return past, present
    return None


def _int_attr(node: onnx.NodeProto, name: str) -> int | None:
    for attribute in node.attribute:
        if attribute.name == name and attribute.type == onnx.AttributeProto.INT:
            return int(attribute.i)
    return None


def _float_attr(node: onnx.NodeProto, name: str) -> float | None:
    for attribute in node.attribute:
        if attribute.name == name and attribute.type == onnx.AttributeProto.FLOAT:
            return float(attribute.f)
    return None


def _weights(model: onnx.ModelProto) -> tuple[int, dict[str, int], str, int | None]:
    """Total weight bytes, bytes per kind (packed int4/int8 blocks and their scales named so), the
    dominant kind, and the quantisation block size."""
    packed: dict[str, int] = {}  # initializer -> bits
    scales: dict[str, int] = {}
    block: int | None = None
    by_output = {out: node for node in model.graph.node for out in node.output}
    for node in model.graph.node:
        if node.domain != "com.microsoft" or node.op_type not in _QUANTIZED_WEIGHT_OPS:
            continue
        bits = _int_attr(node, "bits") or 4
        block = block or _int_attr(node, "block_size")
        weight = node.input[_QUANTIZED_WEIGHT_OPS[node.op_type]]
        producer = by_output.get(weight)  # the builder's tied embedding reshapes the lm_head's blocks
        while producer is not None and producer.op_type in ("Reshape", "Identity") and producer.input:
            weight = producer.input[0]
            producer = by_output.get(weight)
        packed[weight] = bits
        scale_index = _QUANTIZED_SCALE_INPUT[node.op_type]
        if len(node.input) > scale_index and node.input[scale_index]:
            scales[node.input[scale_index]] = bits
    by_kind: Counter[str] = Counter()
    for tensor in model.graph.initializer:
        size = shape_bytes(tuple(int(d) for d in tensor.dims), tensor.data_type) or 0
        dtype = dtype_name(tensor.data_type)
        if tensor.name in packed:
            kind = f"int{packed[tensor.name]}"
        elif tensor.name in scales:
            kind = f"int{scales[tensor.name]} scales ({dtype})"
        else:
            kind = dtype
        by_kind[kind] += size
    total = sum(by_kind.values())
    ordered = dict(sorted(by_kind.items(), key=lambda kv: -kv[1]))
    dominant = next(iter(ordered), "none")
    quantized = dominant.startswith("int") and "scales" not in dominant
    return total, ordered, dominant, block if quantized else None


def _initializer_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    return {t.name: tuple(int(d) for d in t.dims) for t in model.graph.initializer}


def _projected_width(
    name: str, by_output: Mapping[str, onnx.NodeProto], shapes: Mapping[str, tuple[int, ...]]
) -> int | None:
    """The width of the projection that computes ``name``: a ``MatMulNBits``'s ``N``, a ``MatMul``'s weight's
    last dim, or the length of a bias ``Add``'s 1-D initializer (the builder adds Q/K/V biases after the
    MatMul); through ``Cast`` and ``Identity``. None where the graph does not say."""
    producer = by_output.get(name)
    for _ in range(8):  # a short chain: projection, bias, a cast
        if producer is None:
            return None
        if producer.op_type == "MatMulNBits":
            return _int_attr(producer, "N")
        if producer.op_type == "MatMul":
            weight = shapes.get(producer.input[1]) if len(producer.input) > 1 else None
            return weight[-1] if weight else None
        if producer.op_type == "Add" and len(producer.input) == 2:
            bias = [shapes[i] for i in producer.input if i in shapes and len(shapes[i]) == 1]
            if bias:
                return bias[0][0]
            producer = by_output.get(producer.input[0])
        elif producer.op_type in ("Cast", "Identity") and producer.input:
            producer = by_output.get(producer.input[0])
        else:
            return None
    return None


def _attention_sizes(model: onnx.ModelProto, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, int]:
    """heads, kv_heads and head_size from the first attention contrib node, where it says them.

    The head size comes from the width of the projection feeding the node (packed Q, K and V:
    ``heads + 2 * kv_heads`` heads wide; Q alone: ``heads``), and only where that is not to be read
    from its ``scale`` attribute, which the builder sets to ``1/sqrt(head_size)`` for most models but
    not all (Granite's ``attention_multiplier``, Phi-3's muP scale).
    """
    found: dict[str, int] = {}
    by_output = {out: node for node in model.graph.node for out in node.output}
    for node in model.graph.node:
        if node.op_type not in _ATTENTION_OPS or node.domain != "com.microsoft":
            continue
        heads, kv_heads = _int_attr(node, "num_heads"), _int_attr(node, "kv_num_heads")
        if heads:
            found["heads"] = heads
        if kv_heads:
            found["kv_heads"] = kv_heads
        packed = len(node.input) < 3 or not node.input[1]  # Q, K and V in one input
        width = _projected_width(node.input[0], by_output, shapes) if node.input else None
        if width and heads:
            parts = heads + 2 * (kv_heads or heads) if packed else heads
            if width % parts == 0:
                found["head_size"] = width // parts
        if "head_size" not in found:
            scale = _float_attr(node, "scale")
            if scale:
                size = round(1.0 / scale**2)
                if abs(1.0 / math.sqrt(size) - scale) < 1e-5:
                    found["head_size"] = size
        return found
    return found


def _embedding_shape(
    model: onnx.ModelProto, input_ids: str | None, shapes: Mapping[str, tuple[int, ...]]
) -> tuple[int, ...] | None:
    """The ``[vocab, hidden]`` table a ``Gather`` of the token ids reads, where it is a plain initializer."""
    if input_ids is None:
        return None
    for node in model.graph.node:
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == input_ids:
            shape = shapes.get(node.input[0])
            if shape is not None and len(shape) == 2:
                return shape
    return None


def _gathered_bytes(model: onnx.ModelProto, input_ids: str | None) -> int:
    """Bytes of the initializers read only as the table of a ``Gather`` of the token ids (an untied
    embedding): a decode step reads one row of them."""
    if input_ids is None:
        return 0
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for name in set(node.input):
            readers.setdefault(name, []).append(node)

    def gathered(name: str) -> bool:
        nodes = readers.get(name, [])
        return bool(nodes) and all(
            n.op_type == "Gather" and list(n.input[:2]) == [name, input_ids] for n in nodes
        )

    return sum(
        shape_bytes(tuple(int(d) for d in t.dims), t.data_type) or 0
        for t in model.graph.initializer
        if gathered(t.name)
    )


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _dims(value: onnx.ValueInfoProto) -> list[Any]:
    return list(shape_from_type(value.type)[0] or [])


def decoder_spec(model: onnx.ModelProto, model_path: str | Path | None = None) -> DecoderSpec | None:
    """Recognise a decoder LLM and read its sizes; None when ``model`` has no KV cache fed back.

    Parameters
    ----------
    model : onnx.ModelProto
        The model (its tensors' bytes are not read: external data may stay on disk).
    model_path : str or Path, optional
        The model's file: a ``genai_config.json`` beside it is read too.

    Returns
    -------
    DecoderSpec or None

    Examples
    --------
    >>> from explorer import zoo
    >>> spec = decoder_spec(zoo.build("llama"))
    >>> spec.source, spec.heads, spec.hidden_size, spec.vocab_size
    ('inputs and outputs', 4, 32, 128)
    """
    config = read_genai_config(model_path)
    initializers = {t.name for t in model.graph.initializer}
    graph_inputs = [v for v in model.graph.input if v.name not in initializers]
    inputs = {v.name: v for v in graph_inputs}
    outputs = {v.name: v for v in model.graph.output}
    found = _kv_layers(list(inputs), list(outputs), config)
    if found is None:
        return None
    past, present = found
    order = sorted(past)
    past_inputs = tuple((past[k]["key"], past[k]["value"]) for k in order)
    present_outputs = tuple((present[k]["key"], present[k]["value"]) for k in order)

    decoder = (config or {}).get("model", {}).get("decoder", {})
    model_config = (config or {}).get("model", {})
    names = decoder.get("inputs", {}) if isinstance(decoder.get("inputs"), dict) else {}

    def named(role: str, *fallbacks: str) -> str | None:
        wanted = names.get(role)
        for name in (wanted, *fallbacks):
            if name and name in inputs:
                return name
        return None

    input_ids = named("input_ids", "input_ids", "tokens")
    attention_mask = named("attention_mask", "attention_mask")
    position_ids = named("position_ids", "position_ids")
    out_names = decoder.get("outputs", {}) if isinstance(decoder.get("outputs"), dict) else {}
    logits = next((n for n in (out_names.get("logits"), "logits") if n and n in outputs), None)

    key_dims = _dims(inputs[past_inputs[0][0]])
    shapes = _initializer_shapes(model)  # read once: the attention, the embedding and the rotary cache
    attention = _attention_sizes(model, shapes)
    embedding = _embedding_shape(model, input_ids, shapes)
    kv_heads = _first(
        decoder.get("num_key_value_heads"),
        key_dims[1] if len(key_dims) == 4 and isinstance(key_dims[1], int) else None,
        attention.get("kv_heads"),
    )
    head_size = _first(
        decoder.get("head_size"),
        key_dims[3] if len(key_dims) == 4 and isinstance(key_dims[3], int) else None,
        attention.get("head_size"),
    )
    hidden = _first(decoder.get("hidden_size"), embedding[1] if embedding else None)
    heads = _first(
        decoder.get("num_attention_heads"),
        attention.get("heads"),
        hidden // head_size if hidden and head_size and hidden % head_size == 0 else None,
    )
    if hidden is None and heads and head_size:
        hidden = heads * head_size
    logit_dims = _dims(outputs[logits]) if logits else []
    vocab = _first(
        model_config.get("vocab_size"),
        logit_dims[-1] if logit_dims and isinstance(logit_dims[-1], int) else None,
        embedding[0] if embedding else None,
    )
    cos_cache = shapes.get("cos_cache")
    context = _first(model_config.get("context_length"), cos_cache[0] if cos_cache else None)

    kv_elem = shape_from_type(inputs[past_inputs[0][0]].type)[1] or onnx.TensorProto.FLOAT
    item = shape_bytes((1,), kv_elem) or 4
    per_token = len(order) * 2 * (kv_heads or 0) * (head_size or 0) * item
    total, by_kind, dominant, block = _weights(model)
    return DecoderSpec(
        source=GENAI_CONFIG if config else "inputs and outputs",
        model_type=model_config.get("type"),
        layers=len(order),
        heads=heads,
        kv_heads=kv_heads,
        head_size=head_size,
        hidden_size=hidden,
        vocab_size=vocab,
        context_length=context,
        weight_bytes=total,
        weight_dtype=dominant,
        weight_block_size=block,
        weight_bytes_by_dtype=by_kind,
        gathered_bytes=_gathered_bytes(model, input_ids),
        kv_dtype=dtype_name(kv_elem),
        kv_bytes_per_token=per_token,
        kv_bytes_at_context=per_token * context if context else None,
        past_inputs=past_inputs,
        present_outputs=present_outputs,
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        logits=logits,
        symbols=_symbol_roles(
            inputs, outputs, input_ids, attention_mask, position_ids, past_inputs, present_outputs
        ),
    )


def _symbol_roles(
    inputs: Mapping[str, onnx.ValueInfoProto],
    outputs: Mapping[str, onnx.ValueInfoProto],
    input_ids: str | None,
    attention_mask: str | None,
    position_ids: str | None,
    past_inputs: Sequence[tuple[str, str]],
    present_outputs: Sequence[tuple[str, str]],
) -> dict[str, str]:
    """Each symbolic dimension's role, read from where it stands in the decoder's inputs and outputs."""
    roles: dict[str, str] = {}

    def mark(dims: Sequence[Any], index: int, role: str) -> None:
        if len(dims) > index and isinstance(dims[index], str) and dims[index] not in roles:
            roles[dims[index]] = role

    for name in (*(n for pair in past_inputs for n in pair),):
        dims = _dims(inputs[name])
        mark(dims, 0, "batch")
        mark(dims, 1, "kv_heads")
        mark(dims, 2, "past")
        mark(dims, 3, "head_size")
    for name in (input_ids, position_ids):
        if name is not None:
            dims = _dims(inputs[name])
            mark(dims, 0, "batch")
            mark(dims, 1, "sequence")
    if attention_mask is not None:
        mark(_dims(inputs[attention_mask]), 1, "total")
    for pair in present_outputs:
        for name in pair:
            mark(_dims(outputs[name]), 2, "total")
    return roles


def _evaluate(dim: str, values: Mapping[str, int]) -> int | None:
    """A dimension written as a sum of known symbols and integers (``s1 + s2``, the exporters' form)."""
    total = 0
    for term in (t.strip() for t in dim.split("+")):
        if term.isdigit():
            total += int(term)
        elif term in values:
            total += values[term]
        else:
            return None
    return total


def decoder_symbols(
    spec: DecoderSpec,
    bound: Mapping[str, int] | None = None,
    sequence: int = 32,
    past: int = 32,
) -> dict[str, int]:
    """The size of each symbolic dimension in one call: ``sequence`` new tokens after ``past`` cached ones.

    Sizes already ``bound`` (from shapes a user gave) win, and the rest follow them: a given
    total length and sequence set the past, a given past and sequence the total.

    Parameters
    ----------
    spec : DecoderSpec
        From :func:`decoder_spec`.
    bound : mapping, optional
        Symbol -> size, where a size is already known.
    sequence, past : int
        New tokens and tokens in the KV cache, where ``bound`` does not say.

    Examples
    --------
    >>> from explorer import zoo
    >>> spec = decoder_spec(zoo.build("llama"))
    >>> decoder_symbols(spec, sequence=1, past=7)["total_sequence_length"]
    8
    >>> decoder_symbols(spec, {"total_sequence_length": 20, "sequence_length": 4})["past_sequence_length"]
    16
    """
    bound = dict(bound or {})
    by_role = {role: bound[symbol] for symbol, role in spec.symbols.items() if symbol in bound}
    seq, old, total = by_role.get("sequence"), by_role.get("past"), by_role.get("total")
    if total is not None:
        if seq is None and old is not None:
            seq = total - old
        if old is None:
            old = total - (seq if seq is not None else sequence)
    seq = sequence if seq is None else seq
    old = max(0, past if old is None else old)
    sizes = {
        "batch": by_role.get("batch", 1),
        "sequence": seq,
        "past": old,
        "total": old + seq,
        "kv_heads": spec.kv_heads,
        "head_size": spec.head_size,
    }
    values = {symbol: sizes[role] for symbol, role in spec.symbols.items() if sizes.get(role) is not None}
    values.update(bound)
    return values


def evaluate_dim(dim: str, values: Mapping[str, int]) -> int | None:
    """A symbolic dimension's size: its own value, or a sum of known symbols (``s1 + s2``); None if unknown.

    Examples
    --------
    >>> evaluate_dim("past + 1", {"past": 7}), evaluate_dim("seq", {}), evaluate_dim("n", {"n": 3})
    (8, None, 3)
    """
    if dim in values:
        return values[dim]
    return _evaluate(dim, values)

"""Make a decoder LLM NPU-ready: a prefill (AR-N) and a decode (AR-1) graph, each static and quantised.

Qualcomm's HTP takes static graphs of standard ops in QDQ form, so a decoder becomes two
graphs at one context L (:mod:`explorer.targets.decoder_split`), and each runs the decoder
pipeline (:data:`DECODER_PIPELINES`):

1. ``explorer:decompose_contrib``: ONNX Runtime's contrib ops in standard ONNX
   (``MatMulNBits`` -> ``DequantizeLinear`` + ``MatMul``, ``GatherBlockQuantized`` ->
   ``DequantizeLinear`` + ``Gather``, ``(Skip)SimplifiedLayerNormalization`` -> RMS norm,
   ``GroupQueryAttention`` -> ``MatMul``/``Softmax``/rotary as ``Mul``/``Add``): the QNN EP has
   no HTP builder for any of them (``MatMulNBits``, ``GroupQueryAttention`` and
   ``GatherBlockQuantized``: GPU backend only). First, because ONNX's checker refuses
   ``SimplifiedLayerNormalization`` in the default domain, which the next step runs.
2. ``ort-quant:fix_shapes``: every input at the call's fixed shape (ONNX Runtime's helper).
3. ``onnxsim``: shape computations (the mask's lengths, the attention's reshapes) become
   constants at the fixed shapes; the int4 weights' ``DequantizeLinear`` folds into float.
4. ``explorer:bound_masks``: the masks' "minus infinity" (``-1e9``, float32's lowest) becomes
   -100 (:mod:`explorer.targets.decoder_mask`), or 16-bit activations cannot resolve the scores.
5. ``ort-quant:qnn_qdq``: QDQ with the QNN EP's configuration, 16-bit activations and 8-bit
   weights (A16W8), calibrated on the decoder's own consistent calls (an attention mask of
   ones, token ids below the vocabulary, the call's KV-cache sizes).

Why A16W8 and not A16W4: the HTP takes int4 weights only as low-power block quantisation
(LPBQ: ``DequantizeLinear`` of per-block integer scales -> ``QuantizeLinear`` ->
``DequantizeLinear`` -> ``MatMul``, fused by the QNN EP; ``shared/data/qnn-htp-ops.md``,
"Data types", source MS/QQ), and ONNX Runtime's QNN quantiser writes neither that nor
per-channel ``MatMul`` weights ("QNN does not support per-channel MatMul",
``get_qnn_qdq_config``), so its int4 would be one scale per tensor. 16-bit activations
(``uint16``) are what the table's sources give for precision-sensitive models (the QNN docs'
own example: u16 activations, u8 weights).

Examples
--------
>>> [i[0] if isinstance(i, tuple) else i.name for i in decoder_pipeline("qnn-htp", {"input_ids": [1, 4]})]
['explorer:decompose_contrib', 'ort-quant:fix_shapes', 'onnxsim', 'explorer:bound_masks', 'ort-quant:qnn_qdq']
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from explorer.onnx_adapter.adapter import onnx_model
from explorer.targets.decoder_mask import BOUND_MASKS
from explorer.targets.decoder_split import DecoderSplit, decoder_split
from explorer.targets.partition import partition
from explorer.targets.prepare import PreparedModel, judge_pipeline
from explorer.targets.registry import get_target
from explorer.targets.support import NodeSupport

if TYPE_CHECKING:
    import pandas as pd

    from explorer.core.graph import ModelGraph
    from explorer.passes.base import Pass

__all__ = [
    "DECODER_PIPELINES",
    "DECODER_ACTIVATIONS",
    "DECODER_WEIGHTS",
    "PreparedCall",
    "PreparedDecoder",
    "decoder_pipeline",
    "prepare_decoder",
]

DECODER_PIPELINES: Mapping[str, tuple[str, ...]] = {
    "qnn-htp": (
        "explorer:decompose_contrib",
        "ort-quant:fix_shapes",
        "onnxsim",
        "explorer:bound_masks",
        "ort-quant:qnn_qdq",
    ),
}
"""The passes that make each graph of a decoder ready for each target, in order."""
_QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
DECODER_ACTIVATIONS = "uint16"
"""A decoder's QDQ activations: 16-bit (8-bit activations lose too much of an LLM's range)."""
DECODER_WEIGHTS = "int8"
"""A decoder's QDQ weights: symmetric int8 (A16W8); see the module's notes on int4."""


def decoder_pipeline(
    target: str,
    input_shapes: Mapping[str, Sequence[int]],
    *,
    activation_type: str = DECODER_ACTIVATIONS,
    weight_type: str = DECODER_WEIGHTS,
    samples: int | None = None,
    seed: int = 0,
) -> list[tuple[str, dict[str, Any]] | Pass]:
    """The pipeline items that make one graph of a decoder ready for ``target``, with their parameters.

    Examples
    --------
    >>> items = decoder_pipeline("qnn-htp", {"input_ids": [1, 4]}, samples=2)
    >>> items[0][1], items[-1][1]["activation_type"], items[-1][1]["weight_type"], items[-1][1]["samples"]
    ({'rms_norm': True}, 'uint16', 'int8', 2)
    """
    if target not in DECODER_PIPELINES:
        raise KeyError(f"no decoder pipeline for {target!r}; there is one for {', '.join(DECODER_PIPELINES)}")
    shapes = {k: [int(d) for d in v] for k, v in input_shapes.items()}
    items: list[tuple[str, dict[str, Any]] | Pass] = []
    for name in DECODER_PIPELINES[target]:
        if name == BOUND_MASKS.name:  # ours, not in the passes' registry
            items.append(BOUND_MASKS)
            continue
        params: dict[str, Any] = {}
        if name == "explorer:decompose_contrib":
            params["rms_norm"] = True  # one RMSNormalization (the HTP's RmsNorm) where the opset has it
        if name in ("ort-quant:fix_shapes", "onnxsim"):
            params["input_shapes"] = shapes
        if name == "ort-quant:qnn_qdq":
            params.update(
                input_shapes=shapes, activation_type=activation_type, weight_type=weight_type, seed=seed
            )
            if samples is not None:
                params["samples"] = int(samples)
        items.append((name, params))
    return items


@dataclass(frozen=True)
class PreparedCall:
    """One graph of a prepared decoder: the prefill or the decode call.

    Attributes
    ----------
    name : {"prefill", "decode"}
        Which call.
    tokens, past : int
        New tokens (N or 1) and KV-cache tokens (L - N or L - 1).
    prepared : PreparedModel
        The pipeline's steps, each with coverage, partitions and drift.
    fallback : tuple of NodeSupport
        The nodes of the last step the target does not take, each with its reasons.
    seconds : float
        Wall time of the pipeline and its checks.
    """

    name: str
    tokens: int
    past: int
    prepared: PreparedModel = field(repr=False)
    fallback: tuple[NodeSupport, ...]
    seconds: float

    @property
    def graph(self) -> ModelGraph:
        """The graph after the last step."""
        return self.prepared.graph

    def problems(self) -> list[str]:
        """What was asked and did not happen: failed steps, contrib ops or dynamic shapes left."""
        out = [f"{self.name}: {s.pass_name} failed: {s.error}" for s in self.prepared.steps if s.error]
        model = self.graph.model
        contrib = sorted(
            {n.op_type for n in model.graph.node if n.domain == "com.microsoft"} - _QDQ_OPS
        )  # com.microsoft's Q/DQ: the 16-bit QDQ of models below opset 21
        if contrib:
            out.append(f"{self.name}: contrib ops left ({', '.join(contrib)})")
        dynamic = [
            v.name
            for v in (*model.graph.input, *model.graph.output)
            if any(not d.HasField("dim_value") for d in v.type.tensor_type.shape.dim)
        ]
        if dynamic:
            out.append(f"{self.name}: inputs or outputs with dynamic shapes ({', '.join(dynamic[:4])})")
        return out

    def to_dict(self) -> dict[str, Any]:
        """``{"name", "tokens", "past", "seconds", "steps", "fallback"}``."""
        return {
            "name": self.name,
            "tokens": self.tokens,
            "past": self.past,
            "seconds": round(self.seconds, 2),
            "input_shapes": self.prepared.input_shapes,
            "steps": [s.to_dict() for s in self.prepared.steps],
            "fallback": [s.to_dict() for s in self.fallback],
        }


@dataclass(frozen=True)
class PreparedDecoder:
    """A decoder made NPU-ready: its prefill and decode graphs, each judged after every step.

    Attributes
    ----------
    target : str
        The target's name.
    split : DecoderSplit
        N, L and each call's fixed input shapes.
    activation_type, weight_type : str
        The QDQ types.
    calls : tuple of PreparedCall
        The prefill graph, then the decode graph.
    seconds : float
        Wall time of the whole preparation.
    """

    target: str
    split: DecoderSplit
    activation_type: str
    weight_type: str
    calls: tuple[PreparedCall, ...]
    seconds: float

    @property
    def prefill(self) -> PreparedCall:
        """The AR-N graph."""
        return self.calls[0]

    @property
    def decode(self) -> PreparedCall:
        """The AR-1 graph."""
        return self.calls[1]

    def problems(self) -> list[str]:
        """Every call's :meth:`PreparedCall.problems`."""
        return [p for call in self.calls for p in call.problems()]

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``onnx-explorer prepare`` on a decoder."""
        return {
            "target": self.target,
            "decoder": True,
            "prompt_tokens": self.split.prompt_tokens,
            "context": self.split.context,
            "activation_type": self.activation_type,
            "weight_type": self.weight_type,
            "seconds": round(self.seconds, 2),
            "graphs": {call.name: call.to_dict() for call in self.calls},
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per (graph, pass): coverage, partitions, drift, ..."""
        import pandas as pd

        rows = [{"graph": c.name, **s.to_dict()} for c in self.calls for s in c.prepared.steps]
        return pd.DataFrame(rows).set_index(["graph", "pass"])


def prepare_decoder(
    source: Any,
    target: str = "qnn-htp",
    *,
    prompt_tokens: int | None = None,
    context: int | None = None,
    activation_type: str = DECODER_ACTIVATIONS,
    weight_type: str = DECODER_WEIGHTS,
    samples: int | None = None,
    seed: int = 0,
    progress: Callable[[int, int, str], object] | None = None,
) -> PreparedDecoder:
    """Make a decoder LLM's prefill (AR-N) and decode (AR-1) graphs ready for ``target`` and judge each.

    Parameters
    ----------
    source : ModelGraph or anything :func:`explorer.load` accepts
        The decoder (never modified); a ``genai_config.json`` beside its file is read.
    target : str
        A target of :data:`DECODER_PIPELINES`.
    prompt_tokens, context : int, optional
        N and L (:func:`~explorer.targets.decoder_split.decoder_split`'s defaults).
    activation_type : {"uint16", "uint8"}
        The QDQ activations.
    weight_type : {"int8", "uint8", "int16", "uint16"}
        The QDQ weights.
    samples : int, optional
        Generated calibration calls per graph (default 8).
    seed : int
        Seed of the calibration and drift inputs.
    progress : callable, optional
        ``progress(step, total, name)`` before each step, ``name`` prefixed by the graph.

    Returns
    -------
    PreparedDecoder

    Examples
    --------
    >>> p = prepare_decoder("zoo:llama", prompt_tokens=4, context=16, samples=1)
    >>> [(c.name, c.prepared.input_shapes["input_ids"]) for c in p.calls]
    [('prefill', [1, 4]), ('decode', [1, 1])]
    >>> p.prefill.prepared.steps[0].coverage < p.prefill.prepared.steps[-1].coverage == 1.0
    True
    """
    from explorer.core.graph import ModelGraph
    from explorer.onnx_adapter.decoder import decoder_spec
    from explorer.onnx_adapter.load import load

    started = time.perf_counter()
    graph = source if isinstance(source, ModelGraph) else load(source)
    model = onnx_model(graph, "prepare_decoder")
    chosen = get_target(target)
    split = decoder_split(
        model, decoder_spec(model, graph.model_path), prompt_tokens=prompt_tokens, context=context
    )
    calls = []
    for name, tokens, past, shapes in split.calls():
        began = time.perf_counter()
        pipeline = decoder_pipeline(
            target,
            shapes,
            activation_type=activation_type,
            weight_type=weight_type,
            samples=samples,
            seed=seed,
        )
        told = None
        if progress is not None:

            def told(step: int, total: int, what: str, _name: str = name) -> object:
                return progress(step, total, f"{_name}: {what}")

        prepared = judge_pipeline(graph, target, shapes, pipeline, seed=seed, progress=told)
        last = partition(prepared.graph, chosen)
        fallback = tuple(last.support[n] for n in last.fallback_nodes)
        calls.append(PreparedCall(name, tokens, past, prepared, fallback, time.perf_counter() - began))
    return PreparedDecoder(
        target, split, activation_type, weight_type, tuple(calls), time.perf_counter() - started
    )

"""A decoder LLM's two fixed-shape calls for an NPU: prefill of N tokens (AR-N) and decode of 1 (AR-1).

An NPU such as Qualcomm's HTP compiles static graphs, so a decoder with a growing KV cache
becomes two graphs at one context length L (CL-L): a prefill graph that takes N prompt
tokens at once (AR-N, "auto-regression length N" in Qualcomm's LLM flow) and a decode graph
that takes one (AR-1). This first version keeps the model's own past/present semantics:
each graph takes a KV cache of a fixed L - N (resp. L - 1) past tokens and returns the
present of L, so each graph computes exactly what the model computes at those sizes, with
an ``attention_mask`` of L positions (zeros where the buffer holds no token, when the
model's attention honours the mask).

Qualcomm's own flow (AI Hub / QAIRT's Genie exports) differs: the KV cache is a buffer of
L - N slots the runtime owns and shifts, each graph returns only the N (resp. 1) new keys
and values rather than the whole present, the mask (and the rotary cos/sin) are inputs
computed on the host, the prompt is fed in chunks of N padded to N, and the prefill and
decode graphs share their weights in one context binary.

The symbols are sized by their decoder roles
(:func:`~explorer.onnx_adapter.decoder.decoder_symbols`), never guessed from names.

Examples
--------
>>> from explorer import zoo
>>> split = decoder_split(zoo.build("llama"), prompt_tokens=16, context=64)
>>> split.prefill["input_ids"], split.prefill["past_key_values.0.key"]
([1, 16], [1, 2, 48, 8])
>>> split.decode["input_ids"], split.decode["attention_mask"]
([1, 1], [1, 64])
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from explorer.core.errors import UsageError
from explorer.onnx_adapter.decoder import DecoderSpec, decoder_spec
from explorer.onnx_adapter.inputs import input_shape, symbol_sizes
from explorer.onnx_adapter.tensor_protos import shape_from_type

if TYPE_CHECKING:
    import onnx
    import pandas as pd

__all__ = ["DEFAULT_PROMPT_TOKENS", "DEFAULT_CONTEXT", "DecoderSplit", "decoder_split"]

DEFAULT_PROMPT_TOKENS = 128
"""AR-N: the prefill graph's tokens (Qualcomm's Llama exports use 128), at most half the context."""
DEFAULT_CONTEXT = 1024
"""CL: the context when the model's own is unknown or longer (its KV inputs grow with it)."""


@dataclass(frozen=True)
class DecoderSplit:
    """The prefill (AR-N) and decode (AR-1) calls of one decoder at one context length (CL).

    Attributes
    ----------
    prompt_tokens : int
        N, the prefill graph's new tokens.
    context : int
        L, the tokens the KV cache and the new ones fill together.
    prefill, decode : dict
        Every graph input's fixed shape in each call.
    batch : int
        The batch (1).
    """

    prompt_tokens: int
    context: int
    prefill: dict[str, list[int]]
    decode: dict[str, list[int]]
    batch: int = 1

    def calls(self) -> Iterator[tuple[str, int, int, dict[str, list[int]]]]:
        """``(name, new tokens, past tokens, input shapes)`` for the prefill and the decode graph.

        Examples
        --------
        >>> from explorer import zoo
        >>> [c[:3] for c in decoder_split(zoo.build("llama"), prompt_tokens=8, context=32).calls()]
        [('prefill', 8, 24), ('decode', 1, 31)]
        """
        yield "prefill", self.prompt_tokens, self.context - self.prompt_tokens, self.prefill
        yield "decode", 1, self.context - 1, self.decode

    def to_dict(self) -> dict[str, Any]:
        """``{"prompt_tokens", "context", "prefill", "decode"}`` (the shapes per input).

        Examples
        --------
        >>> from explorer import zoo
        >>> decoder_split(zoo.build("llama"), prompt_tokens=8, context=32).to_dict()["context"]
        32
        """
        return {
            "prompt_tokens": self.prompt_tokens,
            "context": self.context,
            "prefill": {k: list(v) for k, v in self.prefill.items()},
            "decode": {k: list(v) for k, v in self.decode.items()},
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per input: its shape in the prefill and in the decode graph.

        Examples
        --------
        >>> from explorer import zoo
        >>> frame = decoder_split(zoo.build("llama"), prompt_tokens=8, context=32).to_frame()
        >>> frame.loc["input_ids", "decode"]
        [1, 1]
        """
        import pandas as pd

        rows = [(name, self.prefill[name], self.decode[name]) for name in self.prefill]
        return pd.DataFrame(rows, columns=["input", "prefill", "decode"]).set_index("input")


def decoder_split(
    model: onnx.ModelProto,
    spec: DecoderSpec | None = None,
    *,
    prompt_tokens: int | None = None,
    context: int | None = None,
) -> DecoderSplit:
    """The fixed input shapes of a decoder's prefill (AR-N) and decode (AR-1) graphs at context L.

    Parameters
    ----------
    model : onnx.ModelProto
        A decoder LLM (:func:`~explorer.onnx_adapter.decoder.decoder_spec` recognises it).
    spec : DecoderSpec, optional
        Its spec, when already read (it may come from ``genai_config.json`` beside the file).
    prompt_tokens : int, optional
        N (default :data:`DEFAULT_PROMPT_TOKENS`, at most half the context).
    context : int, optional
        L (default: the model's context length, at most :data:`DEFAULT_CONTEXT`).

    Raises
    ------
    UsageError
        When ``model`` is no decoder, or N is not between 1 and L - 1.

    Examples
    --------
    >>> from explorer import zoo
    >>> split = decoder_split(zoo.build("llama"))  # its context is 128: N = 64
    >>> split.prompt_tokens, split.context, split.prefill["attention_mask"]
    (64, 128, [1, 128])
    """
    spec = spec if spec is not None else decoder_spec(model)
    if spec is None:
        raise UsageError(
            f"{model.graph.name or 'the model'} is not a decoder LLM (no KV cache fed back from present.N "
            "to past_key_values.N, no genai_config.json): it has no prefill and decode graphs"
        )
    length = int(context) if context else min(spec.context_length or DEFAULT_CONTEXT, DEFAULT_CONTEXT)
    tokens = int(prompt_tokens) if prompt_tokens else min(DEFAULT_PROMPT_TOKENS, max(1, length // 2))
    if not 1 <= tokens < length:
        raise UsageError(
            f"the prefill graph's tokens (--prompt-tokens {tokens}) must lie between 1 and the context "
            f"minus one (--context {length}): the KV cache holds context - prompt tokens"
        )
    roles = set(spec.symbols.values())
    if "sequence" not in roles or not roles & {"past", "total"}:
        raise UsageError(
            f"the decoder's inputs name no sequence and past dimensions ({spec.symbols or 'no symbols'}): "
            "its calls cannot be sized"
        )

    initializers = {t.name for t in model.graph.initializer}

    def shapes(new: int) -> dict[str, list[int]]:
        symbols = symbol_sizes(model, sequence=new, past=length - new, spec=spec)
        return {
            v.name: list(input_shape(shape_from_type(v.type)[0], None, symbols))
            for v in model.graph.input
            if v.name not in initializers
        }

    return DecoderSplit(tokens, length, shapes(tokens), shapes(1))

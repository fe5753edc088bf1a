"""Models from today's PyTorch exporter: real architectures built in ``torch.nn``, exported with dynamo.

:func:`export` builds one of :data:`NAMES` in PyTorch with random weights (``torch.manual_seed``),
and writes it with ``torch.onnx.export(..., dynamo=True)``, the exporter's default since PyTorch
2.9. Nothing is downloaded; the modules are written here (torchvision and transformers are not
needed). The graphs are what that exporter writes, unlike the classic (TorchScript) exporter's and
unlike :mod:`explorer.zoo`'s: opset 18 or later, ``node_linear_NN`` names, module scopes only in
the ``pkg.torch.onnx.*`` metadata, and ``IsNaN``/``Where`` around the attention mask of
``scaled_dot_product_attention``.

====================  ==========================================================  ========  ========
name                  what it is (``size="full"``)                                 full      small
====================  ==========================================================  ========  ========
``bert_encoder``      BERT-base: 12 layers, hidden 768, 12 heads, FFN 3072,        ~420 MB   ~1 MB
                      vocab 30522; inputs ``input_ids`` and ``attention_mask``
``gpt2_decoder``      GPT-2 small: 12 layers, hidden 768, 12 heads, vocab 50257,   ~500 MB   ~1 MB
                      causal, no KV cache; input ``input_ids``
``convnext``          ConvNeXt-T: stages [3, 3, 9, 3], dims [96, 192, 384, 768],   ~110 MB   ~0.5 MB
                      depthwise 7x7, LayerNorm, inverted MLP; 224x224 images
``efficientnet``      EfficientNet-B0: MBConv with squeeze-excitation and SiLU,     ~21 MB    ~0.3 MB
                      BatchNormalization; 224x224 images
``llama_kv_decoder``  SmolLM2-135M's Llama shape with a KV cache: 30 layers,        ~540 MB   ~0.7 MB
                      hidden 576, 9 heads, 3 KV heads (grouped-query attention),
                      SwiGLU FFN 1536, RMSNorm, rotary embeddings, vocab 49152,
                      tied; past/present KV as inputs/outputs (below)
====================  ==========================================================  ========  ========

``size="small"`` is the same architecture at reduced width and depth (for tests: a few seconds to
export); ``size="full"`` is the real size (a minute or more to export on two cores). The dynamic
dimensions are ``batch`` (every model) and ``sequence`` (the transformers); images are fixed
at the size in :func:`spec`. :func:`spec` also gives the attention heads and hidden size the
transformer optimisers need.

``llama_kv_decoder`` is a decoder LLM as people export one themselves for generation: inputs
``input_ids`` ``[batch, sequence]``, ``attention_mask`` ``[batch, total_sequence]`` (past plus
new tokens) and ``past_key_values.N.key`` / ``past_key_values.N.value`` ``[batch, kv_heads,
past_sequence, head_size]`` for each layer N; outputs ``logits`` ``[batch, sequence, vocab]``
and ``present.N.key`` / ``present.N.value`` ``[batch, kv_heads, past_sequence + sequence,
head_size]``. ``past_sequence`` may be 0 (the prefill); feeding each ``present`` back as ``past``
decodes one token at a time. The graph is plain ONNX (the exporter's attention, no contrib ops),
unlike onnxruntime-genai's builder's (:mod:`explorer.zoo.decoders`).

Examples
--------
>>> import tempfile, onnx
>>> from explorer.zoo import torch_exports as torch_zoo
>>> with tempfile.TemporaryDirectory() as tmp:
...     path = torch_zoo.export("bert_encoder", tmp)
...     model = onnx.load(path)
>>> path.name
'bert_encoder-small.onnx'
>>> [i.name for i in model.graph.input]
['input_ids', 'attention_mask']
>>> {"IsNaN", "Where"} <= {n.op_type for n in model.graph.node}
True
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from explorer.core.errors import MissingDependencyError, UnknownNameError, UsageError

__all__ = ["NAMES", "SIZES", "export", "module", "spec"]

NAMES: tuple[str, ...] = ("bert_encoder", "gpt2_decoder", "convnext", "efficientnet", "llama_kv_decoder")
"""The models :func:`export` builds."""

SIZES: tuple[str, ...] = ("small", "full")
"""``small``: reduced width and depth, for tests; ``full``: the real size."""

Size = Literal["small", "full"]

_CONFIGS: dict[str, dict[str, dict[str, Any]]] = {
    "bert_encoder": {
        "full": {"layers": 12, "hidden": 768, "heads": 12, "ffn": 3072, "vocab": 30522, "positions": 512},
        "small": {"layers": 2, "hidden": 64, "heads": 4, "ffn": 256, "vocab": 1000, "positions": 128},
    },
    "gpt2_decoder": {
        "full": {"layers": 12, "hidden": 768, "heads": 12, "vocab": 50257, "positions": 1024},
        "small": {"layers": 2, "hidden": 64, "heads": 4, "vocab": 1000, "positions": 128},
    },
    "convnext": {
        "full": {"depths": (3, 3, 9, 3), "dims": (96, 192, 384, 768), "image": 224, "classes": 1000},
        "small": {"depths": (1, 1, 2, 1), "dims": (16, 32, 64, 128), "image": 64, "classes": 10},
    },
    "efficientnet": {
        "full": {"width": 1.0, "depth": 1.0, "image": 224, "classes": 1000},
        "small": {"width": 0.25, "depth": 0.34, "image": 64, "classes": 10},
    },
    "llama_kv_decoder": {  # full: HuggingFaceTB/SmolLM2-135M's shape; small: explorer.zoo.decoders' small
        "full": {"layers": 30, "hidden": 576, "heads": 9, "kv_heads": 3, "ffn": 1536, "vocab": 49152}
        | {"positions": 8192, "rope_theta": 100000.0, "eps": 1e-5},
        "small": {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 128, "vocab": 512}
        | {"positions": 256, "rope_theta": 100000.0, "eps": 1e-5},
    },
}

_TEXT = ("bert_encoder", "gpt2_decoder", "llama_kv_decoder")
"""The models that take token ids (a dynamic ``sequence``)."""

_OUTPUTS = {"bert_encoder": ["last_hidden_state", "pooler_output"]}
"""Output names other than ``["logits"]`` (the KV decoder's presents: :func:`spec`)."""


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise MissingDependencyError(
            "explorer.zoo.torch_exports builds models in PyTorch, which is not installed: "
            "pip install 'onnx-graph-explorer[torch]'"
        ) from None
    return torch


def _check(name: str, size: str) -> None:
    if name not in NAMES:
        raise UnknownNameError(f"no PyTorch zoo model {name!r}; the models are: {', '.join(NAMES)}")
    if size not in SIZES:
        raise UsageError(f"size must be one of {', '.join(SIZES)}, not {size!r}")


def spec(name: str, size: Size = "small") -> dict[str, Any]:
    """What the exported model takes and how it is configured.

    Parameters
    ----------
    name : str
        One of :data:`NAMES`.
    size : {"small", "full"}
        The reduced or the real size.

    Returns
    -------
    dict
        ``inputs``: input name to (dtype, shape with ``"batch"``/``"sequence"`` for the dynamic
        dimensions, and ``"total_sequence"``/``"past_sequence"`` for the KV decoder's mask and
        cache); ``outputs``: the output names, in order; ``example``: input name to the concrete
        shape exported with (and a sensible ``--input-shape``); ``config``: the architecture's
        numbers (``layers``, ``hidden``, ``heads``, ... for the transformers; ``kv_heads``,
        ``ffn``, ``positions`` (the context length), ``rope_theta`` and ``eps`` for the KV decoder).

    Examples
    --------
    >>> spec("bert_encoder", "full")["config"]["heads"]
    12
    >>> spec("convnext")["inputs"]
    {'pixel_values': ('float32', ['batch', 3, 64, 64])}
    >>> kv = spec("llama_kv_decoder")
    >>> kv["inputs"]["past_key_values.1.value"], kv["example"]["attention_mask"]
    (('float32', ['batch', 2, 'past_sequence', 16]), [2, 24])
    >>> kv["outputs"][:3]
    ['logits', 'present.0.key', 'present.0.value']
    """
    _check(name, size)
    config = dict(_CONFIGS[name][size])
    outputs = _OUTPUTS.get(name, ["logits"])
    if name == "llama_kv_decoder":
        seq, past = (16, 8) if size == "small" else (128, 32)
        cache = [config["kv_heads"], config["hidden"] // config["heads"]]
        kv_inputs = _kv_names("past_key_values", config["layers"])
        inputs = {
            "input_ids": ("int64", ["batch", "sequence"]),
            "attention_mask": ("int64", ["batch", "total_sequence"]),
        } | {n: ("float32", ["batch", cache[0], "past_sequence", cache[1]]) for n in kv_inputs}
        example = {"input_ids": [2, seq], "attention_mask": [2, past + seq]}
        example |= {n: [2, cache[0], past, cache[1]] for n in kv_inputs}
        outputs = ["logits", *_kv_names("present", config["layers"])]
    elif name in _TEXT:
        seq = 16 if size == "small" else 128
        names = ["input_ids", "attention_mask"] if name == "bert_encoder" else ["input_ids"]
        inputs = {n: ("int64", ["batch", "sequence"]) for n in names}
        example = {n: [2, seq] for n in names}
    else:
        image = config["image"]
        inputs = {"pixel_values": ("float32", ["batch", 3, image, image])}
        example = {"pixel_values": [2, 3, image, image]}
    return {"inputs": inputs, "outputs": list(outputs), "example": example, "config": config}


def _kv_names(prefix: str, layers: int) -> list[str]:
    """``PREFIX.0.key``, ``PREFIX.0.value``, ``PREFIX.1.key``, ...: the cache's names, layer by layer."""
    return [f"{prefix}.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]


# --- the modules ---------------------------------------------------------------------------------


def _bert(torch: Any, c: dict[str, Any]) -> Any:
    nn, F = torch.nn, torch.nn.functional

    class SelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.heads, self.head = c["heads"], c["hidden"] // c["heads"]
            self.query = nn.Linear(c["hidden"], c["hidden"])
            self.key = nn.Linear(c["hidden"], c["hidden"])
            self.value = nn.Linear(c["hidden"], c["hidden"])

        def split(self, x: Any) -> Any:
            b, s, _ = x.shape
            return x.view(b, s, self.heads, self.head).transpose(1, 2)

        def forward(self, x: Any, mask: Any) -> Any:
            q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            b, _, s, _ = out.shape
            return out.transpose(1, 2).reshape(b, s, self.heads * self.head)

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.self = SelfAttention()
            self.output = nn.ModuleDict(
                {"dense": nn.Linear(c["hidden"], c["hidden"]), "LayerNorm": nn.LayerNorm(c["hidden"], 1e-12)}
            )

        def forward(self, x: Any, mask: Any) -> Any:
            h = self.output["dense"](self.self(x, mask))
            return self.output["LayerNorm"](h + x)

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attention = Attention()
            self.intermediate = nn.ModuleDict({"dense": nn.Linear(c["hidden"], c["ffn"])})
            self.output = nn.ModuleDict(
                {"dense": nn.Linear(c["ffn"], c["hidden"]), "LayerNorm": nn.LayerNorm(c["hidden"], 1e-12)}
            )

        def forward(self, x: Any, mask: Any) -> Any:
            a = self.attention(x, mask)
            h = self.output["dense"](F.gelu(self.intermediate["dense"](a)))
            return self.output["LayerNorm"](h + a)

    class Embeddings(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.word_embeddings = nn.Embedding(c["vocab"], c["hidden"])
            self.position_embeddings = nn.Embedding(c["positions"], c["hidden"])
            self.token_type_embeddings = nn.Embedding(2, c["hidden"])
            self.LayerNorm = nn.LayerNorm(c["hidden"], 1e-12)
            self.register_buffer("position_ids", torch.arange(c["positions"]).unsqueeze(0), persistent=False)

        def forward(self, input_ids: Any) -> Any:
            positions = self.position_ids[:, : input_ids.shape[1]]
            types = torch.zeros_like(input_ids)
            x = self.word_embeddings(input_ids) + self.token_type_embeddings(types)
            return self.LayerNorm(x + self.position_embeddings(positions))

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.ModuleList(Layer() for _ in range(c["layers"]))

        def forward(self, x: Any, mask: Any) -> Any:
            for layer in self.layer:
                x = layer(x, mask)
            return x

    class Pooler(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.dense = nn.Linear(c["hidden"], c["hidden"])

        def forward(self, x: Any) -> Any:
            return torch.tanh(self.dense(x[:, 0]))

    class BertModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embeddings, self.encoder, self.pooler = Embeddings(), Encoder(), Pooler()

        def forward(self, input_ids: Any, attention_mask: Any) -> tuple[Any, Any]:
            mask = attention_mask[:, None, None, :].to(torch.bool)  # SDPA's boolean mask: IsNaN/Where
            hidden = self.encoder(self.embeddings(input_ids), mask)
            return hidden, self.pooler(hidden)

    return BertModel()


def _gpt2(torch: Any, c: dict[str, Any]) -> Any:
    nn, F = torch.nn, torch.nn.functional

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.heads, self.head = c["heads"], c["hidden"] // c["heads"]
            self.c_attn = nn.Linear(c["hidden"], 3 * c["hidden"])
            self.c_proj = nn.Linear(c["hidden"], c["hidden"])

        def forward(self, x: Any) -> Any:
            b, s, h = x.shape
            q, k, v = self.c_attn(x).split(h, dim=2)
            q, k, v = (t.view(b, s, self.heads, self.head).transpose(1, 2) for t in (q, k, v))
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(out.transpose(1, 2).reshape(b, s, h))

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_fc = nn.Linear(c["hidden"], 4 * c["hidden"])
            self.c_proj = nn.Linear(4 * c["hidden"], c["hidden"])

        def forward(self, x: Any) -> Any:
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(c["hidden"]), Attention()
            self.ln_2, self.mlp = nn.LayerNorm(c["hidden"]), MLP()

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class Transformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(c["vocab"], c["hidden"])
            self.wpe = nn.Embedding(c["positions"], c["hidden"])
            self.h = nn.ModuleList(Block() for _ in range(c["layers"]))
            self.ln_f = nn.LayerNorm(c["hidden"])

        def forward(self, input_ids: Any) -> Any:
            positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
            x = self.wte(input_ids) + self.wpe(positions)
            for block in self.h:
                x = block(x)
            return self.ln_f(x)

    class GPT2LMHeadModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = Transformer()
            self.lm_head = nn.Linear(c["hidden"], c["vocab"], bias=False)
            self.lm_head.weight = self.transformer.wte.weight  # tied, as in GPT-2

        def forward(self, input_ids: Any) -> Any:
            return self.lm_head(self.transformer(input_ids))

    return GPT2LMHeadModel()


def _convnext(torch: Any, c: dict[str, Any]) -> Any:
    nn, F = torch.nn, torch.nn.functional

    class LayerNorm2d(nn.LayerNorm):
        """LayerNorm over the channels of an NCHW tensor (ConvNeXt's channels-first LayerNorm)."""

        def forward(self, x: Any) -> Any:
            x = x.permute(0, 2, 3, 1)
            return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps).permute(
                0, 3, 1, 2
            )

    class Block(nn.Module):
        def __init__(self, dim: int) -> None:
            super().__init__()
            self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
            self.norm = nn.LayerNorm(dim, eps=1e-6)
            self.pwconv1, self.pwconv2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
            self.gamma = nn.Parameter(torch.full((dim,), 0.5))  # layer scale (1e-6 at init; trained ~0.1-1)

        def forward(self, x: Any) -> Any:
            h = self.dwconv(x).permute(0, 2, 3, 1)
            h = self.gamma * self.pwconv2(F.gelu(self.pwconv1(self.norm(h))))
            return x + h.permute(0, 3, 1, 2)

    class ConvNeXt(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            dims = c["dims"]
            stem = nn.Sequential(nn.Conv2d(3, dims[0], 4, stride=4), LayerNorm2d(dims[0], eps=1e-6))
            self.downsample_layers = nn.ModuleList([stem])
            for i in range(3):
                self.downsample_layers.append(
                    nn.Sequential(
                        LayerNorm2d(dims[i], eps=1e-6), nn.Conv2d(dims[i], dims[i + 1], 2, stride=2)
                    )
                )
            self.stages = nn.ModuleList(
                nn.Sequential(*(Block(dim) for _ in range(depth)))
                for depth, dim in zip(c["depths"], dims, strict=True)
            )
            self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
            self.head = nn.Linear(dims[-1], c["classes"])

        def forward(self, pixel_values: Any) -> Any:
            x = pixel_values
            for down, stage in zip(self.downsample_layers, self.stages, strict=True):
                x = stage(down(x))
            return self.head(self.norm(x.mean((2, 3))))

    return ConvNeXt()


_B0_STAGES = ((1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3))
_B0_STAGES += ((6, 112, 3, 1, 5), (6, 192, 4, 2, 5), (6, 320, 1, 1, 3))
"""EfficientNet-B0's MBConv stages: (expansion, channels, repeats, stride, kernel)."""


def _efficientnet(torch: Any, c: dict[str, Any]) -> Any:
    nn = torch.nn

    def channels(n: int) -> int:
        return max(8, int(n * c["width"] + 4) // 8 * 8)

    def conv_bn_act(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: bool = True) -> Any:
        layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
        return nn.Sequential(*layers, *([nn.SiLU()] if act else []))

    class SqueezeExcitation(nn.Module):
        def __init__(self, cin: int, squeeze: int) -> None:
            super().__init__()
            self.fc1, self.fc2 = nn.Conv2d(cin, squeeze, 1), nn.Conv2d(squeeze, cin, 1)

        def forward(self, x: Any) -> Any:
            s = torch.nn.functional.adaptive_avg_pool2d(x, 1)
            return x * torch.sigmoid(self.fc2(torch.nn.functional.silu(self.fc1(s))))

    class MBConv(nn.Module):
        def __init__(self, cin: int, cout: int, expand: int, stride: int, k: int) -> None:
            super().__init__()
            mid = cin * expand
            layers = [conv_bn_act(cin, mid, 1)] if expand != 1 else []
            layers += [conv_bn_act(mid, mid, k, stride, groups=mid), SqueezeExcitation(mid, max(1, cin // 4))]
            layers += [conv_bn_act(mid, cout, 1, act=False)]
            self.block = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x: Any) -> Any:
            return x + self.block(x) if self.residual else self.block(x)

    class EfficientNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            cin = channels(32)
            layers: list[Any] = [conv_bn_act(3, cin, 3, 2)]
            for expand, cout, repeats, stride, k in _B0_STAGES:
                cout = channels(cout)
                stage = []
                for i in range(max(1, math.ceil(repeats * c["depth"]))):
                    stage.append(MBConv(cin, cout, expand, stride if i == 0 else 1, k))
                    cin = cout
                layers.append(nn.Sequential(*stage))
            layers.append(conv_bn_act(cin, channels(1280), 1))
            self.features = nn.Sequential(*layers)
            self.classifier = nn.Linear(channels(1280), c["classes"])

        def forward(self, pixel_values: Any) -> Any:
            x = self.features(pixel_values).mean((2, 3))
            return self.classifier(x)

    model = EfficientNet()
    generator = torch.Generator().manual_seed(0)
    for module in model.modules():  # trained-looking statistics, so BatchNormalization is not the identity
        if isinstance(module, nn.BatchNorm2d):
            n = module.num_features
            module.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
            module.running_var.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
    return model


def _llama_kv(torch: Any, c: dict[str, Any]) -> Any:
    """A Llama decoder (RMSNorm, rotary, grouped-query attention, SwiGLU) that reads and returns its KV cache.

    Parameter names are Hugging Face's ``LlamaForCausalLM``'s (``model.layers.0.self_attn.q_proj.weight``).
    ``forward(input_ids, attention_mask, past_key_values)`` takes the cache as one flat list (key,
    value of layer 0, then layer 1, ...) and returns ``(logits, *presents)`` in that order.
    """
    nn, F = torch.nn, torch.nn.functional
    head = c["hidden"] // c["heads"]

    class RMSNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(c["hidden"]))

        def forward(self, x: Any) -> Any:
            return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c["eps"]))

    def rotate(x: Any, cos: Any, sin: Any) -> Any:
        first, second = x.chunk(2, dim=-1)
        return x * cos + torch.cat((-second, first), dim=-1) * sin

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q_proj = nn.Linear(c["hidden"], c["heads"] * head, bias=False)
            self.k_proj = nn.Linear(c["hidden"], c["kv_heads"] * head, bias=False)
            self.v_proj = nn.Linear(c["hidden"], c["kv_heads"] * head, bias=False)
            self.o_proj = nn.Linear(c["heads"] * head, c["hidden"], bias=False)

        def forward(self, x: Any, rope: tuple[Any, Any], mask: Any, past: tuple[Any, Any]) -> Any:
            b, s, _ = x.shape
            q = self.q_proj(x).view(b, s, c["heads"], head).transpose(1, 2)
            k = self.k_proj(x).view(b, s, c["kv_heads"], head).transpose(1, 2)
            v = self.v_proj(x).view(b, s, c["kv_heads"], head).transpose(1, 2)
            q, k = rotate(q, *rope), rotate(k, *rope)
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
            group = c["heads"] // c["kv_heads"]  # each KV head serves `group` query heads
            out = F.scaled_dot_product_attention(
                q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1), attn_mask=mask
            )
            return self.o_proj(out.transpose(1, 2).reshape(b, s, c["heads"] * head)), k, v

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gate_proj = nn.Linear(c["hidden"], c["ffn"], bias=False)
            self.up_proj = nn.Linear(c["hidden"], c["ffn"], bias=False)
            self.down_proj = nn.Linear(c["ffn"], c["hidden"], bias=False)

        def forward(self, x: Any) -> Any:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class DecoderLayer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.input_layernorm, self.self_attn = RMSNorm(), Attention()
            self.post_attention_layernorm, self.mlp = RMSNorm(), MLP()

        def forward(self, x: Any, rope: tuple[Any, Any], mask: Any, past: tuple[Any, Any]) -> Any:
            attended, k, v = self.self_attn(self.input_layernorm(x), rope, mask, past)
            x = x + attended
            return x + self.mlp(self.post_attention_layernorm(x)), k, v

    class LlamaModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed_tokens = nn.Embedding(c["vocab"], c["hidden"])
            self.layers = nn.ModuleList(DecoderLayer() for _ in range(c["layers"]))
            self.norm = RMSNorm()
            inv_freq = 1.0 / c["rope_theta"] ** (torch.arange(0, head, 2, dtype=torch.float32) / head)
            self.register_buffer("inv_freq", inv_freq, persistent=False)

        def forward(self, input_ids: Any, attention_mask: Any, past_key_values: list[Any]) -> Any:
            s, past = input_ids.shape[1], past_key_values[0].shape[2]
            positions = torch.arange(s, device=input_ids.device) + past
            freqs = positions[:, None].to(torch.float32) * self.inv_freq[None, :]
            angles = torch.cat((freqs, freqs), dim=-1)
            rope = (angles.cos()[None, None], angles.sin()[None, None])
            causal = torch.arange(past + s, device=input_ids.device)[None, :] <= positions[:, None]
            mask = causal[None, None] & attention_mask[:, None, None, :].to(torch.bool)
            x, presents = self.embed_tokens(input_ids), []
            for i, layer in enumerate(self.layers):
                x, k, v = layer(x, rope, mask, (past_key_values[2 * i], past_key_values[2 * i + 1]))
                presents += [k, v]
            return self.norm(x), presents

    class LlamaForCausalLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = LlamaModel()
            self.lm_head = nn.Linear(c["hidden"], c["vocab"], bias=False)
            self.lm_head.weight = self.model.embed_tokens.weight  # tied, as in SmolLM2

        def forward(self, input_ids: Any, attention_mask: Any, past_key_values: list[Any]) -> tuple[Any, ...]:
            hidden, presents = self.model(input_ids, attention_mask, past_key_values)
            return (self.lm_head(hidden), *presents)

    return LlamaForCausalLM()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The exporter's progress lines (stdout), FutureWarnings and "torchvision is not installed" logs."""
    registration = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = registration.level
    registration.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        registration.setLevel(level)


_BUILDERS = {
    "bert_encoder": _bert,
    "gpt2_decoder": _gpt2,
    "convnext": _convnext,
    "efficientnet": _efficientnet,
    "llama_kv_decoder": _llama_kv,
}


def _example_inputs(torch: Any, name: str, s: dict[str, Any], seed: int) -> tuple[Any, ...]:
    generator = torch.Generator().manual_seed(seed)
    if name == "llama_kv_decoder":
        shapes = s["example"]
        ids = torch.randint(0, s["config"]["vocab"], shapes["input_ids"], generator=generator)
        mask = torch.ones(shapes["attention_mask"], dtype=torch.int64)
        past = [torch.randn(shapes[n], generator=generator) for n in list(shapes)[2:]]
        return ids, mask, past
    if name in _TEXT:
        shape = s["example"]["input_ids"]
        ids = torch.randint(0, s["config"]["vocab"], shape, generator=generator)
        if name == "gpt2_decoder":
            return (ids,)
        mask = torch.ones(shape, dtype=torch.int64)
        mask[0, shape[1] // 2 :] = 0  # padding in the first sequence
        return ids, mask
    return (torch.randn(s["example"]["pixel_values"], generator=generator),)


def _dynamic_shapes(torch: Any, name: str, s: dict[str, Any]) -> dict[str, Any]:
    """The exporter's ``dynamic_shapes``, named as :func:`spec`'s inputs (``batch``, ``sequence``, ...)."""
    dim, positions = torch.export.Dim, s["config"].get("positions", 1)
    batch = dim("batch", min=1, max=1024)
    if name not in _TEXT:
        return {input_name: {0: batch} for input_name in s["inputs"]}
    sequence = dim("sequence", min=1, max=positions)
    if name != "llama_kv_decoder":
        return {input_name: {0: batch, 1: sequence} for input_name in s["inputs"]}
    past = dim("past_sequence", min=0, max=positions)  # 0: the prefill
    return {
        "input_ids": {0: batch, 1: sequence},
        "attention_mask": {0: batch, 1: dim("total_sequence", min=1, max=2 * positions)},
        "past_key_values": [{0: batch, 2: past} for _ in list(s["inputs"])[2:]],
    }


def module(name: str, size: Size = "small", *, seed: int = 0) -> Any:
    """The PyTorch module :func:`export` exports, with the same random weights, in eval mode.

    What a test compares the ONNX model with (PyTorch eager on the same inputs).

    Parameters
    ----------
    name : str
        One of :data:`NAMES`.
    size : {"small", "full"}
        The reduced or the real size.
    seed : int
        Seeds the weights (``torch.manual_seed``), as :func:`export` does.

    Returns
    -------
    torch.nn.Module
        The model; the KV decoder's ``forward(input_ids, attention_mask, past_key_values)`` takes
        the cache as one flat list (layer 0's key and value, then layer 1's, ...) and returns
        ``(logits, *presents)`` in the same order.

    Raises
    ------
    MissingDependencyError
        PyTorch is not installed (the ``torch`` extra).
    UnknownNameError
        ``name`` is not one of :data:`NAMES`.

    Examples
    --------
    >>> import torch
    >>> model = module("llama_kv_decoder")
    >>> empty = [torch.zeros(1, 2, 0, 16) for _ in range(4)]  # 2 layers' keys and values, past length 0
    >>> logits, *presents = model(torch.tensor([[1, 2, 3]]), torch.ones(1, 3, dtype=torch.int64), empty)
    >>> tuple(logits.shape), tuple(presents[0].shape)
    ((1, 3, 512), (1, 2, 3, 16))
    """
    _check(name, size)
    torch = _torch()
    torch.manual_seed(seed)
    return _BUILDERS[name](torch, spec(name, size)["config"]).eval()


def export(name: str, path_or_folder: str | os.PathLike[str], *, size: Size = "small", seed: int = 0) -> Path:
    """Build ``name`` in PyTorch with random weights and export it with ``torch.onnx.export(dynamo=True)``.

    Parameters
    ----------
    name : str
        One of :data:`NAMES`.
    path_or_folder : str or os.PathLike
        The ``.onnx`` file to write, or an existing folder to write ``NAME-SIZE.onnx`` in.
    size : {"small", "full"}
        The reduced size (tests) or the real size (see the module's table).
    seed : int
        Seeds the weights (``torch.manual_seed``) and the example inputs traced with; the same
        seed gives the same weights.

    Returns
    -------
    pathlib.Path
        The file written (one file: the weights are inside it at these sizes).

    Raises
    ------
    MissingDependencyError
        PyTorch is not installed (the ``torch`` extra).
    UnknownNameError
        ``name`` is not one of :data:`NAMES`.

    Examples
    --------
    >>> import tempfile, onnx
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     model = onnx.load(export("efficientnet", tmp))
    >>> [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    ['batch', 3, 64, 64]
    """
    _check(name, size)
    torch = _torch()
    target = Path(path_or_folder)
    if target.is_dir():
        target = target / f"{name}-{size}.onnx"
    s = spec(name, size)
    model = module(name, size, seed=seed)
    args = _example_inputs(torch, name, s, seed)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _quiet(), torch.no_grad():
        torch.onnx.export(
            model,
            args,
            str(target),
            dynamo=True,
            input_names=list(s["inputs"]),
            output_names=s["outputs"],
            dynamic_shapes=_dynamic_shapes(torch, name, s),
            external_data=False,
            verbose=False,
        )
    return target

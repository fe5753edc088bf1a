"""ONNX Runtime's transformer optimizer (``onnxruntime.transformers.optimizer.optimize_model``) as a step.

``optimize_model`` runs the Python fusions written for one family of models (BERT,
GPT-2, ViT, T5, ...) and, for some, ONNX Runtime's own basic level first. The fusions
produce ONNX Runtime contrib ops of the ``com.microsoft`` domain: Attention,
MultiHeadAttention, SkipLayerNormalization, EmbedLayerNormalization, BiasGelu,
FastGelu, ... The step runs it on the model at a path, writes the result to
``out_path`` and logs what the optimizer logged (its ``Fused ...: N`` lines and
warnings) with the fused-op counts.

Examples
--------
>>> import tempfile, os, onnx
>>> from explorer import zoo
>>> with tempfile.TemporaryDirectory() as tmp:
...     src, dst = os.path.join(tmp, "in.onnx"), os.path.join(tmp, "out.onnx")
...     onnx.save(zoo.build("transformer", layers=1, hidden=32, heads=2), src)
...     log = ort_transformers_step(src, "bert", 2, 32, out_path=dst)
...     sorted({n.op_type for n in onnx.load(dst).graph.node if n.domain == "com.microsoft"})
['Attention', 'BiasGelu', 'SkipLayerNormalization']
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Iterator
from typing import Any

import onnx
from onnx import helper

from ..native import save_model

__all__ = ["MODEL_TYPES", "GPU_ONLY_FUSIONS", "model_types", "ort_transformers_step"]

MODEL_TYPES: tuple[str, ...] = (
    *("bart", "bert", "bert_tf", "bert_keras", "clip", "conformer", "gpt2", "gpt2_tf", "gpt_neox", "phi"),
    *("qwen3", "sam2", "swin", "tnlr", "t5", "unet", "vae", "vit", "mmdit"),
)
"""The keys of ``onnxruntime.transformers.optimizer.MODEL_TYPES`` in ONNX Runtime 1.32, listed here so
that building the registry does not import the optimizer (half a second, and sympy) in the parent."""


def model_types() -> list[str]:
    """The model types of :data:`MODEL_TYPES`, in ONNX Runtime's order.

    Examples
    --------
    >>> {"bert", "gpt2", "vit"} <= set(model_types())
    True
    """
    return list(MODEL_TYPES)


class _Collect(logging.Handler):
    """Keep the messages of ONNX Runtime's transformer tools (its modules log under their bare names)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "transformers" in record.pathname.replace("\\", "/").split("/onnxruntime/", 1)[-1]:
            self.lines.append(f"{record.levelname.lower()}: {record.getMessage()}")


@contextlib.contextmanager
def _collected() -> Iterator[_Collect]:
    root = logging.getLogger()
    handler, level = _Collect(), root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


GPU_ONLY_FUSIONS = (
    "enable_nhwc_conv",
    "enable_group_norm",
    "enable_skip_group_norm",
    "enable_bias_splitgelu",
    "enable_bias_add",
)
"""``FusionOptions`` switches (on for unet, vae and clip) whose ops ONNX Runtime 1.32 has only CUDA
kernels for (NhwcConv, GroupNorm, SkipGroupNorm, BiasSplitGelu, BiasAdd)."""


def _complete_opset_imports(model: Any) -> list[str]:
    """Import every domain a node uses (the Python fusions add com.microsoft nodes without importing it)."""
    imported = {o.domain for o in model.opset_import}
    missing = sorted({n.domain for n in model.graph.node if n.domain not in imported} - {"", "ai.onnx"})
    for domain in missing:
        model.opset_import.append(helper.make_opsetid(domain, 1))
    return [f"added the missing opset import {domain} v1" for domain in missing]


def _without_cpu_kernel(model: Any) -> list[str]:
    """Contrib ops of the result that this ONNX Runtime cannot run on the CPU."""
    from onnxruntime.capi import _pybind_state

    cpu = {
        (d.domain, d.op_name)
        for d in _pybind_state.get_all_opkernel_def()
        if d.provider == "CPUExecutionProvider"
    }
    missing = Counter(
        n.op_type
        for n in model.graph.node
        if n.domain not in ("", "ai.onnx") and (n.domain, n.op_type) not in cpu
    )
    if not missing:
        return []
    ops = ", ".join(f"{op} {n}" for op, n in sorted(missing.items()))
    return [f"no CPU kernel in this ONNX Runtime for: {ops}; the model runs only on a GPU build"]


def ort_transformers_step(
    path: str,
    model_type: str,
    num_heads: int = 0,
    hidden_size: int = 0,
    opt_level: int | None = None,
    gelu_approximation: bool = False,
    use_multi_head_attention: bool = False,
    gpu_fusions: bool = False,
    *,
    out_path: str,
) -> list[str]:
    """Run ``optimize_model`` for ``model_type`` on the model at ``path``; write the result to ``out_path``.

    Parameters
    ----------
    path : str
        The input model (external data is read next to it).
    model_type : str
        One of :func:`model_types`, e.g. ``"bert"``.
    num_heads, hidden_size : int
        Attention heads and hidden size; 0 lets the optimizer read them from the graph
        (the Reshape targets of Q/K/V), which fails when those are computed at run time.
    opt_level : int, optional
        ONNX Runtime level run before the Python fusions (0, 1, 2 or 99); ``None`` is the
        model type's default (1 for bert, gpt2, vit, ...; 0 for gpt_neox, phi, qwen3).
    gelu_approximation : bool
        Also turn Gelu / BiasGelu into FastGelu (tanh approximation; not exact).
    use_multi_head_attention : bool
        Fuse attention into MultiHeadAttention (separate Q/K/V inputs) instead of Attention.
    gpu_fusions : bool
        Keep the fusions into ops with only CUDA kernels (:data:`GPU_ONLY_FUSIONS`); off by
        default, so the result runs on the CPU and can be verified.
    out_path : str
        Where to write the optimised model.

    Examples
    --------
    >>> ort_transformers_step.__defaults__
    (0, 0, None, False, False, False)
    """
    import onnxruntime
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import MODEL_TYPES, optimize_model

    if model_type not in MODEL_TYPES:
        raise ValueError(
            f"unknown ONNX Runtime transformer model type {model_type!r}; use one of {', '.join(MODEL_TYPES)}"
        )
    if model_type == "phi" and not onnx.load(path, load_external_data=False).functions:
        raise ValueError(
            "the phi optimizer expects the dynamo exporter's Phi-2 graph, with one model-local function "
            "per module; this model has no model-local functions"
        )
    options = FusionOptions(model_type)
    options.enable_gelu_approximation = bool(gelu_approximation)
    options.use_multi_head_attention = bool(use_multi_head_attention)
    switched_off = [name for name in GPU_ONLY_FUSIONS if getattr(options, name, False) and not gpu_fusions]
    for name in switched_off:
        setattr(options, name, False)
    log = [
        f"onnxruntime {onnxruntime.__version__} transformers optimizer: model_type={model_type}, "
        f"num_heads={num_heads or 'detect'}, hidden_size={hidden_size or 'detect'}, "
        f"opt_level={MODEL_TYPES[model_type][2] if opt_level is None else opt_level}"
    ]
    with _collected() as collected:
        optimizer = optimize_model(
            path,
            model_type=model_type,
            num_heads=int(num_heads),
            hidden_size=int(hidden_size),
            optimization_options=options,
            opt_level=opt_level,
            use_gpu=False,
        )
    if switched_off:
        log.append("CUDA-only fusions left off (gpu_fusions=True keeps them): " + ", ".join(switched_off))
    log += collected.lines
    if hasattr(optimizer, "get_fused_operator_statistics"):
        counts = {op: n for op, n in optimizer.get_fused_operator_statistics().items() if n}
        log.append("fused operators: " + (", ".join(f"{op} {n}" for op, n in counts.items()) or "none"))
    log += _complete_opset_imports(optimizer.model)
    log += _without_cpu_kernel(optimizer.model)
    save_model(optimizer.model, out_path)
    return log

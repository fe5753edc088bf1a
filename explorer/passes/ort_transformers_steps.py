"""ONNX Runtime's transformer optimizer (``onnxruntime.transformers.optimizer.optimize_model``) as a step.

``optimize_model`` runs the Python fusions written for one family of models (BERT,
GPT-2, ViT, T5, ...) and, for some, ONNX Runtime's own basic level first. The fusions
produce ONNX Runtime contrib ops of the ``com.microsoft`` domain: Attention,
MultiHeadAttention, SkipLayerNormalization, EmbedLayerNormalization, BiasGelu,
FastGelu, ... The step runs it on the model at a path, writes the result to
``out_path`` and logs what the optimizer logged (its ``Fused ...: N`` lines and
warnings) with the fused-op counts, and says in words when attention was not fused or a
fusion changed the numerics (BiasGelu from a tanh-approximate Gelu). ONNX Runtime's own level
is run here (its ``optimize_by_onnxruntime`` imports torch), so the step needs no PyTorch.

Examples
--------
>>> import tempfile, os, onnx
>>> from explorer import zoo
>>> with tempfile.TemporaryDirectory() as tmp:
...     src = str(zoo.save("transformer", tmp, layers=1, hidden=32, heads=2))
...     dst = os.path.join(tmp, "out.onnx")
...     log = ort_transformers_step(src, "bert", 2, 32, out_path=dst)
...     sorted({n.op_type for n in onnx.load(dst).graph.node if n.domain == "com.microsoft"})
['Attention', 'BiasGelu', 'SkipLayerNormalization']
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from typing import Any

import onnx
from onnx import helper

from explorer.core.errors import UsageError
from explorer.onnx_adapter.files import save_model
from explorer.passes.step_failures import StepCrashed, crash_site, step_traceback

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


_ATTENTION_OPS = ("Attention", "MultiHeadAttention", "GroupQueryAttention", "PackedAttention")


def _unfused_attention(source: Any, model: Any, model_type: str) -> list[str]:
    """Say so in words when the input has attention (Softmax) and the optimizer fused none of it."""
    softmax = sum(n.op_type == "Softmax" for n in model.graph.node)
    fused = sum(n.op_type in _ATTENTION_OPS for n in model.graph.node)
    if not softmax or fused:
        return []
    ops = {n.op_type for n in source.graph.node}
    why = (
        "the dynamo exporter's scaled_dot_product_attention, with IsNaN and Where around the mask, "
        "is not one of its patterns"
        if {"IsNaN", "Where"} <= ops
        else "its attention patterns did not match this graph"
    )
    return [
        f"attention not fused: {softmax} Softmax left; ONNX Runtime's {model_type!r} fusion found no "
        f"attention to fuse ({why}); the other fusions ran"
    ]


def _tanh_gelu_made_exact(source: Any, model: Any) -> list[str]:
    """Say so when the fusion turned ``Gelu(approximate="tanh")`` into BiasGelu, the exact (erf) GELU.

    ONNX Runtime 1.32's BiasGelu fusion matches any opset-20 Gelu and ignores its ``approximate``
    attribute (GPT-2's ``gelu_new`` exported by the dynamo exporter), so the outputs change.
    """
    tanh = sum(
        n.op_type == "Gelu" and any(a.name == "approximate" and a.s == b"tanh" for a in n.attribute)
        for n in source.graph.node
    )
    bias_gelu = sum(n.op_type == "BiasGelu" for n in model.graph.node)
    if not (tanh and bias_gelu):
        return []
    return [
        f"warning: {bias_gelu} BiasGelu fused from Gelu(approximate='tanh') ({tanh} in the input): BiasGelu "
        "computes the exact (erf) GELU, so the outputs differ from the model's; "
        "gelu_approximation=True fuses FastGelu (tanh) instead"
    ]


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


_LEVELS = {1: "ORT_ENABLE_BASIC", 2: "ORT_ENABLE_EXTENDED", 99: "ORT_ENABLE_ALL"}
"""The ``opt_level`` values ``optimize_model`` accepts (besides 0, none) and ONNX Runtime's names for them."""

_FUSION_BLOCKERS = (
    *("MatMulScaleFusion", "MatMulAddFusion", "MatmulTransposeFusion", "GemmActivationFusion"),
    "BiasSoftmaxFusion",
)
"""The ONNX Runtime optimizers ``optimize_model`` turns off above level 1 (they break its fusions)."""


def _onnxruntime_level(path: str, level: int, folder: str) -> str:
    """ONNX Runtime's own graph optimisations at ``level`` on the CPU, written to a file in ``folder``.

    What ``optimize_model`` runs before its Python fusions (its ``optimize_by_onnxruntime``), done
    here because that function imports ``torch`` (to ask ``torch.version.hip``, which matters only
    for GPU providers): on an install without PyTorch it fails with ``No module named 'torch'``.
    The same session options, the same disabled optimizers, CPU only.
    """
    import onnxruntime
    from onnxruntime.transformers.onnx_utils import has_external_data

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = getattr(onnxruntime.GraphOptimizationLevel, _LEVELS[level])
    out = os.path.join(folder, f"model_o{level}_cpu.onnx")
    options.optimized_model_filepath = out
    if has_external_data(onnx.load(path, load_external_data=False)):
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", os.path.basename(out) + ".data"
        )
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
        )
    disabled = ["ConstantSharing", *(_FUSION_BLOCKERS if level > 1 else ())]
    onnxruntime.InferenceSession(
        path, options, providers=["CPUExecutionProvider"], disabled_optimizers=disabled
    )
    return out


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
    Run in the worker, as the registry does (the optimizer stays out of this process):

    >>> import os, tempfile
    >>> from explorer import zoo
    >>> from explorer.isolation import worker
    >>> model = zoo.build("transformer", layers=1, hidden=32, heads=2)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     out = os.path.join(tmp, "out.onnx")
    ...     log = worker.run_on_model(ort_transformers_step, model, "bert", 2, 32, output=out)
    >>> log[-1]
    'fused operators: Attention 1, BiasGelu 1, LayerNormalization 2, SkipLayerNormalization 2'
    """
    import onnxruntime
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import MODEL_TYPES, optimize_model

    if model_type not in MODEL_TYPES:
        raise UsageError(
            f"unknown ONNX Runtime transformer model type {model_type!r}; use one of {', '.join(MODEL_TYPES)}"
        )
    if model_type == "phi" and not onnx.load(path, load_external_data=False).functions:
        raise UsageError(
            "the phi optimizer expects the dynamo exporter's Phi-2 graph, with one model-local function "
            "per module; this model has no model-local functions"
        )
    options = FusionOptions(model_type)
    options.enable_gelu_approximation = bool(gelu_approximation)
    options.use_multi_head_attention = bool(use_multi_head_attention)
    switched_off = [name for name in GPU_ONLY_FUSIONS if getattr(options, name, False) and not gpu_fusions]
    for name in switched_off:
        setattr(options, name, False)
    level = MODEL_TYPES[model_type][2] if opt_level is None else int(opt_level)
    if level not in (0, *_LEVELS):
        raise UsageError(f"opt_level must be 0, 1, 2 or 99, not {opt_level!r}")
    log = [
        f"onnxruntime {onnxruntime.__version__} transformers optimizer: model_type={model_type}, "
        f"num_heads={num_heads or 'detect'}, hidden_size={hidden_size or 'detect'}, opt_level={level}"
    ]
    with _collected() as collected, tempfile.TemporaryDirectory(prefix="onnx-explorer-ort-") as folder:
        source = _onnxruntime_level(path, level, folder) if level else path
        try:
            optimizer = optimize_model(  # its ONNX Runtime level is done above (level 0: none here)
                source,
                model_type=model_type,
                num_heads=int(num_heads),
                hidden_size=int(hidden_size),
                optimization_options=options,
                opt_level=0,
                use_gpu=False,
            )
        except Exception as err:  # the optimizer's own bug on this graph: where, why, and what to try
            raise _crashed(err, source, model_type, num_heads, hidden_size) from err
    if switched_off:
        log.append("CUDA-only fusions left off (gpu_fusions=True keeps them): " + ", ".join(switched_off))
    log += collected.lines
    if hasattr(optimizer, "get_fused_operator_statistics"):
        counts = {op: n for op, n in optimizer.get_fused_operator_statistics().items() if n}
        log.append("fused operators: " + (", ".join(f"{op} {n}" for op, n in counts.items()) or "none"))
    original = onnx.load(path, load_external_data=False)
    log += _unfused_attention(original, optimizer.model, model_type)
    log += _tanh_gelu_made_exact(original, optimizer.model)
    log += _complete_opset_imports(optimizer.model)
    log += _without_cpu_kernel(optimizer.model)
    save_model(optimizer.model, out_path)
    return log


def _crashed(err: Exception, source: str, model_type: str, num_heads: int, hidden_size: int) -> StepCrashed:
    """The optimizer's crash in words: where in ``onnxruntime.transformers`` (the innermost frame there),
    the exception, why where it is known, and what to try instead.

    Examples
    --------
    >>> crashed = _crashed(IndexError("list index out of range"), "m.onnx", "gpt2", 12, 768)
    >>> print(str(crashed).split("; ")[0])
    ONNX Runtime's transformer optimizer (model type 'gpt2') crashed: IndexError: list index out of range
    >>> "ort-transformers:bert(num_heads=12,hidden_size=768)" in str(crashed)
    True
    """
    site = crash_site(step_traceback(err), within="onnxruntime.transformers")
    where = f" in {site.words()}" if site is not None else ""
    what = f"{type(err).__name__}: {' '.join(str(err).split())}".rstrip(": ")
    params = f"(num_heads={num_heads},hidden_size={hidden_size})" if num_heads or hidden_size else ""
    tries = [] if model_type == "bert" else [f"model type 'bert' (ort-transformers:bert{params})"]
    tries += [
        "ONNX Runtime's own fusions (ort:extended, or onnxscript:ort_fusions)",
        "a legacy export (torch.onnx.export(..., dynamo=False)), the graphs the optimizer's patterns were "
        "written for, where the model exports that way",
    ]
    return StepCrashed(
        f"ONNX Runtime's transformer optimizer (model type {model_type!r}) crashed{where}: {what}"
        f"{_crash_cause(site, err, source)}; instead try {', or '.join(tries)}"
    )


def _crash_cause(site: Any, err: Exception, source: str) -> str:
    """Why the optimizer crashed, in words, where the crash is one it is known to make (else ``""``)."""
    if site is None or (site.file, site.function) != ("onnx_model_gpt2.py", "postprocess"):
        return ""
    try:
        gemms = [n for n in onnx.load(source, load_external_data=False).graph.node if n.op_type == "Gemm"]
    except Exception:  # the model was read once already; a cause is only a help
        return ""
    unbiased = sum(len(n.input) < 3 or not n.input[2] for n in gemms)
    if not isinstance(err, IndexError) or not unbiased:
        return ""
    return (
        f" (GPT-2's postprocess rewrites each Gemm after a LayerNormalization or FastGelu into MatMul + Add "
        f"of the Gemm's bias, input C, and {unbiased} of the model's {len(gemms)} Gemm nodes have none: a "
        "bias of zeros, which the exporter leaves out)"
    )

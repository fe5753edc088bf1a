"""The registry of every available pass, with its family and its explanation for learners.

Names:

- every onnxoptimizer pass under its own name (``fuse_bn_into_conv``; also
  ``onnxoptimizer:fuse_bn_into_conv``), and the preset ``fuse_and_eliminate``;
- ``onnxsim`` and its sub-stages ``onnxsim:constant_folding`` and ``onnxsim:shape_ops``;
- ``ort:basic``, ``ort:extended``, ``ort:layout`` (where ONNX Runtime has it), ``ort:all``;
- ``version_converter`` (parameter ``opset``; ``opset:13`` is a shorthand);
- ``explorer:decompose_contrib`` (parameters ``ops``, ``rms_norm``, ``quantized``) and
  ``explorer:unroll_loops`` (parameter ``max_trips``), rewrites of our own into standard ONNX;
- ``onnxscript:optimize`` and its parts (``onnxscript:constant_folding``, ``onnxscript:remove_unused``,
  ``onnxscript:inline``, ``onnxscript:rewrite``), ``onnxscript:ort_fusions`` (``optimize_for_ort``) and
  one pass per ONNX Runtime fusion rule set, named after its function (``onnxscript:fuse_sdpa``, ...);
- ``ort-quant:fix_shapes`` (parameter ``input_shapes``), ``ort-quant:qnn_preprocess`` and
  ``ort-quant:qnn_qdq`` (``activation_type`` uint8 / uint16, ``weight_type``, ``samples``, ``seed``,
  ``calibration``): ONNX Runtime's tools that make a model NPU-ready;
- ``ort-transformers:MODEL_TYPE`` for every model type of ONNX Runtime's transformer optimizer
  (``ort-transformers:bert``, ``ort-transformers:gpt2``, ...; parameters ``num_heads``, ``hidden_size``).

Examples
--------
>>> from explorer.passes import registry
>>> registry.get_pass("opset:13").parameters["opset"]
13
>>> "fuse_bn_into_conv" in registry.pass_names("onnxoptimizer")
True
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import onnx
from onnx import ModelProto

from explorer.core.errors import PipelineSyntaxError, UnknownPassError
from explorer.isolation import worker
from explorer.onnx_adapter import model_files
from explorer.passes import (
    contrib_decompositions,
    contrib_quantized,
    descriptions,
    loop_unrolling,
    native_steps,
    onnxscript_steps,
    ort_transformers_steps,
    quantization_steps,
)
from explorer.passes.base import FunctionPass, Runner

__all__ = [
    "FAMILIES",
    "get_pass",
    "pass_names",
    "list_passes",
    "passes_frame",
    "parse_pipeline",
    "split_pipeline",
    "PipelineItem",
    "DEFAULT_PASS_TIMEOUT",
]

FAMILIES = (
    "onnxoptimizer",
    "onnxsim",
    "onnxscript",
    "ort",
    "ort-transformers",
    "ort-quant",
    "onnx",
    "explorer",
)
"""Pass families, in the order the registry lists them."""

DEFAULT_PASS_TIMEOUT = 600.0
"""Seconds a native pass may run before the worker stops it."""

PipelineItem = str | tuple[str, Mapping[str, Any]]
"""A pipeline step: a pass name, or ``(name, parameters)``."""


def _in_worker(
    step: Callable[..., list[str]], model: ModelProto | str, *args: Any, label: str, timeout: float | None
) -> tuple[Path, list[str]]:
    """Run a native step on ``model`` (a ModelProto or a file) in the worker; return the file it wrote.

    The output (and its external data) stays in a private folder of its own
    (:func:`explorer.onnx_adapter.model_files.new_model_dir`), so the next step, shape
    inference and the verification read it instead of a re-serialized copy.
    """
    folder = model_files.new_model_dir("pass-")
    out = folder / "model.onnx"
    try:
        log = worker.run_on_model(step, model, *args, output=out, step=label, timeout=timeout)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return out, list(log)


def _runner(
    step: Callable[..., list[str]],
    label: str,
    *fixed: Any,
    from_params: Callable[[Mapping[str, Any]], tuple] | None = None,
) -> Runner:
    """A runner calling ``step(path, *fixed, *from_params(params))`` in the worker."""

    def run(model: ModelProto | str, params: Mapping[str, Any]) -> tuple[Path, list[str]]:
        timeout = params.get("timeout", DEFAULT_PASS_TIMEOUT)
        extra = from_params(params) if from_params is not None else ()
        return _in_worker(step, model, *fixed, *extra, label=label, timeout=timeout)

    run.accepts_path = True  # type: ignore[attr-defined]
    run.isolated = True  # type: ignore[attr-defined]  # the worker gets a serialized copy of the model
    return run


def _register(
    passes: dict[str, FunctionPass],
    name: str,
    family: str,
    kind: str,
    description: str,
    step: Callable[..., list[str]],
    *fixed: Any,
    args: Callable[[Mapping[str, Any]], tuple] | None = None,
    parameters: Mapping[str, Any] | None = None,
    large_models: bool = False,
) -> None:
    """Add the pass ``name`` running ``step(path, *fixed, *args(params))`` in the worker.

    Its parameters are ``timeout`` (:data:`DEFAULT_PASS_TIMEOUT`) and then ``parameters``.
    """
    runner = _runner(step, name, *fixed, from_params=args)
    defaults = {"timeout": DEFAULT_PASS_TIMEOUT, **(parameters or {})}
    passes[name] = FunctionPass(
        name, family, description, runner, defaults, kind=kind, large_models=large_models
    )


_ONNXOPTIMIZER_PARAMETERS = {"fixed_point": False, "cleanup": True, "fold": True}
_ONNXSIM_PARAMETERS = {"input_shapes": None, "portable": True}
_ORT_TRANSFORMERS_PARAMETERS = {
    "num_heads": 0,
    "hidden_size": 0,
    "opt_level": None,
    "gelu_approximation": False,
    "use_multi_head_attention": False,
    "gpu_fusions": False,
}
_QNN_QDQ_PARAMETERS = {
    "input_shapes": None,
    "activation_type": "uint8",
    "weight_type": "uint8",
    "samples": quantization_steps.CALIBRATION_SAMPLES,
    "seed": 0,
    "calibration": None,
}


def _onnxoptimizer_args(params: Mapping[str, Any]) -> tuple:
    return (
        bool(params.get("fixed_point")),
        bool(params.get("cleanup", True)),
        bool(params.get("fold", True)),
    )


def _onnxsim_args(params: Mapping[str, Any]) -> tuple:
    shapes = params.get("input_shapes")
    return (dict(shapes) if shapes else None, bool(params.get("portable", True)))


def _ort_transformers_args(params: Mapping[str, Any]) -> tuple:
    level = params.get("opt_level")
    return (
        int(params.get("num_heads") or 0),
        int(params.get("hidden_size") or 0),
        None if level is None else int(level),
        bool(params.get("gelu_approximation")),
        bool(params.get("use_multi_head_attention")),
        bool(params.get("gpu_fusions")),
    )


def _input_shapes_args(params: Mapping[str, Any]) -> tuple:
    return (params.get("input_shapes"),)


def _qnn_preprocess_args(params: Mapping[str, Any]) -> tuple:
    return (bool(params.get("fuse_layernorm")),)


def _qnn_qdq_args(params: Mapping[str, Any]) -> tuple:
    return (
        params.get("input_shapes"),
        params["activation_type"],
        params["weight_type"],
        int(params["samples"]),
        int(params["seed"]),
        params.get("calibration"),
    )


def _opset_args(params: Mapping[str, Any]) -> tuple:
    return (int(params["opset"]),)


def _contrib_args(params: Mapping[str, Any]) -> tuple:
    return (
        sorted(params["ops"]) if params.get("ops") else None,
        bool(params.get("rms_norm", False)),
        str(params.get("quantized") or contrib_quantized.DEQUANTIZE_LINEAR),
    )


def _unroll_args(params: Mapping[str, Any]) -> tuple:
    return (int(params["max_trips"]),)


def _ort_levels() -> list[str]:
    import onnxruntime as ort

    levels = ["basic", "extended"]
    if hasattr(ort.GraphOptimizationLevel, "ORT_ENABLE_LAYOUT"):
        levels.append("layout")
    return [*levels, "all"]


@functools.cache
def _registry() -> dict[str, FunctionPass]:
    import onnxoptimizer

    passes: dict[str, FunctionPass] = {}
    add = functools.partial(_register, passes)
    text = descriptions
    optimizer, sim = native_steps.onnxoptimizer_step, native_steps.onnxsim_step
    for name in onnxoptimizer.get_available_passes():
        kind = text.ONNXOPTIMIZER_KIND.get(name, "rewrite")
        about = text.ONNXOPTIMIZER.get(name, f"onnxoptimizer pass {name}.")
        add(name, "onnxoptimizer", kind, about, optimizer, [name], args=_onnxoptimizer_args,
            parameters=_ONNXOPTIMIZER_PARAMETERS, large_models=True)  # fmt: skip
    preset = list(onnxoptimizer.get_fuse_and_elimination_passes())
    add("fuse_and_eliminate", "onnxoptimizer", "fuse", text.ONNXOPTIMIZER["fuse_and_eliminate"], optimizer,
        preset, args=_onnxoptimizer_args, large_models=True,
        parameters={**_ONNXOPTIMIZER_PARAMETERS, "fixed_point": True, "cleanup": False})  # fmt: skip
    for key, mode in (
        ("onnxsim", "full"),
        ("onnxsim:constant_folding", "constant_folding"),
        ("onnxsim:shape_ops", "shape_ops"),
    ):
        add(key, "onnxsim", "simplify", text.ONNXSIM[key], sim, mode, args=_onnxsim_args,
            parameters=_ONNXSIM_PARAMETERS, large_models=True)  # fmt: skip
    for level in _ort_levels():
        about = text.ORT.get(f"ort:{level}", f"ONNX Runtime {level} graph optimisation level.")
        add(f"ort:{level}", "ort", "fuse", about, native_steps.ort_optimize_step, level, large_models=True)
    for part in onnxscript_steps.OPTIMIZER_PARTS:
        key = f"onnxscript:{part}"
        kind = text.ONNXSCRIPT_KIND.get(key, "simplify")
        add(key, "onnxscript", kind, text.ONNXSCRIPT[key], onnxscript_steps.optimizer_step, part)
    add("onnxscript:ort_fusions", "onnxscript", "fuse", text.ONNXSCRIPT["onnxscript:ort_fusions"],
        onnxscript_steps.ort_fusions_step)  # fmt: skip
    for name in onnxscript_steps.FUSION_STEPS:
        key = f"onnxscript:{name}"
        add(key, "onnxscript", "fuse", text.ONNXSCRIPT[key], onnxscript_steps.fusion_step, name)
    for model_type in ort_transformers_steps.model_types():
        add(f"ort-transformers:{model_type}", "ort-transformers", "fuse", text.ort_transformers(model_type),
            ort_transformers_steps.ort_transformers_step, model_type, args=_ort_transformers_args,
            parameters=_ORT_TRANSFORMERS_PARAMETERS)  # fmt: skip
    add("ort-quant:fix_shapes", "ort-quant", "convert", text.ORT_QUANT["ort-quant:fix_shapes"],
        quantization_steps.fix_shapes_step, args=_input_shapes_args,
        parameters={"input_shapes": None})  # fmt: skip
    add("ort-quant:qnn_preprocess", "ort-quant", "fuse", text.ORT_QUANT["ort-quant:qnn_preprocess"],
        quantization_steps.qnn_preprocess_step, args=_qnn_preprocess_args,
        parameters={"fuse_layernorm": False})  # fmt: skip
    add("ort-quant:qnn_qdq", "ort-quant", "convert", text.ORT_QUANT["ort-quant:qnn_qdq"],
        quantization_steps.qnn_qdq_step, args=_qnn_qdq_args, parameters=_QNN_QDQ_PARAMETERS)  # fmt: skip
    add("version_converter", "onnx", "convert", text.VERSION_CONVERTER["version_converter"],
        native_steps.version_convert_step, args=_opset_args,
        parameters={"opset": onnx.defs.onnx_opset_version()})  # fmt: skip
    add("explorer:decompose_contrib", "explorer", "rewrite", text.EXPLORER["explorer:decompose_contrib"],
        contrib_decompositions.decompose_contrib_step, args=_contrib_args,
        parameters={"ops": None, "rms_norm": False,
                    "quantized": contrib_quantized.DEQUANTIZE_LINEAR})  # fmt: skip
    add("explorer:unroll_loops", "explorer", "rewrite", text.EXPLORER["explorer:unroll_loops"],
        loop_unrolling.unroll_loops_step, args=_unroll_args,
        parameters={"max_trips": loop_unrolling.MAX_TRIPS})  # fmt: skip
    return passes


def get_pass(name: str, **parameters: Any) -> FunctionPass:
    """Return the pass registered as ``name``, with ``parameters`` applied.

    Parameters
    ----------
    name : str
        A registry name; ``onnxoptimizer:NAME`` and ``opset:N`` are accepted too.
    **parameters
        Parameters to change (e.g. ``input_shapes`` for onnxsim, ``opset``).

    Raises
    ------
    UnknownPassError
        The name is not registered (a :class:`KeyError`); the message suggests close names.

    Examples
    --------
    >>> get_pass("ort:extended").family
    'ort'
    """
    registry = _registry()
    if name.startswith("opset:"):
        try:
            return registry["version_converter"].with_parameters(
                opset=int(name.split(":", 1)[1]), **parameters
            )
        except ValueError:
            raise UnknownPassError(f"{name!r}: the opset must be an integer, e.g. opset:13") from None
    if name.startswith("onnxoptimizer:") and name.split(":", 1)[1] in registry:
        name = name.split(":", 1)[1]
    if name not in registry:
        import difflib

        close = difflib.get_close_matches(name, registry, n=3)
        hint = (
            f"; did you mean {', '.join(close)}?" if close else "; `onnx-explorer passes --list` lists them"
        )
        raise UnknownPassError(f"no pass named {name!r}{hint}")
    found = registry[name]
    return found.with_parameters(**parameters) if parameters else found


def pass_names(family: str | None = None) -> list[str]:
    """Names of the registered passes, optionally of one family.

    Examples
    --------
    >>> pass_names("ort")[:2]
    ['ort:basic', 'ort:extended']
    """
    return [n for n, p in _registry().items() if family is None or p.family == family]


def list_passes() -> list[FunctionPass]:
    """Every registered pass, grouped by family in :data:`FAMILIES` order.

    Examples
    --------
    >>> len(list_passes()) >= 48 + 1 + 3 + 3 + 1
    True
    """
    passes = list(_registry().values())
    return sorted(passes, key=lambda p: FAMILIES.index(p.family))


def passes_frame() -> Any:
    """The registry as a DataFrame: name, family, kind, description.

    Examples
    --------
    >>> passes_frame().columns.tolist()
    ['name', 'family', 'kind', 'description']
    """
    import pandas as pd

    return pd.DataFrame(
        [
            {"name": p.name, "family": p.family, "kind": p.kind, "description": p.description}
            for p in list_passes()
        ]
    )


def split_pipeline(text: str) -> list[str]:
    """The steps of a pipeline string: split at the commas outside parentheses.

    Raises
    ------
    PipelineSyntaxError
        Unbalanced parentheses.

    Examples
    --------
    >>> split_pipeline("onnxsim, ort-transformers:bert(num_heads=4,hidden_size=64)")
    ['onnxsim', 'ort-transformers:bert(num_heads=4,hidden_size=64)']
    """
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise PipelineSyntaxError(f"pipeline {text!r}: ')' without '('")
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise PipelineSyntaxError(f"pipeline {text!r}: '(' without ')'")
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _parse_item(text: str) -> PipelineItem:
    """``name`` or ``name(key=value, ...)``; values are Python literals, else strings."""
    import ast

    if "(" not in text:
        return text
    if not text.endswith(")"):
        raise PipelineSyntaxError(f"pipeline step {text!r}: text after ')'")
    name, inner = text[: text.index("(")].strip(), text[text.index("(") + 1 : -1]
    params: dict[str, Any] = {}
    for part in split_pipeline(inner):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise PipelineSyntaxError(f"pipeline step {text!r}: {part!r} is not key=value")
        try:
            params[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            params[key.strip()] = value.strip()
    return (name, params)


def parse_pipeline(pipeline: str | Iterable[PipelineItem], **shared: Any) -> list[FunctionPass]:
    """Turn ``"onnxsim,fuse_bn_into_conv,ort:extended"`` (or a list) into passes.

    Parameters
    ----------
    pipeline : str or iterable
        Comma-separated names, each optionally with parameters in parentheses
        (``ort-transformers:bert(num_heads=12, hidden_size=768)``), or a list of names /
        ``(name, parameters)``.
    **shared
        Parameters given to every pass that takes them (e.g. ``input_shapes``).

    Raises
    ------
    PipelineSyntaxError
        Unbalanced parentheses or a parameter that is not ``key=value``.

    Examples
    --------
    >>> [p.name for p in parse_pipeline("onnxsim, fuse_bn_into_conv,opset:13")]
    ['onnxsim', 'fuse_bn_into_conv', 'version_converter']
    >>> parse_pipeline("ort-transformers:bert(num_heads=4, hidden_size=256)")[0].parameters["num_heads"]
    4
    """
    items: list[PipelineItem] = (
        [_parse_item(part) for part in split_pipeline(pipeline)]
        if isinstance(pipeline, str)
        else list(pipeline)
    )
    passes = []
    for item in items:
        name, params = (item, {}) if isinstance(item, str) else (item[0], dict(item[1]))
        found = get_pass(name, **params)
        applicable = {k: v for k, v in shared.items() if k in found.parameters and v is not None}
        passes.append(found.with_parameters(**applicable) if applicable else found)
    return passes

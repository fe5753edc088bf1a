"""The registry of every available pass, with its family and its explanation for learners.

Names:

- every onnxoptimizer pass under its own name (``fuse_bn_into_conv``; also
  ``onnxoptimizer:fuse_bn_into_conv``), and the preset ``fuse_and_eliminate``;
- ``onnxsim`` and its sub-stages ``onnxsim:constant_folding`` and ``onnxsim:shape_ops``;
- ``ort:basic``, ``ort:extended``, ``ort:layout`` (where ONNX Runtime has it), ``ort:all``;
- ``version_converter`` (parameter ``opset``; ``opset:13`` is a shorthand);
- ``explorer:decompose_contrib`` (parameter ``ops``) and ``explorer:unroll_loops`` (parameter
  ``max_trips``), rewrites of our own into standard ONNX;
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx
from onnx import ModelProto

from .. import model_files, worker
from ..errors import PipelineSyntaxError, UnknownPassError
from . import (
    contrib_decompositions,
    descriptions,
    loop_unrolling,
    native_steps,
    onnxscript_steps,
    ort_transformers_steps,
    quantization_steps,
)
from .base import FunctionPass, Runner

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
    (:func:`explorer.model_files.new_model_dir`), so the next step, shape
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
    return run


def _onnxoptimizer_args(params: Mapping[str, Any]) -> tuple:
    return (
        bool(params.get("fixed_point")),
        bool(params.get("cleanup", True)),
        bool(params.get("fold", True)),
    )


def _onnxsim_args(params: Mapping[str, Any]) -> tuple:
    shapes = params.get("input_shapes")
    return (dict(shapes) if shapes else None, bool(params.get("portable", True)))


def _onnxoptimizer_runner(passes: Sequence[str], label: str) -> Runner:
    return _runner(native_steps.onnxoptimizer_step, label, list(passes), from_params=_onnxoptimizer_args)


def _onnxsim_runner(mode: str, label: str) -> Runner:
    return _runner(native_steps.onnxsim_step, label, mode, from_params=_onnxsim_args)


def _ort_runner(level: str, label: str) -> Runner:
    return _runner(native_steps.ort_optimize_step, label, level)


_version_runner = _runner(
    native_steps.version_convert_step, "version_converter", from_params=lambda params: (int(params["opset"]),)
)


def _onnxscript_optimizer_runner(part: str, label: str) -> Runner:
    return _runner(onnxscript_steps.optimizer_step, label, part)


def _onnxscript_fusion_runner(name: str, label: str) -> Runner:
    return _runner(onnxscript_steps.fusion_step, label, name)


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


def _ort_transformers_runner(model_type: str, label: str) -> Runner:
    return _runner(
        ort_transformers_steps.ort_transformers_step, label, model_type, from_params=_ort_transformers_args
    )


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
    base = {"timeout": DEFAULT_PASS_TIMEOUT}
    for name in onnxoptimizer.get_available_passes():
        passes[name] = FunctionPass(
            name,
            "onnxoptimizer",
            descriptions.ONNXOPTIMIZER.get(name, f"onnxoptimizer pass {name}."),
            _onnxoptimizer_runner([name], name),
            {**base, "fixed_point": False, "cleanup": True, "fold": True},
            kind=descriptions.ONNXOPTIMIZER_KIND.get(name, "rewrite"),
        )
    preset = onnxoptimizer.get_fuse_and_elimination_passes()
    passes["fuse_and_eliminate"] = FunctionPass(
        "fuse_and_eliminate",
        "onnxoptimizer",
        descriptions.ONNXOPTIMIZER["fuse_and_eliminate"],
        _onnxoptimizer_runner(preset, "fuse_and_eliminate"),
        {**base, "fixed_point": True, "cleanup": False, "fold": True},
        kind="fuse",
    )
    for key, mode in (
        ("onnxsim", "full"),
        ("onnxsim:constant_folding", "constant_folding"),
        ("onnxsim:shape_ops", "shape_ops"),
    ):
        passes[key] = FunctionPass(
            key,
            "onnxsim",
            descriptions.ONNXSIM[key],
            _onnxsim_runner(mode, key),
            {**base, "input_shapes": None, "portable": True},
            kind="simplify",
        )
    for level in _ort_levels():
        key = f"ort:{level}"
        passes[key] = FunctionPass(
            key,
            "ort",
            descriptions.ORT.get(key, f"ONNX Runtime {level} graph optimisation level."),
            _ort_runner(level, key),
            dict(base),
            kind="fuse",
            large_models=True,
        )
    for part in onnxscript_steps.OPTIMIZER_PARTS:
        key = f"onnxscript:{part}"
        passes[key] = FunctionPass(
            key,
            "onnxscript",
            descriptions.ONNXSCRIPT[key],
            _onnxscript_optimizer_runner(part, key),
            dict(base),
            kind=descriptions.ONNXSCRIPT_KIND.get(key, "simplify"),
        )
    passes["onnxscript:ort_fusions"] = FunctionPass(
        "onnxscript:ort_fusions",
        "onnxscript",
        descriptions.ONNXSCRIPT["onnxscript:ort_fusions"],
        _runner(onnxscript_steps.ort_fusions_step, "onnxscript:ort_fusions"),
        dict(base),
        kind="fuse",
    )
    for name in onnxscript_steps.FUSION_STEPS:
        key = f"onnxscript:{name}"
        passes[key] = FunctionPass(
            key,
            "onnxscript",
            descriptions.ONNXSCRIPT[key],
            _onnxscript_fusion_runner(name, key),
            dict(base),
            kind="fuse",
        )
    for model_type in ort_transformers_steps.model_types():
        key = f"ort-transformers:{model_type}"
        passes[key] = FunctionPass(
            key,
            "ort-transformers",
            descriptions.ort_transformers(model_type),
            _ort_transformers_runner(model_type, key),
            {
                **base,
                "num_heads": 0,
                "hidden_size": 0,
                "opt_level": None,
                "gelu_approximation": False,
                "use_multi_head_attention": False,
                "gpu_fusions": False,
            },
            kind="fuse",
        )
    passes["ort-quant:fix_shapes"] = FunctionPass(
        "ort-quant:fix_shapes",
        "ort-quant",
        descriptions.ORT_QUANT["ort-quant:fix_shapes"],
        _runner(
            quantization_steps.fix_shapes_step,
            "ort-quant:fix_shapes",
            from_params=lambda params: (params.get("input_shapes"),),
        ),
        {**base, "input_shapes": None},
        kind="convert",
    )
    passes["ort-quant:qnn_preprocess"] = FunctionPass(
        "ort-quant:qnn_preprocess",
        "ort-quant",
        descriptions.ORT_QUANT["ort-quant:qnn_preprocess"],
        _runner(
            quantization_steps.qnn_preprocess_step,
            "ort-quant:qnn_preprocess",
            from_params=lambda params: (bool(params.get("fuse_layernorm")),),
        ),
        {**base, "fuse_layernorm": False},
        kind="fuse",
    )
    passes["ort-quant:qnn_qdq"] = FunctionPass(
        "ort-quant:qnn_qdq",
        "ort-quant",
        descriptions.ORT_QUANT["ort-quant:qnn_qdq"],
        _runner(
            quantization_steps.qnn_qdq_step,
            "ort-quant:qnn_qdq",
            from_params=lambda params: (
                params.get("input_shapes"),
                params["activation_type"],
                params["weight_type"],
                int(params["samples"]),
                int(params["seed"]),
                params.get("calibration"),
            ),
        ),
        {
            **base,
            "input_shapes": None,
            "activation_type": "uint8",
            "weight_type": "uint8",
            "samples": quantization_steps.CALIBRATION_SAMPLES,
            "seed": 0,
            "calibration": None,
        },
        kind="convert",
    )
    passes["version_converter"] = FunctionPass(
        "version_converter",
        "onnx",
        descriptions.VERSION_CONVERTER["version_converter"],
        _version_runner,
        {**base, "opset": onnx.defs.onnx_opset_version()},
        kind="convert",
    )
    passes["explorer:decompose_contrib"] = FunctionPass(
        "explorer:decompose_contrib",
        "explorer",
        descriptions.EXPLORER["explorer:decompose_contrib"],
        _runner(
            contrib_decompositions.decompose_contrib_step,
            "explorer:decompose_contrib",
            from_params=lambda params: (sorted(params["ops"]) if params.get("ops") else None,),
        ),
        {**base, "ops": None},
        kind="rewrite",
    )
    passes["explorer:unroll_loops"] = FunctionPass(
        "explorer:unroll_loops",
        "explorer",
        descriptions.EXPLORER["explorer:unroll_loops"],
        _runner(
            loop_unrolling.unroll_loops_step,
            "explorer:unroll_loops",
            from_params=lambda params: (int(params["max_trips"]),),
        ),
        {**base, "max_trips": loop_unrolling.MAX_TRIPS},
        kind="rewrite",
    )
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

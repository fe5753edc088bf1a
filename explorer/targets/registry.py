"""The targets by CLI name: ONNX Runtime CPU and CUDA, NNAPI, CoreML, Qualcomm HTP, TVM, IREE.

Each entry builds its :class:`~explorer.targets.target.Target` on first use (reading the
installed build or the data files then, not at import):

- ``ort-cpu``: the installed ONNX Runtime's CPU kernel registry (measured);
- ``ort-cuda``: the CUDA provider's registry when the GPU build is installed, else ONNX
  Runtime's published kernel table (``data/targets/ort_cuda_kernels.csv``);
- ``nnapi``, ``coreml-mlprogram``, ``coreml-nn``: the support tables the installed
  ONNX Runtime ships in ``tools/mobile_helpers``;
- ``qnn-htp``: the project's table built from ``shared/data/qnn-htp-ops.md``;
- ``tvm-llvm``: TVM's ONNX importer, tried on each distinct node in the worker;
- ``iree-llvm-cpu``: IREE's ONNX importer and compiler (the optional ``iree`` extra), the
  whole model and then each distinct node compiled in the worker; where IREE is not
  installed the target is listed, but ``unavailable`` says what to install.

Examples
--------
>>> TARGET_NAMES[-2:]
('tvm-llvm', 'iree-llvm-cpu')
>>> get_target("nnapi").source.kind, get_target("ort-cpu").source.kind
('table', 'measured')
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping

from explorer.onnx_adapter.ort_registry import installed_kernels, installed_providers
from explorer.targets.iree_support import COMPILE_TO, iree_missing, iree_reasons, iree_version
from explorer.targets.mobile_tables import mobile_reasons, mobile_table
from explorer.targets.ort_kernels import kernel_reasons, machine_reasons, table_kernels, table_source
from explorer.targets.qnn_htp import qnn_reasons, qnn_table
from explorer.targets.target import KnowledgeSource, Target, per_node
from explorer.targets.tvm_support import tvm_reasons

__all__ = ["TARGET_NAMES", "get_target", "list_targets", "require_available", "targets_frame"]

_CUDA_TABLE = "ort_cuda_kernels.csv"
_COREML_MAX_RANK = 5  # ONNX Runtime's usability checker: CoreML takes tensors up to rank 5


def _ort_version() -> str:
    import onnxruntime

    return onnxruntime.__version__


def _ort_cpu() -> Target:
    kernels = installed_kernels("CPUExecutionProvider")
    return Target(
        "ort-cpu",
        "ONNX Runtime, CPUExecutionProvider",
        "CPU",
        "ONNX Runtime's default provider: every node it has a kernel for runs on the CPU; "
        "a node without one stops the session from being created.",
        KnowledgeSource("measured", f"the installed onnxruntime {_ort_version()}'s kernel registry"),
        per_node(lambda f: [*kernel_reasons(f, kernels, "the CPU provider"), *machine_reasons(f)]),
        provider="CPUExecutionProvider",
    )


def _ort_cuda() -> Target:
    if "CUDAExecutionProvider" in installed_providers():
        kernels = installed_kernels("CUDAExecutionProvider")
        source = KnowledgeSource(
            "measured", f"the installed onnxruntime {_ort_version()}'s CUDA kernel registry"
        )
    else:
        kernels = table_kernels(_CUDA_TABLE)
        info = table_source(_CUDA_TABLE)
        version = info.get("onnxruntime_version")
        what = f"{info['source']} ({info['repository']} @ {info['commit'][:10]}" + (
            f", onnxruntime {version})" if version else ")"
        )
        source = KnowledgeSource("table", what, info.get("date"), info.get("url"))
    return Target(
        "ort-cuda",
        "ONNX Runtime, CUDAExecutionProvider",
        "NVIDIA GPU",
        "ONNX Runtime on an NVIDIA GPU: nodes without a CUDA kernel fall back to the CPU provider, "
        "with a copy at every boundary.",
        source,
        per_node(lambda f: kernel_reasons(f, kernels, "the CUDA provider")),
        fallback="CPU",
        provider="CUDAExecutionProvider",
    )


def _mobile(
    name: str, runtime: str, device: str, description: str, static: bool, max_rank: int | None
) -> Target:
    table = mobile_table(name)
    return Target(
        name,
        runtime,
        device,
        description,
        KnowledgeSource(
            "table",
            f"onnxruntime {table.onnxruntime_version}'s tools/mobile_helpers/{table.path.name}",
            url="https://onnxruntime.ai/docs/reference/mobile/helpers/model-usability-checker.html",
        ),
        per_node(lambda f: mobile_reasons(f, table, max_rank)),
        requires_static_shapes=static,
        fallback="CPU",
        provider=runtime.split(", ")[-1],
    )


def _qnn_htp() -> Target:
    table = qnn_table()
    return Target(
        "qnn-htp",
        "ONNX Runtime, QNNExecutionProvider (HTP backend)",
        "Qualcomm Hexagon NPU (HTP)",
        "Qualcomm's NPU through ONNX Runtime's QNN provider: static shapes, quantised 8/16-bit "
        "types preferred (float runs at FP16 precision on v73 and later); the rest falls back to the CPU.",
        KnowledgeSource(
            "table",
            "the QNN EP's HTP op builders and Qualcomm's docs (explorer/data/targets/qnn_htp_ops.csv, "
            "from shared/data/qnn-htp-ops.md)",
            table.date,
            "https://onnxruntime.ai/docs/execution-providers/QNN-ExecutionProvider.html",
        ),
        per_node(lambda f: qnn_reasons(f, table)),
        requires_static_shapes=True,
        fallback="CPU",
        provider="QNNExecutionProvider",
    )


def _tvm_llvm() -> Target:
    import importlib.metadata

    try:
        version = importlib.metadata.version("apache-tvm")
    except importlib.metadata.PackageNotFoundError:
        version = "(not installed)"
    return Target(
        "tvm-llvm",
        "TVM Relax (ONNX importer), llvm",
        "CPU (TVM-compiled)",
        "TVM compiles the whole graph or nothing: every node must pass its ONNX importer.",
        KnowledgeSource("measured", f"apache-tvm {version}: its ONNX importer, tried on each distinct node"),
        lambda graph, facts: tvm_reasons(graph, facts),
        failure="TVM cannot import the model",
    )


def _iree_llvm_cpu() -> Target:
    missing = iree_missing()
    version = iree_version() or "(not installed)"
    return Target(
        "iree-llvm-cpu",
        "IREE (ONNX importer, iree-compile), llvm-cpu",
        "CPU (IREE-compiled)",
        "IREE compiles the whole graph or nothing: every node must pass its ONNX importer and lowering.",
        KnowledgeSource(
            "measured",
            f"iree-base-compiler {version}: the model, then each distinct node, compiled for llvm-cpu "
            f"up to the {COMPILE_TO} phase",
            url="https://iree.dev/guides/ml-frameworks/onnx/",
        ),
        lambda graph, facts: iree_reasons(graph, facts),
        failure="IREE cannot compile the model",
        unavailable=missing,
    )


_FACTORIES: Mapping[str, Callable[[], Target]] = {
    "ort-cpu": _ort_cpu,
    "ort-cuda": _ort_cuda,
    "nnapi": lambda: _mobile(
        "nnapi",
        "ONNX Runtime, NnapiExecutionProvider",
        "Android NNAPI (NPU / DSP / GPU)",
        "Android's Neural Networks API: the ops in ONNX Runtime's NNAPI table, static shapes; "
        "the rest falls back to the CPU.",
        True,
        None,
    ),
    "coreml-mlprogram": lambda: _mobile(
        "coreml-mlprogram",
        "ONNX Runtime, CoreMLExecutionProvider (ML Program)",
        "Apple Neural Engine / GPU",
        "Core ML's ML Program format (iOS 15+, macOS 12+): the ops in ONNX Runtime's table, up to rank 5.",
        False,
        _COREML_MAX_RANK,
    ),
    "coreml-nn": lambda: _mobile(
        "coreml-nn",
        "ONNX Runtime, CoreMLExecutionProvider (NeuralNetwork)",
        "Apple Neural Engine / GPU",
        "Core ML's older NeuralNetwork format: fewer ops than ML Program, up to rank 5.",
        False,
        _COREML_MAX_RANK,
    ),
    "qnn-htp": _qnn_htp,
    "tvm-llvm": _tvm_llvm,
    "iree-llvm-cpu": _iree_llvm_cpu,
}

TARGET_NAMES = tuple(_FACTORIES)
"""Every target's CLI name, in the order tables list them."""


@functools.cache
def get_target(name: str) -> Target:
    """The target called ``name`` (one of :data:`TARGET_NAMES`).

    Raises
    ------
    KeyError
        For an unknown name (the message lists the known ones).

    Examples
    --------
    >>> get_target("coreml-nn").device
    'Apple Neural Engine / GPU'
    """
    if name not in _FACTORIES:
        raise KeyError(f"no target {name!r}; targets: {', '.join(TARGET_NAMES)}")
    return _FACTORIES[name]()


def require_available(targets: Iterable[Target]) -> None:
    """Raise :class:`~explorer.core.errors.UsageError` naming each target that cannot judge here, and why.

    Examples
    --------
    >>> import dataclasses
    >>> require_available([get_target("ort-cpu")])
    >>> require_available([dataclasses.replace(get_target("ort-cpu"), unavailable="not built here")])
    Traceback (most recent call last):
    ...
    explorer.core.errors.UsageError: target not available here; ort-cpu: not built here
    """
    missing = [f"{t.name}: {t.unavailable}" for t in targets if t.unavailable is not None]
    if missing:
        from explorer.core.errors import UsageError

        raise UsageError("target not available here; " + "; ".join(missing))


def list_targets() -> tuple[Target, ...]:
    """Every target, in :data:`TARGET_NAMES` order.

    Examples
    --------
    >>> [t.name for t in list_targets()][:2]
    ['ort-cpu', 'ort-cuda']
    """
    return tuple(get_target(name) for name in TARGET_NAMES)


def targets_frame():
    """The targets as a table: name, runtime, device, source, date, static shapes, fallback.

    Examples
    --------
    >>> bool(targets_frame().loc["qnn-htp", "static_shapes"])
    True
    """
    import pandas as pd

    rows = [
        {
            "target": t.name,
            "runtime": t.runtime,
            "device": t.device,
            "knowledge": t.source.describe(),
            "static_shapes": t.requires_static_shapes,
            "fallback": t.fallback or "(none)",
        }
        for t in list_targets()
    ]
    return pd.DataFrame(rows).set_index("target")

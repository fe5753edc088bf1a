"""Every runtime ``bench --runtime`` (and the Runtimes tab, and the benchmarks) can name: one table.

Each :class:`RuntimeEntry` says which :class:`~explorer.runtimes.base.Runtime` class makes the
runtime (imported on first use), the options it is made with, and which options from the
command line it takes (:attr:`RuntimeEntry.flag_options`): TVM's tuning budget goes to ``tvm``
only, the thread count to the runtimes that have one. No caller switches on a runtime's name;
a runtime's own behaviour (how its profile's records name kernels, whether ONNX Runtime's
placement applies) is a class attribute of the runtime (``family``, ``places_nodes``). Adding a
runtime is one module and one line here (``docs/architecture.md``, "Add a backend").

Examples
--------
>>> RUNTIME_NAMES[:3]
('ort', 'ort-cuda', 'ort-genai')
>>> get_runtime("tvm-naive").label
'TVM llvm untuned (plain loops)'
>>> sorted(RUNTIMES["ort"].flag_options({"threads": 2, "tune_trials": 64}))
['threads']
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from explorer.core.errors import UsageError

__all__ = ["RUNTIMES", "RUNTIME_NAMES", "RuntimeEntry", "get_runtime"]

_TVM_TUNING = frozenset({"tune_trials", "tune_minutes", "pretuned", "tune_every_task"})
_TVM_TARGET = frozenset({"rpc_tracker", "rpc_key", "target"})
_THREADS = frozenset({"threads"})
_ORT = _THREADS | {"optimization"}


@dataclass(frozen=True)
class RuntimeEntry:
    """How one runtime name is made.

    Attributes
    ----------
    factory : str
        ``module:class`` of its :class:`~explorer.runtimes.base.Runtime`.
    options : dict
        What the class is made with for this name (``ort-cuda``: the CUDA provider).
    takes : frozenset of str
        The command-line options (``bench``'s flags, by keyword) this runtime takes.
    menu : str or None
        Its label in the Runtimes tab's menu (None: not offered there).

    Examples
    --------
    >>> RUNTIMES["ort-cuda"].options
    {'provider': 'CUDAExecutionProvider'}
    """

    factory: str
    options: Mapping[str, Any] = field(default_factory=dict)
    takes: frozenset[str] = _THREADS
    menu: str | None = None

    def flag_options(self, flags: Mapping[str, Any]) -> dict[str, Any]:
        """Those of ``flags`` (keyword -> value; None: not given) this runtime takes.

        Examples
        --------
        >>> RUNTIMES["tvm"].flag_options({"threads": 2, "target": None, "tune_trials": 8})
        {'tune_trials': 8}
        """
        return {key: value for key, value in flags.items() if key in self.takes and value is not None}

    def make(self, **options: Any) -> Any:
        """The runtime, with this entry's options and ``options`` (which win).

        Examples
        --------
        >>> RUNTIMES["iree-default"].make(threads=1).label
        'IREE llvm-cpu, iree-compile defaults (1 thread)'
        """
        module, _, name = self.factory.partition(":")
        return getattr(importlib.import_module(module), name)(**{**self.options, **options})


RUNTIMES: Mapping[str, RuntimeEntry] = {
    "ort": RuntimeEntry("explorer.runtimes.ort_runtime:OrtRuntime", takes=_ORT, menu="ONNX Runtime"),
    "ort-cuda": RuntimeEntry(
        "explorer.runtimes.ort_runtime:OrtRuntime", {"provider": "CUDAExecutionProvider"}, takes=_ORT
    ),
    "ort-genai": RuntimeEntry("explorer.runtimes.genai_runtime:OrtGenaiRuntime"),
    "tvm": RuntimeEntry(
        "explorer.runtimes.tvm_runtime:TvmRuntime", takes=_TVM_TUNING | _TVM_TARGET, menu="TVM"
    ),
    "tvm-naive": RuntimeEntry(  # the untuned baseline: the tuning flags are not its
        "explorer.runtimes.tvm_runtime:TvmRuntime",
        {"schedules": "naive"},
        takes=_TVM_TARGET,
        menu="TVM plain loops",
    ),
    "torch-eager": RuntimeEntry("explorer.runtimes.torch_runtime:TorchEagerRuntime", menu="PyTorch eager"),
    "iree": RuntimeEntry("explorer.runtimes.iree_runtime:IreeRuntime", menu="IREE"),
    "iree-default": RuntimeEntry("explorer.runtimes.iree_runtime:IreeRuntime", {"flags": "default"}),
    "onnx-reference": RuntimeEntry(
        "explorer.runtimes.reference_runtime:OnnxReferenceRuntime",
        takes=frozenset(),
        menu="ONNX reference (slow)",
    ),
}
"""Every runtime: its name (``bench --runtime NAME``) -> how it is made."""

RUNTIME_NAMES: tuple[str, ...] = tuple(RUNTIMES)
"""Runtime names :func:`get_runtime` (and ``onnx-explorer bench --runtime``) takes."""


def get_runtime(name: str, **options: Any) -> Any:
    """The runtime called ``name`` (one of :data:`RUNTIME_NAMES`), with options.

    Examples
    --------
    >>> get_runtime("ort", threads=2).label
    'ONNX Runtime CPU (all, 2 threads)'
    >>> get_runtime("tvm").name, get_runtime("iree", threads=1).label
    ('tvm', 'IREE llvm-cpu (1 thread)')
    """
    if name not in RUNTIMES:
        raise UsageError(f"no runtime {name!r}: the runtimes are {', '.join(RUNTIME_NAMES)}")
    return RUNTIMES[name].make(**options)

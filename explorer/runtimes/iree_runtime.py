"""IREE as a :class:`~explorer.runtimes.base.Runtime`: ONNX into MLIR, compiled for this CPU, run by IREE.

Preparing runs in the worker (:func:`explorer.runtimes.iree_prepare.prepare_iree`): IREE's ONNX
importer and ``iree-compile`` (:func:`explorer.lower.iree.iree_compile.build_vmfb`, target
``llvm-cpu`` for this CPU, with fixed input shapes) make a VM module (``.vmfb``), which IREE's
runtime loads (``iree.runtime.load_vm_flatbuffer_file``, driver ``local-task``) and keeps warm
there; a crash of the compiler or the runtime stops the worker, never the notebook's kernel.
Runs and timings go through the same machinery as ONNX Runtime's and TVM's (the project's
random inputs, warm-up, runs to a count and a time, percentiles:
:mod:`explorer.runtimes.bench`; outputs against the first runtime's:
:mod:`explorer.core.compare`). Inputs become IREE device arrays before the clock starts,
as TVM's tensors do; a timed run is one call of the module's synchronous entry point (the
ONNX graph's name), which returns when its dispatches are done.

Threads: one per physical core by default, as ONNX Runtime, TVM and PyTorch eager run here
(:func:`explorer.isolation.cpu_cores.physical_cores`), set with IREE's
``--task_topology_max_group_count`` before the worker's first ``local-task`` device; one
thread runs the ``local-sync`` driver (:mod:`explorer.runtimes.iree_vm`).

Per-dispatch times (:func:`explorer.runtimes.profile.profile`) come from IREE's own profiler,
which its Python runtime does not expose: the module runs again in ``iree-benchmark-module``
with ``--device_profiling_mode=host-execution``, ``iree-profile`` reads each dispatch's time,
and each dispatch is put on the ONNX node its ``flow.dispatch`` call site is located at
(:mod:`explorer.runtimes.iree_dispatches`).

A model IREE cannot import or compile raises :class:`~explorer.core.errors.LoweringError`
(``compiler`` "IREE": the phase and pass, the op, its ONNX node, the model's source); the CLI
exits 3. Without IREE installed (the ``iree`` extra), :meth:`IreeRuntime.available` is False
and :meth:`IreeRuntime.prepare` raises :class:`~explorer.core.errors.MissingDependencyError`
naming the extra.

Examples
--------
>>> IreeRuntime().name, IreeRuntime().label, IreeRuntime(threads=1).label
('iree', 'IREE llvm-cpu', 'IREE llvm-cpu (1 thread)')
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from explorer.core.errors import LoweringError, MissingDependencyError, UsageError
from explorer.isolation import worker
from explorer.isolation.worker import ProgressEvent
from explorer.onnx_adapter.adapter import onnx_model
from explorer.onnx_adapter.model_files import worker_source
from explorer.runtimes.base import PreparedSession, session_key
from explorer.runtimes.iree_prepare import prepare_iree

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = ["IreeRuntime", "IREE_EXTRA", "IREE_MODULES"]

IREE_EXTRA = "pip install 'onnx-graph-explorer[iree]'"
"""What installs IREE's compiler (with its ONNX importer) and runtime."""

IREE_MODULES = ("iree.compiler", "iree.runtime")
"""What the runtime needs: IREE's compiler (``iree-base-compiler[onnx]``), runtime (``iree-base-runtime``)."""


def _find(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # the parent package (``iree``) is missing
        return False


@dataclass(frozen=True)
class IreeRuntime:
    """IREE: the ONNX graph imported into MLIR, compiled for this CPU, run in IREE's VM.

    Parameters
    ----------
    threads : int
        Threads IREE's dispatches run on; 0 is one per physical core (as ONNX Runtime and TVM
        run here); 1 is IREE's ``local-sync`` driver. IREE sizes its thread pool once per worker
        process: a second multi-threaded count needs a new worker.
    target : str
        IREE's compiler target (:data:`explorer.lower.iree.iree_compile.TARGETS`): ``llvm-cpu``, this CPU.
    flags : {"fast", "default"}
        ``fast``: ``iree-compile``'s defaults plus :data:`~explorer.lower.iree.iree_compile.CPU_FLAGS`
        (data tiling, convolutions as im2col + matmul: 2x on ResNet-18 here); ``default``: exactly
        ``iree-compile``'s defaults, as the lowering view compiles (runtime name ``iree-default``).

    Examples
    --------
    >>> IreeRuntime(threads=2).options()["flags"]
    ['--iree-opt-data-tiling', '--iree-global-opt-use-im2col-for-convs=true']
    >>> IreeRuntime(flags="default").name
    'iree-default'
    """

    family: ClassVar[str] = "iree"
    """How its profile names kernels and what memory it needs (:class:`~explorer.runtimes.base.Runtime`)."""
    places_nodes: ClassVar[bool] = False
    """It compiles for one device: ONNX Runtime's ``--strict-placement`` does not apply."""

    threads: int = 0
    target: str = "llvm-cpu"
    flags: str = "fast"

    def __post_init__(self) -> None:
        from explorer.lower.iree.iree_compile import TARGETS  # no IREE import: the flags are a table

        if self.target not in TARGETS:
            raise UsageError(f"no IREE target {self.target!r}: the targets are {', '.join(TARGETS)}")
        if self.threads < 0:
            raise UsageError(f"threads must be 0 (one per physical core) or more, not {self.threads}")
        if self.flags not in ("fast", "default"):
            raise UsageError(f"flags must be 'fast' or 'default', not {self.flags!r}")

    @property
    def name(self) -> str:
        """``iree`` (``iree-<target>`` for another target; ``-default`` with IREE's default flags)."""
        name = "iree" if self.target == "llvm-cpu" else f"iree-{self.target}"
        return name if self.flags == "fast" else f"{name}-default"

    @property
    def label(self) -> str:
        """``IREE llvm-cpu``, with the thread count when one was set."""
        threads = f" ({self.threads} thread{'s' if self.threads != 1 else ''})" if self.threads else ""
        flags = ", iree-compile defaults" if self.flags == "default" else ""
        return f"IREE {self.target}{flags}{threads}"

    @property
    def tuned(self) -> bool:
        """IREE compiles with its own heuristics, nothing searched or measured: False."""
        return False

    @property
    def missing(self) -> str | None:
        """What is not installed here, with the command that installs it; None when nothing is.

        Examples
        --------
        >>> IreeRuntime().missing is None or "onnx-graph-explorer[iree]" in IreeRuntime().missing
        True
        """
        absent = [m for m in IREE_MODULES if not _find(m)]
        if not absent:
            return None
        return f"IREE is not installed ({', '.join(absent)} missing): {IREE_EXTRA}"

    def available(self) -> bool:
        """Whether IREE's compiler and runtime are installed (the ``iree`` extra)."""
        return self.missing is None

    def options(self) -> dict[str, Any]:
        """``{"target", "threads", "flags"}`` (``flags``: the compiler flags beyond the target's)."""
        from explorer.lower.iree.iree_compile import CPU_FLAGS

        flags = list(CPU_FLAGS) if self.flags == "fast" else []
        return {"target": self.target, "threads": self.threads, "flags": flags}

    def prepare(
        self,
        graph: ModelGraph,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        *,
        progress: Callable[[ProgressEvent], object] | None = None,
    ) -> PreparedSession:
        """Import, compile and load the graph in the worker (or find it there).

        Raises
        ------
        MissingDependencyError
            IREE is not installed (the message says how to install it).
        LoweringError
            IREE's importer or compiler refused the model: the phase and pass, the op, the ONNX
            node (e.g. ``com.microsoft::FusedMatMul``, ``Loop``: ops IREE's ONNX lowering lacks).

        Examples
        --------
        >>> from explorer import load
        >>> session = IreeRuntime().prepare(load("zoo:mlp"))
        >>> session.info["runtime"], session.info["function"], session.input_shapes
        ('iree', 'mlp', {'input': [1, 1, 28, 28]})
        """
        from explorer.onnx_adapter.inputs import concrete_input_shapes

        missing = self.missing
        if missing is not None:
            raise MissingDependencyError(missing)
        onnx_model(graph, "a runtime")
        shapes = {k: [int(d) for d in v] for k, v in concrete_input_shapes(graph.model, input_shapes).items()}
        key = session_key(self, graph, shapes)
        try:
            info = worker.run_on_model(
                prepare_iree,
                worker_source(graph),
                key,
                shapes,
                self.options(),
                step=f"{self.label}: import, compile",
                progress=progress,
            )
        except LoweringError as err:  # raised in the worker, which knew the model only as a file
            from explorer.lower.pass_failures import located

            raise located(err, graph.source) from None
        return PreparedSession(self, key, info, graph, shapes)

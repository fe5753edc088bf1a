"""The one interface every compiler below the ONNX graph has, and the registry that names them.

A :class:`Compiler` lowers a graph step by step into a
:class:`~explorer.lower.timeline.LoweringTimeline` (TVM: Relax passes; IREE: compilation
phases), checks the options that are its own before any work, and turns each step into the
row the CLI prints. The CLI (``lower --compiler``), the Explorer's Lowering tab and the
benchmarks read :data:`COMPILERS` and call :func:`get_compiler`: none of them switches on a
compiler's name. Adding a compiler is one folder (``explorer/lower/NAME/`` with a
``compiler.py``) and one line here (``docs/architecture.md``, "Add a backend").

Examples
--------
>>> COMPILER_NAMES
('tvm', 'iree')
>>> get_compiler("iree").label, get_compiler("tvm").runtime
('IREE (MLIR)', 'tvm')
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from explorer.core.errors import UsageError

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph
    from explorer.lower.timeline import LoweringTimeline

__all__ = [
    "COMPILERS",
    "COMPILER_NAMES",
    "STEP_METRICS",
    "Compiler",
    "LowerOptions",
    "get_compiler",
]

COMPILERS: Mapping[str, str] = {
    "tvm": "explorer.lower.tvm.compiler:TvmCompiler",
    "iree": "explorer.lower.iree.compiler:IreeCompiler",
}
"""Every compiler: its name (``lower --compiler NAME``) -> ``module:class`` of its :class:`Compiler`."""

COMPILER_NAMES: tuple[str, ...] = tuple(COMPILERS)
"""The names :data:`COMPILERS` knows, in the order menus list them (the default first)."""

STEP_METRICS = (
    "bindings",
    "prim_funcs",
    "fused",
    "kernels",
    "intermediates",
    "tensor_allocations",
    "tensor_bytes",
    "storages",
    "storage_bytes",
)
"""The metrics of a step every compiler's rows carry (``None`` where a step has not got one)."""


@dataclass(frozen=True)
class LowerOptions:
    """What a user chose for a lowering: each compiler reads its own and refuses the others'.

    Attributes
    ----------
    passes : str, tuple of str, or None
        TVM: a pipeline name, comma-separated Relax passes or their tuple (None: the default
        pipeline).
    detail : str
        IREE: a step per compilation ``"phases"`` or per module-level ``"passes"``.
    flags : str
        IREE: ``iree-compile``'s ``"default"`` flags or the ``"fast"`` CPU ones.

    Examples
    --------
    >>> LowerOptions().detail, LowerOptions(passes="zero").passes
    ('phases', 'zero')
    """

    passes: str | tuple[str, ...] | None = None
    detail: str = "phases"
    flags: str = "default"


class Compiler(ABC):
    """A compiler below the ONNX graph, as the CLI, the widgets and the benchmarks see it.

    Attributes
    ----------
    name : str
        Its key in :data:`COMPILERS` (``--compiler NAME``).
    label : str
        What menus and headings call it.
    runtime : str
        The runtime (:data:`explorer.runtimes.registry.RUNTIMES`) that builds and runs its output.
    coverage_target : str
        The target (:mod:`explorer.targets.registry`) whose coverage says which ops it takes.
    step_word : str
        What one step is called (a TVM ``pass``, an IREE ``phase``).
    import_metric : str
        The metric the import's line reports (Relax bindings, MLIR ops).
    table_columns : tuple
        The metric columns of ``lower``'s table, as (header, row key, width).

    Examples
    --------
    >>> compiler = get_compiler("tvm")
    >>> compiler.name, compiler.step_word, compiler.coverage_target
    ('tvm', 'pass', 'tvm-llvm')
    """

    name: ClassVar[str]
    label: ClassVar[str]
    runtime: ClassVar[str]
    coverage_target: ClassVar[str]
    step_word: ClassVar[str] = "pass"
    import_metric: ClassVar[str] = "bindings"
    table_columns: ClassVar[tuple[tuple[str, str, int], ...]] = (
        ("bindings", "bindings", 8),
        ("prim_funcs", "prim_funcs", 10),
        ("fused", "fused", 5),
        ("kernels", "kernels", 7),
        ("intermediates", "intermediates", 13),
        ("storages", "storages", 8),
        ("storage", "storage_bytes", 10),
    )
    """The metric columns of the CLI's table: (header, row key, width); ``*_bytes`` print as sizes."""

    def check_options(self, options: LowerOptions) -> LowerOptions:
        """``options`` checked before any work (a UsageError names what is not this compiler's).

        Examples
        --------
        >>> get_compiler("tvm").check_options(LowerOptions(passes="zero")).passes
        'zero'
        """
        return options

    @abstractmethod
    def lower(
        self,
        graph: ModelGraph,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        options: LowerOptions | None = None,
        *,
        progress: Callable[[Any], object] | None = None,
    ) -> LoweringTimeline:
        """``graph`` lowered step by step: snapshot 0 the import, one snapshot per step after it.

        Examples
        --------
        >>> from explorer import load
        >>> timeline = get_compiler("tvm").lower(load("zoo:mlp"), options=LowerOptions(passes="zero"))
        >>> timeline.snapshots[0].name
        'relax import'
        """

    def step_rows(self, timeline: LoweringTimeline) -> list[dict[str, Any]]:
        """One row per snapshot (the import first): name, changed, ms, :data:`STEP_METRICS`, log.

        Examples
        --------
        >>> from explorer import load
        >>> compiler = get_compiler("tvm")
        >>> rows = compiler.step_rows(compiler.lower(load("zoo:mlp"), options=LowerOptions(passes="zero")))
        >>> rows[1]["pass"], sorted(rows[0])[:3]
        ('LegalizeOps', ['bindings', 'changed', 'elapsed_ms'])
        """
        return [
            {
                "pass": snap.name,
                "changed": snap.changed,
                "elapsed_ms": round(snap.elapsed * 1000, 3),
                **{key: snap.metrics.get(key) for key in STEP_METRICS},
                **self.extra_columns(timeline, index),
                "log": list(snap.log),
            }
            for index, snap in enumerate(timeline.snapshots)
        ]

    def extra_columns(self, timeline: LoweringTimeline, index: int) -> dict[str, Any]:
        """The columns of snapshot ``index`` this compiler adds to :data:`STEP_METRICS` (none here).

        Examples
        --------
        >>> get_compiler("tvm").extra_columns(None, 0)
        {}
        """
        return {}


def get_compiler(name: str) -> Compiler:
    """The compiler called ``name`` (one of :data:`COMPILER_NAMES`); its module is imported here.

    Examples
    --------
    >>> type(get_compiler("iree")).__name__
    'IreeCompiler'
    >>> get_compiler("gcc")
    Traceback (most recent call last):
    ...
    explorer.core.errors.UsageError: no compiler 'gcc': the compilers are tvm, iree
    """
    try:
        module, _, cls = COMPILERS[name].partition(":")
    except KeyError:
        raise UsageError(f"no compiler {name!r}: the compilers are {', '.join(COMPILER_NAMES)}") from None
    return getattr(importlib.import_module(module), cls)()

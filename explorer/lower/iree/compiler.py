"""IREE as a :class:`~explorer.lower.compilers.Compiler`: its ONNX import, then compilation phase by phase.

Examples
--------
>>> from explorer.lower.compilers import LowerOptions
>>> IreeCompiler().check_options(LowerOptions(detail="passes")).detail
'passes'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from explorer.core.errors import UsageError
from explorer.lower.compilers import Compiler, LowerOptions

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph
    from explorer.lower.iree.iree_pipeline import MlirTimeline
    from explorer.lower.timeline import LoweringTimeline

__all__ = ["IREE_STEP_METRICS", "IreeCompiler"]

IREE_STEP_METRICS = ("ops", "dispatches", "executables")
"""The metrics an IREE step adds to every compiler's (with ``dialects``: ops per dialect)."""


class IreeCompiler(Compiler):
    """IREE for ``llvm-cpu``: a snapshot after the import and after each phase (or module-level pass).

    Examples
    --------
    >>> IreeCompiler().check_options(LowerOptions(passes="zero"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    explorer.core.errors.UsageError: --passes names TVM Relax passes; ...
    """

    name = "iree"
    label = "IREE (MLIR)"
    runtime = "iree"
    coverage_target = "iree-llvm-cpu"
    step_word = "phase"
    import_metric = "ops"
    table_columns = (("ops", "ops", 6), ("dispatches", "dispatches", 10))

    def check_options(self, options: LowerOptions) -> LowerOptions:
        """``options`` with TVM's ``passes`` refused.

        Examples
        --------
        >>> IreeCompiler().check_options(LowerOptions(flags="fast")).flags
        'fast'
        """
        if options.passes:
            raise UsageError(
                "--passes names TVM Relax passes; with --compiler iree use --detail phases|passes"
            )
        return options

    def lower(
        self,
        graph: ModelGraph,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        options: LowerOptions | None = None,
        *,
        progress: Callable[[Any], object] | None = None,
    ) -> MlirTimeline:
        """``graph`` imported by IREE and compiled for llvm-cpu, a snapshot per phase (see
        :func:`~explorer.lower.iree.iree_pipeline.iree_pipeline`).

        Examples
        --------
        >>> from explorer import load
        >>> IreeCompiler().lower(load("zoo:mlp")).code_label  # doctest: +SKIP
        'MLIR symbol'
        """
        from explorer.lower.iree.iree_pipeline import iree_pipeline

        options = options or LowerOptions()
        return iree_pipeline(
            graph,
            "llvm-cpu",
            options.detail,
            input_shapes=input_shapes,
            flags=options.flags,
            progress=progress,
        )

    def extra_columns(self, timeline: LoweringTimeline, index: int) -> dict[str, Any]:
        """IREE's step metrics and the ops per dialect of snapshot ``index``.

        Examples
        --------
        >>> from explorer.lower.iree.iree_pipeline import MlirTimeline
        >>> IreeCompiler().extra_columns(MlirTimeline((), "none", dialects=({"func": 2},)), 0)["dialects"]
        {'func': 2}
        """
        metrics = timeline.snapshots[index].metrics if index < len(timeline.snapshots) else {}
        dialects = getattr(timeline, "dialects", ())
        return {
            **{key: metrics.get(key) for key in IREE_STEP_METRICS},
            "dialects": dict((dialects[index] if index < len(dialects) else None) or {}),
        }

"""TVM as a :class:`~explorer.lower.compilers.Compiler`: Relax import, then its passes one at a time.

Examples
--------
>>> from explorer import load
>>> from explorer.lower.compilers import LowerOptions
>>> timeline = TvmCompiler().lower(load("zoo:mlp"), options=LowerOptions(passes="zero"))
>>> [s.name for s in timeline.snapshots][:2]
['relax import', 'LegalizeOps']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from explorer.core.errors import UsageError
from explorer.lower.compilers import Compiler, LowerOptions

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph
    from explorer.lower.tvm.tir import TirTimeline

__all__ = ["TvmCompiler"]


class TvmCompiler(Compiler):
    """TVM Relax: a snapshot after the import and after each pass of a pipeline (``--passes``).

    Examples
    --------
    >>> TvmCompiler().check_options(LowerOptions(detail="passes"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    explorer.core.errors.UsageError: --detail and --iree-flags are for --compiler iree ...
    """

    name = "tvm"
    label = "TVM Relax"
    runtime = "tvm"
    coverage_target = "tvm-llvm"
    step_word = "pass"
    import_metric = "bindings"

    def check_options(self, options: LowerOptions) -> LowerOptions:
        """``options`` with ``passes`` checked (a typo fails before anything runs); IREE's options refused.

        Examples
        --------
        >>> TvmCompiler().check_options(LowerOptions()).passes
        'default'
        """
        from explorer.lower.tvm.relax_pipeline import check_passes

        if options.detail != "phases" or options.flags != "default":
            raise UsageError(
                "--detail and --iree-flags are for --compiler iree (TVM's steps are its passes: --passes)"
            )
        passes = check_passes(options.passes) if options.passes else "default"
        return LowerOptions(passes if isinstance(passes, str) else tuple(passes))

    def lower(
        self,
        graph: ModelGraph,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        options: LowerOptions | None = None,
        *,
        progress: Callable[[Any], object] | None = None,
    ) -> TirTimeline:
        """``graph`` imported into Relax, then ``options.passes`` run one by one (see
        :func:`~explorer.lower.tvm.relax_pipeline.relax_pipeline`).

        Examples
        --------
        >>> from explorer import load
        >>> TvmCompiler().lower(load("zoo:mlp"), options=LowerOptions(passes="zero")).code_label
        'PrimFunc'
        """
        from explorer.lower.tvm.relax_pipeline import relax_pipeline

        passes = options.passes if options is not None and options.passes else "default"
        return relax_pipeline(graph, input_shapes, passes, progress=progress)

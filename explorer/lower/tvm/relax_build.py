"""Compile an ONNX graph with TVM Relax (untuned, CPU) into a library that runs, checked against ONNX Runtime.

:func:`relax_build` imports, compiles (``tvm.compile`` with the ``llvm`` target for this
machine's CPU), exports the library to a private scratch folder and runs it once on the
project's random inputs, all in the worker; the same inputs run in ONNX Runtime (its own
optimisations off) and the largest output difference is kept. :meth:`RelaxBuild.run` runs
the library again, on any inputs. Untuned code has no schedule: expect it to be much slower
than ONNX Runtime (tuning, and timing it honestly, are the runtimes' work).

Examples
--------
>>> from explorer import load
>>> built = relax_build(load("zoo:mlp"))
>>> built.max_abs_diff < 1e-4, built.library.suffix
(True, '.so')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from explorer.core.compare import max_abs_diff
from explorer.core.errors import LoweringError
from explorer.core.graph import ModelGraph
from explorer.isolation import worker
from explorer.lower.pass_failures import located
from explorer.lower.tvm.relax_compile import build_relax, run_relax_library
from explorer.lower.tvm.relax_import import failed_import
from explorer.lower.tvm.relax_pipeline import RelaxImportFailed
from explorer.onnx_adapter.adapter import onnx_model
from explorer.onnx_adapter.inputs import concrete_input_shapes, random_feeds
from explorer.onnx_adapter.model_files import new_model_dir, worker_source

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RelaxBuild", "relax_build", "build"]


@dataclass(frozen=True)
class RelaxBuild:
    """A compiled Relax module: where its library is, what it cost, and how it agrees with ONNX Runtime.

    Attributes
    ----------
    library : Path
        The exported library (in the process's scratch folder, removed at exit).
    target : str
        The target it was compiled for.
    input_shapes : dict
        The static input shapes it was compiled with.
    compile_s, run_s : float
        Seconds to compile, and to run once on the check inputs.
    outputs : tuple of numpy.ndarray
        Its outputs on the check inputs (:func:`explorer.onnx_adapter.inputs.random_feeds`, ``seed``).
    reference : tuple of numpy.ndarray
        ONNX Runtime's outputs on the same inputs.
    max_abs_diff : float
        The largest difference between the two (``inf`` when shapes differ).
    """

    library: Path
    target: str
    input_shapes: dict[str, list[int]]
    compile_s: float
    run_s: float
    outputs: tuple[np.ndarray, ...] = field(repr=False)
    reference: tuple[np.ndarray, ...] = field(repr=False)
    max_abs_diff: float = 0.0

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Run the library on ``feeds`` (in the model's input order), in the worker.

        Examples
        --------
        >>> from explorer import load
        >>> built = relax_build(load("zoo:mlp"))
        >>> [o.shape for o in built.run({"input": np.zeros((1, 1, 28, 28), np.float32)})]
        [(1, 10)]
        """
        return worker.run(run_relax_library, str(self.library), dict(feeds))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready facts (no arrays).

        Examples
        --------
        >>> from explorer import load
        >>> sorted(relax_build(load("zoo:mlp")).to_dict())
        ['compile_s', 'input_shapes', 'library', 'max_abs_diff', 'run_s', 'target']
        """
        return {
            "library": str(self.library),
            "target": self.target,
            "input_shapes": dict(self.input_shapes),
            "compile_s": round(self.compile_s, 4),
            "run_s": round(self.run_s, 4),
            "max_abs_diff": self.max_abs_diff,
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per output: shape, dtype, max abs difference from ONNX Runtime.

        Examples
        --------
        >>> from explorer import load
        >>> relax_build(load("zoo:mlp")).to_frame()["shape"].tolist()
        [(1, 10)]
        """
        import pandas as pd

        rows = [
            {
                "output": i,
                "shape": tuple(out.shape),
                "dtype": str(out.dtype),
                "max_abs_diff": max_abs_diff([ref], [out]),
            }
            for i, (out, ref) in enumerate(zip(self.outputs, self.reference, strict=False))
        ]
        return pd.DataFrame(rows, columns=["output", "shape", "dtype", "max_abs_diff"])


def relax_build(
    graph: ModelGraph,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    target: str = "llvm",
    seed: int = 0,
    timeout: float | None = None,
) -> RelaxBuild:
    """Compile ``graph`` with TVM Relax and check its outputs against ONNX Runtime.

    Parameters
    ----------
    graph : ModelGraph
        A top-level ONNX graph.
    input_shapes : mapping, optional
        Static input shapes; dynamic dimensions take the project's defaults otherwise
        (:func:`~explorer.onnx_adapter.inputs.concrete_input_shapes`).
    target : str
        ``"llvm"``: this machine's CPU.
    seed : int
        Seed of the check inputs.
    timeout : float, optional
        Seconds the worker may take.

    Returns
    -------
    RelaxBuild

    Raises
    ------
    RelaxImportFailed
        When the model does not import (``err.result.retry()`` is the fix where there is one).
    LoweringError
        When a pass of the build fails on the model (the pass, the binding, its ONNX nodes, the fix).

    Examples
    --------
    >>> from explorer import load
    >>> relax_build(load("zoo:mlp")).max_abs_diff < 1e-4
    True
    """
    from explorer.passes.verification import ort_runner  # ONNX Runtime, only when a build is checked

    onnx_model(graph, "relax_build")
    shapes = concrete_input_shapes(graph.model, input_shapes)
    feeds = random_feeds(graph.model, shapes, seed)
    library = new_model_dir("relax-") / "model.so"
    try:
        out = worker.run_on_model(  # the library lands in ``library`` atomically (the worker's output)
            build_relax,
            worker_source(graph),
            shapes,
            feeds,
            output=str(library),
            target=target,
            step="Relax build",
            timeout=timeout,
        )
    except LoweringError as err:  # a pass failed on the model: name the model too
        raise located(err, graph.source) from None
    if not out["ok"]:
        raise RelaxImportFailed(failed_import(out, graph, shapes))
    reference = tuple(ort_runner(graph, feeds))
    outputs = tuple(out["outputs"])
    return RelaxBuild(
        library=library,
        target=target,
        input_shapes=shapes,
        compile_s=out["compile_s"],
        run_s=out["run_s"],
        outputs=outputs,
        reference=reference,
        max_abs_diff=max_abs_diff(reference, outputs),
    )


build = relax_build
"""``relax_build`` under the name the lowering's issue gave it (``explorer.lower.build``)."""

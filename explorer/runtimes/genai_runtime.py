"""onnxruntime-genai's ``Generator`` as a runtime: the loop the builder's users run, timed beside ours.

onnxruntime-genai runs a decoder from the folder its model builder writes (``model.onnx`` and
``genai_config.json``): its own generation loop on ONNX Runtime, with the KV cache in one
buffer of the full length (``past_present_share_buffer``) and sampling in C++. It takes no
single call, so it times only a decoder's generation (:mod:`explorer.runtimes.generation`):
the prompt appended (prefill), then ``generate_next_token`` a token at a time (decode). Its
prompt is the same tokens as the other runtimes', so its logits for the token after the
prompt are compared with theirs; its decode runs on its own cache (the prompt's, not random
values), so decode is timed but not compared.

Examples
--------
>>> OrtGenaiRuntime().name, OrtGenaiRuntime().generation_only
('ort-genai', True)
"""

from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from explorer.core.errors import MissingDependencyError, RuntimeUnsupportedError
from explorer.isolation import worker
from explorer.onnx_adapter.decoder import GENAI_CONFIG, read_genai_config

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph
    from explorer.runtimes.base import PreparedSession

__all__ = ["OrtGenaiRuntime", "GENAI_EXTRA"]

GENAI_EXTRA = "onnxruntime-genai is not installed: pip install 'onnx-graph-explorer[llm]'"
"""What is missing, in words, where onnxruntime-genai is not installed."""


@dataclass(frozen=True)
class OrtGenaiRuntime:
    """onnxruntime-genai's ``Generator`` on the CPU.

    Parameters
    ----------
    threads : int
        ONNX Runtime's intra-op threads (0: the config's, else ONNX Runtime's default).

    Examples
    --------
    >>> OrtGenaiRuntime(threads=2).label
    'onnxruntime-genai Generator (2 threads)'
    """

    family: ClassVar[str] = "ort-genai"
    """How its profile names kernels and what memory it needs (:class:`~explorer.runtimes.base.Runtime`)."""
    places_nodes: ClassVar[bool] = False
    """It compiles for one device: ONNX Runtime's ``--strict-placement`` does not apply."""

    threads: int = 0
    generation_only: bool = True

    @property
    def name(self) -> str:
        """``ort-genai``."""
        return "ort-genai"

    @property
    def label(self) -> str:
        """``onnxruntime-genai Generator``, with the thread count when one was set."""
        threads = f" ({self.threads} thread{'s' if self.threads != 1 else ''})" if self.threads else ""
        return f"onnxruntime-genai Generator{threads}"

    @property
    def tuned(self) -> bool:
        """Nothing is tuned: False."""
        return False

    @property
    def missing(self) -> str | None:
        """Why it is not available here, or None.

        Examples
        --------
        >>> OrtGenaiRuntime().missing is None or "pip install" in OrtGenaiRuntime().missing
        True
        """
        return None if self.available() else GENAI_EXTRA

    def available(self) -> bool:
        """Whether onnxruntime-genai is installed.

        Examples
        --------
        >>> isinstance(OrtGenaiRuntime().available(), bool)
        True
        """
        return importlib.util.find_spec("onnxruntime_genai") is not None

    def options(self) -> dict[str, Any]:
        """``{"threads"}``.

        Examples
        --------
        >>> OrtGenaiRuntime().options()
        {'threads': 0}
        """
        return {"threads": self.threads}

    def prepare(
        self,
        graph: ModelGraph,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        *,
        progress: Callable[[Any], object] | None = None,
    ) -> PreparedSession:
        """Refused: onnxruntime-genai runs a whole generation, never one call.

        Raises
        ------
        RuntimeUnsupportedError
            Always; :meth:`generate` is what it runs.

        Examples
        --------
        >>> from explorer import load
        >>> OrtGenaiRuntime().prepare(load("zoo:llama"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        explorer.core.errors.RuntimeUnsupportedError: ...runs a decoder's generation, not one call...
        """
        raise RuntimeUnsupportedError(
            "it runs a decoder's generation, not one call: bench a decoder LLM without --single-call",
            runtime=self.label,
            path=graph.source,
        )

    def generate(
        self,
        graph: ModelGraph,
        prompt: Sequence[int],
        context: int,
        decode_steps: int,
        *,
        prefill_runs: int = 3,
        progress: Callable[[Any], object] | None = None,
    ) -> dict[str, Any]:
        """Time ``prompt``, then ``decode_steps`` tokens up to ``context``, in the worker.

        Returns
        -------
        dict
            ``prefill_ms``, ``decode_ms``, ``logits`` (of the token after the prompt), ``tokens``,
            ``cache`` (``"shared buffer"``), ``prepare_s`` (loading the model), ``info``.

        Raises
        ------
        RuntimeUnsupportedError
            No ``genai_config.json`` beside the model.
        MissingDependencyError
            onnxruntime-genai is not installed.

        Examples
        --------
        >>> from explorer import load
        >>> OrtGenaiRuntime().generate(load("zoo:llama"), [1, 2], 16, 2)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        explorer.core.errors.RuntimeUnsupportedError: ...genai_config.json...
        """
        if not self.available():
            raise MissingDependencyError(GENAI_EXTRA)
        if graph.model_path is None or read_genai_config(graph.model_path) is None:
            raise RuntimeUnsupportedError(
                f"it reads the {GENAI_CONFIG} onnxruntime-genai's model builder writes beside the model, "
                "and there is none",
                runtime=self.label,
                path=graph.source,
            )
        folder = str(graph.model_path.parent)
        return worker.run(
            _generation_loop,
            folder,
            [int(t) for t in prompt],
            int(context),
            int(decode_steps),
            prefill_runs=prefill_runs,
            threads=self.threads,
            progress=progress,
        )


def _overlay(threads: int) -> str:
    """The config overlay setting ONNX Runtime's threads."""
    options = {"intra_op_num_threads": threads, "inter_op_num_threads": 1}
    return json.dumps({"model": {"decoder": {"session_options": options}}})


def _generation_loop(
    folder: str,
    prompt: Sequence[int],
    context: int,
    decode_steps: int,
    *,
    prefill_runs: int = 3,
    threads: int = 0,
) -> dict[str, Any]:
    """Run in the worker: onnxruntime-genai's model from ``folder``, a prompt timed, then decode steps.

    Decode is timed after a prompt of ``context - 2 - decode_steps`` tokens (the prompt's tokens
    repeated), so its last step runs at the context: each ``generate_next_token`` after the
    first runs the model on the token chosen before and picks the next (greedy).

    """
    import onnxruntime_genai as og

    started = time.perf_counter()
    config = og.Config(folder)
    if threads:
        config.overlay(_overlay(threads))
    model = og.Model(config)
    load_s = time.perf_counter() - started

    def generator() -> Any:
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=context, do_sample=False)
        return og.Generator(model, params)

    tokens = np.asarray(prompt, dtype=np.int32)
    prefill_ms: list[float] = []
    logits: np.ndarray | None = None
    for run in range(1 + max(1, prefill_runs)):
        g = generator()
        began = time.perf_counter_ns()
        g.append_tokens(tokens)
        elapsed = (time.perf_counter_ns() - began) / 1e6
        if run:
            prefill_ms.append(elapsed)
        logits = np.asarray(g.get_logits(), dtype=np.float32).reshape(1, 1, -1)
        worker.report(None, f"prefill {run}/{max(1, prefill_runs)}")

    g = generator()
    g.append_tokens(np.resize(tokens, max(1, context - 2 - decode_steps)))
    g.generate_next_token()  # the token after the prompt: sampling only, the prompt's logits exist
    decode_ms: list[float] = []
    for step in range(1 + decode_steps):
        began = time.perf_counter_ns()
        g.generate_next_token()
        elapsed = (time.perf_counter_ns() - began) / 1e6
        if step:
            decode_ms.append(elapsed)
        worker.report(None, f"decode {step}/{decode_steps}")
    chosen = [int(t) for t in g.get_sequence(0)[-(decode_steps + 2) :]]
    return {
        "prefill_ms": prefill_ms,
        "decode_ms": decode_ms,
        "logits": [logits],
        "tokens": chosen,
        "cache": "shared buffer",
        "prepare_s": load_s,
        "info": {"version": og.__version__, "threads": threads, "reused": False},
    }

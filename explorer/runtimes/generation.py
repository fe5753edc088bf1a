"""Prefill and decode timed as a decoder LLM runs: a prompt, then a token at a time, the KV cache fed back.

A decoder LLM is deployed as a loop, not a single call: the prompt of ``prompt_tokens`` goes
through the model once (*prefill*: many tokens a call, compute-bound), then each new token
is one call of a single token over the cache of every token before it (*decode*: one
token a call, bound by reading every weight and the whole cache from memory). The loop here
is an application's: each decode step feeds the token the last one chose (greedy) and the
``present`` outputs back as the ``past`` inputs.

The loop runs in the worker, next to the sessions, so the KV cache never crosses the process
boundary between steps. Decode is timed up to ``context`` tokens: its cache starts
``decode_steps + 1`` tokens short of it (random values: the time does not depend on them) and
grows a token a step on a runtime that takes any shape (ONNX Runtime, PyTorch eager); a
runtime compiled for fixed shapes keeps that window (the cache's oldest token dropped each
step), as a fixed-context NPU graph does. The first step's inputs are the same on every
runtime, and so are the prompt's: their logits are what runtimes are compared on.

The memory roof: a decode step reads every weight (of an embedding table only gathered, one
row) and the cache once, so this machine's measured bandwidth
(:func:`explorer.runtimes.machine.measure_peak`) bounds it at ``bandwidth / (weight bytes +
cache bytes)`` tokens a second.

Examples
--------
>>> from explorer import load
>>> from explorer.runtimes.ort_runtime import OrtRuntime
>>> g = load("zoo:llama")
>>> run = generation_benchmark(g, OrtRuntime(), prompt_tokens=8, context=32, decode_steps=4)
>>> run.timing.prompt_tokens, run.timing.context, len(run.decode_ms)
(8, 32, 4)
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from explorer.core.errors import ExplorerError, RuntimeUnsupportedError, UsageError
from explorer.isolation import worker
from explorer.onnx_adapter.decoder import DecoderSpec, decoder_spec
from explorer.onnx_adapter.inputs import concrete_input_shapes, random_feeds
from explorer.runtimes.machine import measure_peak
from explorer.runtimes.ort_refusals import ort_node_failure
from explorer.runtimes.sessions import _get

if TYPE_CHECKING:
    import pandas as pd

    from explorer.core.graph import ModelGraph
    from explorer.runtimes.base import PreparedSession, Runtime
    from explorer.runtimes.profile import Profile

__all__ = [
    "PROMPT_TOKENS",
    "CONTEXT",
    "DECODE_STEPS",
    "LlmTiming",
    "GenerationRun",
    "generation_plan",
    "generation_benchmark",
    "generation_loop",
    "generation_profiles",
    "grows_cache",
]

PROMPT_TOKENS = 128
"""The prompt's length by default (``bench --prompt-tokens``)."""

CONTEXT = 1024
"""The context decode is timed at by default (``bench --context``)."""

DECODE_STEPS = 16
"""Decode steps timed (after one untimed step)."""


@dataclass(frozen=True)
class LlmTiming:
    """Prefill and decode of one runtime, and how far decode is from the memory roof.

    Attributes
    ----------
    prompt_tokens, context, decode_steps : int
        The prompt's tokens, the context decode ran at, the decode steps timed.
    prefill_ms, prefill_tokens_per_s : float
        The prompt's time (median of the runs) and its tokens a second.
    decode_ms_per_token, decode_tokens_per_s : float
        One decode step's time (median) and tokens a second.
    kv_cache_bytes : int
        The cache at ``context`` tokens.
    bytes_per_decode_step : int
        What a decode step reads at least: every weight (a row of an embedding table only
        gathered) and the cache.
    memory_gbps : float
        This machine's measured memory bandwidth.
    bandwidth_bound_tokens_per_s : float
        ``memory_gbps / bytes_per_decode_step``: decode's roof here.
    cache : str
        ``"grows"`` (a token a step) or ``"window"`` (fixed shapes: the oldest token dropped).
    """

    prompt_tokens: int
    context: int
    decode_steps: int
    prefill_ms: float
    prefill_tokens_per_s: float
    decode_ms_per_token: float
    decode_tokens_per_s: float
    kv_cache_bytes: int
    bytes_per_decode_step: int
    memory_gbps: float
    bandwidth_bound_tokens_per_s: float
    cache: str

    @property
    def share_of_bound(self) -> float:
        """Decode's tokens a second as a share of the bandwidth bound.

        Examples
        --------
        >>> LlmTiming(8, 32, 4, 1.0, 8000.0, 2.0, 500.0, 1, 1, 1.0, 1000.0, "grows").share_of_bound
        0.5
        """
        return self.decode_tokens_per_s / self.bandwidth_bound_tokens_per_s

    def to_dict(self) -> dict[str, Any]:
        """The ``llm`` object of ``bench --json``.

        Examples
        --------
        >>> sorted(LlmTiming(8, 32, 4, 1.0, 8000.0, 2.0, 500.0, 1, 1, 1.0, 1000.0, "grows").to_dict())[:3]
        ['bandwidth_bound_tokens_per_s', 'bytes_per_decode_step', 'cache']
        """
        return {
            "prompt_tokens": self.prompt_tokens,
            "context": self.context,
            "decode_steps": self.decode_steps,
            "prefill_ms": round(self.prefill_ms, 4),
            "prefill_tokens_per_s": round(self.prefill_tokens_per_s, 2),
            "decode_ms_per_token": round(self.decode_ms_per_token, 4),
            "decode_tokens_per_s": round(self.decode_tokens_per_s, 2),
            "kv_cache_bytes": self.kv_cache_bytes,
            "bytes_per_decode_step": self.bytes_per_decode_step,
            "memory_gbps": round(self.memory_gbps, 2),
            "bandwidth_bound_tokens_per_s": round(self.bandwidth_bound_tokens_per_s, 2),
            "share_of_bound": round(self.share_of_bound, 4),
            "cache": self.cache,
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per figure (``field``, ``value``).

        Examples
        --------
        >>> t = LlmTiming(8, 32, 4, 1.0, 8000.0, 2.0, 500.0, 1, 1, 1.0, 1000.0, "grows")
        >>> t.to_frame().set_index("field").loc["decode_tokens_per_s", "value"]
        500.0
        """
        import pandas as pd

        return pd.DataFrame(list(self.to_dict().items()), columns=["field", "value"])


@dataclass(frozen=True)
class GenerationRun:
    """A generation loop's timing, every timed call, and the logits to compare runtimes on.

    Attributes
    ----------
    timing : LlmTiming
    prefill_ms, decode_ms : tuple of float
        Every timed prefill and decode call.
    logits : tuple of numpy.ndarray
        The logits of the token after the prompt, and of the first decode step's (the same inputs
        on every runtime); a runtime with a loop of its own has only the first.
    tokens : tuple of int
        The tokens decode chose (greedy).
    prefill_shapes, decode_shapes : dict
        The inputs' shapes of the two calls.
    prepare_s : float
        Preparing both sessions (when they were first prepared).
    info : dict
        What preparing the decode session found (versions, threads, a build's tasks and tuning,
        ``reused``); ``info["prefill"]``, what preparing the prompt's session found (its own
        compile: its tasks, records and trials).
    """

    timing: LlmTiming
    prefill_ms: tuple[float, ...]
    decode_ms: tuple[float, ...]
    logits: tuple[np.ndarray, ...] = field(repr=False)
    tokens: tuple[int, ...]
    prefill_shapes: Mapping[str, Sequence[int]] = field(default_factory=dict)
    decode_shapes: Mapping[str, Sequence[int]] = field(default_factory=dict)
    prepare_s: float = 0.0
    info: Mapping[str, Any] = field(default_factory=dict, repr=False)


def grows_cache(runtime: Runtime) -> bool:
    """Whether ``runtime`` takes any input shape, so the cache can grow a token a step.

    Examples
    --------
    >>> from explorer.runtimes.ort_runtime import OrtRuntime
    >>> from explorer.runtimes.tvm_runtime import TvmRuntime
    >>> grows_cache(OrtRuntime()), grows_cache(TvmRuntime())
    (True, False)
    """
    return runtime.name.startswith(("ort", "torch"))


def generation_plan(
    graph: ModelGraph,
    prompt_tokens: int = PROMPT_TOKENS,
    context: int = CONTEXT,
    spec: DecoderSpec | None = None,
    decode_steps: int = 0,
) -> tuple[DecoderSpec, dict[str, list[int]], dict[str, list[int]]]:
    """The decoder's figures and the shapes of its two calls: the prompt, and the first decode step.

    The first decode step's cache holds ``context - 1 - decode_steps`` tokens: after it (untimed),
    ``decode_steps`` timed steps grow the cache a token each, the last one running at ``context``.

    Raises
    ------
    UsageError
        ``graph`` is no decoder LLM, or the prompt or context does not fit the model.

    Examples
    --------
    >>> from explorer import load
    >>> spec, prefill, decode = generation_plan(load("zoo:llama"), prompt_tokens=8, context=32)
    >>> prefill["input_ids"], decode["input_ids"], decode["past_key_values.0.key"]
    ([1, 8], [1, 1], [1, 2, 31, 8])
    """
    spec = spec if spec is not None else decoder_spec(graph.model, graph.model_path)
    if spec is None:
        raise UsageError(f"{graph.source} is no decoder LLM: it has no KV cache fed back (past -> present)")
    if prompt_tokens < 1 or context < 2:
        raise UsageError(
            f"a prompt of at least 1 token and a context of at least 2 (not {prompt_tokens}, {context})"
        )
    if spec.context_length is not None and context > spec.context_length:
        raise UsageError(
            f"--context {context} is longer than {graph.source}'s context of {spec.context_length} tokens"
        )
    if prompt_tokens >= context:
        raise UsageError(f"the prompt ({prompt_tokens} tokens) must be shorter than the context ({context})")
    if decode_steps >= context:
        raise UsageError(f"{decode_steps} decode steps do not fit a context of {context} tokens")
    prefill = concrete_input_shapes(graph.model, sequence=prompt_tokens, past=0, spec=spec)
    decode = concrete_input_shapes(graph.model, sequence=1, past=context - 1 - decode_steps, spec=spec)
    return spec, prefill, decode


def _names(graph: ModelGraph, spec: DecoderSpec) -> dict[str, Any]:
    return {
        "input_ids": spec.input_ids,
        "attention_mask": spec.attention_mask,
        "position_ids": spec.position_ids,
        "past": [list(p) for p in spec.past_inputs],
        "present": [list(p) for p in spec.present_outputs],
        "logits": spec.logits,
        "outputs": [o.name for o in graph.model.graph.output],
    }


def generation_loop(
    prefill_key: str,
    decode_key: str,
    prefill_feeds: Mapping[str, np.ndarray],
    decode_feeds: Mapping[str, np.ndarray],
    names: Mapping[str, Any],
    *,
    prefill_runs: int = 3,
    decode_steps: int = DECODE_STEPS,
    grow: bool = True,
) -> dict[str, Any]:
    """Run in the worker: time the prompt, then ``decode_steps`` tokens fed back as an application does.

    Parameters
    ----------
    prefill_key, decode_key : str
        The sessions (:mod:`explorer.runtimes.sessions`) for the prompt's shapes and the decode step's.
    prefill_feeds, decode_feeds : mapping
        The prompt's inputs, and the first decode step's (a cache of ``context - 1`` tokens).
    names : mapping
        ``input_ids``, ``attention_mask``, ``position_ids``, ``past``, ``present``, ``logits``, ``outputs``.
    prefill_runs, decode_steps : int
        Timed prompt runs (after one untimed), timed decode steps (after one untimed).
    grow : bool
        The cache grows a token a step; else the oldest token is dropped (fixed shapes).

    Returns
    -------
    dict
        ``prefill_ms``, ``decode_ms``, ``logits`` (the prompt's last position's and the first
        step's), ``tokens``.

    Examples
    --------
    >>> from explorer import load, zoo
    >>> from explorer.runtimes.ort_prepare import prepare_ort
    >>> graph = load("zoo:llama")
    >>> _ = worker.run(prepare_ort, str(zoo.save("llama")), "doc-llama", {})
    >>> spec, prefill, decode = generation_plan(graph, prompt_tokens=4, context=16, decode_steps=3)
    >>> first = random_feeds(graph.model, prefill, sequence=4, past=0)
    >>> step = random_feeds(graph.model, decode, sequence=1, past=12)
    >>> out = worker.run(generation_loop, "doc-llama", "doc-llama", first, step, _names(graph, spec),
    ...                  prefill_runs=1, decode_steps=2)
    >>> len(out["decode_ms"]), out["logits"][1].shape, len(out["tokens"])
    (2, (1, 1, 128), 3)
    """
    outputs = list(names["outputs"])
    logits_at = outputs.index(names["logits"])

    def call(key: str, feeds: Mapping[str, np.ndarray]) -> tuple[float, list[np.ndarray]]:
        session = _get(key)
        bound = session.bind(feeds)
        started = time.perf_counter_ns()
        result = session.call(bound)
        elapsed = (time.perf_counter_ns() - started) / 1e6
        return elapsed, session.outputs(result)

    prefill_ms: list[float] = []
    prompt_logits: np.ndarray | None = None
    for run in range(1 + max(1, prefill_runs)):
        elapsed, out = call(prefill_key, prefill_feeds)
        if run:
            prefill_ms.append(elapsed)
        prompt_logits = out[logits_at][:, -1:]  # the next token's: what every runtime can be compared on
        worker.report(None, f"prefill {run}/{max(1, prefill_runs)}")

    feeds = dict(decode_feeds)
    by_name = {name: i for i, name in enumerate(outputs)}
    decode_ms: list[float] = []
    tokens: list[int] = []
    first_logits: np.ndarray | None = None
    for step in range(1 + max(1, decode_steps)):
        elapsed, out = call(decode_key, feeds)
        if step:
            decode_ms.append(elapsed)
        else:
            first_logits = out[logits_at]
        token = int(np.argmax(out[logits_at][0, -1]))
        tokens.append(token)
        ids = feeds[names["input_ids"]]
        feeds[names["input_ids"]] = np.full(ids.shape, token, dtype=ids.dtype)
        for past, present in zip(names["past"], names["present"], strict=True):
            for past_name, present_name in zip(past, present, strict=True):
                value = out[by_name[present_name]]
                feeds[past_name] = value if grow else np.ascontiguousarray(value[:, :, 1:])
        if grow and names["attention_mask"]:
            mask = feeds[names["attention_mask"]]
            feeds[names["attention_mask"]] = np.ones((mask.shape[0], mask.shape[1] + 1), dtype=mask.dtype)
        if grow and names["position_ids"]:
            positions = feeds[names["position_ids"]]
            feeds[names["position_ids"]] = positions + 1
        worker.report(None, f"decode {step}/{max(1, decode_steps)}")
    return {
        "prefill_ms": prefill_ms,
        "decode_ms": decode_ms,
        "logits": [prompt_logits, first_logits],
        "tokens": tokens,
    }


def generation_benchmark(
    graph: ModelGraph,
    runtime: Runtime,
    *,
    prompt_tokens: int = PROMPT_TOKENS,
    context: int = CONTEXT,
    decode_steps: int = DECODE_STEPS,
    prefill_runs: int = 3,
    seed: int = 0,
    progress: Any = None,
    fix: bool = False,
    simplify: bool = False,
    run_graph: ModelGraph | None = None,
) -> GenerationRun:
    """Prepare ``runtime`` for the prompt and for a decode step, run the loop, and measure.

    Parameters
    ----------
    graph : ModelGraph
        A decoder LLM (:func:`explorer.onnx_adapter.decoder.decoder_spec` recognises it).
    runtime : Runtime
    prompt_tokens, context, decode_steps, prefill_runs : int
        The prompt's length, the context decode runs at, the timed decode steps and prompt runs.
    seed : int
        Seed of the prompt's tokens and of the cache's values.
    progress : callable, optional
        ``progress(event)``, as :meth:`Runtime.prepare` takes it.
    fix, simplify : bool
        As ``bench --fix`` and ``--simplify`` (:func:`explorer.lower.import_fix.lower_with_fixes`),
        for each call's shapes apart: a compiler that needs fixed shapes gets the prompt's graph
        and the decode step's, each simplified at its own shapes (``info["fixes"]`` says which).
    run_graph : ModelGraph, optional
        The graph the runtime runs, when not ``graph`` itself: ``graph`` with the rewrites a
        compiler's fix made (:func:`explorer.lower.import_fix.rewritten`), so that every runtime runs
        what the compilers ran; the plan and the inputs still come from ``graph``.

    Returns
    -------
    GenerationRun

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.runtimes.ort_runtime import OrtRuntime
    >>> run = generation_benchmark(load("zoo:llama"), OrtRuntime(), prompt_tokens=4, context=16,
    ...                            decode_steps=2)
    >>> run.timing.cache, run.logits[0].shape, run.logits[1].shape
    ('grows', (1, 1, 128), (1, 1, 128))
    """
    spec, prefill_shapes, decode_shapes = generation_plan(
        graph, prompt_tokens, context, decode_steps=decode_steps
    )
    cached = decode_shapes[spec.past_inputs[0][0]][2]
    prefill_feeds = random_feeds(
        graph.model, prefill_shapes, seed=seed, sequence=prompt_tokens, past=0, spec=spec
    )
    decode_feeds = random_feeds(graph.model, decode_shapes, seed=seed + 1, sequence=1, past=cached, spec=spec)
    own_loop = getattr(runtime, "generate", None)  # a runtime with a generation loop of its own
    try:
        if own_loop is not None:
            prompt = [int(t) for t in prefill_feeds[spec.input_ids].reshape(-1)]
            result = own_loop(
                graph, prompt, context, decode_steps, prefill_runs=prefill_runs, progress=progress
            )
        else:
            result = _session_loop(
                graph,
                run_graph if run_graph is not None else graph,
                runtime,
                spec,
                (prefill_shapes, decode_shapes),
                (prefill_feeds, decode_feeds),
                prefill_runs=prefill_runs,
                decode_steps=decode_steps,
                progress=progress,
                fixes=(fix, simplify),
            )
    except (ExplorerError, MemoryError):
        raise
    except Exception as err:  # the runtime refused the model's inputs: the user's model, not a bug
        reason = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        failure = ort_node_failure(str(err))  # ONNX Runtime's words for a node (GroupQueryAttention's checks)
        if failure is not None:
            reason = (
                f"{failure['op_type']} (node {failure['node']!r}) refused the inputs made for it: "
                f"{failure['status']}; time one call at shapes you give (--single-call --input-shape ...), "
                "or another runtime"
            )
        raise RuntimeUnsupportedError(
            f"a prompt of {prompt_tokens} tokens, then decode from a cache of {cached}, failed: {reason}",
            runtime=runtime.label,
            op_type=failure["op_type"] if failure else None,
            path=graph.source,
        ) from None
    prefill_median = float(np.median(result["prefill_ms"]))
    decode_median = float(np.median(result["decode_ms"]))
    kv_bytes = spec.kv_bytes_per_token * context
    read = spec.weight_bytes - spec.gathered_bytes + kv_bytes  # a gathered table: one row a step
    gbps = measure_peak().gbps
    timing = LlmTiming(
        prompt_tokens=prompt_tokens,
        context=context,
        decode_steps=len(result["decode_ms"]),
        prefill_ms=prefill_median,
        prefill_tokens_per_s=prompt_tokens / prefill_median * 1e3,
        decode_ms_per_token=decode_median,
        decode_tokens_per_s=1e3 / decode_median,
        kv_cache_bytes=kv_bytes,
        bytes_per_decode_step=read,
        memory_gbps=gbps,
        bandwidth_bound_tokens_per_s=gbps * 1e9 / read,
        cache=result["cache"],
    )
    return GenerationRun(
        timing=timing,
        prefill_ms=tuple(result["prefill_ms"]),
        decode_ms=tuple(result["decode_ms"]),
        logits=tuple(result["logits"]),
        tokens=tuple(result["tokens"]),
        prefill_shapes=prefill_shapes,
        decode_shapes=decode_shapes,
        prepare_s=float(result["prepare_s"]),
        info=dict(result["info"]),
    )


def _prepared(
    graph: ModelGraph,
    runtime: Runtime,
    shapes: Mapping[str, Sequence[int]],
    fixes: tuple[bool, bool],
    progress: Any,
    applied_fixes: list[str],
) -> PreparedSession:
    """``runtime`` prepared for one call's ``shapes``; with ``fixes`` (fix, simplify), as
    ``bench --fix``/``--simplify`` for those shapes (the fixes applied go to ``applied_fixes``)."""
    from explorer.lower.import_fix import lower_with_fixes

    def attempt(fixed: ModelGraph, fixed_shapes: Any) -> PreparedSession:
        return runtime.prepare(fixed, fixed_shapes or shapes, progress=progress)

    session, applied = lower_with_fixes(graph, dict(shapes), attempt, simplify=fixes[1], fix=fixes[0])
    applied_fixes.extend(words for words in applied if words not in applied_fixes)
    return session


def _session_loop(
    graph: ModelGraph,
    run_graph: ModelGraph,
    runtime: Runtime,
    spec: DecoderSpec,
    shapes: tuple[Mapping[str, Sequence[int]], Mapping[str, Sequence[int]]],
    feeds: tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]],
    *,
    prefill_runs: int,
    decode_steps: int,
    progress: Any,
    fixes: tuple[bool, bool],
) -> dict[str, Any]:
    """The loop on two sessions of ``runtime`` (the prompt's shapes, a decode step's) of ``run_graph``
    (``graph``, or it rewritten), in the worker."""
    applied_fixes: list[str] = []
    prefill = _prepared(run_graph, runtime, shapes[0], fixes, progress, applied_fixes)
    decode = _prepared(run_graph, runtime, shapes[1], fixes, progress, applied_fixes)
    grow = grows_cache(runtime)

    def loop() -> dict[str, Any]:
        return worker.run(
            generation_loop,
            prefill.key,
            decode.key,
            feeds[0],
            feeds[1],
            _names(graph, spec),
            prefill_runs=prefill_runs,
            decode_steps=decode_steps,
            grow=grow,
            progress=progress,
        )

    result = decode.with_session(lambda: prefill.with_session(loop, progress), progress)
    reused = bool(prefill.info.get("reused")) and bool(decode.info.get("reused"))
    return {
        **result,
        "cache": "grows" if grow else "window",
        "prepare_s": prefill.prepare_s + decode.prepare_s,
        "info": {**decode.info, "reused": reused, "fixes": applied_fixes, "prefill": dict(prefill.info)},
    }


def generation_profiles(
    graph: ModelGraph,
    runtime: Runtime,
    *,
    prompt_tokens: int = PROMPT_TOKENS,
    context: int = CONTEXT,
    decode_steps: int = DECODE_STEPS,
    runs: int = 3,
    seed: int = 0,
    fix: bool = False,
    simplify: bool = False,
    progress: Any = None,
) -> dict[str, Profile]:
    """Per-node time of the prompt's call (``"prefill"``) and of the first decode step (``"decode"``).

    The calls :func:`generation_benchmark` times, on the same inputs, each profiled
    (:func:`explorer.runtimes.profile.profile`); a runtime with a loop of its own has none.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.runtimes.ort_runtime import OrtRuntime
    >>> calls = generation_profiles(load("zoo:llama"), OrtRuntime(), prompt_tokens=8, context=32, runs=1)
    >>> sorted(calls), max(calls["decode"].node_ms, key=calls["decode"].node_ms.get).startswith("/")
    (['decode', 'prefill'], True)
    """
    from explorer.runtimes.profile import profile

    if getattr(runtime, "generate", None) is not None:
        return {}
    spec, prefill_shapes, decode_shapes = generation_plan(
        graph, prompt_tokens, context, decode_steps=decode_steps
    )
    cached = decode_shapes[spec.past_inputs[0][0]][2]
    feeds = {
        "prefill": random_feeds(
            graph.model, prefill_shapes, seed=seed, sequence=prompt_tokens, past=0, spec=spec
        ),
        "decode": random_feeds(graph.model, decode_shapes, seed=seed + 1, sequence=1, past=cached, spec=spec),
    }
    shapes = {"prefill": prefill_shapes, "decode": decode_shapes}
    found: dict[str, Profile] = {}
    for call in ("prefill", "decode"):
        session = _prepared(graph, runtime, shapes[call], (fix, simplify), progress, [])
        found[call] = profile(session, feeds[call], runs=runs)
    return found

"""Honest latency: every runtime on the same inputs, warm-up then many runs, percentiles, agreement.

Measured as ``onnxruntime_perf_test`` measures (MLPerf's rules on query counts and run
durations are not followed): a session is prepared once (its creation, compile or tuning
time reported apart as ``prepare_s``), warm-up runs are discarded, then runs repeat until
both a minimum count and a minimum time are reached (a slow runtime stops at a maximum
time, with at least three runs). The distribution is kept (``times_ms``) and summarised as
median, p90, p99, min and IQR. Inputs come from the model's input types and shapes with a
fixed seed (:func:`explorer.onnx_adapter.inputs.random_feeds`, the project's one generator), or
are given. Every runtime's outputs are compared with the
first runtime's (:func:`explorer.core.compare.agreement`).

Examples
--------
>>> from explorer import load
>>> report = bench(load("zoo:mlp"), ["ort"], min_runs=5, min_seconds=0.0)
>>> row = report.to_dict()["results"][0]
>>> row["runtime"], row["runs"] >= 5, row["max_abs_err"]
('ort', True, 0.0)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from explorer.core.compare import agreement, max_abs_diff
from explorer.core.errors import UsageError
from explorer.isolation.worker import ProgressEvent
from explorer.onnx_adapter.adapter import onnx_model
from explorer.onnx_adapter.decoder import DecoderSpec, decoder_spec
from explorer.onnx_adapter.inputs import concrete_input_shapes, random_feeds
from explorer.onnx_adapter.model_files import worker_source
from explorer.onnx_adapter.ort_run import run_onnxruntime
from explorer.runtimes.base import PreparedSession, Runtime
from explorer.runtimes.generation import (
    CONTEXT,
    DECODE_STEPS,
    PROMPT_TOKENS,
    GenerationRun,
    LlmTiming,
    generation_benchmark,
)
from explorer.runtimes.registry import RUNTIME_NAMES, get_runtime

if TYPE_CHECKING:
    import pandas as pd

    from explorer.core.graph import ModelGraph

__all__ = [
    "BenchResult",
    "BenchReport",
    "bench",
    "latency_stats",
    "get_runtime",
    "RUNTIME_NAMES",
    "TVM_BUILD_KEYS",
    "QUANTIZERS",
    "rounding_floor",
]


TVM_BUILD_KEYS = (
    "tasks",
    "tasks_with_records",
    "task_schedules",
    "defaults_rejected",
    "records_rejected",
    "tuning_dir",
    "rpc_servers",
    "rpc_notes",
)
"""What a TVM result's JSON carries of its build: tasks, records, schedule sources, the default
schedules rejected for computing something else than the plain loops (and why), RPC servers."""


def latency_stats(times_ms: Sequence[float]) -> dict[str, float]:
    """Median, p90, p99, min and IQR (p75 - p25) of run times, in ms.

    Examples
    --------
    >>> latency_stats([1.0, 2.0, 3.0, 4.0])["median_ms"]
    2.5
    """
    times = np.asarray(times_ms, dtype=np.float64)
    if times.size == 0:
        return {k: float("nan") for k in ("median_ms", "p90_ms", "p99_ms", "min_ms", "iqr_ms")}
    p25, p50, p75, p90, p99 = np.percentile(times, [25, 50, 75, 90, 99])
    return {
        "median_ms": float(p50),
        "p90_ms": float(p90),
        "p99_ms": float(p99),
        "min_ms": float(times.min()),
        "iqr_ms": float(p75 - p25),
    }


@dataclass(frozen=True)
class BenchResult:
    """One runtime's measurement.

    Attributes
    ----------
    runtime : str
        Its name (``ort``, ``tvm``).
    label : str
        What tables and plots call it.
    tuned : bool
        Whether its code was tuned.
    median_ms, p90_ms, p99_ms, min_ms, iqr_ms : float
        The distribution of the timed runs.
    runs : int
        Timed runs (warm-up excluded).
    prepare_s : float
        Session creation, or import, compile and tuning, when it was first prepared.
    reused : bool
        The session was prepared before (this benchmark did not pay ``prepare_s``).
    threads : int
        Threads the runtime ran with.
    max_abs_err, max_rel_err : float
        Against the first runtime's outputs (0 for the first runtime).
    agrees : bool
        Within the dtype tolerances (:data:`explorer.core.compare.TOLERANCES`).
    times_ms : tuple of float
        Every timed run.
    info : dict
        What preparing found (versions, providers, target, compile time).
    llm : LlmTiming or None
        A decoder LLM's prefill and decode (:mod:`explorer.runtimes.generation`): then the
        latency fields above are the decode step's and ``times_ms`` every decode step.
    """

    runtime: str
    label: str
    tuned: bool
    median_ms: float
    p90_ms: float
    p99_ms: float
    min_ms: float
    iqr_ms: float
    runs: int
    prepare_s: float
    reused: bool
    threads: int
    max_abs_err: float
    max_rel_err: float
    agrees: bool
    times_ms: tuple[float, ...] = field(repr=False)
    info: Mapping[str, Any] = field(default_factory=dict, repr=False)
    llm: LlmTiming | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the CLI's keys (``runtime``, ``tuned``, ``median_ms``, ``p90_ms``, ``runs``,
        ``prepare_s``, ``max_abs_err``) and the rest; not the run times. A TVM build adds what
        :data:`TVM_BUILD_KEYS` it has (each task's schedule source; on RPC, the servers).

        Examples
        --------
        >>> from explorer import load
        >>> r = bench(load("zoo:mlp"), ["ort"], min_runs=3, min_seconds=0.0).results[0]
        >>> sorted(r.to_dict())[:4]
        ['agrees', 'iqr_ms', 'label', 'max_abs_err']
        """
        found = {key: self.info[key] for key in TVM_BUILD_KEYS if self.info.get(key) is not None}
        return {
            "runtime": self.runtime,
            "label": self.label,
            "tuned": self.tuned,
            "median_ms": round(self.median_ms, 4),
            "p90_ms": round(self.p90_ms, 4),
            "p99_ms": round(self.p99_ms, 4),
            "min_ms": round(self.min_ms, 4),
            "iqr_ms": round(self.iqr_ms, 4),
            "runs": self.runs,
            "prepare_s": round(self.prepare_s, 4),
            "reused": self.reused,
            "threads": self.threads,
            "max_abs_err": float(self.max_abs_err),
            "max_rel_err": float(self.max_rel_err),
            "agrees": self.agrees,
            **found,
            **({"llm": self.llm.to_dict()} if self.llm is not None else {}),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per timed run: ``runtime``, ``run``, ``ms`` (what a box or violin plot takes).

        Examples
        --------
        >>> from explorer import load
        >>> r = bench(load("zoo:mlp"), ["ort"], min_runs=3, min_seconds=0.0).results[0]
        >>> list(r.to_frame().columns)
        ['runtime', 'run', 'ms']
        """
        import pandas as pd

        return pd.DataFrame({"runtime": self.label, "run": range(len(self.times_ms)), "ms": self.times_ms})


@dataclass(frozen=True)
class BenchReport:
    """Every runtime's :class:`BenchResult` on one model, same inputs, same run.

    Attributes
    ----------
    results : tuple of BenchResult
        In the order the runtimes were given; errors are against the first.
    source : str
        The model.
    input_shapes : dict
        The shapes the inputs had.
    seed : int or None
        The seed of the generated inputs (None when inputs were given).
    skipped : tuple of (str, str)
        Runtimes not available here, and why.
    rounding_floor : tuple of float
        For a quantized model, per output: how far ONNX Runtime's own runs of it differ, its
        unoptimised QDQ graph against the reference (:func:`rounding_floor`); empty otherwise.
    llm : dict or None
        For a decoder LLM timed as it generates: its figures (``decoder``) and the shapes of its
        prompt and decode calls (``prefill_input_shapes``; ``input_shapes`` are the decode step's).
    """

    results: tuple[BenchResult, ...]
    source: str
    input_shapes: Mapping[str, Sequence[int]]
    seed: int | None
    skipped: tuple[tuple[str, str], ...] = ()
    rounding_floor: tuple[float, ...] = ()
    llm: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"results": [...], "source", "input_shapes", "seed", "skipped", "rounding_floor"}``.

        Examples
        --------
        >>> from explorer import load
        >>> sorted(bench(load("zoo:mlp"), ["ort"], min_runs=3, min_seconds=0.0).to_dict())
        ['input_shapes', 'results', 'rounding_floor', 'seed', 'skipped', 'source']
        """
        return {
            "results": [r.to_dict() for r in self.results],
            "source": self.source,
            "input_shapes": {k: list(v) for k, v in self.input_shapes.items()},
            "seed": self.seed,
            "skipped": [{"runtime": name, "why": why} for name, why in self.skipped],
            "rounding_floor": list(self.rounding_floor),
            **({"llm": dict(self.llm)} if self.llm is not None else {}),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per runtime (the table of :meth:`BenchResult.to_dict`).

        Examples
        --------
        >>> from explorer import load
        >>> bench(load("zoo:mlp"), ["ort"], min_runs=3, min_seconds=0.0).to_frame().shape[0]
        1
        """
        import pandas as pd

        return pd.DataFrame([r.to_dict() for r in self.results])

    def times_frame(self) -> pd.DataFrame:
        """Every timed run of every runtime, long form (``runtime``, ``run``, ``ms``).

        Examples
        --------
        >>> from explorer import load
        >>> len(bench(load("zoo:mlp"), ["ort"], min_runs=3, min_seconds=0.0).times_frame()) >= 3
        True
        """
        import pandas as pd

        return pd.concat([r.to_frame() for r in self.results], ignore_index=True)


def _why_not(runtime: Runtime) -> str:
    """Why a runtime is skipped: what is missing (a runtime that says: ONNX Runtime's provider,
    TVM's architecture, IREE's extra to install), else "not available here"."""
    return str(getattr(runtime, "missing", None) or "not available here")


BenchProgress = Callable[[str, ProgressEvent | None], object]
"""Called as ``progress(runtime_label, event)``: preparing, then timing each runtime."""


QUANTIZERS = ("QuantizeLinear", "DynamicQuantizeLinear")
"""Ops that round to integer steps (and ``QLinear*``): where correct runs of a model may differ by a step."""


def rounding_floor(
    graph: ModelGraph, feeds: Mapping[str, np.ndarray], reference: Sequence[np.ndarray]
) -> tuple[float, ...]:
    """How far two correct runs of a quantized model differ, per output (empty for float models).

    A quantizer rounds to integer steps: where two implementations sum in a different order,
    a value near a rounding boundary lands on the neighbouring step, and the difference grows
    through the layers after it. ONNX Runtime itself shows it: its unoptimised QDQ graph (float
    arithmetic between the quantizers) and its optimised one (fused int8 kernels) differ by
    that much. Measured here as the largest difference between ``reference`` and ONNX
    Runtime with optimisations off, on the same inputs.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.runtimes import random_feeds
    >>> g = load("zoo:mlp")
    >>> rounding_floor(g, random_feeds(g.model), [])
    ()
    """
    ops = {n.op_type for n in graph.model.graph.node}
    if not any(op in QUANTIZERS or op.startswith("QLinear") for op in ops):
        return ()
    unfused = run_onnxruntime(worker_source(graph), feeds, optimization="disabled")
    return tuple(max_abs_diff([r], [u]) for r, u in zip(reference, unfused, strict=False))


def bench(
    graph: ModelGraph,
    runtimes: Sequence[str | Runtime] = ("ort", "tvm"),
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    feeds: Mapping[str, np.ndarray] | None = None,
    seed: int = 0,
    warmup: int = 3,
    min_runs: int = 10,
    min_seconds: float = 1.0,
    max_seconds: float = 30.0,
    progress: BenchProgress | None = None,
    generation: bool | None = None,
    prompt_tokens: int | None = None,
    context: int | None = None,
    decode_steps: int = DECODE_STEPS,
    fix: bool = False,
    simplify: bool = False,
) -> BenchReport:
    """Prepare and time each runtime on the same inputs; compare their outputs with the first's.

    A decoder LLM (:func:`~explorer.onnx_adapter.decoder.decoder_spec`) is timed as it generates
    (:func:`~explorer.runtimes.generation.generation_benchmark`): its prompt, then tokens one at a
    time, every runtime's logits compared with the first's; each result has its ``llm``.

    Parameters
    ----------
    graph : ModelGraph
        A top-level ONNX graph.
    runtimes : sequence of str or Runtime
        Names (:data:`RUNTIME_NAMES`) or runtimes; those not available here are skipped
        and listed in ``skipped``.
    input_shapes : mapping, optional
        Shapes for dynamic inputs (default: 1 for batch-like dims, 32 for others).
    feeds : mapping, optional
        The inputs; by default generated from the model with ``seed``.
    seed : int
        Seed of the generated inputs.
    warmup, min_runs, min_seconds, max_seconds
        The measurement (see :func:`explorer.runtimes.sessions.time_session`).
    progress : callable, optional
        ``progress(runtime_label, event)``.
    generation : bool, optional
        Time a decoder LLM's generation (the default for a decoder when neither ``feeds`` nor
        ``input_shapes`` are given); False times one call, as for any model.
    prompt_tokens, context : int, optional
        The prompt's tokens and the context decode runs at (default 128 and 1024, or what the
        model's context allows).
    decode_steps : int
        Decode steps timed.
    fix, simplify : bool
        A decoder's generation only: ``bench --fix`` and ``--simplify`` for each call's shapes
        (:func:`~explorer.runtimes.generation.generation_benchmark`); for one call, the caller
        fixes the model first (:func:`~explorer.lower.import_fix.lower_with_fixes`).

    Returns
    -------
    BenchReport

    Examples
    --------
    >>> from explorer import load
    >>> report = bench(load("zoo:mlp"), ["ort", "tvm"], min_runs=3, min_seconds=0.0)
    >>> [r.agrees for r in report.results]
    [True, True]
    """
    onnx_model(graph, "bench")
    chosen = [get_runtime(r) if isinstance(r, str) else r for r in runtimes]
    for runtime in chosen:  # a user's mistake in a target: refused before any runtime runs
        if callable(check := getattr(runtime, "check_target", None)):
            check()
    spec = decoder_spec(graph.model, graph.model_path) if feeds is None and generation is not False else None
    if generation and spec is None:
        raise UsageError(f"{graph.source} is no decoder LLM: there is no generation to time")
    if spec is not None and (generation or not input_shapes):
        return _generation_report(
            graph,
            chosen,
            spec,
            prompt_tokens,
            context,
            decode_steps,
            seed=seed,
            progress=progress,
            fixes=(fix, simplify),
        )
    one_call = spec if spec is not None else decoder_spec(graph.model, graph.model_path)  # its config's sizes
    shapes = {k: list(v) for k, v in concrete_input_shapes(graph.model, input_shapes, spec=one_call).items()}
    given = feeds is not None
    inputs = dict(feeds) if given else random_feeds(graph.model, shapes, seed=seed)
    skipped = tuple((r.name, _why_not(r)) for r in chosen if not r.available())
    whole = tuple(  # a runtime that only ever runs a whole generation (onnxruntime-genai)
        (r.name, "it times a decoder LLM's generation, not one call")
        for r in chosen
        if r.available() and getattr(r, "generation_only", False)
    )
    skipped += whole
    chosen = [r for r in chosen if not getattr(r, "generation_only", False)]
    results: list[BenchResult] = []
    reference: list[np.ndarray] | None = None
    floor: tuple[float, ...] = ()
    for runtime in (r for r in chosen if r.available()):

        def forward(event: ProgressEvent, label: str = runtime.label) -> None:
            if progress is not None:
                progress(label, event)

        session: PreparedSession = runtime.prepare(graph, shapes, progress=forward)
        try:
            timed = session.time(
                inputs,
                warmup=warmup,
                min_runs=min_runs,
                min_seconds=min_seconds,
                max_seconds=max_seconds,
                progress=forward,
            )
        except Exception as err:  # a contrib op refusing the inputs' shapes (GroupQueryAttention): typed
            explain = getattr(runtime, "explain_run_error", None)
            refused = explain(err, graph, shapes, given=bool(input_shapes) or given) if explain else None
            if refused is None:
                raise
            raise refused from None
        outputs = list(timed["outputs"])
        if reference is None:
            reference = outputs
            floor = rounding_floor(graph, inputs, reference)
        agreed = agreement(reference, outputs, floor)
        stats = latency_stats(timed["times_ms"])
        results.append(
            BenchResult(
                runtime=runtime.name,
                label=runtime.label,
                tuned=runtime.tuned,
                runs=len(timed["times_ms"]),
                prepare_s=session.prepare_s,
                reused=bool(session.info.get("reused")),
                threads=int(session.info.get("threads", 0)),
                max_abs_err=agreed.max_abs_err,
                max_rel_err=agreed.max_rel_err,
                agrees=agreed.ok,
                times_ms=tuple(timed["times_ms"]),
                info=dict(session.info),
                **stats,
            )
        )
        if progress is not None:
            progress(runtime.label, None)
    return BenchReport(tuple(results), graph.source, shapes, None if given else seed, skipped, floor)


def _generation_report(
    graph: ModelGraph,
    runtimes: Sequence[str | Runtime],
    spec: DecoderSpec,
    prompt_tokens: int | None,
    context: int | None,
    decode_steps: int,
    *,
    seed: int,
    progress: BenchProgress | None,
    fixes: tuple[bool, bool] = (False, False),
) -> BenchReport:
    """Every runtime's generation loop on the same prompt and cache; logits compared with the first's."""
    context = context or min(CONTEXT, spec.context_length or CONTEXT)
    prompt_tokens = prompt_tokens or min(PROMPT_TOKENS, context // 2)
    chosen = [get_runtime(r) if isinstance(r, str) else r for r in runtimes]
    skipped = tuple((r.name, _why_not(r)) for r in chosen if not r.available())
    results: list[BenchResult] = []
    reference: list[np.ndarray] | None = None
    shapes: Mapping[str, Sequence[int]] = {}
    prefill_shapes: Mapping[str, Sequence[int]] = {}
    available = [r for r in chosen if r.available()]

    def generate(runtime: Runtime, run_graph: ModelGraph) -> GenerationRun:
        def forward(event: ProgressEvent, label: str = runtime.label) -> None:
            if progress is not None:
                progress(label, event)

        return generation_benchmark(
            graph,
            runtime,
            prompt_tokens=prompt_tokens,
            context=context,
            decode_steps=decode_steps,
            seed=seed,
            progress=forward,
            fix=fixes[0],
            simplify=fixes[1],
            run_graph=run_graph,
        )

    from explorer.lower.import_fix import rewrites_applied, rewritten

    runs = [generate(runtime, graph) for runtime in available]
    applied = [words for run in runs for words in run.info.get("fixes") or ()]
    wanted = rewrites_applied(applied)
    if wanted:  # a compiler ran the model rewritten (--fix): every runtime runs that graph
        run_graph = rewritten(graph, applied)
        for i, (runtime, run) in enumerate(zip(available, runs, strict=True)):
            if rewrites_applied(run.info.get("fixes") or ()) != wanted:
                again = generate(runtime, run_graph)
                words = [w for w in applied if rewrites_applied([w])]
                fixes_run = list(dict.fromkeys([*words, *(again.info.get("fixes") or ())]))
                runs[i] = dataclasses.replace(again, info={**again.info, "fixes": fixes_run})
    for runtime, run in zip(available, runs, strict=True):
        shapes, prefill_shapes = run.decode_shapes, run.prefill_shapes
        outputs = list(run.logits)
        if reference is None:
            reference = outputs
        agreed = agreement(reference[: len(outputs)], outputs[: len(reference)])  # what both have
        results.append(
            BenchResult(
                runtime=runtime.name,
                label=runtime.label,
                tuned=runtime.tuned,
                runs=len(run.decode_ms),
                prepare_s=run.prepare_s,
                reused=bool(run.info.get("reused")),
                threads=int(run.info.get("threads", 0)),
                max_abs_err=agreed.max_abs_err,
                max_rel_err=agreed.max_rel_err,
                agrees=agreed.ok,
                times_ms=run.decode_ms,
                info=dict(run.info),
                llm=run.timing,
                **latency_stats(run.decode_ms),
            )
        )
        if progress is not None:
            progress(runtime.label, None)
    llm = {
        "decoder": {k: v for k, v in spec.to_dict().items() if k not in ("past_inputs", "present_outputs")},
        "prefill_input_shapes": {k: list(v) for k, v in prefill_shapes.items()},
    }
    return BenchReport(tuple(results), graph.source, dict(shapes), seed, skipped, (), llm)

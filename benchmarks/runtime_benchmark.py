"""ONNX Runtime against TVM (untuned, tuned) and IREE on the zoo's CNNs and transformer, as ratios in one run.

For each model, in one process and on the same inputs:

- ``ort``: ONNX Runtime CPU at its default level (``all``), the baseline of every ratio;
- ``PyTorch eager``: the graph node by node as ``torch`` calls (``TorchEagerRuntime``, when
  PyTorch is installed; ``--no-eager`` leaves it out): what people run before compiling;
- ``tvm plain loops``: TVM Relax compiled for this CPU with the default pipeline, no schedule
  (``TvmRuntime(schedules="naive")``: every kernel the loop nest LegalizeOps wrote);
- ``tvm default schedules``: untuned, each kernel one unmeasured schedule from MetaSchedule's
  rules (``TvmRuntime()``: :mod:`explorer.lower.tvm.default_schedules`);
- ``tvm tuned``: the same, tuned with MetaSchedule for ``--tune-minutes`` (skipped at 0) into
  the database under ``--tuning-root`` (by default a new, empty one, so the figure is what
  that budget alone finds; give the same root again to apply it without tuning);
- ``tvm pre-tuned``: the records shipped for this CPU (``explorer/data/tvm_records``, made by
  ``benchmarks/pretune_zoo.py``) applied to an empty database, no tuning (skipped when
  none are shipped for this CPU, or with ``--no-pretuned``);
- ``IREE llvm-cpu``: IREE's MLIR compiler for this CPU, its VM module run by IREE's runtime
  (``IreeRuntime``, when the ``iree`` extra is installed; ``--no-iree`` leaves it out).

Each runtime is timed ``--repeat`` times (:func:`explorer.runtimes.bench`: warm-up, then
runs to a count and a time); the table shows the median of the medians and, for ONNX
Runtime, the spread of its medians across repeats ((max - min) / median: the issue's target
is under 5% on an idle machine). The transformer goes through the import's fix first
(fixed shapes and onnxsim), for both runtimes.

``--tasks`` prints every TVM build's tasks: where each schedule came from (a record, a default
schedule, plain loops), its share of the time and the GFLOP/s it reached.

Run: ``.venv/bin/python benchmarks/runtime_benchmark.py [--models resnet18,mobilenetv2,transformer]
[--tune-minutes 10] [--tuning-root DIR] [--repeat 3] [--profile] [--tasks] [--no-naive] [--no-eager]
[--no-iree]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

from explorer import load
from explorer.lower import relax_import
from explorer.lower.tvm.tvm_records import shipped_records
from explorer.onnx_adapter.inputs import concrete_input_shapes
from explorer.runtimes import IreeRuntime, OrtRuntime, TorchEagerRuntime, TvmRuntime, bench
from explorer.runtimes.environment import environment
from explorer.runtimes.profile import profile

__all__ = ["main", "model_graph"]


def model_graph(name: str) -> object:
    """The zoo model, after the Relax import's fixes when it needs them (the same graph for both runtimes)."""
    graph = load(f"zoo:{name}")
    result = relax_import(graph, concrete_input_shapes(graph.model)).fixed()
    return result.source if result.ok else graph


def _explain(graph: object, runtimes: list, rows: list[dict]) -> None:
    """Per runtime: kernels launched, bytes written between them, achieved GFLOP/s, and the
    slowest nodes against the roofline (why they are slow: how far below the roof, and
    whether memory or compute bounds them)."""
    from explorer.core.tensors import format_bytes
    from explorer.runtimes import random_feeds
    from explorer.runtimes.cost_model import node_costs
    from explorer.runtimes.machine import measure_peak
    from explorer.runtimes.roofline import roofline

    shapes = concrete_input_shapes(graph.model)
    feeds = random_feeds(graph.model, shapes)
    costs, peak = node_costs(graph, shapes), measure_peak()
    print(
        f"machine peak: {peak.gflops:.0f} GFLOP/s, {peak.gbps:.1f} GB/s (ridge {peak.ridge:.1f} FLOP/B); "
        f"model: {costs.total_flops / 1e9:.3f} GFLOP per inference"
    )
    for runtime, row in zip(runtimes, rows, strict=False):
        prof = profile(runtime.prepare(graph), feeds, runs=5)
        line = roofline(prof, costs, peak)
        written = format_bytes(int(prof.written_bytes)) if prof.written_bytes is not None else "?"
        row.update(
            launches=prof.launches,
            written_bytes=prof.written_bytes,
            coverage=prof.coverage,
            achieved_gflops=round(line.achieved_gflops, 2),
        )
        print(
            f"{runtime.label}: {prof.launches:.0f} kernels, {written} written between kernels, "
            f"{line.achieved_gflops:.1f} GFLOP/s on the nodes with FLOPs "
            f"({line.achieved_gflops / peak.gflops:.0%} of peak), overlay {prof.coverage:.1%}"
        )
        frame = line.to_frame().head(6)
        for p in frame.itertuples():
            print(
                f"    {p.node[:48]:<48} {p.op_type:<14} {p.ms:8.3f} ms {p.gflops:7.1f} GFLOP/s "
                f"{p.efficiency:5.0%} of roof ({p.bound}-bound, {p.intensity:.1f} FLOP/B)"
            )


def _tasks(graph: object, runtimes: list) -> None:
    """Per TVM build: the share of the time per schedule source, then the slowest tasks."""
    from explorer.runtimes import random_feeds
    from explorer.runtimes.task_coverage import SCHEDULE_WORDS, task_coverage

    feeds = random_feeds(graph.model, concrete_input_shapes(graph.model))
    for runtime in runtimes:
        session = runtime.prepare(graph)
        coverage = task_coverage(session, profile(session, feeds, runs=5))
        shares = ", ".join(f"{SCHEDULE_WORDS[k]} {v:.0%}" for k, v in coverage.share_by_schedule().items())
        print(f"{runtime.label}: {len(coverage.tasks)} tasks; time in {shares}")
        for t in coverage.tasks[:8]:
            rate = "" if t.gflops is None else f"{t.gflops:7.1f} GFLOP/s"
            words = SCHEDULE_WORDS[t.schedule]
            print(f"    {t.task[:52]:<52} {words:<26} {t.ms:8.3f} ms {t.share:5.0%} {rate}")


_last_shown = [0.0]


def _progress(label: str, event: object) -> None:
    """Tuning and timing progress, a line every 30 s at most."""
    now = time.perf_counter()
    if now - _last_shown[0] > 30:
        _last_shown[0] = now
        print(f"  {label}: {getattr(event, 'message', event)}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table (and JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18,mobilenetv2,transformer")
    parser.add_argument("--tune-minutes", type=float, default=0.0)
    parser.add_argument("--tuning-root", help="the tuned runtime's database (default: a new empty one)")
    parser.add_argument("--no-pretuned", action="store_true", help="leave out the shipped records")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--min-seconds", type=float, default=2.0)
    parser.add_argument("--max-seconds", type=float, default=30.0)
    parser.add_argument("--profile", action="store_true", help="also print the slowest TVM kernels")
    parser.add_argument("--tasks", action="store_true", help="print each TVM build's tasks and schedules")
    parser.add_argument("--no-naive", action="store_true", help="leave out TVM's plain loops")
    parser.add_argument("--no-eager", action="store_true", help="leave out PyTorch eager")
    parser.add_argument("--no-iree", action="store_true", help="leave out IREE")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    print(environment())
    rows = []
    tuning_root = args.tuning_root or tempfile.mkdtemp(prefix="tvm-tuning-")
    pretuned = not args.no_pretuned and shipped_records() is not None
    for name in args.models.split(","):
        graph = model_graph(name)
        eager = TorchEagerRuntime()
        runtimes = [
            OrtRuntime(),
            *([] if args.no_eager or not eager.available() else [eager]),
            *([] if args.no_naive else [TvmRuntime(schedules="naive")]),
            TvmRuntime(),
        ]
        if args.tune_minutes > 0:
            runtimes.append(TvmRuntime(tune_minutes=args.tune_minutes, tuning_root=tuning_root))
        if pretuned:  # an empty database each time: the shipped records alone
            runtimes.append(TvmRuntime(pretuned=True, tuning_root=tempfile.mkdtemp(prefix="tvm-shipped-")))
        iree = IreeRuntime()
        if not args.no_iree and iree.available():  # iree-compile's defaults, then with the CPU flags
            runtimes += [IreeRuntime(flags="default"), iree]
        medians: dict[str, list[float]] = {}
        prepare: dict[str, float] = {}
        agrees: dict[str, bool] = {}
        started = time.perf_counter()
        for _ in range(args.repeat):
            report = bench(
                graph,
                runtimes,
                min_seconds=args.min_seconds,
                max_seconds=args.max_seconds,
                progress=_progress,
            )
            for result in report.results:
                medians.setdefault(result.label, []).append(result.median_ms)
                prepare.setdefault(result.label, result.prepare_s)  # the first run's: not reused
                agrees[result.label] = result.agrees

        def spread_of(values: list[float]) -> float:  # the repeats' medians: (max - min) / median
            return (max(values) - min(values)) / statistics.median(values)

        base = statistics.median(medians[runtimes[0].label])
        spread = spread_of(medians[runtimes[0].label])
        for label, values in medians.items():
            median = statistics.median(values)
            rows.append(
                {
                    "model": name,
                    "runtime": label,
                    "median_ms": round(median, 3),
                    "ratio_vs_ort": round(median / base, 2),
                    "prepare_s": round(prepare[label], 2),
                    "agrees": agrees[label],
                    "ort_spread": round(spread, 4),
                    "spread": round(spread_of(values), 4),
                }
            )
        print(f"\n{name} ({time.perf_counter() - started:.0f} s; ONNX Runtime's medians spread {spread:.1%})")
        print(f"{'runtime':<36} {'median_ms':>10} {'x ORT':>7} {'prepare_s':>9} {'spread':>7}  agrees")
        for row in rows[-len(medians) :]:
            print(
                f"{row['runtime']:<36} {row['median_ms']:>10.2f} {row['ratio_vs_ort']:>7.2f} "
                f"{row['prepare_s']:>9.2f} {row['spread']:>7.1%}  {'yes' if row['agrees'] else 'NO'}"
            )
        if args.profile:
            _explain(graph, runtimes, rows[-len(medians) :])
        if args.tasks:
            _tasks(graph, [r for r in runtimes if isinstance(r, TvmRuntime)])
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

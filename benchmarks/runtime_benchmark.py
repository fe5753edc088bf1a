"""ONNX Runtime against TVM (untuned, tuned) on the zoo's CNNs and transformer, as ratios in the same run.

For each model, in one process and on the same inputs:

- ``ort``: ONNX Runtime CPU at its default level (``all``), the baseline of every ratio;
- ``tvm``: TVM Relax compiled for this CPU with the default pipeline, untuned;
- ``tvm tuned``: the same, tuned with MetaSchedule for ``--tune-minutes`` (skipped at 0; the
  database is per target and shared, so a second run applies it without tuning).

Each runtime is timed ``--repeat`` times (:func:`explorer.runtimes.bench`: warm-up, then
runs to a count and a time); the table shows the median of the medians and, for ONNX
Runtime, the spread of its medians across repeats ((max - min) / median: the issue's target
is under 5% on an idle machine). The transformer goes through the import's fix first
(fixed shapes and onnxsim), for both runtimes.

Run: ``.venv/bin/python benchmarks/runtime_benchmark.py [--models resnet18,mobilenetv2,transformer]
[--tune-minutes 10] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

from explorer import load
from explorer.lower import relax_import
from explorer.runtimes import OrtRuntime, TvmRuntime, bench
from explorer.runtimes.inputs import concrete_input_shapes
from explorer.runtimes.profile import profile

__all__ = ["main", "model_graph"]


def model_graph(name: str) -> object:
    """The zoo model, after the Relax import's fixes when it needs them (the same graph for both runtimes)."""
    graph = load(f"zoo:{name}")
    result = relax_import(graph, concrete_input_shapes(graph.model)).fixed()
    return result.source if result.ok else graph


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table (and JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18,mobilenetv2,transformer")
    parser.add_argument("--tune-minutes", type=float, default=0.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--min-seconds", type=float, default=2.0)
    parser.add_argument("--max-seconds", type=float, default=30.0)
    parser.add_argument("--profile", action="store_true", help="also print the slowest TVM kernels")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    machine = platform.processor() or platform.machine()
    print(f"{machine}, {os.cpu_count()} cores, python {sys.version.split()[0]}")
    rows = []
    for name in args.models.split(","):
        graph = model_graph(name)
        runtimes = [OrtRuntime(), TvmRuntime()]
        if args.tune_minutes > 0:
            runtimes.append(TvmRuntime(tune_minutes=args.tune_minutes))
        medians: dict[str, list[float]] = {}
        prepare: dict[str, float] = {}
        agrees: dict[str, bool] = {}
        started = time.perf_counter()
        for _ in range(args.repeat):
            report = bench(graph, runtimes, min_seconds=args.min_seconds, max_seconds=args.max_seconds)
            for result in report.results:
                medians.setdefault(result.label, []).append(result.median_ms)
                prepare.setdefault(result.label, result.prepare_s)  # the first run's: not reused
                agrees[result.label] = result.agrees
        base = statistics.median(medians[runtimes[0].label])
        spread = (max(medians[runtimes[0].label]) - min(medians[runtimes[0].label])) / base
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
                }
            )
        print(f"\n{name} ({time.perf_counter() - started:.0f} s; ONNX Runtime's medians spread {spread:.1%})")
        print(f"{'runtime':<36} {'median_ms':>10} {'x ORT':>7} {'prepare_s':>9}  agrees")
        for row in rows[-len(medians) :]:
            print(
                f"{row['runtime']:<36} {row['median_ms']:>10.2f} {row['ratio_vs_ort']:>7.2f} "
                f"{row['prepare_s']:>9.2f}  {'yes' if row['agrees'] else 'NO'}"
            )
        if args.profile:
            tvm = runtimes[-1].prepare(graph)
            from explorer.runtimes import random_feeds

            prof = profile(tvm, random_feeds(graph.model, concrete_input_shapes(graph.model)), runs=1)
            print(f"slowest kernels of {runtimes[-1].label} (coverage {prof.coverage:.1%}):")
            print(prof.to_frame().head(6).to_string(index=False))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

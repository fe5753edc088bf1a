"""How long the targets view takes: support checks, partitions and coverage against loading the model.

For each model, saved once to ``--workdir`` (default ``build/bench-models``), in one run:

- ``explorer.load(path)`` (the baseline: what opening the model costs);
- per target (``ort-cpu``, ``nnapi``, ``coreml-mlprogram``, ``qnn-htp`` and, unless
  ``--no-tvm``, ``tvm-llvm``): ``partition(graph, target)`` (node facts, the target's check,
  the partitioning, device transitions), the first call and again (tables and the
  kernel registry are read once per process);
- ``coverage(graph, those targets)`` (also the cost model's FLOPs, shapes re-inferred with
  fixed inputs).

Models: ``resnet18`` (46 MB, 69 nodes) and ``transformer`` (``zoo.build("transformer",
layers=123)``: 9,974 ONNX nodes, 392 MB of weights). Ratios are against ``explorer.load``
of the same file in the same run.

Run: ``.venv/bin/python benchmarks/coverage_benchmark.py`` (``--models resnet18`` for the
small one only; ``--json out.json`` to keep the figures).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from explorer import load, zoo  # noqa: E402
from explorer.targets import coverage, get_target, partition  # noqa: E402

MODELS = {
    "resnet18": lambda: zoo.build("resnet18"),
    "transformer": lambda: zoo.build("transformer", layers=123),
}
TARGETS = ("ort-cpu", "nnapi", "coreml-mlprogram", "qnn-htp", "tvm-llvm")


def _saved(name: str, folder: Path) -> Path:
    path = folder / f"coverage-{name}.onnx"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        onnx.save(MODELS[name](), path)
    return path


def _timed(fn):
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def measure(name: str, folder: Path, targets: list[str]) -> dict:
    """Time load, each target's partitioning (first and again) and the whole coverage of one model."""
    path = _saved(name, folder)
    load_s, graph = _timed(lambda: load(path))
    row: dict = {"model": name, "nodes": len(graph.op_nodes()), "load_s": round(load_s, 3), "targets": {}}
    print(f"{name}: {row['nodes']} nodes, explorer.load {load_s:.2f} s", flush=True)
    for target in targets:
        first, p = _timed(lambda t=target: partition(graph, get_target(t)))
        again, _ = _timed(lambda t=target: partition(graph, get_target(t)))
        row["targets"][target] = {
            "first_s": round(first, 3),
            "again_s": round(again, 3),
            "again_vs_load": round(again / load_s, 3),
            "partitions": p.partition_count,
            "coverage": round(p.coverage, 4),
        }
        print(
            f"  {target:<17} first {first:6.2f} s  again {again:6.2f} s  ({again / load_s:5.2f}x load)  "
            f"{p.partition_count} partitions, coverage {p.coverage:.1%}",
            flush=True,
        )
    whole, _ = _timed(lambda: coverage(graph, targets))
    row["coverage_s"] = round(whole, 3)
    row["coverage_vs_load"] = round(whole / load_s, 3)
    print(f"  coverage(all of them) {whole:.2f} s ({whole / load_s:.2f}x load)", flush=True)
    return row


def main() -> None:
    """Run the benchmark (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated: resnet18,transformer")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench-models")
    parser.add_argument("--no-tvm", action="store_true", help="leave tvm-llvm out (its import attempts)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    targets = [t for t in TARGETS if not (args.no_tvm and t == "tvm-llvm")]
    rows = [measure(name, args.workdir, targets) for name in args.models.split(",")]
    if args.json:
        args.json.write_text(json.dumps({"machine": platform.platform(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

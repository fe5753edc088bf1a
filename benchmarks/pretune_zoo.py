"""Tune the zoo's models with MetaSchedule and ship the best records for this CPU (TopHub-style).

For each model (the same graph the runtime benchmark times: the Relax import's fixes
applied), TVM tunes for ``--minutes`` into one database (an empty one, or ``--work-dir``'s);
then the best record of every task goes to
``explorer/data/tvm_records/<records_key>/`` (gzipped MetaSchedule JSON files and a
``manifest.json``: TVM version, target, CPU, date, budget, command). ``TvmRuntime(pretuned=True)``
and ``onnx-explorer bench --pretuned`` apply them.

Run: ``.venv/bin/python benchmarks/pretune_zoo.py [--models resnet18,mobilenetv2,transformer]
[--minutes 10] [--work-dir DIR] [--export-only] [--from-shipped] [--every-task] [--target TARGET]``.
``--from-shipped`` seeds the database with the records shipped now, so a longer budget for one
model builds on them and the export keeps every model's; ``--every-task`` gives every task
without a record its first round of trials as well, so that no kernel is shipped untuned.
``--export-only`` writes what ``--work-dir`` (a tuning root, e.g. the runtime benchmark's
``--tuning-root``) holds.
``--target 'llvm -mcpu=haswell -num-cores=2'`` tunes AVX2 code on two threads (on any x86 CPU
with AVX2) for the ``llvm-x86_64-avx2`` records, whatever the widest vector unit here is.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from runtime_benchmark import model_graph

from explorer.lower.tvm.relax_tuning import tuning_dir
from explorer.lower.tvm.tuning_log import forget_models
from explorer.lower.tvm.tvm_records import MANIFEST, RECORDS_ROOT, export_records, records_key
from explorer.runtimes import TvmRuntime

__all__ = ["main"]


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class _Progress:
    """Tuning progress, a line every 30 s at most."""

    def __init__(self, name: str) -> None:
        self.name, self.shown = name, 0.0

    def __call__(self, event: object) -> None:
        if time.perf_counter() - self.shown > 30:
            self.shown = time.perf_counter()
            print(f"  {self.name}: {getattr(event, 'message', event)}", flush=True)


def _history(before: dict) -> list[str]:
    """How the records a run tuned on from were made: the earlier runs' notes and commands."""
    earlier = [*before.get("history", ()), *([before["note"]] if before.get("note") else [])]
    if before.get("command"):
        cpu = before.get("cpu", "?")
        earlier.append(f"{before.get('minutes')} min in all until: {before['command']} ({cpu})")
    return earlier


def main(argv: list[str] | None = None) -> int:
    """Tune (unless ``--export-only``) and export the records."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18,mobilenetv2,transformer")
    parser.add_argument("--minutes", type=float, default=10.0, help="tuning budget per model")
    parser.add_argument("--work-dir", help="the tuning root (default: a new, empty one)")
    parser.add_argument("--export-only", action="store_true", help="export --work-dir's records, no tuning")
    parser.add_argument(
        "--from-shipped", action="store_true", help="start from the records shipped now (tune on from them)"
    )
    parser.add_argument(
        "--every-task",
        action="store_true",
        help="every task without a record gets its first round of trials too (no kernel shipped untuned)",
    )
    parser.add_argument("--out", help=f"where to write (default: {RECORDS_ROOT}/<records key>)")
    parser.add_argument(
        "--target",
        default="llvm",
        help="what to tune for (default: this CPU); 'llvm -mcpu=haswell -num-cores=2' tunes AVX2 code on two "
        "threads on any x86 CPU that has AVX2, for the llvm-x86_64-avx2 records",
    )
    args = parser.parse_args(argv)
    if args.export_only and not args.work_dir:
        parser.error("--export-only needs --work-dir")
    root = args.work_dir or tempfile.mkdtemp(prefix="tvm-pretune-")
    out = Path(args.out) if args.out else RECORDS_ROOT / records_key(args.target)
    command = "python benchmarks/pretune_zoo.py " + " ".join(argv if argv is not None else sys.argv[1:])
    where = _cpu_name() if args.target == "llvm" else f"{_cpu_name()}, code built as {args.target}"
    models: dict[str, dict[str, object]] = {}
    if (out / MANIFEST).is_file():  # how the records there were made: this run adds to it
        models.update(json.loads((out / MANIFEST).read_text()).get("models", {}))
    built_for = "llvm"
    for name in args.models.split(","):
        runtime = TvmRuntime(
            args.target,
            tune_minutes=args.minutes,
            tuning_root=root,
            pretuned=args.from_shipped,
            tune_every_task=args.every_task,
        )
        if args.export_only:
            models.setdefault(name, {"minutes": args.minutes})
            continue
        started = time.perf_counter()
        forget_models(tuning_dir(args.target, root))  # tune on, whatever budget the last run had
        session = runtime.prepare(model_graph(name), progress=_Progress(name))
        info = session.info
        built_for = str(info.get("target", built_for))
        before = models.get(name, {})
        continued = args.from_shipped or bool(args.work_dir)  # tuning on from records made before
        models[name] = {
            "minutes": args.minutes + (float(before.get("minutes", 0)) if continued else 0.0),
            "trials_run": info.get("trials_run"),
            "tasks": info.get("tasks"),
            "tasks_tuned": sum(1 for p in info.get("plan") or () if p["tuned"]),
            "tasks_with_records": info.get("tasks_with_records"),
            "tune_s": round(float(info.get("tune_s") or 0.0), 1),
            "threads": info.get("threads"),  # what the measurements ran on (TVM's pool in the worker)
            "cpu": where,
            "command": command,
        }
        if continued and _history(before):
            models[name]["history"] = _history(before)
        print(f"{name}: {models[name]} ({time.perf_counter() - started:.0f} s)", flush=True)
    key = records_key(args.target)
    import tvm

    database = tuning_dir(args.target, root)
    manifest = {
        "id": f"{key}-{datetime.datetime.now(datetime.timezone.utc):%Y%m%d%H%M}",
        "key": key,
        "tvm": tvm.__version__,
        "target": built_for,
        "cpu": where,
        "created": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}",
        "command": command,
        "models": models,
    }
    count = export_records(database, out, manifest)
    print(f"{count} records (the best of each task) -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

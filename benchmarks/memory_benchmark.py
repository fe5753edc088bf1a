"""Peak memory of each command over the model's size, on models with weights in external files.

Issue #39's bound: every command either stays within 1.5x the model's size on disk, or refuses in
under 2 s (with the figures and what to do). For each model and each command below, the command
runs as a user runs it (``onnx-explorer ...`` in a fresh process) while the summed resident memory
of its process tree (the CLI and its worker, :class:`explorer.isolation.process_memory.ProcessTreeSampler`)
is read every 50 ms. Each row prints:

- ``peak_gib``: the tree's peak RSS; ``x_size``: that over the model's size (model file and
  external data), the figure the bound is on;
- ``base_gib``: the baseline, measured in the same run: the same command on a tiny model of the
  same form (``tiny``: two 64x64 layers), i.e. the processes and libraries with no weights to
  speak of (TVM imports torch: about 0.5 GB before any model); ``x_net``: (peak - base) over the
  model's size, the memory the weights cost;
- ``x_anon``: the same for anonymous memory only (resident less file-backed: a weights file
  mapped read-only is page cache the kernel drops and reads again under pressure, so this is what
  the machine must hold; the verdict stays on ``x_net``);
- ``seconds`` and ``exit``: wall time and exit code (3: refused, or a model the runtime cannot take);
- ``verdict``: ``ok`` (exit 0 and ``x_net`` within 1.5x: the bound is on what the weights cost,
  not on the libraries a 0.5 GB model cannot amortise), ``refused`` (exit 3 in under 2 s, the reason printed),
  or ``OVER`` / ``SLOW REFUSAL`` / ``FAILED``.

Models: ``3gib`` (:func:`explorer.zoo.write_external_chain` at its defaults: three 16384x16384
float32 MatMuls, a sparse file) and ``0.5gb`` (three 6400x6400 layers of random weights, 0.49 GB).
A command is stopped when its tree passes ``--kill-gib`` (default 16) or ``--timeout`` seconds.

Run: ``.venv/bin/python benchmarks/memory_benchmark.py [--models 3gib 0.5gb] [--only bench-tvm ...]
[--json]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere: explorer/ is beside benchmarks/
    sys.path.insert(0, str(ROOT))

from explorer import zoo  # noqa: E402
from explorer.isolation.process_memory import tree_memory  # noqa: E402

__all__ = ["COMMANDS", "MODELS", "Row", "measure", "main"]

GIB = 2**30
BOUND = 1.5
REFUSAL_S = 2.0

MODELS = {
    "3gib": {"hidden": 16384, "layers": 3, "fill": "sparse"},
    "0.5gb": {"hidden": 6400, "layers": 3, "fill": "random"},
}
BASELINE_MODEL = {"hidden": 64, "layers": 2, "fill": "random"}

_BENCH = ["--min-runs", "1", "--min-seconds", "0", "--warmup", "0"]
COMMANDS: dict[str, list[str]] = {
    "info": ["info", "MODEL"],
    "passes": ["passes", "MODEL", "--pipeline", "ort:extended", "-o", "OUT/passes.onnx", "--no-verify"],
    "lower-tvm": ["lower", "MODEL", "--input-shape", "input=1,HIDDEN"],
    "lower-iree": ["lower", "MODEL", "--compiler", "iree", "--input-shape", "input=1,HIDDEN"],
    "bench-ort": ["bench", "MODEL", "--runtime", "ort", "--input-shape", "input=1,HIDDEN", *_BENCH],
    "bench-tvm": ["bench", "MODEL", "--runtime", "tvm", "--input-shape", "input=1,HIDDEN", *_BENCH],
    "bench-iree": ["bench", "MODEL", "--runtime", "iree", "--input-shape", "input=1,HIDDEN", *_BENCH],
    "bench-reference": [
        "bench",
        "MODEL",
        "--runtime",
        "onnx-reference",
        "--input-shape",
        "input=1,HIDDEN",
        *_BENCH,
    ],
    "coverage-iree": ["coverage", "MODEL", "--target", "iree-llvm-cpu", "--input-shape", "input=1,HIDDEN"],
    "coverage-htp": ["coverage", "MODEL", "--target", "qnn-htp"],
}
"""Name -> the command's words (``MODEL``, ``OUT`` and ``HIDDEN`` are filled in)."""


@dataclass(frozen=True)
class Row:
    """One command on one model."""

    model: str
    command: str
    size_gib: float
    peak_gib: float
    x_size: float
    base_gib: float
    x_net: float
    x_anon: float
    seconds: float
    exit: int
    verdict: str
    said: str


def _peak(words: list[str], kill_bytes: int, timeout: float) -> tuple[int, int, float, int, str]:
    """Run ``onnx-explorer WORDS``; return (peak tree RSS, peak anonymous, seconds, exit code, last
    stderr line)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "explorer.cli", *words],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak, anon, stopped = 0, 0, ""
    lines: list[str] = []
    reader = _drain(process, lines)
    while process.poll() is None:
        now = tree_memory(process.pid)
        peak, anon = max(peak, now.rss_bytes), max(anon, now.anonymous_bytes)
        if peak > kill_bytes or time.perf_counter() - started > timeout:
            stopped = (
                f"stopped by the benchmark at {peak / GIB:.1f} GiB / {time.perf_counter() - started:.0f} s"
            )
            for child in psutil.Process(process.pid).children(recursive=True):
                child.kill()
            process.kill()
        time.sleep(0.05)
    reader.join()
    seconds = time.perf_counter() - started
    return peak, anon, seconds, process.returncode, stopped or (lines[-1].strip() if lines else "")


def _drain(process: subprocess.Popen[str], lines: list[str]) -> object:
    import threading

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            if line.strip():
                lines.append(line)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def _verdict(x_size: float, seconds: float, code: int) -> str:
    if code == 0:
        return "ok" if x_size <= BOUND else "OVER"
    if code == 3:
        return "refused" if seconds < REFUSAL_S else "SLOW REFUSAL"
    return "FAILED"


def _run(spec: dict, name: str, command: str, folder: Path, kill_gib: float, timeout: float) -> tuple:
    """Write the model ``name`` (once) and run ``command`` on it: (size, peak, seconds, exit, said)."""
    path = folder / name / "model.onnx"
    if not path.exists():
        zoo.write_external_chain(path.parent, **spec)
    size = sum(p.stat().st_size for p in path.parent.iterdir())
    out = folder / "out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    words = [
        w.replace("MODEL", str(path)).replace("OUT", str(out)).replace("HIDDEN", str(spec["hidden"]))
        for w in COMMANDS[command]
    ]
    peak, anon, seconds, code, said = _peak(words, int(kill_gib * GIB), timeout)
    shutil.rmtree(out, ignore_errors=True)
    return size, peak, anon, seconds, code, said


def measure(model: str, command: str, folder: Path, kill_gib: float, timeout: float) -> Row:
    """Run one command on the baseline model and on ``model`` (written into ``folder`` if missing)."""
    _, base, base_anon, _, _, _ = _run(BASELINE_MODEL, "tiny", command, folder, kill_gib, timeout)
    size, peak, anon, seconds, code, said = _run(MODELS[model], model, command, folder, kill_gib, timeout)
    x_size = peak / size
    return Row(
        model, command, size / GIB, peak / GIB, x_size, base / GIB, max(0, peak - base) / size,
        max(0, anon - base_anon) / size, seconds, code, _verdict(max(0, peak - base) / size, seconds, code),
        said[:300],
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table (or ``--json``); exit 1 when a row is over the bound."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--only", nargs="+", default=list(COMMANDS), choices=list(COMMANDS))
    parser.add_argument("--kill-gib", type=float, default=16.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument(
        "--folder", type=Path, default=None, help="where the models are written (a temp folder)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    folder = args.folder or Path(tempfile.mkdtemp(prefix="memory-benchmark-"))
    folder.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    if not args.json:
        print(f"bound: {BOUND}x the model's size, or a refusal in under {REFUSAL_S:g} s")
        print(
            f"{'model':6} {'command':14} {'size':>6} {'peak':>6} {'x_size':>6} {'base':>6} {'x_net':>6} "
            f"{'x_anon':>6} "
            f"{'s':>6} exit verdict"
        )
    try:
        for model in args.models:
            for command in args.only:
                row = measure(model, command, folder, args.kill_gib, args.timeout)
                rows.append(row)
                if not args.json:
                    print(
                        f"{row.model:6} {row.command:14} {row.size_gib:6.2f} {row.peak_gib:6.2f} "
                        f"{row.x_size:6.2f} {row.base_gib:6.2f} {row.x_net:6.2f} {row.x_anon:6.2f} "
                        f"{row.seconds:6.1f} "
                        f"{row.exit:4} {row.verdict}" + (f"  ({row.said})" if row.exit else ""),
                        flush=True,
                    )
    except KeyboardInterrupt:
        print("interrupted: the rows so far", file=sys.stderr)
    finally:
        if args.folder is None:
            shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        print(json.dumps({"bound": BOUND, "rows": [asdict(r) for r in rows]}, indent=1))
    return 1 if any(r.verdict not in ("ok", "refused") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Opening a model, whatever its weights weigh: explorer.load and file -> figure against onnx.load.

For three models, each saved once to a cache folder (``--workdir``, default
``build/bench-models``):

- ``8 MB``: ``zoo.build("transformer", layers=123, hidden=32)`` (9,974 nodes; the
  old performance rows, weightless by today's standards);
- ``344 MB``: ``zoo.build("transformer", layers=108)`` at its default hidden size
  (8,759 nodes, weights inside the file);
- ``3 GiB``: :func:`explorer.zoo.write_external_chain` (3 MatMuls whose 1 GiB
  weights live in an external-data file, random values),

this measures, in one run and each in a fresh child process (imports and the
worker warmed up first, as in a notebook that already opened a model):

- ``onnx.load(path, load_external_data=False)`` and ``onnx.load(path)`` (the baselines);
- ``explorer.load(path)`` (parsing, external-data checks, shape inference in the
  worker on a weight-stripped copy, graph building);
- ``file -> figure``: load, :func:`explorer.views.layout.auto_collapse`, ``layered`` and
  :func:`explorer.views.figures.graph_figure`, as ``GraphView`` opens a model (layout cache cleared);
- ``info``: ``onnx-explorer info PATH --json`` as a command, from process start;
- peak memory of each (resident set of the process and its worker, sampled every 5 ms);
- ``pipeline step``: on the 344 MB model, one ``run_pipeline`` step of ``ort:basic``
  (which rewrites the model), with the step's wall time split into the pass itself
  (its worker round trip: ``PassResult.elapsed``) and the overhead around it (loading
  its output, shape inference, the diff; verification off), against ``onnx.load``.

Ratios are against ``onnx.load`` of the same file, measured in the same run.

The real-size set (``--real``): today's PyTorch exporter's models at their real sizes
(:func:`explorer.zoo.torch_exports.export` with ``size="full"``: a BERT-base encoder, a GPT-2-small
decoder, ConvNeXt-T, EfficientNet-B0; exported once into real_exports_benchmark.py's cache,
``$ONNX_EXPLORER_CACHE/real-exports``; skipped, with a
message, where torch is not installed). For each, in a fresh process whose worker is started
and warm (as in a notebook that opened a model before), the peak memory (PSS, sampled every
5 ms) of this process (the kernel) and of its worker, each and summed, while it:

- ``onnx.load(path)`` (the baseline: the file parsed once);
- opens it as a notebook does: ``GraphView(path)`` (load, shape inference in the worker,
  summary, layout, figure, the widgets).

Each figure is the peak minus what the process (or the worker) held before opening; the
ratio is to the file's size. The Jupyter server is not in them (not ours: it holds the
notebook, not the model).

Run: ``.venv/bin/python benchmarks/load_benchmark.py`` (``--help`` for options;
``--models 8MB,344MB`` to skip the 3 GiB model; writing it the first time takes
about 10 s and 3 GiB of disk; ``--models none --real bert_encoder`` for one real model only).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

__all__ = ["main", "PeakMemory"]

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("8MB", "344MB", "3GiB")
REAL = ("bert_encoder", "gpt2_decoder", "convnext", "efficientnet")
MEMORY_PHASES = ("onnx.load", "GraphView")


class PeakMemory:
    """Samples the resident memory of a process and its children; ``peak`` is the largest sum seen."""

    def __init__(self, pid: int, interval: float = 0.005) -> None:
        self.process = psutil.Process(pid)
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> int:
        total = 0
        with contextlib.suppress(psutil.Error):
            for proc in (self.process, *self.process.children(recursive=True)):
                with contextlib.suppress(psutil.Error):
                    total += proc.memory_info().rss
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._sample())
            time.sleep(self.interval)

    def reset(self) -> None:
        self.peak = self._sample()

    def __enter__(self) -> PeakMemory:
        self.reset()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def build_model(name: str, workdir: Path) -> Path:
    """Write (once) the model called ``name`` and return its path."""
    import onnx

    from explorer import zoo

    workdir.mkdir(parents=True, exist_ok=True)
    if name == "8MB":
        path = workdir / "transformer_L123_h32.onnx"
        if not path.exists():
            onnx.save(zoo.build("transformer", layers=123, hidden=32), path)
    elif name == "344MB":
        path = workdir / "transformer_L108_h256.onnx"
        if not path.exists():
            onnx.save(zoo.build("transformer", layers=108), path)
    elif name == "3GiB":
        path = workdir / "chain_3gib" / "model.onnx"
        if not path.exists():
            zoo.write_external_chain(path.parent, fill="random")
    else:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    return path


# --------------------------------------------------------------------------- the child side


def _phase(kind: str, path: str) -> Callable[[], Any]:
    import onnx

    import explorer
    from explorer.views import layout as lay
    from explorer.views.figures import graph_figure

    if kind == "onnx.load (structure)":
        return lambda: onnx.load(path, load_external_data=False)
    if kind == "onnx.load":
        return lambda: onnx.load(path)
    if kind == "explorer.load":
        return lambda: explorer.load(path)

    def file_to_figure() -> Any:
        lay.clear_cache()
        graph = explorer.load(path)
        layout = lay.layered(graph, collapse=lay.auto_collapse(graph), node_size="auto")
        return graph_figure(graph, layout)

    return file_to_figure


def child(kind: str, path: str, repeat: int) -> dict[str, Any]:
    """Run one phase ``repeat`` times in this (fresh) process; return median seconds and peak bytes."""
    import gc

    import explorer
    from explorer import zoo

    explorer.load(zoo.build("mlp"))  # warm: imports, the worker and its imports
    fn = _phase(kind, path)
    times = []
    with PeakMemory(psutil.Process().pid) as memory:
        for _ in range(repeat):
            gc.collect()
            start = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - start)
            del result
    return {"seconds": statistics.median(times), "peak": memory.peak}


def child_pipeline(path: str) -> dict[str, Any]:
    """One changing pipeline step on ``path``: step wall time, the pass's own time, the overhead."""
    import explorer
    from explorer import zoo
    from explorer.passes.pipeline import run_pipeline

    explorer.load(zoo.build("mlp"))
    graph = explorer.load(path)
    start = time.perf_counter()
    timeline = run_pipeline(graph, "ort:basic", verify=False)
    step = time.perf_counter() - start
    snapshot = timeline[1]
    return {"step": step, "pass": snapshot.elapsed, "changed": snapshot.changed, "error": snapshot.error}


def child_memory(kind: str, path: str) -> dict[str, Any]:
    """Open ``path`` (``kind``: one of :data:`MEMORY_PHASES`); peak PSS of this process and its worker."""
    import gc

    import explorer
    from explorer import zoo
    from explorer.isolation.process_memory import ProcessTreeSampler, tree_memory

    warm = explorer.load(zoo.build("mlp"))  # imports, the worker and its imports
    if kind == "GraphView":
        from widgets import GraphView

        GraphView(warm)  # the widget stack and plotly's first figure
    del warm
    gc.collect()
    time.sleep(0.3)
    base = tree_memory()
    start = time.perf_counter()
    with ProcessTreeSampler(interval_s=0.005) as sampler:
        if kind == "onnx.load":
            import onnx

            opened: Any = onnx.load(path)
        else:
            from widgets import GraphView

            opened = GraphView(path)
    seconds = time.perf_counter() - start
    del opened
    peak = sampler.result
    return {
        "seconds": seconds,
        "kernel": peak.peak_root_pss_bytes - base.root_pss_bytes,
        "worker": peak.peak_children_pss_bytes - (base.pss_bytes - base.root_pss_bytes),
        "both": peak.peak_pss_bytes - base.pss_bytes,
        "base_kernel": base.root_pss_bytes,
        "base_worker": base.pss_bytes - base.root_pss_bytes,
    }


def build_real(name: str) -> Path:
    """Export (once) the real-size ``name`` of :mod:`explorer.zoo.torch_exports`, in the folder
    real_exports_benchmark.py keeps them in (one copy of each export)."""
    from real_exports_benchmark import export_folder  # this script's own folder is on sys.path

    from explorer.zoo import torch_exports as torch_zoo

    folder = export_folder()
    path = folder / f"{name}-full.onnx"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        torch_zoo.export(name, path, size="full")
    return path


def real_size_set(names: list[str]) -> dict[str, dict[str, Any]]:
    """Measure :data:`MEMORY_PHASES` on each real-size model; print a line per phase."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        print("== real-size set skipped: torch is not installed (pip install 'onnx-graph-explorer[torch]')")
        return {}
    results: dict[str, dict[str, Any]] = {}
    for name in names:
        print(f"== {name} (real size): exporting the model (once)", flush=True)
        path = build_real(name)
        size = path.stat().st_size
        row: dict[str, Any] = {"path": str(path), "bytes": size}
        for phase in MEMORY_PHASES:
            print(f"   {phase} ...", end="", flush=True)
            got = row[phase] = _in_child(["memory", phase, str(path)], timeout=1800)
            print(
                f" {got['seconds']:.2f} s, peak over the warm state: kernel {_mb(got['kernel'])}, "
                f"worker {_mb(got['worker'])}, both {_mb(got['both'])} = {got['both'] / size:.2f}x the file",
                flush=True,
            )
        results[name] = row
    return results


def print_real(results: dict[str, dict[str, Any]]) -> None:
    """The real-size set as a Markdown table."""
    if not results:
        return
    print()
    print(
        "| model | file | onnx.load | its peak | GraphView(path) | peak: kernel | peak: worker "
        "| peak: both | both / file | warm state (kernel + worker) | with the warm state / file |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, row in results.items():
        base, view, size = row["onnx.load"], row["GraphView"], row["bytes"]
        warm = view["base_kernel"] + view["base_worker"]
        print(
            f"| {name} | {_mb(size)} | {base['seconds']:.2f} s | {_mb(base['both'])} "
            f"| {view['seconds']:.2f} s | {_mb(view['kernel'])} | {_mb(view['worker'])} "
            f"| {_mb(view['both'])} | {view['both'] / size:.2f}x "
            f"| {_mb(view['base_kernel'])} + {_mb(view['base_worker'])} "
            f"| {(warm + view['both']) / size:.2f}x |"
        )


# --------------------------------------------------------------------------- the parent side


def _in_child(args: list[str], timeout: float) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    if done.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def time_info(path: Path, repeat: int) -> dict[str, Any]:
    """``onnx-explorer info PATH --json`` as a command: median wall time and peak memory."""
    times, peak = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        command = Path(sys.executable).with_name("onnx-explorer")  # the command users run
        proc = subprocess.Popen(
            [str(command), "info", str(path), "--json"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        with PeakMemory(proc.pid) as memory:
            _, err = proc.communicate(timeout=600)
        times.append(time.perf_counter() - start)
        peak = max(peak, memory.peak)
        if proc.returncode != 0:
            raise RuntimeError(f"info failed: {err.decode()[-2000:]}")
    return {"seconds": statistics.median(times), "peak": peak}


def _mb(value: float) -> str:
    return f"{value / 2**20:,.0f} MB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--models", default=",".join(MODELS), help=f"comma list of {', '.join(MODELS)}, or none"
    )
    parser.add_argument(
        "--real", default=",".join(REAL), help=f"the real-size set: comma list of {', '.join(REAL)}, or none"
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per phase (median)")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench-models")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        if kind == "pipeline":
            result = child_pipeline(rest[0])
        elif kind == "memory":
            result = child_memory(rest[0], rest[1])
        else:
            result = child(kind, rest[0], int(rest[1]))
        print(json.dumps(result))
        return 0

    import onnxruntime

    import explorer  # noqa: F401  (versions below)

    print(
        f"machine: {platform.machine()}, {psutil.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB, Python {platform.python_version()}, "
        f"onnxruntime {onnxruntime.__version__}",
        flush=True,
    )
    phases = ("onnx.load (structure)", "onnx.load", "explorer.load", "file -> figure")
    results: dict[str, dict[str, Any]] = {}
    synthetic = [m for m in args.models.split(",") if m and m != "none"]
    real = real_size_set([m for m in args.real.split(",") if m and m != "none"])
    for name in synthetic:
        print(f"== {name}: writing the model (once)", flush=True)
        path = build_model(name, args.workdir)
        row: dict[str, Any] = {"path": str(path)}
        for phase in phases:
            print(f"   {phase} ...", end="", flush=True)
            row[phase] = _in_child([phase, str(path), str(args.repeat)], timeout=1800)
            print(f" {row[phase]['seconds']:.3f} s, peak {_mb(row[phase]['peak'])}", flush=True)
        print("   info ...", end="", flush=True)
        row["info"] = time_info(path, args.repeat)
        print(f" {row['info']['seconds']:.3f} s, peak {_mb(row['info']['peak'])}", flush=True)
        if name == "344MB":
            print("   pipeline step (ort:basic) ...", end="", flush=True)
            row["pipeline"] = _in_child(["pipeline", str(path)], timeout=1800)
            print(f" {row['pipeline']['step']:.3f} s", flush=True)
        results[name] = row

    if args.json:
        print(json.dumps({**results, "real-size": real}, indent=2))
        return 0
    print_real(real)
    if not results:
        return 0
    print()
    print(
        "| weights | onnx.load (structure) | onnx.load | explorer.load | file -> figure "
        "| figure / onnx.load | info (command) | peak: onnx.load | peak: explorer.load "
        "| peak: file -> figure | peak: info |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, row in results.items():
        base = row["onnx.load"]["seconds"]
        print(
            f"| {name} | {row['onnx.load (structure)']['seconds']:.3f} s | {base:.3f} s "
            f"| {row['explorer.load']['seconds']:.3f} s | {row['file -> figure']['seconds']:.3f} s "
            f"| {row['file -> figure']['seconds'] / base:.2f}x | {row['info']['seconds']:.3f} s "
            f"| {_mb(row['onnx.load']['peak'])} | {_mb(row['explorer.load']['peak'])} "
            f"| {_mb(row['file -> figure']['peak'])} | {_mb(row['info']['peak'])} |"
        )
    if "344MB" in results and "pipeline" in results["344MB"]:
        step = results["344MB"]["pipeline"]
        base = results["344MB"]["onnx.load"]["seconds"]
        overhead = step["step"] - step["pass"]
        print()
        print(
            f"pipeline step on 344MB (ort:basic, verify off): {step['step']:.3f} s, the pass "
            f"(worker round trip included) {step['pass']:.3f} s, overhead {overhead:.3f} s "
            f"= {overhead / base:.2f}x onnx.load; changed={step['changed']}, error={step['error']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

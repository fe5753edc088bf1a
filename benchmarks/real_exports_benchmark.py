"""Every command on today's PyTorch exporter's models at their real sizes, as a user runs them.

The set is :mod:`explorer.zoo.torch_exports`'s at ``size="full"`` (random weights, exported in code with
``torch.onnx.export(..., dynamo=True)``, never downloaded): a BERT-base encoder (12 layers,
hidden 768, with an attention mask), a GPT-2-small decoder (no KV cache), ConvNeXt-T and
EfficientNet-B0. Each is exported once into ``--workdir`` (default
``$ONNX_EXPLORER_CACHE/real-exports``, ``~/.cache/onnx-graph-explorer/real-exports``); the
export's time is kept next to the file (``NAME-full.json``) and reported from there on later
runs (``--reexport`` to export and time again).

Per model, each command runs as ``onnx-explorer`` in a process of its own (the time is the
command's wall time from process start, as a user sees it, worker start included):

- ``info --json``;
- ``coverage --json`` with the fixed input shapes;
- ``passes``: onnxscript's optimizer, then ONNX Runtime's transformer optimizer for the two
  transformers (``bert``/``gpt2`` with the heads and hidden size), or ONNX Runtime's extended
  level for the CNNs;
- ``lower`` (TVM Relax import and the default pipeline; ``--fix`` for GPT-2, whose causal mask
  needs fixed shapes and onnxsim);
- ``bench --runtime ort --runtime tvm`` (TVM untuned): the medians, their ratio (TVM / ONNX
  Runtime, measured in the same run) and whether the outputs agree.

Input shapes: batch 1; sequence length ``--seq`` (default 128) for the transformers; 224x224
images. Untuned TVM on BERT-base takes long on two cores, so ``bench`` times few runs
(``--min-runs``, default 3, after one warm-up) rather than a time budget.

Run: ``.venv/bin/python benchmarks/real_exports_benchmark.py [--models bert_encoder,convnext]
[--workdir DIR] [--seq 128] [--min-runs 3] [--json OUT]``. Progress goes to stderr, the table
to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "export_folder"]

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = {
    "bert_encoder": "onnxscript:optimize,ort-transformers:bert(num_heads={heads},hidden_size={hidden})",
    "gpt2_decoder": "onnxscript:optimize,ort-transformers:gpt2(num_heads={heads},hidden_size={hidden})",
    "convnext": "onnxscript:optimize,ort:extended",
    "efficientnet": "onnxscript:optimize,fuse_bn_into_conv,ort:extended",
    "llama_kv_decoder": "onnxscript:optimize,ort:extended",
}
NEEDS_FIX = {"gpt2_decoder", "llama_kv_decoder"}
COMMANDS = ("info", "coverage", "passes", "lower", "bench")


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def export_folder(given: str | None = None) -> Path:
    """Where the full-size exports are cached (``real-exports`` in the cache every run shares:
    :func:`explorer.isolation.io.cache_folder`, made and checked writable), or ``given``.

    Examples
    --------
    >>> export_folder("/tmp/x")
    PosixPath('/tmp/x')
    >>> import tempfile
    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"ONNX_EXPLORER_CACHE": tempfile.mkdtemp()}):
    ...     export_folder().is_dir(), export_folder().name
    (True, 'real-exports')
    """
    if given:
        return Path(given)
    from explorer.isolation.io import cache_folder

    return cache_folder("real-exports")


def _exported(name: str, folder: Path, reexport: bool) -> tuple[Path, float]:
    """The full-size export of ``name`` (made now, or cached) and the seconds exporting it took."""
    path, record = folder / f"{name}-full.onnx", folder / f"{name}-full.json"
    if path.exists() and record.exists() and not reexport:
        return path, json.loads(record.read_text())["export_s"]
    folder.mkdir(parents=True, exist_ok=True)
    _progress(f"{name}: exporting (full size) ...")
    # in a child process: torch and the module's weights are not kept in this one while the commands run
    code = (
        "import json, sys, time, torch; from explorer.zoo import torch_exports as torch_zoo; "
        "start = time.perf_counter(); "
        "torch_zoo.export(sys.argv[1], sys.argv[2], size='full'); "
        "print(json.dumps({'export_s': time.perf_counter() - start, 'torch': torch.__version__}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, name, str(path)], capture_output=True, text=True, cwd=ROOT, check=True
    )
    record.write_text(done.stdout.strip().splitlines()[-1])
    return path, json.loads(record.read_text())["export_s"]


def _shapes(name: str, seq: int) -> list[str]:
    from explorer.zoo import torch_exports as torch_zoo

    args, example = [], torch_zoo.spec(name, "full")["example"]
    past = example.get("past_key_values.0.key", [0, 0, 0])[2]  # the KV decoder's cached tokens
    for input_name, shape in example.items():
        if input_name == "attention_mask" and past:
            shape = [1, past + seq]  # the cache's tokens and the new ones
        else:
            shape = [1, seq] if len(shape) == 2 else [1, *shape[1:]]
        args += ["--input-shape", f"{input_name}={','.join(map(str, shape))}"]
    return args


def _args(name: str, command: str, path: Path, seq: int, min_runs: int) -> list[str]:
    from explorer.zoo import torch_exports as torch_zoo

    shapes, fix = _shapes(name, seq), ["--fix"] if name in NEEDS_FIX else []
    config = torch_zoo.spec(name, "full")["config"]
    if command == "info":
        return ["info", str(path), "--json"]
    if command == "coverage":
        return ["coverage", str(path), *shapes, "--json"]
    if command == "passes":
        pipeline = PIPELINES[name].format(heads=config.get("heads"), hidden=config.get("hidden"))
        out = path.with_name(f"{path.stem}-passes.onnx")
        return ["passes", str(path), "--pipeline", pipeline, "--json", "-o", str(out)]
    if command == "lower":
        return ["lower", str(path), *shapes, *fix, "--json"]
    timing = ["--warmup", "1", "--min-runs", str(min_runs), "--min-seconds", "0"]
    return ["bench", str(path), "--runtime", "ort", "--runtime", "tvm", *shapes, *fix, *timing, "--json"]


def _run(args: list[str]) -> tuple[float, int, Any, str]:
    """``onnx-explorer ARGS`` in its own process: seconds, exit code, its JSON (or None), its stderr."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "explorer.cli", *args], capture_output=True, text=True, cwd=ROOT
    )
    seconds = time.perf_counter() - start
    try:
        result = json.loads(done.stdout)
    except ValueError:
        result = None
    return seconds, done.returncode, result, done.stderr


def _summary(command: str, result: Any) -> str:
    if not isinstance(result, dict):
        return ""
    if "error" in result and isinstance(result["error"], dict):
        return f"error: {result['error'].get('message', '')[:160]}"
    if command == "info":
        return f"{result['nodes']} nodes, {result['params'] / 1e6:.1f}M params"
    if command == "coverage":
        return ", ".join(f"{t['target']} {t['coverage']:.0%}" for t in result["targets"][:3])
    if command == "passes":
        last = result["steps"][-1]
        errors = [s["pass"] for s in result["steps"] if s["error"]]
        words = [line for line in last["log"] if line.startswith("attention not fused")]
        return (
            f"{result['steps'][0]['nodes_before']}->{last['nodes_after']} nodes"
            + (f"; failed: {', '.join(errors)}" if errors else "")
            + ("; attention not fused" if words else "")
        )
    if command == "lower":
        return f"{result['steps'][-1]['kernels']} kernels" if result.get("steps") else ""
    if command == "bench":
        by = {r["runtime"]: r for r in result["results"]}
        ort, tvm = by.get("ort"), by.get("tvm")
        if ort and tvm:
            ratio = tvm["median_ms"] / ort["median_ms"]
            return (
                f"ort {ort['median_ms']:.1f} ms, tvm {tvm['median_ms']:.1f} ms (x{ratio:.2f}), "
                f"tvm prepare {tvm['prepare_s']:.0f} s, agrees {tvm['agrees']}"
            )
    return ""


def main(argv: list[str] | None = None) -> int:
    """Export the full-size set (or reuse it), run every command on each, print the table.

    Examples
    --------
    >>> main(["--models", "nosuch"])  # doctest: +SKIP
    """
    from explorer.zoo import torch_exports as torch_zoo

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(torch_zoo.NAMES))
    parser.add_argument("--workdir", help="where the exports are cached")
    parser.add_argument("--reexport", action="store_true", help="export (and time) again")
    parser.add_argument("--seq", type=int, default=128, help="sequence length of the transformers")
    parser.add_argument("--min-runs", type=int, default=3, help="bench's timed runs per runtime")
    parser.add_argument("--commands", default=",".join(COMMANDS))
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)
    folder = export_folder(args.workdir)
    names = [n for n in args.models.split(",") if n]
    commands = [c for c in args.commands.split(",") if c]
    rows = []
    for name in names:
        path, export_s = _exported(name, folder, args.reexport)
        row: dict[str, Any] = {"model": name, "file_mb": path.stat().st_size / 1e6, "export_s": export_s}
        _progress(f"{name}: {row['file_mb']:.0f} MB, exported in {export_s:.0f} s")
        for command in commands:
            _progress(f"{name}: {command} ...")
            seconds, code, result, stderr = _run(_args(name, command, path, args.seq, args.min_runs))
            summary = _summary(command, result) or stderr.strip().splitlines()[-1:]
            row[command] = {"s": seconds, "exit": code, "summary": summary, "result": result}
            _progress(f"{name}: {command} {seconds:.1f} s, exit {code}: {summary}")
        rows.append(row)
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; seq {args.seq}, batch 1")
    header = f"{'model':14} {'file MB':>8} {'export s':>9} " + " ".join(f"{c + ' s':>10}" for c in commands)
    print(header)
    for row in rows:
        cells = " ".join(
            f"{row[c]['s']:>10.1f}" if row[c]["exit"] == 0 else f"{'exit ' + str(row[c]['exit']):>10}"
            for c in commands
        )
        print(f"{row['model']:14} {row['file_mb']:>8.0f} {row['export_s']:>9.1f} {cells}")
    for row in rows:
        for command in commands:
            print(f"  {row['model']} {command}: {row[command]['summary']}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

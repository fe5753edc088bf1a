"""Decoder LLMs as people deploy them: prefill and decode tokens/s per runtime, as ratios to ONNX Runtime.

The models (built once into ``--folder``, random weights, nothing downloaded):

- ``genai-int4``: onnxruntime-genai's model builder on a SmolLM2-135M-shaped Llama (30 layers, 9
  heads, 3 KV heads, hidden 576): int4 ``MatMulNBits`` blocks of 32, ``GroupQueryAttention``;
- ``genai-fp32``: the same at fp32;
- ``torch``: a Llama of the same shape in ``torch.nn`` with its KV cache as inputs and outputs,
  exported by ``torch.onnx.export(dynamo=True)`` (standard ONNX).

The runtimes, each on the same prompt (``--prompt-tokens``) and decode steps up to ``--context``
(:func:`explorer.runtimes.generation.generation_benchmark`): ``ort`` (our own loop, the
baseline), ``ort-genai`` (onnxruntime-genai's ``Generator``, on the builder's models), ``torch-eager``
(the graph node by node as ``torch`` calls; it takes no contrib op), ``tvm`` (default schedules;
``--fix`` rewrites the contrib ops and fixes each call's shapes), ``tvm-tuned`` (pre-tuned: with
``--tune-minutes``, after ``tvm``), ``iree``. A runtime that refuses the model is listed with its
reason, not dropped in silence.

TVM pre-tuned: before a model's rows are timed, an untimed pass tunes its two compiles (the prompt's
shapes and a decode step's) with MetaSchedule into ``--folder``/tuning, ``--tune-minutes`` per
model, half to each compile (a model, shapes and budget tuned there before is not tuned again);
the workers are then closed, so the ``tvm-tuned`` row prepares anew: its prepare time is the two
compiles with the records, and it says how many tasks were tuned, with how many trials, and how
many of each compile's tasks have a record (the rest keep their default schedule).

Each row: prefill and decode tokens/s, each as a ratio to ONNX Runtime's, decode's share of the
bandwidth bound (weights and KV cache read once a step, over this machine's measured bandwidth),
whether the logits agree with ONNX Runtime's, and the preparation time.

Run: ``.venv/bin/python benchmarks/llm_benchmark.py [--models genai-int4,genai-fp32,torch]
[--runtimes ort,ort-genai,torch-eager,tvm,iree] [--prompt-tokens 128] [--context 1024]
[--decode-steps 8] [--tune-minutes 0] [--folder build/llm_benchmark] [--json] [--out FILE]``; the
rows go to stdout as they are measured, the JSON (``--json``, or into ``--out``) at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from explorer import load
from explorer.core.errors import ExplorerError
from explorer.isolation import worker
from explorer.runtimes.bench import bench, get_runtime
from explorer.runtimes.environment import environment

__all__ = ["main", "model_path"]

MODELS = ("genai-int4", "genai-fp32", "torch")
RUNTIMES = ("ort", "ort-genai", "torch-eager", "tvm", "iree")


def model_path(name: str, folder: Path) -> Path:
    """The benchmark's model ``name``, built into ``folder`` on first use."""
    if name.startswith("genai-"):
        from explorer.zoo.decoders import genai_decoder

        return genai_decoder(folder / name, name.removeprefix("genai-"), "full")
    if name == "torch":
        from explorer.zoo import torch_exports

        target = folder / "torch" / "llama_kv_decoder-full.onnx"
        if target.exists():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        return Path(torch_exports.export("llama_kv_decoder", target, size="full"))
    raise SystemExit(f"no model {name!r}: the models are {', '.join(MODELS)}")


def _runtime(name: str, tune_minutes: float, tuning_root: Path) -> Any:
    if name == "tvm-tuned":  # the model's budget, half to each of its two compiles
        return get_runtime("tvm", tune_minutes=tune_minutes / 2, tuning_root=str(tuning_root))
    return get_runtime(name)


TUNING_KEYS = ("tasks", "tasks_with_records", "trials_run", "tune_s", "tuned_before", "out_of_time")
"""What the ``tuning`` of a ``tvm-tuned`` row says of each compile (and ``tasks_tuned``: the tasks
the plan gave trials)."""


def _tuning(info: dict[str, Any]) -> dict[str, Any]:
    """A compile's tuning figures (:data:`TUNING_KEYS`), from its session's info."""
    found = {key: info.get(key) for key in TUNING_KEYS}
    found["tasks_tuned"] = sum(1 for plan in info.get("plan") or () if plan.get("tuned"))
    found["defaults_rejected"] = sorted(info.get("defaults_rejected") or ())
    return found


def _pretune(graph: Any, runtime: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The untimed pass: tune the model's prompt and decode compiles into the tuning folder (a key
    tuned there with this budget before is only compiled), then close the workers, so that the
    timed row prepares anew from the records. Returns each compile's tuning figures."""
    started = time.perf_counter()
    try:
        report = _generate(graph, [runtime], args)
    except ExplorerError as err:
        return {"refused": str(err).splitlines()[0], "seconds": time.perf_counter() - started}
    finally:
        worker.shutdown()  # the sessions go: the timed row compiles again, with the records
    if report.skipped:
        return {"refused": report.skipped[0][1], "seconds": time.perf_counter() - started}
    info = dict(report.results[0].info)
    return {
        "minutes": args.tune_minutes,
        "prefill": _tuning(dict(info.get("prefill") or {})),
        "decode": _tuning(info),
        "seconds": time.perf_counter() - started,
    }


def _generate(graph: Any, runtimes: list[Any], args: argparse.Namespace) -> Any:
    """``bench`` in generation mode with the run's prompt, context and decode steps, ``--fix`` on."""
    return bench(
        graph,
        runtimes,
        generation=True,
        prompt_tokens=args.prompt_tokens,
        context=args.context,
        decode_steps=args.decode_steps,
        fix=True,
    )


def _builds(info: dict[str, Any]) -> dict[str, Any]:
    """A TVM row's two compiles: tasks, tasks with a record, and whether the budget was tuned before."""
    if info.get("tasks") is None:
        return {}
    calls = {"prefill": dict(info.get("prefill") or {}), "decode": info}
    return {
        "builds": {
            call: {key: found.get(key) for key in ("tasks", "tasks_with_records", "tuned_before", "tune_s")}
            for call, found in calls.items()
        }
    }


def _measure(graph: Any, name: str, runtime: Any, args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        report = _generate(graph, ["ort", runtime] if name != "ort" else ["ort"], args)
    except ExplorerError as err:
        return {
            "runtime": name,
            "refused": str(err).splitlines()[0],
            "seconds": time.perf_counter() - started,
        }
    if report.skipped:
        return {"runtime": name, "refused": report.skipped[0][1], "seconds": time.perf_counter() - started}
    row = report.results[-1]
    return {
        "runtime": name,
        "label": row.label,
        "agrees": row.agrees,
        "max_abs_err": row.max_abs_err,
        "prepare_s": row.prepare_s,
        "fixes": list(row.info.get("fixes") or ()),
        **_builds(row.info),
        "llm": row.llm.to_dict(),
        "ort_llm": report.results[0].llm.to_dict(),
        "seconds": time.perf_counter() - started,
    }


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table (or ``--json``); return 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--runtimes", default=",".join(RUNTIMES))
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--decode-steps", type=int, default=8)
    parser.add_argument(
        "--tune-minutes",
        type=float,
        default=0.0,
        help="add a tvm-tuned row, tuned before it by an untimed pass: minutes per model, half per compile",
    )
    parser.add_argument("--folder", type=Path, default=Path("build/llm_benchmark"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--out", type=Path, help="also write the JSON here (the rows still print)")
    args = parser.parse_args(argv)
    args.folder.mkdir(parents=True, exist_ok=True)
    names = [r for r in args.runtimes.split(",") if r]
    if args.tune_minutes > 0 and "tvm" in names:
        names.insert(names.index("tvm") + 1, "tvm-tuned")
    rows: list[dict[str, Any]] = []
    for model in [m for m in args.models.split(",") if m]:
        path = model_path(model, args.folder)
        graph = load(str(path))
        llm = graph.summary().llm
        tuning = None
        if "tvm-tuned" in names:
            tuning = _pretune(graph, _runtime("tvm-tuned", args.tune_minutes, args.folder / "tuning"), args)
            if not args.json:
                _print_tuning(model, tuning)
        for name in names:
            runtime = _runtime(name, args.tune_minutes, args.folder / "tuning")
            row = {
                "model": model,
                "params_bytes": llm["weight_bytes"],
                **_measure(graph, name, runtime, args),
            }
            if name == "tvm-tuned":
                row["tuning"] = tuning
                if "label" in row:  # its records come from the untimed pass: it tuned nothing itself
                    row["label"] = f"{row['label']}, pre-tuned by the untimed pass"
                if "refused" in tuning and "refused" not in row:
                    row["refused"] = f"tuning failed: {tuning['refused']}"
            rows.append(row)
            if not args.json:
                _print_row(row)
        worker.shutdown()  # the model's sessions (a full-size fp32 decoder's: GBs) go before the next's
    found = json.dumps(
        {"environment": environment(), "argv": sys.argv[1:] if argv is None else argv, "rows": rows},
        default=str,
    )
    if args.out is not None:
        args.out.write_text(found + "\n")
    if args.json:
        print(found)
    return 0


def _print_tuning(model: str, tuning: dict[str, Any]) -> None:
    if "refused" in tuning:
        print(f"{model:<11} tvm-tuned    tuning refused: {tuning['refused']}", flush=True)
        return
    calls = []
    for call in ("prefill", "decode"):
        t = tuning[call]
        before = ", tuned before" if t["tuned_before"] else ""
        calls.append(
            f"{call}: {t['tasks_tuned']} of {t['tasks']} tasks tuned, {t['trials_run']} trials in "
            f"{float(t['tune_s'] or 0):.0f} s{before}, {t['tasks_with_records']}/{t['tasks']} with records"
        )
    print(f"{model:<11} tvm-tuned    {'; '.join(calls)} ({tuning['seconds']:.0f} s)", flush=True)


def _print_row(row: dict[str, Any]) -> None:
    if "refused" in row:
        print(f"{row['model']:<11} {row['runtime']:<12} refused: {row['refused']}", flush=True)
        return
    t, o = row["llm"], row["ort_llm"]
    print(
        f"{row['model']:<11} {row['runtime']:<12} prefill {t['prefill_tokens_per_s']:>9.1f} tok/s "
        f"({t['prefill_tokens_per_s'] / o['prefill_tokens_per_s']:.2f}x ORT)  decode "
        f"{t['decode_tokens_per_s']:>7.1f} tok/s "
        f"({t['decode_tokens_per_s'] / o['decode_tokens_per_s']:.2f}x ORT, "
        f"{t['share_of_bound']:.0%} of the {t['bandwidth_bound_tokens_per_s']:.0f} tok/s bound)  "
        f"agrees {row['agrees']} ({row['max_abs_err']:.1e})  prepare {row['prepare_s']:.1f} s",
        flush=True,
    )


if __name__ == "__main__":
    raise SystemExit(main())

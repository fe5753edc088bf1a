"""``onnx-explorer bench MODEL``: time a model on ONNX Runtime and TVM (or IREE, PyTorch eager) side by
side (median, p90, runs, prepare time, agreement), on the same generated inputs.

Examples
--------
>>> from explorer.cli import main
>>> main(["bench", "zoo:mlp", "--runtime", "no-such-runtime"])  # refused before any work
2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from explorer.cli.errors import EXIT_NOT_IMPORTED, error_dict, say_error
from explorer.cli.fix_flags import add_fix_options, fix_progress, with_flags
from explorer.cli.options import (
    add_export_overlay,
    add_input_shape,
    add_json,
    add_model,
    non_negative_float,
    non_negative_int,
    positive_int,
)
from explorer.cli.placement_flags import (
    add_strict_placement,
    combined_error,
    placement_lines,
    refused_all,
    strict_runtimes,
)
from explorer.core.errors import ExplorerError, LoweringError, RuntimeUnsupportedError
from explorer.core.tensors import format_bytes
from explorer.isolation.io import check_output_path
from explorer.onnx_adapter.input_shapes import check_input_shapes
from explorer.onnx_adapter.load import load

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``bench`` to the sub-commands ``commands``; return its parser.

    Examples
    --------
    >>> commands = argparse.ArgumentParser(prog="onnx-explorer").add_subparsers()
    >>> args = add_parser(commands).parse_args(["zoo:mlp", "--runtime", "ort", "--min-runs", "5"])
    >>> args.runtime, args.min_runs, args.warmup
    (['ort'], 5, 3)
    """
    parser = commands.add_parser(
        "bench",
        help="time a model on ONNX Runtime and TVM side by side: median, p90, runs, prepare time, agreement",
        description="Prepare each runtime once (session creation, or import, tuning and compile: prepare_s), "
        "then time it on the same generated inputs (fixed seed): warm-up runs, then runs until both "
        "--min-runs and --min-seconds are reached (or --max-seconds is). max_abs_err is against the "
        "first runtime's outputs.",
    )
    add_model(parser)
    parser.add_argument(
        "--runtime",
        action="append",
        default=[],
        metavar="NAME",
        help="ort, ort-cuda, tvm, tvm-naive (TVM's plain loops, no schedules), iree (IREE's MLIR compiler, "
        "llvm-cpu for this CPU, with data tiling and im2col convolutions: the iree extra), iree-default "
        "(iree-compile's defaults), torch-eager (the graph node by node as PyTorch calls: "
        "what people run before compiling), or onnx-reference (ONNX's reference implementation in numpy: "
        "slow, the specification's answer) (repeatable)",
    )
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument(
        "--tune-trials",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="tune TVM with N trials (0: untuned)",
    )
    budget.add_argument(
        "--tune-minutes", type=non_negative_float, default=None, metavar="M", help="tune TVM for M minutes"
    )
    parser.add_argument(
        "--tune-every-task",
        action="store_true",
        help="with a budget: every TVM task without a record gets its first round of trials too, "
        "however little time it takes (the rest of the budget goes where the time is)",
    )
    parser.add_argument(
        "--pretuned",
        action="store_true",
        help="TVM applies the tuning records shipped for this CPU (with a budget, tunes on from them)",
    )
    add_input_shape(parser)
    parser.add_argument(
        "--threads",
        type=non_negative_int,
        default=0,
        help="ONNX Runtime's, IREE's and PyTorch eager's threads (0: their default, one per physical core)",
    )
    add_strict_placement(parser)
    add_fix_options(
        parser,
        simplify="run onnxsim with the fixed input shapes first (as `lower --simplify`); every runtime "
        "runs it",
        fix="when a compiler's import or a pass fails (TVM's or IREE's), apply every fix offered, then fixed "
        "shapes and onnxsim (as `lower --fix`: never less than --simplify), and time every runtime on the "
        "fixed model, so all of them run the same graph",
    )
    parser.add_argument(
        "--rpc-tracker", metavar="HOST:PORT", help="run TVM on a server from this RPC tracker"
    )
    parser.add_argument("--rpc-key", metavar="KEY", help="the device key of the RPC servers")
    parser.add_argument(
        "--tvm-target",
        metavar="TARGET",
        help="the CPU TVM builds and tunes for, e.g. 'llvm -mcpu=haswell -num-cores=2' (default: this CPU; "
        "with --rpc-tracker, the servers' own when they can say); each target has its own tuning database",
    )
    parser.add_argument("--warmup", type=non_negative_int, default=3, help="runs before timing (default 3)")
    parser.add_argument("--min-runs", type=positive_int, default=10, help="timed runs at least (default 10)")
    parser.add_argument(
        "--min-seconds",
        type=non_negative_float,
        default=1.0,
        help="seconds of timed runs at least (default 1)",
    )
    parser.add_argument(
        "--max-seconds", type=non_negative_float, default=30.0, help="stop timing after this (default 30)"
    )
    parser.add_argument(
        "--prompt-tokens",
        type=positive_int,
        help="a decoder LLM: the prompt's tokens, timed as prefill (default 128, or half the context)",
    )
    parser.add_argument(
        "--context",
        type=positive_int,
        help="a decoder LLM: the context each decode step runs at (default 1024, or the model's own)",
    )
    parser.add_argument(
        "--decode-steps",
        type=positive_int,
        default=16,
        help="a decoder LLM: decode steps timed (default 16)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="per-node time on the graph for each runtime (a decoder LLM: of the prompt's call and of a "
        "decode step); --json adds profiles: {runtime: {call: {node: ms}}}",
    )
    parser.add_argument(
        "--single-call",
        action="store_true",
        help="a decoder LLM: time one call at the input shapes instead of a prompt and decode steps",
    )
    add_export_overlay(
        parser, "--profile's time per node (implies --profile), one node-data file per runtime and call"
    )
    add_json(parser)
    parser.set_defaults(handler=run)
    return parser


def _runtimes(args: argparse.Namespace) -> list[Any]:
    """The runtimes ``--runtime`` names (ORT and TVM by default), with their options from the flags."""
    from explorer.runtimes.registry import RUNTIMES, get_runtime

    flags = {
        "tune_trials": args.tune_trials,
        "tune_minutes": args.tune_minutes,
        "pretuned": args.pretuned or None,
        "tune_every_task": args.tune_every_task or None,
        "rpc_tracker": args.rpc_tracker,
        "rpc_key": args.rpc_key,
        "target": args.tvm_target,
        "threads": args.threads or None,  # ONNX Runtime's, IREE's and PyTorch's threads
    }
    runtimes = []
    for name in args.runtime or ["ort", "tvm"]:
        entry = RUNTIMES.get(name)
        options = entry.flag_options(flags) if entry is not None else {}  # an unknown name: get_runtime says
        if options.get("tune_every_task") and not (args.tune_trials or args.tune_minutes):
            raise ExplorerError(
                "--tune-every-task spreads a tuning budget: give --tune-trials N or --tune-minutes M"
            )
        try:
            runtimes.append(get_runtime(name, **options))
        except ExplorerError:  # typed already (a UsageError: --rpc-tracker without :PORT)
            raise
        except ValueError as err:
            raise ExplorerError(str(err)) from None
    return runtimes


def run(args: argparse.Namespace) -> int:
    """Time ``args.model`` on each runtime and print one row per runtime; return 0, or
    :data:`~explorer.cli.errors.EXIT_NOT_IMPORTED` when TVM cannot import it (IREE's or TVM's
    :class:`~explorer.core.errors.LoweringError` is raised: exit 3 too) or when no runtime could run
    here (each skipped, the error says why).

    Examples
    --------
    >>> from explorer.cli import build_parser
    >>> words = ["bench", "zoo:mlp", "--runtime", "ort", "--min-runs", "1", "--min-seconds", "0", "--json"]
    >>> run(build_parser().parse_args(words))  # doctest: +ELLIPSIS
    {"results": [{"runtime": "ort", ...}], "source": "zoo:mlp", ..., "fixes": []}
    0
    """
    from explorer.runtimes.bench import bench

    if args.export_overlay:
        check_output_path(args.export_overlay, args.model)  # before the work
        args.profile = True
    from explorer.runtimes.memory_budget import check_memory

    graph = load(args.model)
    check_input_shapes(graph.model, dict(args.input_shape), args.model)
    runtimes = _runtimes(args)
    check_memory(graph.model, "bench", args.runtime or ["ort", "tvm"], label=args.model)  # exit 3
    runtimes, placements, misplaced = strict_runtimes(graph, runtimes, args)  # --strict-placement
    if misplaced is not None and not runtimes:
        return refused_all(placements, misplaced, args)

    shown: dict[str, float] = {}

    def progress(label: str, event: Any) -> None:  # a line every 2 s per runtime at most
        now = time.monotonic()
        if args.json or event is None or not event.message or now - shown.get(label, -10.0) < 2.0:
            return
        shown[label] = now
        print(f"  {label}: {event.message}", file=sys.stderr)

    from explorer.lower import RelaxImportFailed
    from explorer.lower.import_fix import lower_with_fixes

    def timed(graph: Any, input_shapes: Mapping[str, Sequence[int]] | None) -> Any:
        return bench(
            graph,
            runtimes,
            input_shapes=input_shapes,
            warmup=args.warmup,
            min_runs=args.min_runs,
            min_seconds=args.min_seconds,
            max_seconds=args.max_seconds,
            progress=progress,
            generation=False if args.single_call else (True if args.prompt_tokens or args.context else None),
            prompt_tokens=args.prompt_tokens,
            context=args.context,
            decode_steps=args.decode_steps,
            fix=args.fix,
            simplify=args.simplify,
        )

    try:
        if _generates(graph, args):  # each call's shapes fixed apart: inside the generation
            report = timed(graph, None)
            applied = tuple(dict.fromkeys(f for r in report.results for f in r.info.get("fixes") or ()))
        else:
            report, applied = lower_with_fixes(
                graph,
                dict(args.input_shape) or None,
                timed,
                simplify=args.simplify,
                fix=args.fix,
                progress=fix_progress(args),
            )
    except LoweringError as err:  # main says it (exit 3), with the flags that fix it
        raise with_flags(err, "bench", args) from None
    except RelaxImportFailed as err:  # as `lower` reports it
        if args.json:
            print(json.dumps({"source": args.model, "error": error_dict(err, EXIT_NOT_IMPORTED)}))
        say_error(err)
        if err.result.fix and not args.fix:
            print("to apply the fix: onnx-explorer bench MODEL --fix", file=sys.stderr)
        return EXIT_NOT_IMPORTED
    except ConnectionError as err:  # the RPC tracker or servers
        raise ExplorerError(str(err)) from None
    if not report.results:  # every runtime asked for was skipped: nothing was timed
        return _nothing_timed(report, applied, args)
    found = _node_times(graph, runtimes, report, args) if args.profile else {}
    profiles = {label: {call: dict(p.node_ms) for call, p in calls.items()} for label, calls in found.items()}
    exported = _export(graph, found, args.export_overlay) if args.export_overlay else []
    named_but_skipped = combined_error(misplaced, _named_but_skipped(report, args))
    if args.json:
        extra: dict[str, Any] = {"profiles": profiles} if args.profile else {}
        if args.strict_placement:
            extra["placement"] = {name: p.to_dict() for name, p in placements.items()}
        if args.export_overlay:
            extra["exported_overlays"] = [str(path) for path in exported]
        if named_but_skipped is not None:
            extra["error"] = error_dict(named_but_skipped, EXIT_NOT_IMPORTED)
        print(json.dumps({**report.to_dict(), "source": args.model, "fixes": list(applied), **extra}))
        if named_but_skipped is not None:
            say_error(named_but_skipped)
            return EXIT_NOT_IMPORTED
        return 0
    for fix in applied:
        print(f"fixed before the import (every runtime runs the fixed model): {fix}")
    print(f"model: {args.model}, inputs {report.to_dict()['input_shapes']} (seed {report.seed})")
    header = (
        f"{'runtime':<34} {'median_ms':>10} {'p90_ms':>9} {'runs':>5} {'prepare_s':>9} {'max_abs_err':>11}"
    )
    print(f"{header}  agrees")
    for r in report.results:
        print(
            f"{r.label:<34} {r.median_ms:>10.3f} {r.p90_ms:>9.3f} {r.runs:>5} {r.prepare_s:>9.2f} "
            f"{r.max_abs_err:>11.2e}  {'yes' if r.agrees else 'NO'}"
        )
    if any(r.llm is not None for r in report.results):
        print(_llm_table(report))
    for label, calls in profiles.items():
        for call, node_ms in calls.items():
            slowest = sorted(node_ms.items(), key=lambda kv: -kv[1])[:5]
            where = "; ".join(f"{node} {ms:.3f} ms" for node, ms in slowest)
            print(f"{label}, {call}: slowest nodes {where}")
    for path in exported:
        print(f"wrote {path} (Model Explorer node data)")
    if args.strict_placement:
        for line in placement_lines(placements, runtimes):
            print(line)
    for name, why in report.skipped:
        print(f"{name}: skipped ({why})")
    for r in report.results:  # tuned on RPC servers: who measured what, and what a dead server cost
        servers = r.info.get("rpc_servers") or {}
        if servers:
            counts = ", ".join(f"{s} measured {c['measured']}, lost {c['lost']}" for s, c in servers.items())
            print(f"{r.label}: tuning candidates {counts}")
        for note in r.info.get("rpc_notes") or ():
            print(f"{r.label}: {note}")
    for r in report.results:  # a default schedule (or a record) that computed something else is not used
        for key in ("defaults_rejected", "records_rejected"):
            for task, why in (r.info.get(key) or {}).items():
                print(f"{r.label}: {task}: {why}")
    if named_but_skipped is not None:
        say_error(named_but_skipped)
        return EXIT_NOT_IMPORTED
    return 0


def _named_but_skipped(report: Any, args: argparse.Namespace) -> RuntimeUnsupportedError | None:
    """A runtime the user named with ``--runtime`` that could not run here: the others were timed, but
    what was asked for did not all happen, so the command exits 3 naming it (a runtime of the default
    set that is missing, as TVM without its extra, is only noted)."""
    if not args.runtime or not report.skipped:  # with --runtime given, every runtime tried was one it named
        return None
    return _skipped_error(report, args, f"only {', '.join(r.label for r in report.results)} timed")


def _skipped_error(report: Any, args: argparse.Namespace, outcome: str) -> RuntimeUnsupportedError:
    """The error naming each skipped runtime and why (the reason alone when only one was), then
    ``outcome`` (what was timed instead)."""
    skipped = report.skipped or (("bench", "no runtime was asked for"),)
    whys = [reason if len(skipped) == 1 else f"{name}: {reason}" for name, reason in skipped]
    return RuntimeUnsupportedError(
        f"{'; '.join(whys)}; {outcome}",
        runtime=", ".join(name for name, _ in skipped),
        path=args.model,
    )


def _nothing_timed(report: Any, applied: Sequence[str], args: argparse.Namespace) -> int:
    """No runtime could run here (each was skipped, with why): the error, naming each runtime and why,
    on stderr and (with ``--json``) in the report's document; exit 3."""
    err = _skipped_error(report, args, "nothing was timed")
    if args.json:
        document = {**report.to_dict(), "source": args.model, "fixes": list(applied)}
        print(json.dumps({**document, "error": error_dict(err, EXIT_NOT_IMPORTED)}))
    say_error(err)
    return EXIT_NOT_IMPORTED


def _export(graph: Any, found: Mapping[str, Mapping[str, Any]], path: str) -> list[Any]:
    """``--export-overlay``: each runtime's (and call's) profile as Model Explorer node data."""
    from explorer.overlays.export import export_overlays
    from explorer.overlays.ours import profile_overlay

    overlays = [
        profile_overlay(prof, graph, call=None if call == "run" else call)
        for calls in found.values()
        for call, prof in calls.items()
    ]
    return export_overlays(overlays, path, graph)


def _node_times(
    graph: Any, runtimes: Sequence[Any], report: Any, args: argparse.Namespace
) -> dict[str, dict[str, Any]]:
    """Each timed runtime's profile: ``{label: {call: Profile}}`` (``"prefill"`` and ``"decode"``
    for a decoder's generation, else ``"run"``); ``Profile.node_ms`` is the time per node."""
    from explorer.onnx_adapter.inputs import random_feeds
    from explorer.runtimes.generation import generation_profiles
    from explorer.runtimes.profile import profile

    timed = {r.label: r for r in report.results}
    found: dict[str, dict[str, Any]] = {}
    for runtime in runtimes:
        row = timed.get(runtime.label)
        if row is None:
            continue
        if row.llm is not None:
            calls = generation_profiles(
                graph,
                runtime,
                prompt_tokens=row.llm.prompt_tokens,
                context=row.llm.context,
                decode_steps=row.llm.decode_steps,
                fix=args.fix,
                simplify=args.simplify,
            )
        else:
            shapes = report.input_shapes
            session = runtime.prepare(graph, shapes)
            calls = {"run": profile(session, random_feeds(graph.model, shapes, seed=report.seed or 0))}
        found[runtime.label] = dict(calls)
    return found


def _generates(graph: Any, args: argparse.Namespace) -> bool:
    """Whether ``bench`` times a decoder LLM's generation: a decoder, and no single call asked for."""
    from explorer.onnx_adapter.decoder import decoder_spec

    if args.single_call or (args.input_shape and not (args.prompt_tokens or args.context)):
        return False
    return decoder_spec(graph.model, graph.model_path) is not None


def _llm_table(report: Any) -> str:
    """A decoder's generation per runtime: prefill and decode, and decode against the memory roof."""
    first = next(r.llm for r in report.results if r.llm is not None)
    lines = [
        f"decoder LLM: a prompt of {first.prompt_tokens} tokens, then {first.decode_steps} decode steps "
        f"up to a context of {first.context} (KV cache {format_bytes(first.kv_cache_bytes)}; a decode "
        f"step reads {format_bytes(first.bytes_per_decode_step)}: at {first.memory_gbps:.1f} GB/s, at "
        f"most {first.bandwidth_bound_tokens_per_s:.1f} tokens/s)",
        f"{'runtime':<34} {'prefill_ms':>10} {'prompt tok/s':>12} {'decode_ms':>10} {'tok/s':>9} "
        f"{'of bound':>8}  cache",
    ]
    for r in report.results:
        t = r.llm
        if t is None:
            continue
        lines.append(
            f"{r.label:<34} {t.prefill_ms:>10.3f} {t.prefill_tokens_per_s:>12.1f} "
            f"{t.decode_ms_per_token:>10.3f} {t.decode_tokens_per_s:>9.1f} {t.share_of_bound:>8.0%}  "
            f"{t.cache}"
        )
    return "\n".join(lines)

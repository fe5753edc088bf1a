"""The ``onnx-explorer`` command line.

``onnx-explorer info MODEL`` prints a model's summary; MODEL is a path or
``zoo:NAME``; ``passes``, ``diff``, ``report``, ``lower`` (TVM Relax, pass by pass),
``bench`` (ONNX Runtime and TVM side by side), ``coverage`` (op support and partitions
per target) and ``prepare`` (NPU-ready, step by step) are the other commands. Bad input
(a broken model, a bad argument, an output that would replace the input) ends with a
one-line error on stderr and exit code 2; a model that does not import or lower into a
runtime or compiler, with exit code 3. With ``--json``, stdout is one JSON document
whatever happens (a failure's has an ``"error"`` key), and nothing else.

Examples
--------
>>> from explorer.cli import main
>>> main(["info", "zoo:mlp", "--json"])  # doctest: +ELLIPSIS
{"source": "zoo:mlp", ...}
0
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from . import __version__
from .errors import ExplorerError, LoweringError, RuntimeUnsupportedError
from .io import check_output_path
from .load import check_input_shapes, load
from .op_deltas import format_op_deltas

__all__ = [
    "main",
    "build_parser",
    "parse_input_shape",
    "non_negative_int",
    "positive_int",
    "non_negative_float",
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "EXIT_NOT_IMPORTED",
]

EXIT_BAD_INPUT = 2
"""Exit code for bad input (missing file, broken model, bad arguments, an output path that cannot be
written or would replace the input)."""
EXIT_INTERNAL = 1
"""Exit code for an unexpected internal error (a bug: please report it)."""
EXIT_NOT_IMPORTED = 3
"""Exit code when the model does not import or lower into a runtime or compiler: TVM Relax's import
or one of its passes fails (:class:`~explorer.errors.LoweringError`), or a runtime cannot take an
operator or type of the model (:class:`~explorer.errors.RuntimeUnsupportedError`). The failing ops,
pass or runtime are named."""


def parse_input_shape(text: str) -> tuple[str, list[int]]:
    """Parse ``NAME=1,3,224,224`` (or ``NAME=1x3x224x224``) into a name and a shape.

    Examples
    --------
    >>> parse_input_shape("input=1,3,224,224")
    ('input', [1, 3, 224, 224])
    >>> parse_input_shape("x:0=2x8")
    ('x:0', [2, 8])
    """
    name, sep, dims = text.rpartition("=")
    if not sep or not name or not dims:
        raise argparse.ArgumentTypeError(f"expected NAME=D1,D2,... (e.g. input=1,3,224,224), got {text!r}")
    try:
        shape = [int(d) for d in dims.replace("x", ",").split(",") if d.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"dimensions must be integers in {text!r}") from None
    if not shape or any(d <= 0 for d in shape):
        raise argparse.ArgumentTypeError(f"dimensions must be positive integers in {text!r}")
    return name, shape


def non_negative_int(text: str) -> int:
    """An argparse ``type``: an integer >= 0 (a count, a number of threads, ``0`` for "the default").

    Examples
    --------
    >>> non_negative_int("0"), non_negative_int("8")
    (0, 8)
    >>> non_negative_int("-5")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be an integer >= 0, got '-5'
    """
    return _bounded(text, int, 0, "an integer >= 0")


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer >= 1 (runs, samples).

    Examples
    --------
    >>> positive_int("3")
    3
    >>> positive_int("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be an integer >= 1, got '0'
    """
    return _bounded(text, int, 1, "an integer >= 1")


def non_negative_float(text: str) -> float:
    """An argparse ``type``: a finite number >= 0 (seconds, minutes).

    Examples
    --------
    >>> non_negative_float("0.5")
    0.5
    >>> non_negative_float("nan")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a finite number >= 0, got 'nan'
    """
    return _bounded(text, float, 0, "a finite number >= 0")


def _bounded(text: str, kind: Callable[[str], Any], low: float, what: str) -> Any:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if not math.isfinite(value) or value < low:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
    return value


class _ArgumentsRejected(SystemExit):
    """argparse refused the arguments (usage and message already on stderr); ``main`` adds the
    ``--json`` error document. Uncaught, it exits 2 as argparse does."""

    def __init__(self, message: str) -> None:
        super().__init__(EXIT_BAD_INPUT)
        self.message = message


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors ``main`` can also report as ``--json``."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        text = f"{self.prog}: error: {message}"
        print(text, file=sys.stderr)
        raise _ArgumentsRejected(text)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``onnx-explorer`` (one sub-command per task).

    Examples
    --------
    >>> build_parser().parse_args(["info", "zoo:mlp"]).command
    'info'
    """
    parser = _Parser(
        prog="onnx-explorer",
        description="Explore ONNX graphs and what compilers do to them.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = commands.add_parser("info", help="summarise a model: ops, parameters, opsets, inputs and outputs")
    info.add_argument("model", metavar="MODEL", help="an .onnx file, or zoo:NAME for a built-in sample")
    info.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    info.add_argument(
        "--input-shape",
        action="append",
        type=parse_input_shape,
        default=[],
        metavar="NAME=D1,D2,...",
        help="fix the dims of an input (repeatable), e.g. input=1,3,224,224",
    )
    info.add_argument(
        "--no-external-data",
        action="store_true",
        help="do not read tensors stored in external files (structure only)",
    )
    info.set_defaults(handler=_info)

    passes = commands.add_parser(
        "passes",
        help="run a pipeline of passes step by step and show what each changed",
        description="Run passes one at a time; per step: changed?, time, nodes, op-count deltas, "
        "added/removed/modified nodes, and the max abs output difference from the original (ONNX Runtime).",
    )
    passes.add_argument("model", metavar="MODEL", nargs="?", help="an .onnx file, or zoo:NAME")
    passes.add_argument("--list", action="store_true", help="list every registered pass and exit")
    passes.add_argument(
        "--pipeline",
        default="fuse_and_eliminate",
        help="comma-separated pass names, e.g. onnxsim,fuse_bn_into_conv,ort:extended; parameters in "
        "parentheses, e.g. ort-transformers:bert(num_heads=12,hidden_size=768) (default: %(default)s)",
    )
    passes.add_argument(
        "--input-shape", action="append", type=parse_input_shape, default=[], metavar="NAME=D1,D2,..."
    )
    passes.add_argument("--json", action="store_true", help="print one JSON object")
    passes.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the final model here (atomically; not when a step fails)",
    )
    passes.add_argument("--force", action="store_true", help="let -o replace the input model")
    passes.add_argument("--no-verify", action="store_true", help="skip the ONNX Runtime output comparison")
    passes.set_defaults(handler=_passes)

    report = commands.add_parser(
        "report",
        help="write a self-contained HTML report (summary, op histogram, graph; steps with --pipeline)",
    )
    report.add_argument("model", metavar="MODEL", help="an .onnx file, or zoo:NAME")
    report.add_argument("-o", "--output", metavar="FILE", required=True, help="the .html file to write")
    report.add_argument("--force", action="store_true", help="let -o replace the input model")
    report.add_argument("--pipeline", help="passes to run and report step by step, e.g. onnxsim,ort:extended")
    report.add_argument(
        "--input-shape", action="append", type=parse_input_shape, default=[], metavar="NAME=D1,D2,..."
    )
    report.add_argument("--expanded", action="store_true", help="draw every node (no collapsed name scopes)")
    report.set_defaults(handler=_report)

    lower = commands.add_parser(
        "lower",
        help="lower a model through TVM Relax pass by pass: bindings, PrimFuncs and fused functions per step",
        description="Import into TVM Relax and run its passes one at a time (by default the CPU's "
        "default pipeline, the one the build compiles with: library dispatch, LegalizeOps, "
        "AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR, the dataflow lowering, memory planning "
        "and VM finalization). Per step: changed?, time, Relax bindings, PrimFuncs, fused functions, "
        "kernels, intermediate tensors, storages. A model "
        "that does not import: the failing ops with reasons; a pass that fails: the pass, the Relax binding "
        f"and the ONNX node it came from, and the fix; exit code {EXIT_NOT_IMPORTED}.",
    )
    lower.add_argument("model", metavar="MODEL", help="an .onnx file, or zoo:NAME")
    lower.add_argument(
        "--input-shape", action="append", type=parse_input_shape, default=[], metavar="NAME=D1,D2,..."
    )
    lower.add_argument(
        "--simplify", action="store_true", help="run onnxsim with the fixed input shapes before the import"
    )
    lower.add_argument(
        "--fix",
        action="store_true",
        help="when the import or a pass fails, apply every fix offered (rewrites into standard ONNX, fixed "
        "shapes and onnxsim) and try again: never less than --simplify does",
    )
    lower.add_argument(
        "--passes",
        help="a pipeline (default: the target's default pipeline; zero: LegalizeOps .. FuseTIR) or "
        "comma-separated relax.transform passes",
    )
    lower.add_argument("--json", action="store_true", help="print one JSON object")
    lower.set_defaults(handler=_lower)

    timing = commands.add_parser(
        "bench",
        help="time a model on ONNX Runtime and TVM side by side: median, p90, runs, prepare time, agreement",
        description="Prepare each runtime once (session creation, or import, tuning and compile: prepare_s), "
        "then time it on the same generated inputs (fixed seed): warm-up runs, then runs until both "
        "--min-runs and --min-seconds are reached (or --max-seconds is). max_abs_err is against the "
        "first runtime's outputs.",
    )
    timing.add_argument("model", metavar="MODEL", help="an .onnx file, or zoo:NAME")
    timing.add_argument(
        "--runtime", action="append", default=[], metavar="NAME", help="ort, ort-cuda or tvm (repeatable)"
    )
    budget = timing.add_mutually_exclusive_group()
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
    timing.add_argument(
        "--pretuned",
        action="store_true",
        help="TVM applies the tuning records shipped for this CPU (with a budget, tunes on from them)",
    )
    timing.add_argument(
        "--input-shape", action="append", type=parse_input_shape, default=[], metavar="NAME=D1,D2,..."
    )
    timing.add_argument(
        "--threads", type=non_negative_int, default=0, help="ONNX Runtime's intra-op threads (0: its default)"
    )
    timing.add_argument(
        "--simplify",
        action="store_true",
        help="run onnxsim with the fixed input shapes first (as `lower --simplify`); every runtime runs it",
    )
    timing.add_argument(
        "--fix",
        action="store_true",
        help="when TVM's import or a pass fails, apply every fix offered (as `lower --fix`) and time every "
        "runtime on the fixed model, so all of them run the same graph",
    )
    timing.add_argument(
        "--rpc-tracker", metavar="HOST:PORT", help="run TVM on a server from this RPC tracker"
    )
    timing.add_argument("--rpc-key", metavar="KEY", help="the device key of the RPC servers")
    timing.add_argument("--warmup", type=non_negative_int, default=3, help="runs before timing (default 3)")
    timing.add_argument("--min-runs", type=positive_int, default=10, help="timed runs at least (default 10)")
    timing.add_argument(
        "--min-seconds",
        type=non_negative_float,
        default=1.0,
        help="seconds of timed runs at least (default 1)",
    )
    timing.add_argument(
        "--max-seconds", type=non_negative_float, default=30.0, help="stop timing after this (default 30)"
    )
    timing.add_argument("--json", action="store_true", help="print one JSON object")
    timing.set_defaults(handler=_bench)

    cover = commands.add_parser(
        "coverage",
        help="which nodes each target takes (ONNX Runtime CPU/CUDA, NNAPI, CoreML, Qualcomm HTP, TVM), "
        "partitions and CPU fallback",
        description="Per target: supported_nodes, total_nodes, coverage (0..1), partitions, and the ops "
        "that fall back with their reasons. Fix dynamic input shapes with --input-shape: NPUs need static "
        "shapes.",
    )
    cover.add_argument("model", metavar="MODEL", nargs="?", help="an .onnx file, or zoo:NAME")
    cover.add_argument(
        "--target", action="append", default=[], metavar="NAME", help="a target (repeatable; default: all)"
    )
    cover.add_argument(
        "--input-shape", action="append", type=parse_input_shape, default=[], metavar="NAME=D1,D2,..."
    )
    cover.add_argument(
        "--assignment",
        action="store_true",
        help="also ask ONNX Runtime where it places each node (installed providers) and compare",
    )
    cover.add_argument(
        "--list-targets", action="store_true", help="list the targets and where their knowledge comes from"
    )
    cover.add_argument("--json", action="store_true", help="print one JSON object")
    cover.set_defaults(handler=_coverage)

    ready = commands.add_parser(
        "prepare",
        help="make a model NPU-ready step by step (static shapes, onnxsim, QNN preprocessing, QDQ) and "
        "show the target's coverage, partitions and accuracy after each step",
        description="Runs the target's NPU-ready pipeline (qnn-htp: ort-quant:fix_shapes, onnxsim, "
        "ort-quant:qnn_preprocess, ort-quant:qnn_qdq) and prints per step: pass, coverage, partitions, "
        "max_abs_diff against the float model (both on ONNX Runtime's CPU provider).",
    )
    ready.add_argument("model", metavar="MODEL", help="an .onnx file, or zoo:NAME")
    ready.add_argument(
        "--target", default="qnn-htp", help="qnn-htp (default), nnapi, coreml-mlprogram or coreml-nn"
    )
    ready.add_argument(
        "--input-shape", action="append", type=parse_input_shape, default=[], metavar="NAME=D1,D2,..."
    )
    ready.add_argument(
        "--activations", choices=("uint8", "uint16"), default="uint8", help="QDQ activation type (qnn-htp)"
    )
    ready.add_argument(
        "--samples", type=positive_int, default=None, help="generated calibration inputs (default 8)"
    )
    ready.add_argument("--output", metavar="PATH", help="save the prepared model here (written atomically)")
    ready.add_argument("--force", action="store_true", help="let --output replace the input model")
    ready.add_argument("--json", action="store_true", help="print one JSON object")
    ready.set_defaults(handler=_prepare)

    difference = commands.add_parser(
        "diff", help="diff two model files: added, removed, modified nodes and fusions"
    )
    difference.add_argument("before", metavar="A", help="the first model (.onnx or zoo:NAME)")
    difference.add_argument("after", metavar="B", help="the second model")
    difference.add_argument("--json", action="store_true", help="print one JSON object")
    difference.set_defaults(handler=_diff)
    return parser


def _info(args: argparse.Namespace) -> int:
    graph = load(
        args.model,
        input_shapes=dict(args.input_shape) or None,
        external_data=not args.no_external_data,
    )
    summary = graph.summary()
    if args.json:
        print(json.dumps(summary.to_dict()))
    else:
        print(summary.to_text())
    return 0


def _list_passes(as_json: bool) -> int:
    from .passes import list_passes

    passes = list_passes()
    if as_json:
        print(
            json.dumps(
                [
                    {"name": p.name, "family": p.family, "kind": p.kind, "description": p.description}
                    for p in passes
                ]
            )
        )
        return 0
    family = None
    for found in passes:
        if found.family != family:
            family = found.family
            print(f"\n{family}")
        first = found.description.split(". ")[0].strip().rstrip(".")
        print(f"  {found.name:<40} {first[:100]}")
    return 0


def _progress(step: int, total: int, name: str) -> None:
    print(f"[{step}/{total}] {name} ...", file=sys.stderr, flush=True)


def _passes(args: argparse.Namespace) -> int:
    if args.list:
        return _list_passes(args.json)
    if not args.model:
        raise ExplorerError("passes needs a MODEL (or --list)")
    if args.output:  # before the passes run: an unwritable path fails at once
        check_output_path(args.output, args.model, force=args.force)
    from .timeline import run_pipeline

    timeline = run_pipeline(
        args.model,
        args.pipeline,
        input_shapes=dict(args.input_shape) or None,
        verify=not args.no_verify,
        progress=None if args.json else _progress,
    )
    failed = [s for s in timeline.snapshots if s.error]
    if args.output and not failed:  # a failed step: not the pipeline's model, nothing is written
        from .model_files import save_graph_model

        save_graph_model(timeline.snapshots[-1].graph, args.output)
    error = None
    if failed:
        first = failed[0]
        more = f" (and {len(failed) - 1} more failed steps)" if len(failed) > 1 else ""
        unwritten = f"; {args.output} was not written" if args.output else ""
        error = ExplorerError(
            f"{args.model}: step {first.index} ({first.name}) failed: {first.error}{more}{unwritten}"
        )
    if args.json:
        data = timeline.to_dict()
        if error is not None:
            data["error"] = _error_dict(error, EXIT_BAD_INPUT)
        print(json.dumps(data))
    else:
        print(_timeline_text(timeline))
        if args.output and not failed:
            print(f"wrote {args.output}")
    if error is not None:
        print(f"onnx-explorer: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def _timeline_text(timeline: Any) -> str:
    header = (
        f"{'#':>2}  {'pass':<34} {'changed':<7} {'ms':>9} {'nodes':>13}  "
        f"{'+add':>5} {'-rem':>5} {'~mod':>5}  {'max|diff|':>9}  op deltas"
    )
    lines = [f"model: {timeline.source}", header]
    for index in range(1, len(timeline)):
        row = timeline.step_row(index)
        deltas = format_op_deltas(row["op_deltas"], empty="-")
        drift = row["max_abs_diff"]
        drift_text = "-" if drift is None else (drift if isinstance(drift, str) else f"{drift:.2e}")
        nodes = f"{row['nodes_before']}->{row['nodes_after']}"
        lines.append(
            f"{index:>2}  {row['pass']:<34} {'yes' if row['changed'] else 'no':<7} {row['elapsed_ms']:>9.1f} "
            f"{nodes:>13}  {row['added']:>5} {row['removed']:>5} {row['modified']:>5}  "
            f"{drift_text:>9}  {deltas}"
        )
        if row["error"]:
            lines.append(f"    error: {row['error']}")
        lines += [f"    | {line}" for line in row["log"]]
    return "\n".join(lines)


def _with_flags(err: LoweringError, command: str, args: argparse.Namespace) -> LoweringError:
    """``err`` with the flags that apply its fix, when they were not given (``--simplify``, ``--fix``)."""
    from .lower import FIX

    if err.fix != FIX or args.fix or args.simplify:
        return err
    return err.replace(
        fix=f"{err.fix} (onnx-explorer {command} MODEL --input-shape ... --simplify, or --fix)"
    )


def _fix_progress(args: argparse.Namespace) -> Callable[[str], None] | None:
    """Say each fix as it is applied (on stderr; not with --json)."""
    if args.json:
        return None
    return lambda words: print(f"  applying a fix: {words}", file=sys.stderr)


def _lower(args: argparse.Namespace) -> int:
    from .lower import FIX, RelaxImportFailed, relax_pipeline
    from .lower.import_fix import lower_with_fixes
    from .lower.relax_pipeline import check_passes
    from .tensors import format_bytes

    passes = check_passes(args.passes) if args.passes else "default"  # a typo: before anything runs
    graph = load(args.model)
    shapes = dict(args.input_shape) or None
    check_input_shapes(graph.model, shapes or {}, args.model)
    try:
        timeline, applied = lower_with_fixes(
            graph,
            shapes,
            lambda g, s: relax_pipeline(g, s, passes),
            simplify=args.simplify,
            fix=args.fix,
            progress=_fix_progress(args),
        )
    except LoweringError as err:  # main says it (exit 3), with the flags that fix it
        raise _with_flags(err, "lower", args) from None
    except RelaxImportFailed as err:
        result = err.result
        if args.json:
            print(
                json.dumps(
                    {
                        "source": args.model,
                        **result.to_dict(),
                        "error": _error_dict(err, EXIT_NOT_IMPORTED),
                    }
                )
            )
            print(f"onnx-explorer: error: {' '.join(str(err).split())}", file=sys.stderr)
        else:
            print(f"{args.model} does not import into TVM Relax:", file=sys.stderr)
            for failure in result.failures:
                print(f"  {failure.node or '?'} [{failure.op_type}]: {failure.reason}", file=sys.stderr)
            if result.fix:
                how = "--simplify --input-shape ..., or --fix" if result.fix == FIX else "--fix"
                print(f"fix: {result.fix} (onnx-explorer lower MODEL {how})", file=sys.stderr)
        return EXIT_NOT_IMPORTED
    rows = [
        {
            "pass": snap.name,
            "changed": snap.changed,
            "elapsed_ms": round(snap.elapsed * 1000, 3),
            **{
                key: snap.metrics.get(key)
                for key in (
                    "bindings",
                    "prim_funcs",
                    "fused",
                    "kernels",
                    "intermediates",
                    "tensor_allocations",
                    "tensor_bytes",
                    "storages",
                    "storage_bytes",
                )
            },
            "log": list(snap.log),
        }
        for snap in timeline.snapshots
    ]
    if args.json:
        print(
            json.dumps({"source": args.model, "fixes": list(applied), "import": rows[0], "steps": rows[1:]})
        )
        return 0
    print(
        f"model: {args.model} (Relax import {rows[0]['elapsed_ms']:.1f} ms, {rows[0]['bindings']} bindings)"
    )
    for fix in applied:
        print(f"fixed before the import: {fix}")
    print(
        f"{'#':>2}  {'pass':<22} {'changed':<7} {'ms':>9} {'bindings':>8} {'prim_funcs':>10} {'fused':>5}"
        f" {'kernels':>7} {'intermediates':>13} {'storages':>8} {'storage':>10}"
    )
    for index, row in enumerate(rows[1:], start=1):
        print(
            f"{index:>2}  {row['pass']:<22} {'yes' if row['changed'] else 'no':<7} {row['elapsed_ms']:>9.1f} "
            f"{row['bindings']:>8} {row['prim_funcs']:>10} {row['fused']:>5} {row['kernels']:>7} "
            f"{row['intermediates']:>13} {row['storages']:>8} "
            f"{format_bytes(row['storage_bytes']) if row['storage_bytes'] else '':>10}"
        )
    return 0


def _bench(args: argparse.Namespace) -> int:
    from .runtimes.bench import bench, get_runtime

    graph = load(args.model)
    check_input_shapes(graph.model, dict(args.input_shape), args.model)
    runtimes = []
    for name in args.runtime or ["ort", "tvm"]:
        options: dict[str, Any] = {}
        if name.startswith("tvm"):
            options = {"tune_trials": args.tune_trials, "tune_minutes": args.tune_minutes}
            if args.pretuned:
                options["pretuned"] = True
            if args.rpc_tracker or args.rpc_key:
                options.update(rpc_tracker=args.rpc_tracker, rpc_key=args.rpc_key)
        elif args.threads:
            options = {"threads": args.threads}
        try:
            runtimes.append(get_runtime(name, **options))
        except ValueError as err:
            raise ExplorerError(str(err)) from None

    shown: dict[str, float] = {}

    def progress(label: str, event: Any) -> None:  # a line every 2 s per runtime at most
        now = time.monotonic()
        if args.json or event is None or not event.message or now - shown.get(label, -10.0) < 2.0:
            return
        shown[label] = now
        print(f"  {label}: {event.message}", file=sys.stderr)

    from .lower import RelaxImportFailed
    from .lower.import_fix import lower_with_fixes

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
        )

    try:
        report, applied = lower_with_fixes(
            graph,
            dict(args.input_shape) or None,
            timed,
            simplify=args.simplify,
            fix=args.fix,
            progress=_fix_progress(args),
        )
    except LoweringError as err:  # main says it (exit 3), with the flags that fix it
        raise _with_flags(err, "bench", args) from None
    except RelaxImportFailed as err:  # as `lower` reports it
        if args.json:
            print(json.dumps({"source": args.model, "error": _error_dict(err, EXIT_NOT_IMPORTED)}))
        print(f"onnx-explorer: error: {' '.join(str(err).split())}", file=sys.stderr)
        if err.result.fix and not args.fix:
            print("to apply the fix: onnx-explorer bench MODEL --fix", file=sys.stderr)
        return EXIT_NOT_IMPORTED
    except ConnectionError as err:  # the RPC tracker or servers
        raise ExplorerError(str(err)) from None
    if args.json:
        print(json.dumps({**report.to_dict(), "source": args.model, "fixes": list(applied)}))
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
    for name, why in report.skipped:
        print(f"{name}: skipped ({why})")
    return 0


def _coverage(args: argparse.Namespace) -> int:
    from .targets import coverage, get_target, list_targets

    if args.list_targets:
        targets = list_targets()
        if args.json:
            print(json.dumps({"targets": [t.to_dict() for t in targets]}))
            return 0
        for t in targets:
            print(f"{t.name:<17} {t.runtime} on {t.device}")
            print(f"{'':<17} {t.source.describe()}")
        return 0
    if not args.model:
        raise ExplorerError("coverage needs a MODEL (or --list-targets)")
    try:
        targets = [get_target(n) for n in args.target]  # before loading: a typo fails at once
    except KeyError as err:
        raise ExplorerError(err.args[0]) from None
    shapes = dict(args.input_shape) or None
    graph = load(args.model, input_shapes=shapes)
    report = coverage(graph, targets or None, input_shapes=shapes, with_assignment=args.assignment)
    if args.json:
        print(json.dumps(report.to_dict()))
        return 0
    print(f"model: {args.model}")
    print(f"{'target':<17} {'supported':>9} {'total':>6} {'coverage':>8} {'by FLOPs':>8} {'partitions':>10}")
    for t in report.targets:
        flops = "" if t.flops_coverage is None else f"{t.flops_coverage:.1%}"
        print(
            f"{t.target:<17} {t.supported_nodes:>9} {t.total_nodes:>6} {t.coverage:>8.1%} {flops:>8} "
            f"{t.partitions:>10}"
        )
    for t in report.targets:
        print(f"\n{t.target}: {t.verdict}")
        if t.agrees_with_runtime is not None:
            print(f"  ONNX Runtime's own placement {'agrees' if t.agrees_with_runtime else 'DIFFERS'}")
        for op, entry in t.fallback_ops.items():
            print(f"  {op} x{entry['count']}: {'; '.join(entry['reasons'][:3])}")
    return 0


def _prepare(args: argparse.Namespace) -> int:
    from .targets.prepare import prepare_for_target, prepare_pipeline

    try:
        prepare_pipeline(args.target, {})  # before loading: a target without a pipeline fails at once
    except KeyError as err:
        raise ExplorerError(err.args[0]) from None

    if args.output:  # before the pipeline runs: an unwritable path fails at once
        check_output_path(args.output, args.model, force=args.force)

    def progress(step: int, total: int, name: str) -> None:
        if not args.json:
            print(f"[{step}/{total}] {name}", file=sys.stderr)

    graph = load(args.model)
    check_input_shapes(graph.model, dict(args.input_shape), args.model)
    prepared = prepare_for_target(
        graph,
        args.target,
        input_shapes=dict(args.input_shape) or None,
        activation_type=args.activations,
        samples=args.samples,
        progress=progress,
    )
    saved = None
    if args.output:
        from .model_files import save_graph_model

        saved = save_graph_model(prepared.graph, args.output)
    if args.json:
        print(
            json.dumps({**prepared.to_dict(), "source": args.model, "output": str(saved) if saved else None})
        )
        return 0
    print(f"model: {args.model} -> {args.target}, inputs {prepared.input_shapes}")
    print(
        f"{'pass':<26} {'coverage':>8} {'partitions':>10} {'nodes':>6} {'max_abs_diff':>12} {'relative':>9}"
    )
    for s in prepared.steps:
        diff = "" if s.max_abs_diff is None else f"{s.max_abs_diff:.3g}"
        relative = "" if s.relative_diff is None else f"{s.relative_diff:.2%}"
        note = f"  ({s.error})" if s.error else ("" if s.changed or s.index == 0 else "  (no change)")
        print(
            f"{s.pass_name:<26} {s.coverage:>8.1%} {s.partitions:>10} {s.total_nodes:>6} {diff:>12} "
            f"{relative:>9}{note}"
        )
    print(prepared.steps[-1].verdict)
    if saved:
        print(f"wrote {saved}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from .report import save

    check_output_path(args.output, args.model, force=args.force)  # before the work
    path = save(
        args.model,
        args.output,
        pipeline=args.pipeline,
        input_shapes=dict(args.input_shape) or None,
        collapse=None if args.expanded else "auto",
    )
    print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB); open it in any browser, no network needed")
    return 0


def _diff(args: argparse.Namespace) -> int:
    from .diff import diff

    result = diff(load(args.before), load(args.after))
    if args.json:
        print(json.dumps(result.to_dict()))
        return 0
    counts = result.counts()
    print(f"{args.before} -> {args.after}")
    print(
        f"added {counts['added']}, removed {counts['removed']}, modified {counts['modified']}, "
        f"kept {counts['kept']}, fusions {counts['fusions']}; nodes {result.node_delta:+d}, "
        f"params {result.param_delta:+d}, changed weight bytes {result.weight_bytes_changed:,}"
    )
    if result.op_deltas:
        print("op deltas: " + format_op_deltas(result.op_deltas))
    for fusion in result.fusions[:50]:
        print(f"  {fusion.kind:<6} {fusion.pattern}  ({', '.join(fusion.sources)} -> {fusion.into})")
    if len(result.fusions) > 50:
        print(f"  ... {len(result.fusions) - 50} more")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``onnx-explorer`` with ``argv`` (default: ``sys.argv[1:]``) and return the exit code.

    Examples
    --------
    >>> main(["info", "no-such-model.onnx"])
    2
    """
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(words)
    except _ArgumentsRejected as err:  # usage and message are on stderr
        if "--json" in words:
            print(
                json.dumps({"error": {"type": "UsageError", "message": err.message, "exit_code": err.code}})
            )
        raise
    as_json = bool(getattr(args, "json", False))
    try:
        return args.handler(args)
    except (RuntimeUnsupportedError, LoweringError) as err:  # the model does not import or lower
        return _fail(err, EXIT_NOT_IMPORTED, as_json)
    except ExplorerError as err:
        return _fail(err, EXIT_BAD_INPUT, as_json)
    except KeyboardInterrupt:
        print("onnx-explorer: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        if args.debug:
            traceback.print_exc()
        message = (
            f"internal error ({type(err).__name__}: {err}); "
            "rerun with --debug for the traceback and please report it"
        )
        print(f"onnx-explorer: {message}", file=sys.stderr)
        if as_json:
            print(json.dumps({"error": {"type": "internal", "message": message, "exit_code": EXIT_INTERNAL}}))
        return EXIT_INTERNAL


def _fail(err: ExplorerError, code: int, as_json: bool) -> int:
    """Report ``err`` as one line on stderr (and, with ``--json``, as the error document) and
    return ``code``."""
    message = " ".join(str(err).split())  # one line, whatever the message holds
    print(f"onnx-explorer: error: {message}", file=sys.stderr)
    if as_json:
        print(json.dumps({"error": _error_dict(err, code)}))
    return code


_ERROR_FIELDS = ("path", "runtime", "op_type", "domain", "opset", "pass_name", "binding", "onnx_nodes", "fix")
"""Attributes of typed errors the ``--json`` error document carries when they are set."""


def _error_dict(err: ExplorerError, code: int) -> dict[str, Any]:
    """``{"type", "message", "exit_code", ...}``: the ``"error"`` of a ``--json`` document."""
    data: dict[str, Any] = {
        "type": type(err).__name__,
        "message": " ".join(str(err).split()),
        "exit_code": code,
    }
    for name in _ERROR_FIELDS:
        value = getattr(err, name, None)
        if value not in (None, "", ()):
            data[name] = list(value) if isinstance(value, tuple) else value
    return data


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

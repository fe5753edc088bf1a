"""``onnx-explorer prepare MODEL --target T``: make a model NPU-ready step by step (static shapes,
onnxsim, QNN preprocessing, QDQ) and show the target's coverage, partitions and accuracy per step.

A decoder LLM (a KV cache fed back, or ``genai_config.json`` beside it) on ``qnn-htp`` becomes two
graphs, as Qualcomm's LLM flow makes them: a prefill graph of ``--prompt-tokens`` N tokens (AR-N)
and a decode graph of one (AR-1), both at ``--context`` L (:mod:`explorer.targets.decoder_prepare`:
contrib ops rewritten, shapes fixed, onnxsim, bounded masks, A16W8 QDQ). ``--output OUT.onnx``
writes ``OUT_prefill.onnx`` and ``OUT_decode.onnx`` (each atomically; both or neither). Giving
``--input-shape`` prepares the one call those shapes describe instead.

Examples
--------
>>> from explorer.cli import main
>>> main(["prepare", "zoo:mlp", "--target", "cpu"])  # a target without a pipeline: refused at once
2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from explorer.cli.options import add_input_shape, add_json, add_model, add_output, positive_int
from explorer.core.errors import ExplorerError, LoweringError, UsageError
from explorer.isolation.io import check_output_path
from explorer.onnx_adapter.input_shapes import check_input_shapes
from explorer.onnx_adapter.load import load

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph
    from explorer.targets.prepare import PreparedModel

__all__ = ["add_parser", "run", "run_decoder", "decoder_outputs"]


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``prepare`` to the sub-commands ``commands``; return its parser.

    Examples
    --------
    >>> commands = argparse.ArgumentParser(prog="onnx-explorer").add_subparsers()
    >>> args = add_parser(commands).parse_args(["zoo:mlp", "--activations", "uint16"])
    >>> args.target, args.activations, args.samples, args.prompt_tokens
    ('qnn-htp', 'uint16', None, None)
    """
    parser = commands.add_parser(
        "prepare",
        help="make a model NPU-ready step by step (static shapes, onnxsim, QNN preprocessing, QDQ) and "
        "show the target's coverage, partitions and accuracy after each step",
        description="Runs the target's NPU-ready pipeline (qnn-htp: ort-quant:fix_shapes, onnxsim, "
        "ort-quant:qnn_preprocess, ort-quant:qnn_qdq) and prints per step: pass, coverage, partitions, "
        "max_abs_diff against the float model (both on ONNX Runtime's CPU provider).",
    )
    add_model(parser)
    parser.add_argument(
        "--target", default="qnn-htp", help="qnn-htp (default), nnapi, coreml-mlprogram or coreml-nn"
    )
    add_input_shape(parser)
    parser.add_argument(
        "--activations",
        choices=("uint8", "uint16"),
        default=None,
        help="QDQ activation type (qnn-htp; default uint8, uint16 for a decoder LLM)",
    )
    parser.add_argument(
        "--weights",
        choices=("uint8", "int8", "uint16", "int16"),
        default=None,
        help="QDQ weight type (qnn-htp; default uint8, int8 for a decoder LLM)",
    )
    parser.add_argument(
        "--prompt-tokens",
        "--ar",
        dest="prompt_tokens",
        type=positive_int,
        default=None,
        metavar="N",
        help="a decoder LLM's prefill graph takes N tokens (AR-N; default 128, at most half the context)",
    )
    parser.add_argument(
        "--context",
        type=positive_int,
        default=None,
        metavar="L",
        help="a decoder LLM's context length CL (KV cache + new tokens; default the model's, at most 1024)",
    )
    parser.add_argument(
        "--samples", type=positive_int, default=None, help="generated calibration inputs (default 8)"
    )
    add_output(parser, "save the prepared model here (written atomically)", short=False, metavar="PATH")
    add_json(parser)
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the target's NPU-ready pipeline on ``args.model``, print one row per step and the verdict,
    and save the result to ``--output`` when given; return 0. When a step failed (the QDQ step on a
    model ONNX Runtime cannot run, say, while the shapes were fixed), the model is not what was asked:
    a :class:`~explorer.core.errors.LoweringError` (exit 3) names each failed step's reason, no
    verdict is printed and ``--output`` is not written.

    Examples
    --------
    >>> from explorer.cli import build_parser
    >>> args = build_parser().parse_args(["prepare", "zoo:mlp", "--target", "nnapi", "--samples", "1"])
    >>> import contextlib, io
    >>> with contextlib.redirect_stderr(io.StringIO()):  # the steps as they start
    ...     run(args)  # doctest: +ELLIPSIS
    model: zoo:mlp -> nnapi, inputs {'input': [1, 1, 28, 28]}
    pass                       coverage partitions  nodes max_abs_diff  relative
    original ...
    the whole graph (6 nodes) runs on Android NNAPI (NPU / DSP / GPU) as one partition
    0
    """
    from explorer.targets.prepare import prepare_for_target, prepare_pipeline

    try:
        prepare_pipeline(args.target, {})  # before loading: a target without a pipeline fails at once
    except KeyError as err:
        raise ExplorerError(err.args[0]) from None

    if args.output:  # before the pipeline runs: an unwritable path fails at once
        check_output_path(args.output, args.model, force=args.force)

    def progress(step: int, total: int, name: str) -> None:
        if not args.json:
            print(f"[{step}/{total}] {name}", file=sys.stderr)

    from explorer.runtimes.memory_budget import check_memory

    graph = load(args.model)
    check_input_shapes(graph.model, dict(args.input_shape), args.model)
    if _is_decoder_call(args, graph):
        check_memory(graph.model, "prepare", ["decoder"], label=args.model)  # before any work: exit 3
        return run_decoder(args, graph, progress)
    check_memory(graph.model, "prepare", label=args.model)  # its quantization tools: one protobuf
    if args.prompt_tokens or args.context:
        raise UsageError(
            f"{args.model}: --prompt-tokens and --context size a decoder LLM's prefill and decode graphs "
            f"on qnn-htp; this is no decoder there (or --input-shape chose one call)"
        )
    prepared = prepare_for_target(
        graph,
        args.target,
        input_shapes=dict(args.input_shape) or None,
        activation_type=args.activations or "uint8",
        weight_type=args.weights or "uint8",
        samples=args.samples,
        progress=progress,
    )
    failed = [s for s in prepared.steps if s.error]
    if failed:  # the pipeline is what was asked: a model some step failed on is not ready for the target
        steps = len(prepared.steps) - 1
        what = (
            "every step failed, nothing was prepared"
            if len(failed) == steps
            else f"{len(failed)} of {steps} steps failed, the model is not ready for {args.target}"
        )
        reasons = [f"{s.pass_name}: {s.error}" for s in failed]
        _refuse(args, [what, *reasons], failed[0].pass_name, "pipeline")
    saved = None
    if args.output:
        from explorer.onnx_adapter.model_files import save_graph_model

        saved = save_graph_model(prepared.graph, args.output)
    if args.json:
        print(
            json.dumps({**prepared.to_dict(), "source": args.model, "output": str(saved) if saved else None})
        )
        return 0
    print(f"model: {args.model} -> {args.target}, inputs {prepared.input_shapes}")
    _print_steps(prepared)
    if saved:
        print(f"wrote {saved}")
    return 0


def _is_decoder_call(args: argparse.Namespace, graph: ModelGraph) -> bool:
    """Whether ``prepare`` makes a decoder's two graphs: a decoder on a target with a decoder pipeline,
    and no ``--input-shape`` choosing one call."""
    from explorer.onnx_adapter.decoder import decoder_spec
    from explorer.targets.decoder_prepare import DECODER_PIPELINES

    if args.target not in DECODER_PIPELINES or args.input_shape:
        return False
    return decoder_spec(graph.model, graph.model_path) is not None


def decoder_outputs(output: str | os.PathLike[str]) -> dict[str, Path]:
    """Where ``--output OUT.onnx`` puts a decoder's graphs: ``OUT_prefill.onnx`` and ``OUT_decode.onnx``.

    Examples
    --------
    >>> {k: v.name for k, v in decoder_outputs("out/smol.onnx").items()}
    {'prefill': 'smol_prefill.onnx', 'decode': 'smol_decode.onnx'}
    """
    path = Path(output)
    suffix = path.suffix or ".onnx"
    return {name: path.with_name(f"{path.stem}_{name}{suffix}") for name in ("prefill", "decode")}


def run_decoder(
    args: argparse.Namespace, graph: ModelGraph, progress: Callable[[int, int, str], None]
) -> int:
    """``prepare`` on a decoder LLM: its prefill and decode graphs, each step judged; both graphs
    written to ``--output`` (:func:`decoder_outputs`) when every step did what was asked, else exit 3.

    Examples
    --------
    >>> import contextlib, io
    >>> from explorer.cli import build_parser
    >>> args = build_parser().parse_args(["prepare", "zoo:llama", "--ar", "4", "--context", "16",
    ...                                   "--samples", "1", "--json"])
    >>> with contextlib.redirect_stdout(io.StringIO()) as out:
    ...     code = run_decoder(args, load(args.model), lambda *a: None)
    >>> code, json.loads(out.getvalue())["graphs"]["decode"]["input_shapes"]["input_ids"]
    (0, [1, 1])
    """
    from explorer.onnx_adapter.model_files import save_graph_model
    from explorer.targets.decoder_prepare import DECODER_ACTIVATIONS, DECODER_WEIGHTS, prepare_decoder

    outputs = decoder_outputs(args.output) if args.output else {}
    for path in outputs.values():  # before the work: an unwritable path fails at once
        check_output_path(path, args.model, force=args.force)
    prepared = prepare_decoder(
        graph,
        args.target,
        prompt_tokens=args.prompt_tokens,
        context=args.context,
        activation_type=args.activations or DECODER_ACTIVATIONS,
        weight_type=args.weights or DECODER_WEIGHTS,
        samples=args.samples,
        progress=progress,
    )
    problems = prepared.problems()
    if problems:
        failed = next((s.pass_name for c in prepared.calls for s in c.prepared.steps if s.error), "prepare")
        _refuse(args, problems, failed, "decoder pipeline")
    written: list[Path] = []
    try:
        for call in prepared.calls if outputs else ():
            written.append(save_graph_model(call.graph, outputs[call.name]))
    except BaseException:
        for path in written:  # both graphs or neither
            path.unlink(missing_ok=True)
        raise
    if args.json:
        document = {**prepared.to_dict(), "source": args.model}
        document["output"] = {k: str(v) for k, v in outputs.items()} or None
        print(json.dumps(document))
        return 0
    split = prepared.split
    print(
        f"model: {args.model} -> {args.target}, decoder: prefill AR-{split.prompt_tokens} and decode AR-1 "
        f"at context {split.context}; QDQ activations {prepared.activation_type}, "
        f"weights {prepared.weight_type}"
    )
    for call in prepared.calls:
        print(f"\n{call.name}: {call.tokens} new tokens after {call.past} cached, inputs "
              f"input_ids {call.prepared.input_shapes.get('input_ids')} ({call.seconds:.1f} s)")  # fmt: skip
        _print_steps(call.prepared)
        for node in call.fallback[:_FALLBACK_SHOWN]:
            print(f"  falls back: {node.node} ({node.op}): {'; '.join(str(r) for r in node.blocking)}")
        if len(call.fallback) > _FALLBACK_SHOWN:
            print(f"  ... and {len(call.fallback) - _FALLBACK_SHOWN} more nodes (--json lists every one)")
    print(f"\nprepared in {prepared.seconds:.1f} s")
    for name, path in outputs.items():
        print(f"wrote {name}: {path}")
    return 0


_FALLBACK_SHOWN = 10


def _refuse(args: argparse.Namespace, problems: Sequence[str], failed: str, pipeline: str) -> NoReturn:
    """Raise the :class:`~explorer.core.errors.LoweringError` (exit 3) of a prepare that did not do what
    was asked: each problem named, the first failed pass, and that ``--output`` was not written."""
    unwritten = [f"nothing was written for --output {args.output}"] if args.output else []
    raise LoweringError(
        "; ".join([*problems, *unwritten]),
        pass_name=failed,
        compiler=f"{args.target} {pipeline}:",
        path=args.model,
    )


def _print_steps(prepared: PreparedModel) -> None:
    """The steps' table and the last verdict."""
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

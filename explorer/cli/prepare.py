"""``onnx-explorer prepare MODEL --target T``: make a model NPU-ready step by step (static shapes,
onnxsim, QNN preprocessing, QDQ) and show the target's coverage, partitions and accuracy per step.

Examples
--------
>>> from explorer.cli import main
>>> main(["prepare", "zoo:mlp", "--target", "cpu"])  # a target without a pipeline: refused at once
2
"""

from __future__ import annotations

import argparse
import json
import sys

from explorer.cli.options import add_input_shape, add_json, add_model, add_output, positive_int
from explorer.core.errors import ExplorerError
from explorer.isolation.io import check_output_path
from explorer.onnx_adapter.input_shapes import check_input_shapes
from explorer.onnx_adapter.load import load

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``prepare`` to the sub-commands ``commands``; return its parser.

    Examples
    --------
    >>> commands = argparse.ArgumentParser(prog="onnx-explorer").add_subparsers()
    >>> args = add_parser(commands).parse_args(["zoo:mlp", "--activations", "uint16"])
    >>> args.target, args.activations, args.samples
    ('qnn-htp', 'uint16', None)
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
        "--activations", choices=("uint8", "uint16"), default="uint8", help="QDQ activation type (qnn-htp)"
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
    and save the result to ``--output`` when given; return 0.

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
        from explorer.onnx_adapter.model_files import save_graph_model

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

"""``onnx-explorer quant-error FLOAT_MODEL QDQ_MODEL``: where quantisation hurts, per node (the SQNR of
each quantised activation and weight against the float model), and the first node that breaks accuracy
(a bisection between float and quantised, answered with the float model's ONNX node names).

Examples
--------
>>> from explorer.cli import main
>>> main(["quant-error", "zoo:mlp", "zoo:mlp"])  # the second model is no QDQ model: refused
2
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from explorer.cli.options import (
    add_export_overlay,
    add_input_shape,
    add_json,
    add_model,
    non_negative_float,
    positive_int,
)
from explorer.isolation.io import check_output_path
from explorer.onnx_adapter.input_shapes import check_input_shapes
from explorer.onnx_adapter.load import load

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``quant-error`` to the sub-commands ``commands``; return its parser.

    Examples
    --------
    >>> commands = argparse.ArgumentParser(prog="onnx-explorer").add_subparsers()
    >>> args = add_parser(commands).parse_args(["f.onnx", "q.onnx", "--threshold", "25"])
    >>> args.qdq_model, args.metric, args.threshold, args.direction
    ('q.onnx', 'sqnr', 25.0, 'reverse')
    """
    parser = commands.add_parser(
        "quant-error",
        help="where quantisation hurts, per node: SQNR of a QDQ model's tensors against the float model, "
        "and the first node that breaks accuracy",
        description="Runs the float model and its QDQ version (ONNX Runtime's CPU provider, optimisations "
        "off) on the inputs given (--inputs; random ones otherwise, and said so) and prints, per node of "
        "the float model, the SQNR in dB of each quantised activation and weight against the float model "
        "(as onnxruntime.quantization.qdq_loss_debug computes it); then bisects between float and "
        "quantised for the first node whose quantisation breaks the metric (as Polygraphy's debug "
        "precision does), and measures the metric with that node alone kept in float.",
    )
    add_model(parser, help="the float model that was quantised (an .onnx file, or zoo:NAME)")
    parser.add_argument("qdq_model", metavar="QDQ_MODEL", help="its QDQ version (an .onnx file)")
    add_input_shape(parser, help="the random inputs' shapes (when no --inputs are given)")
    parser.add_argument(
        "--inputs",
        metavar="FILE.npz",
        help="calibration or evaluation inputs: an array per input, the samples stacked along a new first "
        "axis (an array of the input's own rank is one sample)",
    )
    parser.add_argument(
        "--samples", type=positive_int, default=8, help="random inputs when no --inputs (default 8)"
    )
    parser.add_argument(
        "--metric",
        choices=("sqnr", "top1"),
        default="sqnr",
        help="the search's metric against the float model: sqnr (dB of the outputs, default) or top1 "
        "(share of samples whose top-1 class is the float model's)",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="what passes (default: 20 dB for sqnr, the float model's top1 less 0.05)",
    )
    parser.add_argument(
        "--direction",
        choices=("reverse", "forward"),
        default="reverse",
        help="reverse (default): quantise a growing prefix, the answer is the first node whose quantisation "
        "breaks the metric; forward: keep a growing prefix in float",
    )
    parser.add_argument(
        "--below",
        type=non_negative_float,
        default=None,
        metavar="DB",
        help="with --export-overlay: paint the nodes under this SQNR red",
    )
    add_export_overlay(parser, "the activation SQNR per node, then the weight SQNR per node,")
    add_json(parser)
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Measure the SQNR per node and search the first breaking node; print them; return 0.

    Examples
    --------
    >>> import contextlib, io, os, tempfile, onnx
    >>> from explorer.cli import build_parser
    >>> from explorer.runtimes.qdq_pairs import tiny_pair
    >>> tmp = tempfile.mkdtemp(); f, q = tiny_pair()
    >>> onnx.save(f, os.path.join(tmp, "f.onnx")); onnx.save(q, os.path.join(tmp, "q.onnx"))
    >>> args = build_parser().parse_args(["quant-error", os.path.join(tmp, "f.onnx"),
    ...                                   os.path.join(tmp, "q.onnx"), "--samples", "2", "--json"])
    >>> with contextlib.redirect_stdout(io.StringIO()) as out:
    ...     code = run(args)
    >>> document = json.loads(out.getvalue())
    >>> code, document["nodes"][0]["node"], document["first_breaking"]["metric"]
    (0, '/fc/MatMul', 'sqnr')
    """
    from explorer.runtimes.qdq_bisect import first_breaking_node
    from explorer.runtimes.qdq_pairs import pair_models, read_samples
    from explorer.runtimes.quant_error import quant_error

    if args.export_overlay:  # before the work
        check_output_path(args.export_overlay, (args.model, args.qdq_model))
    float_graph = load(args.model)
    shapes = dict(args.input_shape)
    check_input_shapes(float_graph.model, shapes, args.model)
    qdq_graph = load(args.qdq_model)
    pair = pair_models(float_graph, qdq_graph)
    samples = read_samples(
        pair.float_model, args.inputs, input_shapes=shapes, samples=args.samples, label=args.model
    )
    if not args.json:
        print(f"running {args.model} and {args.qdq_model} on {samples.description}", file=sys.stderr)
    report = quant_error(pair, None, samples)
    found = first_breaking_node(
        pair, None, samples, metric=args.metric, threshold=args.threshold, direction=args.direction
    )
    exported = []
    if args.export_overlay:
        from explorer.overlays.export import export_overlays
        from explorer.overlays.quant import quant_error_overlays

        overlays = quant_error_overlays(report, float_graph, first_breaking=found)
        if args.below is not None:
            from explorer.overlays.quant import quant_error_overlay

            overlays[0] = quant_error_overlay(report, float_graph, below=args.below, first_breaking=found)
        exported = export_overlays(overlays, args.export_overlay, float_graph)
    if args.json:
        document = {**report.to_dict(), "first_breaking": found.to_dict()}
        if exported:
            document["overlays"] = [str(p) for p in exported]
        print(json.dumps(document))
        return 0
    _print(report, found)
    for path in exported:
        print(f"wrote {path} (Model Explorer node data)")
    return 0


def _print(report: Any, found: Any) -> None:
    print(f"float: {report.float_source}  QDQ: {report.qdq_source}  inputs: {report.inputs}")
    print(f"{'node':<56} {'op':<20} {'kind':<10} {'sqnr_db':>9} {'local_db':>9}")
    for row in report.nodes:
        local = "" if row.local_sqnr_db is None else f"{row.local_sqnr_db:.2f}"
        print(f"{row.node:<56} {row.op_type or '':<20} {row.kind:<10} {row.sqnr_db:>9.2f} {local:>9}")
    worst = report.worst(3)
    if worst:
        print("lowest activation SQNR: " + ", ".join(f"{t.node} {t.sqnr_db:.2f} dB" for t in worst))
    for note in report.notes:
        print(f"note: {note}")
    runs = len(found.steps)
    print(f"\nfirst breaking node ({found.direction} search over {found.candidates} nodes, {runs} runs):")
    print(f"  {found.verdict}")

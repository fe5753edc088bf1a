"""``onnx-explorer passes MODEL --pipeline ...``: run passes one at a time and show what each changed
(``--list``: the registered passes).

Examples
--------
>>> from explorer.cli import main
>>> main(["passes", "zoo:mlp", "--pipeline", "eliminate_identity", "--no-verify", "--json"])
... # doctest: +ELLIPSIS
{"source": "zoo:mlp", ...}
0
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from explorer.cli.errors import EXIT_BAD_INPUT, error_dict
from explorer.cli.options import add_input_shape, add_json, add_model, add_output
from explorer.core.errors import ExplorerError
from explorer.core.op_deltas import format_op_deltas
from explorer.isolation.io import check_output_path

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``passes`` to the sub-commands ``commands``; return its parser.

    Examples
    --------
    >>> commands = argparse.ArgumentParser(prog="onnx-explorer").add_subparsers()
    >>> add_parser(commands).parse_args(["zoo:mlp"]).pipeline
    'fuse_and_eliminate'
    """
    parser = commands.add_parser(
        "passes",
        help="run a pipeline of passes step by step and show what each changed",
        description="Run passes one at a time; per step: changed?, time, nodes, op-count deltas, "
        "added/removed/modified nodes, and the max abs output difference from the original (ONNX Runtime).",
    )
    add_model(parser, optional=True)
    parser.add_argument("--list", action="store_true", help="list every registered pass and exit")
    parser.add_argument(
        "--pipeline",
        default="fuse_and_eliminate",
        help="comma-separated pass names, e.g. onnxsim,fuse_bn_into_conv,ort:extended; parameters in "
        "parentheses, e.g. ort-transformers:bert(num_heads=12,hidden_size=768) (default: %(default)s)",
    )
    add_input_shape(parser)
    add_json(parser)
    add_output(parser, "write the final model here (atomically; not when a step fails)")
    parser.add_argument("--no-verify", action="store_true", help="skip the ONNX Runtime output comparison")
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run ``args.pipeline`` on ``args.model`` step by step and print the steps (or list the passes);
    a failed step: exit code 2, and ``-o`` is not written.

    Examples
    --------
    >>> from explorer.cli import build_parser
    >>> run(build_parser().parse_args(["passes", "--list", "--json"]))  # doctest: +ELLIPSIS
    [{"name": ...}]
    0
    """
    if args.list:
        return _list_passes(args.json)
    if not args.model:
        raise ExplorerError("passes needs a MODEL (or --list)")
    if args.output:  # before the passes run: an unwritable path fails at once
        check_output_path(args.output, args.model, force=args.force)
    from explorer.passes.pipeline import run_pipeline

    timeline = run_pipeline(
        args.model,
        args.pipeline,
        input_shapes=dict(args.input_shape) or None,
        verify=not args.no_verify,
        progress=None if args.json else _progress,
    )
    failed = [s for s in timeline.snapshots if s.error]
    if args.output and not failed:  # a failed step: not the pipeline's model, nothing is written
        from explorer.onnx_adapter.model_files import save_graph_model

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
            data["error"] = error_dict(error, EXIT_BAD_INPUT)
        print(json.dumps(data))
    else:
        print(_timeline_text(timeline))
        if args.output and not failed:
            print(f"wrote {args.output}")
    if error is not None:
        # --debug: each failed step's traceback (the worker's), then the error
        if getattr(args, "debug", False):
            for step in failed:
                trace = step.traceback or "(none recorded)"
                print(f"traceback of step {step.index} ({step.name}):\n{trace}", file=sys.stderr)
        print(f"onnx-explorer: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def _list_passes(as_json: bool) -> int:
    from explorer.passes import list_passes

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


def _timeline_text(timeline: Any) -> str:
    header = (
        f"{'#':>2}  {'pass':<34} {'changed':<7} {'ms':>9} {'nodes':>13}  "
        f"{'+add':>5} {'-rem':>5} {'~mod':>5}  {'max|diff|':>9}  op deltas"
    )
    lines = [f"model: {timeline.source}"]
    lines += [f"    | {line}" for line in timeline[0].log]  # the original's notes: why max|diff| is "-"
    lines.append(header)
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

"""``onnx-explorer diff A B``: what changed between two models (added, removed, modified nodes,
fusions, op deltas, parameters and weight bytes).

Examples
--------
>>> from explorer.cli import main
>>> main(["diff", "zoo:mlp", "zoo:mlp", "--json"])  # doctest: +ELLIPSIS
{"added": 0, "removed": 0, "modified": 0, "kept": 6, ...}
0
"""

from __future__ import annotations

import argparse
import json

from explorer.cli.options import add_json
from explorer.core.op_deltas import format_op_deltas
from explorer.onnx_adapter.load import load

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``diff`` to the sub-commands ``commands``; return its parser.

    Examples
    --------
    >>> commands = argparse.ArgumentParser(prog="onnx-explorer").add_subparsers()
    >>> args = add_parser(commands).parse_args(["a.onnx", "b.onnx"])
    >>> args.before, args.after
    ('a.onnx', 'b.onnx')
    """
    parser = commands.add_parser(
        "diff", help="diff two model files: added, removed, modified nodes and fusions"
    )
    parser.add_argument("before", metavar="A", help="the first model (.onnx or zoo:NAME)")
    parser.add_argument("after", metavar="B", help="the second model")
    add_json(parser)
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Print what changed from ``args.before`` to ``args.after`` (text, or one JSON object); return 0.

    Examples
    --------
    >>> from explorer.cli import build_parser
    >>> run(build_parser().parse_args(["diff", "zoo:mlp", "zoo:mlp"]))
    zoo:mlp -> zoo:mlp
    added 0, removed 0, modified 0, kept 6, fusions 0; nodes +0, params +0, changed weight bytes 0
    0
    """
    from explorer.core.diff import diff

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

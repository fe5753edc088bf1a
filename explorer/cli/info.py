"""``onnx-explorer info MODEL``: a model's summary (ops, parameters, opsets, inputs and outputs).

Examples
--------
>>> from explorer.cli import main
>>> main(["info", "zoo:mlp"])  # doctest: +ELLIPSIS
model      zoo:mlp
...
0
"""

from __future__ import annotations

import argparse
import json

from explorer.cli.options import add_input_shape, add_json, add_model
from explorer.onnx_adapter.load import load

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``info`` to the sub-commands ``commands``; return its parser.

    Examples
    --------
    >>> commands = argparse.ArgumentParser(prog="onnx-explorer").add_subparsers()
    >>> add_parser(commands).parse_args(["zoo:mlp", "--json"]).json
    True
    """
    parser = commands.add_parser(
        "info", help="summarise a model: ops, parameters, opsets, inputs and outputs"
    )
    add_model(parser, help="an .onnx file, or zoo:NAME for a built-in sample")
    add_json(parser, help="print one JSON object instead of text")
    add_input_shape(parser, help="fix the dims of an input (repeatable), e.g. input=1,3,224,224")
    parser.add_argument(
        "--no-external-data",
        action="store_true",
        help="do not read tensors stored in external files (structure only)",
    )
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Print the summary of ``args.model`` (text, or one JSON object with ``--json``); return 0.

    Examples
    --------
    >>> from explorer.cli import build_parser
    >>> run(build_parser().parse_args(["info", "zoo:mlp", "--json"]))  # doctest: +ELLIPSIS
    {"source": "zoo:mlp", ...}
    0
    """
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

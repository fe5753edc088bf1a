"""The ``onnx-explorer`` command line.

``onnx-explorer info MODEL`` prints a model's summary; MODEL is a path or
``zoo:NAME``. Bad input ends with a one-line error on stderr and exit code 2.

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
import sys
import traceback
from collections.abc import Sequence

from . import __version__
from .errors import ExplorerError
from .load import load

__all__ = ["main", "build_parser", "parse_input_shape", "EXIT_BAD_INPUT", "EXIT_INTERNAL"]

EXIT_BAD_INPUT = 2
"""Exit code for bad input (missing file, broken model, bad arguments)."""
EXIT_INTERNAL = 1
"""Exit code for an unexpected internal error (a bug: please report it)."""


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


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``onnx-explorer`` (one sub-command per task).

    Examples
    --------
    >>> build_parser().parse_args(["info", "zoo:mlp"]).command
    'info'
    """
    parser = argparse.ArgumentParser(
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``onnx-explorer`` with ``argv`` (default: ``sys.argv[1:]``) and return the exit code.

    Examples
    --------
    >>> main(["info", "no-such-model.onnx"])
    2
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except ExplorerError as err:
        print(f"onnx-explorer: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("onnx-explorer: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        if args.debug:
            traceback.print_exc()
        print(
            f"onnx-explorer: internal error ({type(err).__name__}: {err}); "
            "rerun with --debug for the traceback and please report it",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

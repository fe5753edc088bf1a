"""The ``onnx-explorer`` program: its parser, one sub-command per module of :mod:`explorer.cli`, and
``main``, which turns every failure into its exit code (0 done, 2 bad input, 3 not imported or
lowered, 130 interrupted, 1 only for an internal error).

Examples
--------
>>> build_parser().parse_args(["diff", "a.onnx", "b.onnx"]).command
'diff'
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from explorer import __version__
from explorer.cli import bench, coverage, diff, info, lower, overlay, passes, prepare, report
from explorer.cli import quant_error as quant_error_command
from explorer.cli.errors import (
    EXIT_BAD_INPUT,
    EXIT_BROKEN_PIPE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_NOT_IMPORTED,
    ArgumentsRejected,
    fail,
    print_error_document,
)
from explorer.core.errors import ExplorerError, LoweringError, MemoryBudgetError, RuntimeUnsupportedError

__all__ = ["COMMANDS", "Parser", "build_parser", "main"]

COMMANDS = (info, passes, report, lower, bench, coverage, prepare, diff, overlay, quant_error_command)
"""The command modules, in the order ``--help`` lists them; each has ``add_parser`` and ``run``."""


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors ``main`` can also report as ``--json``
    (:class:`~explorer.cli.errors.ArgumentsRejected`)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        text = f"{self.prog}: error: {message}"
        print(text, file=sys.stderr)
        raise ArgumentsRejected(text)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``onnx-explorer`` (one sub-command per task).

    Examples
    --------
    >>> build_parser().parse_args(["info", "zoo:mlp"]).command
    'info'
    """
    parser = Parser(
        prog="onnx-explorer",
        description="Explore ONNX graphs and what compilers do to them.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit raises nothing again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout is no file (a test's capture): nothing to flush
        pass


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
    except ArgumentsRejected as err:  # usage and message are on stderr
        if "--json" in words:
            print_error_document("UsageError", err.message, EXIT_BAD_INPUT)
        raise
    as_json = bool(getattr(args, "json", False))
    try:
        return args.handler(args)
    except (RuntimeUnsupportedError, LoweringError, MemoryBudgetError) as err:  # cannot import, lower or fit
        return fail(err, EXIT_NOT_IMPORTED, as_json)
    except ExplorerError as err:
        return fail(err, EXIT_BAD_INPUT, as_json)
    except BrokenPipeError:  # the reader of stdout went away (`| head`): stop quietly, as a shell's tools do
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:  # Ctrl-C: with --json, stdout is still one document
        print("onnx-explorer: interrupted", file=sys.stderr)
        if as_json:
            print_error_document("interrupted", "interrupted (Ctrl-C)", EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED
    except Exception as err:
        if args.debug:
            traceback.print_exc()
        message = (
            f"internal error ({type(err).__name__}: {err}); "
            "rerun with --debug for the traceback and please report it"
        )
        print(f"onnx-explorer: {message}", file=sys.stderr)
        if as_json:
            print_error_document("internal", message, EXIT_INTERNAL)
        return EXIT_INTERNAL

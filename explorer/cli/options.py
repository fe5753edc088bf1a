"""The argument types and the options several commands share.

Each shared option block (``MODEL``, ``--input-shape``, ``--json``, ``-o``/``--force``) is written
once here; a command's module adds the ones it takes, in the order its ``--help`` lists them.

Examples
--------
>>> import argparse
>>> parser = argparse.ArgumentParser(prog="demo")
>>> add_model(parser)
>>> add_input_shape(parser)
>>> parser.parse_args(["zoo:mlp", "--input-shape", "input=1,8"])
Namespace(model='zoo:mlp', input_shape=[('input', [1, 8])])
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from explorer.core.errors import UsageError

__all__ = [
    "add_export_overlay",
    "MODEL_HELP",
    "JSON_HELP",
    "parse_input_shape",
    "non_negative_int",
    "positive_int",
    "non_negative_float",
    "add_model",
    "add_input_shape",
    "add_json",
    "add_output",
]

MODEL_HELP = "an .onnx file, or zoo:NAME"
"""The help of a command's ``MODEL`` argument."""
JSON_HELP = "print one JSON object"
"""The help of ``--json``."""


def parse_input_shape(text: str) -> tuple[str, list[int]]:
    """``--input-shape``'s argparse type: the ONNX adapter's
    :func:`~explorer.onnx_adapter.input_shapes.parse_input_shape`, its error argparse's.

    Examples
    --------
    >>> parse_input_shape("input=1,3,224,224")
    ('input', [1, 3, 224, 224])
    >>> parse_input_shape("input=1,-3")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: dimensions must be positive integers in 'input=1,-3'
    """
    from explorer.onnx_adapter.input_shapes import parse_input_shape as parse

    try:
        return parse(text)
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


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


def add_model(parser: argparse.ArgumentParser, *, optional: bool = False, help: str = MODEL_HELP) -> None:
    """Add the ``MODEL`` argument (``optional``: for commands that also run without one, as ``--list``).

    Examples
    --------
    >>> parser = argparse.ArgumentParser(prog="demo")
    >>> add_model(parser, optional=True)
    >>> parser.parse_args([]).model is None, parser.parse_args(["zoo:mlp"]).model
    (True, 'zoo:mlp')
    """
    parser.add_argument("model", metavar="MODEL", nargs="?" if optional else None, help=help)


def add_input_shape(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    """Add ``--input-shape NAME=D1,D2,...`` (repeatable; a list of ``(name, shape)``, empty by default).

    Examples
    --------
    >>> parser = argparse.ArgumentParser(prog="demo")
    >>> add_input_shape(parser)
    >>> parser.parse_args(["--input-shape", "a=1,2", "--input-shape", "b=3"]).input_shape
    [('a', [1, 2]), ('b', [3])]
    """
    parser.add_argument(
        "--input-shape",
        action="append",
        type=parse_input_shape,
        default=[],
        metavar="NAME=D1,D2,...",
        help=help,
    )


def add_json(parser: argparse.ArgumentParser, help: str = JSON_HELP) -> None:
    """Add ``--json``: stdout is one JSON document, whatever happens.

    Examples
    --------
    >>> parser = argparse.ArgumentParser(prog="demo")
    >>> add_json(parser)
    >>> parser.parse_args(["--json"]).json, parser.parse_args([]).json
    (True, False)
    """
    parser.add_argument("--json", action="store_true", help=help)


def add_output(
    parser: argparse.ArgumentParser,
    help: str,
    *,
    short: bool = True,
    metavar: str = "FILE",
    required: bool = False,
) -> None:
    """Add ``-o``/``--output`` (only ``--output`` when not ``short``) and ``--force``, which lets it
    replace the input model (:func:`~explorer.isolation.io.check_output_path` checks both).

    Examples
    --------
    >>> parser = argparse.ArgumentParser(prog="demo")
    >>> add_output(parser, "the file to write")
    >>> args = parser.parse_args(["-o", "out.onnx", "--force"])
    >>> args.output, args.force
    ('out.onnx', True)
    >>> "let -o replace the input model" in parser.format_help()
    True
    """
    flags = ("-o", "--output") if short else ("--output",)
    parser.add_argument(*flags, metavar=metavar, required=required, help=help)
    parser.add_argument("--force", action="store_true", help=f"let {flags[0]} replace the input model")


def add_export_overlay(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--export-overlay FILE``: ``what`` the command computed, per node, written as Model
    Explorer node data (:func:`explorer.overlays.export.export_overlays`).

    Examples
    --------
    >>> parser = argparse.ArgumentParser(prog="demo")
    >>> add_export_overlay(parser, "the time per node")
    >>> parser.parse_args(["--export-overlay", "t.json"]).export_overlay
    't.json'
    """
    parser.add_argument(
        "--export-overlay",
        metavar="FILE",
        help=f"write {what} as Model Explorer node data (JSON) at FILE; several overlays: the first at "
        "FILE, each other beside it as FILE's stem.NAME.json (the paths are printed)",
    )

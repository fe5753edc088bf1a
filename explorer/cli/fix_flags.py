"""``--simplify`` and ``--fix``, the fix path ``lower`` and ``bench`` share: the options, what to say
while a fix is applied, and the flags a :class:`~explorer.core.errors.LoweringError`'s fix names.

Examples
--------
>>> import argparse
>>> parser = argparse.ArgumentParser(prog="demo")
>>> add_fix_options(parser, simplify="run onnxsim first", fix="apply every fix offered")
>>> parser.parse_args(["--fix"])
Namespace(simplify=False, fix=True)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from explorer.core.errors import LoweringError

__all__ = ["add_fix_options", "with_flags", "fix_progress"]


def add_fix_options(parser: argparse.ArgumentParser, *, simplify: str, fix: str) -> None:
    """Add ``--simplify`` and ``--fix`` with their helps (each command says what they do there).

    Examples
    --------
    >>> parser = argparse.ArgumentParser(prog="demo")
    >>> add_fix_options(parser, simplify="run onnxsim first", fix="apply every fix offered")
    >>> parser.parse_args(["--simplify"]).simplify
    True
    """
    parser.add_argument("--simplify", action="store_true", help=simplify)
    parser.add_argument("--fix", action="store_true", help=fix)


def with_flags(err: LoweringError, command: str, args: argparse.Namespace) -> LoweringError:
    """``err`` with the flags that apply its fix, when they were not given (``--simplify``, ``--fix``).

    Examples
    --------
    >>> from explorer.lower import FIX
    >>> err = LoweringError("Gather: dynamic shape", pass_name="LegalizeOps", fix=FIX)
    >>> with_flags(err, "lower", argparse.Namespace(fix=False, simplify=False)).fix  # doctest: +ELLIPSIS
    '... (onnx-explorer lower MODEL --input-shape ... --simplify, or --fix)'
    >>> with_flags(err, "lower", argparse.Namespace(fix=True, simplify=False)) is err
    True
    """
    from explorer.lower import FIX

    if err.fix != FIX or args.fix or args.simplify:
        return err
    return err.replace(
        fix=f"{err.fix} (onnx-explorer {command} MODEL --input-shape ... --simplify, or --fix)"
    )


def fix_progress(args: argparse.Namespace) -> Callable[[str], None] | None:
    """Say each fix as it is applied (on stderr; not with ``--json``).

    Examples
    --------
    >>> import contextlib, io
    >>> say = fix_progress(argparse.Namespace(json=False))
    >>> with contextlib.redirect_stderr(io.StringIO()) as stderr:
    ...     say("unroll the loops")
    >>> stderr.getvalue()
    '  applying a fix: unroll the loops\\n'
    >>> fix_progress(argparse.Namespace(json=True)) is None
    True
    """
    if args.json:
        return None
    return lambda words: print(f"  applying a fix: {words}", file=sys.stderr)

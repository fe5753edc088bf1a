"""The ``onnx-explorer`` command line.

``onnx-explorer info MODEL`` prints a model's summary; MODEL is a path or
``zoo:NAME``; ``passes``, ``diff``, ``report``, ``lower`` (TVM Relax, pass by pass),
``bench`` (ONNX Runtime and TVM side by side), ``coverage`` (op support and partitions
per target), ``prepare`` (NPU-ready, step by step) and ``overlay`` (another tool's profile or
node data mapped onto the model's nodes) are the other commands. Bad input
(a broken model, a bad argument, an output that would replace the input) ends with a
one-line error on stderr and exit code 2; a model that does not import or lower into a
runtime or compiler, with exit code 3. With ``--json``, stdout is one JSON document
whatever happens (a failure's has an ``"error"`` key), and nothing else.

One module per command (``info``, ``passes``, ``report``, ``lower``, ``bench``, ``coverage``,
``prepare``, ``diff``, ``overlay``), each with its ``add_parser`` and ``run``;
:mod:`~explorer.cli.options` holds the argument types and the options they share,
:mod:`~explorer.cli.fix_flags` ``--simplify``/``--fix``, :mod:`~explorer.cli.errors` the exit codes
and the error documents, and :mod:`~explorer.cli.app` the parser and ``main``.

Examples
--------
>>> from explorer.cli import main
>>> main(["info", "zoo:mlp", "--json"])  # doctest: +ELLIPSIS
{"source": "zoo:mlp", ...}
0
"""

from __future__ import annotations

from explorer.cli.app import build_parser, main
from explorer.cli.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_NOT_IMPORTED
from explorer.cli.options import non_negative_float, non_negative_int, parse_input_shape, positive_int

__all__ = [
    "main",
    "build_parser",
    "parse_input_shape",
    "non_negative_int",
    "positive_int",
    "non_negative_float",
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "EXIT_NOT_IMPORTED",
    "EXIT_INTERRUPTED",
]

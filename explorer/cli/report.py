"""``onnx-explorer report MODEL -o FILE``: a self-contained HTML report (summary, op histogram,
graph; the steps of ``--pipeline``).

Examples
--------
>>> from explorer.cli import main
>>> main(["report", "no-such-model.onnx", "-o", "out.html"])  # one line on stderr, nothing written
2
"""

from __future__ import annotations

import argparse

from explorer.cli.options import add_input_shape, add_model, add_output
from explorer.isolation.io import check_model_file, check_output_path

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``report`` to the sub-commands ``commands``; return its parser.

    Examples
    --------
    >>> commands = argparse.ArgumentParser(prog="onnx-explorer").add_subparsers()
    >>> add_parser(commands).parse_args(["zoo:mlp", "-o", "mlp.html"]).output
    'mlp.html'
    """
    parser = commands.add_parser(
        "report",
        help="write a self-contained HTML report (summary, op histogram, graph; steps with --pipeline)",
    )
    add_model(parser)
    add_output(parser, "the .html file to write", required=True)
    parser.add_argument("--pipeline", help="passes to run and report step by step, e.g. onnxsim,ort:extended")
    add_input_shape(parser)
    parser.add_argument("--expanded", action="store_true", help="draw every node (no collapsed name scopes)")
    parser.add_argument(
        "--overlay",
        metavar="FILE",
        help="another tool's results on the model (an ONNX Runtime / AI Hub / TensorRT profile, Model "
        "Explorer node data; as `onnx-explorer overlay`): a section with the top nodes and the names that "
        "did not map, and the graph coloured by it",
    )
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Write the report of ``args.model`` to ``args.output`` (checked before the work); return 0.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from explorer.cli import build_parser
    >>> out = Path(tempfile.mkdtemp()) / "mlp.html"
    >>> run(build_parser().parse_args(["report", "zoo:mlp", "-o", str(out)]))  # doctest: +ELLIPSIS
    wrote .../mlp.html (... MiB); open it in any browser, no network needed
    0
    """
    from explorer.views.report import save

    check_output_path(args.output, args.model, force=args.force)  # before the work
    if args.overlay:
        from explorer.overlays.source import WHAT

        check_model_file(args.overlay, what=WHAT)
    path = save(
        args.model,
        args.output,
        pipeline=args.pipeline,
        input_shapes=dict(args.input_shape) or None,
        collapse=None if args.expanded else "auto",
        overlay=args.overlay,
    )
    print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB); open it in any browser, no network needed")
    return 0

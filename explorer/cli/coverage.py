"""``onnx-explorer coverage MODEL``: which nodes each target takes, its partitions and the ops that fall
back to the CPU with their reasons (``--list-targets``: the targets; ``--split FOLDER``: one target's
pieces as ONNX models).

Examples
--------
>>> from explorer.cli import main
>>> main(["coverage", "zoo:mlp", "--target", "no-such-target"])  # refused before loading
2
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from explorer.cli.options import add_export_overlay, add_input_shape, add_json, add_model
from explorer.core.errors import ExplorerError
from explorer.isolation.io import check_output_path
from explorer.onnx_adapter.load import load

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``coverage`` to the sub-commands ``commands``; return its parser.

    Examples
    --------
    >>> commands = argparse.ArgumentParser(prog="onnx-explorer").add_subparsers()
    >>> add_parser(commands).parse_args(["zoo:mlp", "--target", "nnapi", "--target", "coreml-nn"]).target
    ['nnapi', 'coreml-nn']
    """
    parser = commands.add_parser(
        "coverage",
        help="which nodes each target takes (ONNX Runtime CPU/CUDA, NNAPI, CoreML, Qualcomm HTP, TVM, "
        "IREE), partitions and CPU fallback",
        description="Per target: supported_nodes, total_nodes, coverage (0..1), partitions, and the ops "
        "that fall back with their reasons. Fix dynamic input shapes with --input-shape: NPUs need static "
        "shapes.",
    )
    add_model(parser, optional=True)
    parser.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="NAME",
        help="a target (repeatable; default: all installed)",
    )
    add_input_shape(parser)
    parser.add_argument(
        "--assignment",
        action="store_true",
        help="also ask ONNX Runtime where it places each node (installed providers) and compare",
    )
    parser.add_argument(
        "--list-targets", action="store_true", help="list the targets and where their knowledge comes from"
    )
    parser.add_argument(
        "--split",
        metavar="FOLDER",
        help="write each partition and each fallback island of the one --target as its own ONNX model into "
        "FOLDER (new or empty), with partitions.json: their order, files, kinds, nodes, inputs and outputs "
        "(chained in that order, the pieces give the model's outputs)",
    )
    add_export_overlay(
        parser,
        "each target's placement per node (partition 1, ..., the fallback device; coloured as the "
        "graph's partition overlay) and, where nodes fall back, their reasons",
    )
    add_json(parser)
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Print the coverage of ``args.model`` per target (or the targets, with ``--list-targets``); return 0.

    Examples
    --------
    >>> from explorer.cli import build_parser
    >>> run(build_parser().parse_args(["coverage", "zoo:mlp", "--target", "nnapi"]))  # doctest: +ELLIPSIS
    model: zoo:mlp
    target            supported  total coverage by FLOPs partitions
    nnapi ...
    0
    """
    from explorer.targets import coverage, get_target, list_targets
    from explorer.targets.registry import require_available

    if args.list_targets:
        targets = list_targets()
        if args.json:
            print(json.dumps({"targets": [t.to_dict() for t in targets]}))
            return 0
        for t in targets:
            print(f"{t.name:<17} {t.runtime} on {t.device}")
            print(f"{'':<17} {t.source.describe()}")
            if t.unavailable:
                print(f"{'':<17} unavailable: {t.unavailable}")
        return 0
    if not args.model:
        raise ExplorerError("coverage needs a MODEL (or --list-targets)")
    try:
        targets = [get_target(n) for n in args.target]  # before loading: a typo fails at once
    except KeyError as err:
        raise ExplorerError(err.args[0]) from None
    require_available(targets)  # a compiler not installed: said before loading, with what to install
    if args.split is not None:
        from explorer.targets.split import check_split_folder

        if len(args.target) != 1:
            raise ExplorerError(
                f"--split writes the pieces of one target: give exactly one --target (got {len(args.target)})"
            )
        check_split_folder(args.split, args.model)  # before the work
    if args.export_overlay:
        check_output_path(args.export_overlay, args.model)  # before the work
    shapes = dict(args.input_shape) or None
    graph = load(args.model, input_shapes=shapes)
    if args.target:  # the targets that compile need the weights in memory: refused up front (exit 3)
        from explorer.runtimes.memory_budget import check_memory

        check_memory(graph.model, "coverage", args.target, label=args.model)
    report = coverage(graph, targets or None, input_shapes=shapes, with_assignment=args.assignment)
    exported = _export(graph, report, args.export_overlay) if args.export_overlay else []
    split = None
    if args.split is not None:
        from explorer.targets.split import split_partitions

        split = split_partitions(graph, report, args.split)
    if args.json:
        extra = {"exported_overlays": [str(p) for p in exported]} if args.export_overlay else {}
        if split is not None:
            extra["split"] = split.to_dict()
        print(json.dumps({**report.to_dict(), **extra}))
        return 0
    print(f"model: {args.model}")
    print(f"{'target':<17} {'supported':>9} {'total':>6} {'coverage':>8} {'by FLOPs':>8} {'partitions':>10}")
    for t in report.targets:
        flops = "" if t.flops_coverage is None else f"{t.flops_coverage:.1%}"
        print(
            f"{t.target:<17} {t.supported_nodes:>9} {t.total_nodes:>6} {t.coverage:>8.1%} {flops:>8} "
            f"{t.partitions:>10}"
        )
    for t in report.targets:
        print(f"\n{t.target}: {t.verdict}")
        if t.agrees_with_runtime is not None:
            print(f"  ONNX Runtime's own placement {'agrees' if t.agrees_with_runtime else 'DIFFERS'}")
        for op, entry in t.fallback_ops.items():
            print(f"  {op} x{entry['count']}: {'; '.join(entry['reasons'][:3])}")
    for path in exported:
        print(f"wrote {path} (Model Explorer node data)")
    if split is not None:
        print(f"\nwrote {split.summary} to {split.folder} (manifest {split.manifest})")
        for piece in split.pieces:
            count = len(piece.nodes)
            print(
                f"  {piece.file:<24} {piece.placement:<14} {count:>5} node{'s' if count != 1 else ' '}, "
                f"{len(piece.inputs)} in, {len(piece.outputs)} out"
            )
    return 0


def _export(graph: Any, report: Any, path: str) -> list[Any]:
    """``--export-overlay``: each target's placement, then its fallback reasons (when any node falls
    back), as Model Explorer node data."""
    from explorer.overlays.export import export_overlays
    from explorer.overlays.ours import fallback_overlay, placement_overlay

    overlays = []
    for p in report.partitionings.values():
        overlays.append(placement_overlay(p, graph))
        if p.fallback_nodes:
            overlays.append(fallback_overlay(p, graph))
    return export_overlays(overlays, path, graph)

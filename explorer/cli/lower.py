"""``onnx-explorer lower MODEL``: import into TVM Relax and run its passes one at a time (or, with
``--compiler iree``, compile with IREE phase by phase through its MLIR dialects); a model that
does not import or a pass that fails ends with exit code 3 and the fix.

Examples
--------
>>> from explorer.cli import main
>>> main(["lower", "zoo:mlp", "--passes", "NoSuchPass"])  # a typo fails before anything runs
2
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from explorer.cli.errors import EXIT_NOT_IMPORTED, error_dict, say_error
from explorer.cli.fix_flags import add_fix_options, fix_progress, with_flags
from explorer.cli.options import add_input_shape, add_json, add_model
from explorer.core.errors import LoweringError, UsageError
from explorer.isolation.io import check_output_path
from explorer.lower.compilers import COMPILER_NAMES, STEP_METRICS, Compiler, LowerOptions, get_compiler
from explorer.onnx_adapter.input_shapes import check_input_shapes
from explorer.onnx_adapter.load import load

__all__ = ["add_parser", "run", "METRICS"]

METRICS = STEP_METRICS
"""The metrics of a step ``lower`` reports (``None`` where a step has not got one)."""


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``lower`` to the sub-commands ``commands``; return its parser.

    Examples
    --------
    >>> commands = argparse.ArgumentParser(prog="onnx-explorer").add_subparsers()
    >>> add_parser(commands).parse_args(["zoo:mlp", "--passes", "zero"]).passes
    'zero'
    """
    parser = commands.add_parser(
        "lower",
        help="lower a model through TVM Relax pass by pass: bindings, PrimFuncs and fused functions per step",
        description="Import into TVM Relax and run its passes one at a time (by default the CPU's "
        "default pipeline, the one the build compiles with: library dispatch, LegalizeOps, "
        "AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR, the dataflow lowering, memory planning "
        "and VM finalization). Per step: changed?, time, Relax bindings, PrimFuncs, fused functions, "
        "kernels, intermediate tensors, storages. A model "
        "that does not import: the failing ops with reasons; a pass that fails: the pass, the Relax binding "
        f"and the ONNX node it came from, and the fix; exit code {EXIT_NOT_IMPORTED}.",
    )
    add_model(parser)
    add_input_shape(parser)
    add_fix_options(
        parser,
        simplify="run onnxsim with the fixed input shapes before the import",
        fix="when the import or a pass fails, apply every fix offered (rewrites into standard ONNX, fixed "
        "shapes and onnxsim) and try again: never less than --simplify does",
    )
    parser.add_argument(
        "--passes",
        help="a pipeline (default: the target's default pipeline; zero: LegalizeOps .. FuseTIR) or "
        "comma-separated relax.transform passes (TVM only)",
    )
    parser.add_argument(
        "--compiler",
        choices=COMPILER_NAMES,
        default=COMPILER_NAMES[0],
        help="tvm: TVM Relax, pass by pass (default); iree: IREE's ONNX import and compilation for this CPU "
        "(llvm-cpu), one step per phase (torch import, input, ..., flow, stream, hal, vm) with the ops per "
        "MLIR dialect of each (needs the iree extra)",
    )
    parser.add_argument(
        "--iree-flags",
        choices=("default", "fast"),
        default="default",
        help="with --compiler iree: iree-compile's defaults, or those plus data tiling and convolutions as "
        "im2col + matmul (fast: what bench --runtime iree compiles)",
    )
    parser.add_argument(
        "--detail",
        choices=("phases", "passes"),
        default="phases",
        help="with --compiler iree: a step per compilation phase (default), or per module-level pass that "
        "changed the module (about a hundred; for small models)",
    )
    parser.add_argument(
        "--export-mapping",
        metavar="FILE",
        help="write which lowered nodes came from which ONNX nodes as Model Explorer's sync-navigation "
        "mapping (JSON: mappingEntries of leftNodeIds, the ONNX node names, and rightNodeIds, the lowered "
        "graph's node ids): TVM's kernels after FuseTIR, IREE's dispatches at flow (--mapping-step: "
        "another step)",
    )
    parser.add_argument(
        "--mapping-step",
        metavar="STEP",
        help="with --export-mapping: the pass (TVM) or phase (IREE) whose graph the mapping's right side is",
    )
    add_json(parser)
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Lower ``args.model`` step by step with ``--compiler`` and print one row per step; return 0, or
    :data:`~explorer.cli.errors.EXIT_NOT_IMPORTED` when it does not import.

    Examples
    --------
    >>> from explorer.cli import build_parser
    >>> run(build_parser().parse_args(["lower", "zoo:mlp", "--passes", "zero", "--json"]))
    ... # doctest: +ELLIPSIS
    {"source": "zoo:mlp", "compiler": "tvm", "fixes": [], "import": {"pass": "relax import", ...}
    0
    """
    from explorer.lower import FIX, RelaxImportFailed

    compiler = get_compiler(args.compiler)
    options = compiler.check_options(LowerOptions(args.passes, args.detail, args.iree_flags))  # before work
    _check_mapping_flags(args)
    try:
        timeline, applied, graph = _lowered(args, lambda g, s: compiler.lower(g, s, options))
    except RelaxImportFailed as err:
        result = err.result
        if args.json:
            print(
                json.dumps(
                    {
                        "source": args.model,
                        **result.to_dict(),
                        "error": error_dict(err, EXIT_NOT_IMPORTED),
                    }
                )
            )
            say_error(err)
        else:
            print(f"{args.model} does not import into TVM Relax:", file=sys.stderr)
            for failure in result.failures:
                print(f"  {failure.node or '?'} [{failure.op_type}]: {failure.reason}", file=sys.stderr)
            if result.fix:
                how = "--simplify --input-shape ..., or --fix" if result.fix == FIX else "--fix"
                print(f"fix: {result.fix} (onnx-explorer lower MODEL {how})", file=sys.stderr)
        return EXIT_NOT_IMPORTED
    rows = compiler.step_rows(timeline)
    mapping = _export_mapping(args, graph, timeline)
    if args.json:
        extra = {"mapping": mapping} if mapping else {}
        document = {
            "source": args.model,
            "compiler": compiler.name,
            "fixes": list(applied),
            "import": rows[0],
            "steps": rows[1:],
        }
        print(json.dumps({**document, **extra}))
        return 0
    _print_steps(args.model, compiler, applied, rows)
    _print_mapping(mapping)
    return 0


def _print_steps(model: str, compiler: Compiler, applied: list[str], rows: list[dict[str, Any]]) -> None:
    """The table of ``lower``: a line on the import, the fixes, then a row per step with the
    compiler's :attr:`~explorer.lower.compilers.Compiler.table_columns` (and ops per dialect, where a
    step counts them)."""
    from explorer.core.tensors import format_bytes

    first = rows[0]
    print(
        f"model: {model} ({compiler.label} import {first['elapsed_ms']:.1f} ms, "
        f"{first[compiler.import_metric]} {compiler.import_metric})"
    )
    for fix in applied:
        print(f"fixed before the import: {fix}")
    dialects = "  dialects (most ops first)" if "dialects" in first else ""
    columns = " ".join(f"{header:>{width}}" for header, _, width in compiler.table_columns)
    print(f"{'#':>2}  {compiler.step_word:<26} {'changed':<7} {'ms':>9} {columns}{dialects}")
    for index, row in enumerate(rows):
        cells = []
        for _, key, width in compiler.table_columns:
            value = row.get(key)
            if key.endswith("_bytes"):
                text = format_bytes(value) if value else ""
            else:
                text = "" if value is None else value
            cells.append(f"{text:>{width}}")
        top = sorted(row.get("dialects", {}).items(), key=lambda kv: -kv[1])[:4]
        print(
            f"{index:>2}  {row['pass']:<26} {'yes' if row['changed'] else 'no':<7} {row['elapsed_ms']:>9.1f} "
            + " ".join(cells)
            + (f"  {', '.join(f'{k} {v}' for k, v in top)}" if dialects else "")
        )


def _check_mapping_flags(args: argparse.Namespace) -> None:
    """``--mapping-step`` needs ``--export-mapping``; its FILE is checked before the work."""
    if args.mapping_step and not args.export_mapping:
        raise UsageError("--mapping-step chooses the step of --export-mapping FILE: give --export-mapping")
    if args.export_mapping:
        check_output_path(args.export_mapping, args.model)


def _export_mapping(args: argparse.Namespace, graph: Any, timeline: Any) -> dict[str, Any] | None:
    """``--export-mapping``: the sync mapping written; what the output says about it (or None)."""
    if not args.export_mapping:
        return None
    from explorer.overlays.model_explorer import node_key
    from explorer.overlays.sync_mapping import mapping_step, sync_mapping, write_sync_mapping

    step = mapping_step(timeline, args.mapping_step)
    mapping = sync_mapping(graph, step.graph)
    path = write_sync_mapping(mapping, args.export_mapping)
    mapped = {n for e in mapping["mappingEntries"] for n in e["leftNodeIds"]}
    left_out = [node_key(graph, n) for n in graph.op_nodes() if node_key(graph, n) not in mapped]
    return {
        "path": str(path),
        "step": step.name,
        "entries": len(mapping["mappingEntries"]),
        "onnx_nodes_mapped": len(mapped),
        "onnx_nodes_without_lowered_node": left_out,
    }


def _print_mapping(mapping: dict[str, Any] | None) -> None:
    if not mapping:
        return
    print(
        f"wrote {mapping['path']} (Model Explorer sync mapping, ONNX -> step {mapping['step']}: "
        f"{mapping['entries']} entries, {mapping['onnx_nodes_mapped']} ONNX nodes)"
    )
    if mapping["onnx_nodes_without_lowered_node"]:
        shown = mapping["onnx_nodes_without_lowered_node"][:10]
        more = len(mapping["onnx_nodes_without_lowered_node"]) - len(shown)
        print(
            f"  ONNX nodes no node of that step names as its origin: {', '.join(shown)}"
            + (f" ... {more} more" if more > 0 else "")
        )


def _lowered(args: argparse.Namespace, lower: Any) -> tuple[Any, list[str], Any]:
    """The model of ``args`` lowered by ``lower(graph, shapes)`` through the one fix path
    (``--simplify``, ``--fix``), the fixes applied and the ONNX graph loaded; a pass that fails is
    raised with the flags that fix it (exit 3)."""
    from explorer.lower.import_fix import lower_with_fixes
    from explorer.runtimes.memory_budget import check_memory

    graph = load(args.model)
    shapes = dict(args.input_shape) or None
    check_input_shapes(graph.model, shapes or {}, args.model)
    check_memory(graph.model, "lower", [args.compiler], label=args.model)  # before any work: exit 3
    try:
        timeline, applied = lower_with_fixes(
            graph, shapes, lower, simplify=args.simplify, fix=args.fix, progress=fix_progress(args)
        )
        return timeline, applied, graph
    except LoweringError as err:  # main says it (exit 3): the pass (or phase), op, ONNX node, fix
        raise with_flags(err, "lower", args) from None

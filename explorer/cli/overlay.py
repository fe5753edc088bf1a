"""``onnx-explorer overlay MODEL FILE``: another tool's results (an ONNX Runtime profile, Model
Explorer node data, a Qualcomm AI Hub profile, a TensorRT profile) mapped onto the model's nodes:
the format, ``mapped_nodes``, what did not map and why (``unmapped``) and, for timing data,
``time_share_mapped``, the share of the file's time that landed on the model's nodes. For a Qualcomm
AI Hub profile, also where each node ran against where ``coverage --target qnn-htp`` predicts it
(``placement_vs_predicted``: :func:`explorer.overlays.agreement.placement_agreement`).

Examples
--------
>>> import json, os, tempfile
>>> from explorer.cli import main
>>> path = os.path.join(tempfile.mkdtemp(), "node_data.json")
>>> with open(path, "w") as out:
...     json.dump({"main_graph": {"results": {"/fc1/Gemm": {"value": 1}}}}, out)
>>> main(["overlay", "zoo:mlp", path, "--json"])  # doctest: +ELLIPSIS
{"format": "model-explorer", ..., "mapped_nodes": 1, "unmapped": [], "time_share_mapped": null, ...}
0
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from explorer.cli.options import add_input_shape, add_json, add_model
from explorer.isolation.io import check_model_file
from explorer.onnx_adapter.load import load
from explorer.overlays import ai_hub
from explorer.overlays.agreement import PlacementAgreement, placement_agreement
from explorer.overlays.mapping import SPLIT_RULES
from explorer.overlays.ort_profile import LEVELS
from explorer.overlays.registry import READERS, read
from explorer.overlays.source import WHAT
from explorer.overlays.value import NodeValue, Overlay

__all__ = ["add_parser", "run", "print_overlay", "print_agreement", "SHOWN", "PREDICTED_TARGET"]

SHOWN = 30
"""How many unmapped names and nodes the text output lists."""

PREDICTED_TARGET = "qnn-htp"
"""The target an AI Hub profile's measured placement is compared with."""


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``overlay`` to the sub-commands ``commands``; return its parser.

    Examples
    --------
    >>> commands = argparse.ArgumentParser(prog="onnx-explorer").add_subparsers()
    >>> args = add_parser(commands).parse_args(["m.onnx", "profile.json", "layers.json", "--json"])
    >>> args.file, args.layer_info, args.json
    ('profile.json', 'layers.json', True)
    """
    parser = commands.add_parser(
        "overlay",
        help="map another tool's results (ONNX Runtime / AI Hub / TensorRT profile, Model Explorer node "
        "data) onto the model's nodes",
        description="Prints the format, mapped_nodes, unmapped (each name with the reason) and, for timing "
        "data, time_share_mapped: the share of the file's time that landed on the model's nodes. Formats: "
        + "; ".join(f"{r.name}: {r.about}" for r in READERS.values())
        + ".",
    )
    add_model(parser, help="the model the results are about: an .onnx file, or zoo:NAME")
    parser.add_argument("file", metavar="FILE", help="the results: a JSON file in one of the formats")
    parser.add_argument(
        "layer_info",
        metavar="LAYER_INFO",
        nargs="?",
        help="TensorRT only: trtexec --exportLayerInfo's JSON (--profilingVerbosity=detailed), "
        "whose metadata names every ONNX node of a fused layer",
    )
    parser.add_argument("--format", choices=list(READERS), help="the file's format (default: recognised)")
    parser.add_argument(
        "--ort-level",
        choices=[level for level in ("disable", "basic", "extended", "layout", "all") if level in LEVELS],
        help="ONNX Runtime profile: the optimisation level it ran at (default: found from its node names)",
    )
    parser.add_argument(
        "--split",
        choices=list(SPLIT_RULES),
        help="how a fused kernel's time is split over its nodes: even (default) or anchor (all of it on "
        "the conv, pooling, normalization or reduction among them)",
    )
    add_input_shape(
        parser,
        help="load the model with this input shape (repeatable); for an AI Hub profile, the static shapes "
        "it was compiled with, which the qnn-htp prediction uses (default there: dynamic dimensions 1)",
    )
    add_json(parser)
    parser.set_defaults(handler=run)
    return parser


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} ms"


def print_overlay(overlay: Overlay, total_nodes: int) -> None:
    """Print ``overlay`` as text: the counts, the unmapped names with their reasons, the nodes with
    the most time (or, without times, the first nodes with their values).

    Examples
    --------
    >>> from explorer.overlays.value import NodeValue, Unmapped
    >>> print_overlay(Overlay("ort-profile", "p.json", "m", {"a": NodeValue("a", time_ms=1.0)},
    ...                       (Unmapped("b", "no node of the model is named 'b'", 1.0),), 2.0), 3)
    model              m
    file               p.json
    format             ort-profile
    mapped_nodes       1 of 3
    time_share_mapped  50.0% (1.000 ms of 2.000 ms per inference)
    unmapped           1
      b (1.000 ms): no node of the model is named 'b'
    slowest nodes
      a  1.000 ms
    """
    rows = [
        ("model", overlay.mapped_onto or "-"),
        ("file", overlay.source or "-"),
        ("format", overlay.format + _about(overlay.about)),
        ("mapped_nodes", f"{overlay.mapped_nodes} of {total_nodes}"),
    ]
    share = overlay.time_share_mapped
    if share is not None:
        rows.append(
            (
                "time_share_mapped",
                f"{share:.1%} ({_ms(overlay.mapped_ms)} of {_ms(overlay.total_ms)} per inference)",
            )
        )
    rows.append(("unmapped", str(len(overlay.unmapped))))
    for key, value in rows:
        print(f"{key:<18} {value}")
    for item in overlay.unmapped[:SHOWN]:
        time = f" ({_ms(item.time_ms)})" if item.time_ms is not None else ""
        print(f"  {item.name}{time}: {item.reason}")
    if len(overlay.unmapped) > SHOWN:
        print(f"  ... {len(overlay.unmapped) - SHOWN} more (--json lists them all)")
    timed = sorted(
        (v for v in overlay.values.values() if v.time_ms is not None), key=lambda v: -(v.time_ms or 0.0)
    )
    if timed:
        print("slowest nodes")
        for value in timed[:SHOWN]:
            print(f"  {value.node}  {_ms(value.time_ms)}{_ran(value)}")
    elif overlay.values:
        print("nodes")
        for value in list(overlay.values.values())[:SHOWN]:
            print(f"  {value.node}  {value.value if value.value is not None else ''}")
    for note in overlay.notes:
        print(f"note: {note}")


def _ran(value: NodeValue) -> str:
    """``  FusedConv with 2 more on CPUExecutionProvider``: what ran the node, and where."""
    words = value.op or ""
    if value.shared_with:
        words += f" with {len(value.shared_with)} more"
    where = value.compute_unit or value.provider
    if where:
        words += f" on {where}" if words else where
    return f"  {words.strip()}" if words.strip() else ""


def _about(about: dict[str, Any] | Any) -> str:
    parts = []
    if about.get("level"):
        parts.append(f"{about['level']} level, {about.get('level_found', '')}".rstrip(", "))
    if about.get("runs"):
        parts.append(f"{about['runs']} runs")
    return f" ({'; '.join(parts)})" if parts else ""


def print_agreement(agreement: PlacementAgreement) -> None:
    """Print the measured placement against the predicted one: the summary, the count per category
    and the disagreeing nodes.

    Examples
    --------
    >>> from explorer.overlays.agreement import NodeAgreement
    >>> rows = (NodeAgreement("a", "Relu", "NPU", "NPU", True),
    ...         NodeAgreement("b", "Add", "NPU", "CPU", False))
    >>> print_agreement(PlacementAgreement("qnn-htp", "m", None, rows))
    qnn-htp predicted vs measured: 1 of 2 nodes agree (50.0%); 1 predicted NPU ran elsewhere
      agree: 1
      predicted NPU, measured CPU: 1
    disagreeing nodes
      b  Add  predicted NPU, measured CPU
    """
    print(agreement.summary())
    for category, count in agreement.categories().items():
        print(f"  {category}: {count}")
    disagreeing = [n for n in agreement.nodes if n.agrees is False]
    if disagreeing:
        print("disagreeing nodes")
    for n in disagreeing[:SHOWN]:
        print(f"  {n.node}  {n.op}  {n.category}")
    if len(disagreeing) > SHOWN:
        print(f"  ... {len(disagreeing) - SHOWN} more (--json lists them all)")


def run(args: argparse.Namespace) -> int:
    """Map ``args.file`` onto ``args.model`` and print the result (text, or one JSON object); return 0.

    Examples
    --------
    >>> import json, os, tempfile
    >>> from explorer.cli import build_parser
    >>> path = os.path.join(tempfile.mkdtemp(), "hub.json")
    >>> with open(path, "w") as out:
    ...     json.dump({"execution_detail": [
    ...         {"name": "_fc1_Gemm", "type": "FullyConnected", "compute_unit": "NPU", "execution_time": 250,
    ...          "execution_cycles": 1},
    ...         {"name": "_relu1_Relu", "type": "Relu", "compute_unit": "CPU", "execution_time": 50}]}, out)
    >>> run(build_parser().parse_args(["overlay", "zoo:mlp", path]))  # doctest: +ELLIPSIS
    model              zoo:mlp
    file               ...hub.json
    format             ai-hub-profile
    mapped_nodes       2 of 6
    time_share_mapped  100.0% (0.300 ms of 0.300 ms per inference)
    unmapped           0
    slowest nodes
      /fc1/Gemm  0.250 ms  FullyConnected on NPU
      /relu1/Relu  0.050 ms  Relu on CPU
    qnn-htp predicted vs measured: 1 of 2 nodes agree (50.0%); 1 predicted NPU ran elsewhere, 4 not measured
      not measured: 4
      agree: 1
      predicted NPU, measured CPU: 1
    disagreeing nodes
      /relu1/Relu  Relu  predicted NPU, measured CPU
    0
    """
    for path in (args.file, args.layer_info):
        if path is not None:
            check_model_file(path, what=WHAT)  # before the model loads: a typo fails at once
    options: dict[str, Any] = {}
    if args.ort_level is not None:
        options["level"] = args.ort_level
    if args.split is not None:
        options["split"] = args.split
    if args.layer_info is not None:
        options["layer_info"] = args.layer_info
    shapes = dict(args.input_shape) or None
    graph = load(args.model, input_shapes=shapes)
    overlay = read(args.file, graph, format=args.format, **options)
    agreement = None
    if overlay.format == ai_hub.FORMAT and overlay.by_node("compute_unit"):
        agreement = placement_agreement(graph, overlay, PREDICTED_TARGET)
    if args.json:
        data = {**overlay.to_dict(), "total_nodes": len(graph.op_nodes())}
        if agreement is not None:
            data["placement_vs_predicted"] = agreement.to_dict()
        print(json.dumps(data))
    else:
        print_overlay(overlay, len(graph.op_nodes()))
        if agreement is not None:
            print_agreement(agreement)
    return 0

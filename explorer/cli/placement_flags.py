"""``bench --strict-placement``: ONNX Runtime's providers without a silent CPU fallback.

Each ONNX Runtime runtime benched (``ort``, ``ort-cuda``) is made strict
(:attr:`~explorer.runtimes.ort_runtime.OrtRuntime.strict_placement`: its session gets
``session.disable_cpu_ep_fallback`` = ``"1"`` for a provider other than the CPU's), and, where it
can run here, ONNX Runtime is first asked where it places the nodes
(:func:`~explorer.targets.strict_placement.strict_placement`). A runtime whose nodes would fall
back is not timed: the nodes are listed and the command exits 3. The CPU provider is its own
fallback: placement is strict trivially, and ONNX Runtime's assignment says so node by node. A
runtime that cannot run here (``ort-cuda`` without a GPU) is skipped as without the flag (exit 3);
nothing is said about its placement. Other runtimes (TVM, IREE, PyTorch) compile for one device:
the flag is ONNX Runtime's and does not apply to them.

Examples
--------
>>> import argparse
>>> parser = argparse.ArgumentParser(prog="demo")
>>> add_strict_placement(parser)
>>> parser.parse_args(["--strict-placement"]).strict_placement
True
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from explorer.cli.errors import EXIT_NOT_IMPORTED, error_dict, say_error
from explorer.core.errors import RuntimeUnsupportedError

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph
    from explorer.targets.strict_placement import StrictPlacement

__all__ = ["add_strict_placement", "strict_runtimes", "combined_error", "placement_lines", "refused_all"]


def add_strict_placement(parser: argparse.ArgumentParser) -> None:
    """Add ``--strict-placement``.

    Examples
    --------
    >>> parser = argparse.ArgumentParser(prog="demo")
    >>> add_strict_placement(parser)
    >>> parser.parse_args([]).strict_placement
    False
    """
    parser.add_argument(
        "--strict-placement",
        action="store_true",
        help="ONNX Runtime with a provider other than the CPU's runs with session.disable_cpu_ep_fallback=1: "
        "nodes the provider does not take are listed and the runtime is not timed (exit 3) instead of "
        "running on the CPU; the CPU provider is strict trivially (ONNX Runtime's own placement is shown); "
        "--json adds placement: {runtime: {strict, fallback_nodes, nodes_per_provider, ...}}",
    )


def strict_runtimes(
    graph: ModelGraph, runtimes: Sequence[Any], args: argparse.Namespace
) -> tuple[list[Any], dict[str, StrictPlacement], RuntimeUnsupportedError | None]:
    """The runtimes to time with ``--strict-placement``, ONNX Runtime's placement of each, and the
    error naming those not timed because nodes would fall back (None when none).

    Without the flag: ``runtimes`` unchanged, no placement, no error.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.runtimes.ort_runtime import OrtRuntime
    >>> timed, found, refused = strict_runtimes(
    ...     load("zoo:mlp"), [OrtRuntime()], argparse.Namespace(strict_placement=True)
    ... )
    >>> timed[0].strict_placement, found["ort"].strict, refused is None
    (True, True, True)
    """
    if not getattr(args, "strict_placement", False):
        return list(runtimes), {}, None
    from explorer.targets.strict_placement import strict_placement

    kept: list[Any] = []
    found: dict[str, StrictPlacement] = {}
    refused: list[tuple[str, StrictPlacement]] = []
    for runtime in runtimes:
        if not getattr(runtime, "places_nodes", False):
            kept.append(runtime)
            continue
        runtime = dataclasses.replace(runtime, strict_placement=True)
        if not runtime.available():  # skipped by the bench, with why (exit 3 when named)
            kept.append(runtime)
            continue
        placement = strict_placement(graph, runtime.provider, runtime.optimization)
        found[runtime.name] = placement
        if placement.error is None and not placement.strict:
            refused.append((runtime.name, placement))
        else:  # strict, or no session at all: the bench says why, as without the flag
            kept.append(runtime)
    if not refused:
        return kept, found, None
    whys = "; ".join(f"{name}: {p.verdict}" for name, p in refused)
    return (
        kept,
        found,
        RuntimeUnsupportedError(
            f"{whys}; not timed (--strict-placement)",
            runtime=", ".join(f"onnxruntime {p.provider}" for _, p in refused),
            path=getattr(args, "model", None),
        ),
    )


def combined_error(
    strict: RuntimeUnsupportedError | None, skipped: RuntimeUnsupportedError | None
) -> RuntimeUnsupportedError | None:
    """One error for the runtimes not timed: those refused for their placement, then those skipped.

    Examples
    --------
    >>> a, b = RuntimeUnsupportedError("a", runtime="x"), RuntimeUnsupportedError("b", runtime="y")
    >>> combined_error(a, b).reason, combined_error(None, b) is b
    ('a; b', True)
    """
    if strict is None or skipped is None:
        return strict or skipped
    return RuntimeUnsupportedError(
        f"{strict.reason}; {skipped.reason}",
        runtime=f"{strict.runtime}, {skipped.runtime}",
        path=skipped.path or strict.path,
    )


def placement_lines(placements: Mapping[str, StrictPlacement], runtimes: Sequence[Any]) -> list[str]:
    """What ``--strict-placement`` found, a line per runtime (ONNX Runtime's; the others: why not).

    Examples
    --------
    >>> from explorer.targets.strict_placement import StrictPlacement
    >>> p = StrictPlacement("CPUExecutionProvider", "all", False, nodes={"a": "CPUExecutionProvider"})
    >>> placement_lines({"ort": p}, [])[0][:40]
    'ort: strict placement: strict trivially:'
    """
    lines = [f"{name}: strict placement: {p.verdict}" for name, p in placements.items()]
    for runtime in runtimes:
        if not getattr(runtime, "places_nodes", False):
            lines.append(
                f"{runtime.name}: strict placement does not apply (ONNX Runtime's flag; it compiles for "
                "one device)"
            )
    return lines


def refused_all(
    placements: Mapping[str, StrictPlacement], err: RuntimeUnsupportedError, args: argparse.Namespace
) -> int:
    """Every runtime asked for was refused for its placement: say so (with ``--json``, one document
    with ``placement`` and ``error``) and return exit 3.

    Examples
    --------
    >>> import contextlib, io
    >>> from explorer.targets.strict_placement import StrictPlacement
    >>> p = StrictPlacement("AzureExecutionProvider", "all", True, "refused", {"a": "CPUExecutionProvider"})
    >>> err = RuntimeUnsupportedError("not timed", runtime="onnxruntime AzureExecutionProvider")
    >>> args = argparse.Namespace(json=False, model="m.onnx")
    >>> with contextlib.redirect_stderr(io.StringIO()):
    ...     refused_all({"ort-azure": p}, err, args)  # doctest: +ELLIPSIS
    ort-azure: strict placement: not strict: 1 of 1 nodes would fall back to CPUExecutionProvider (ONNX ...
    3
    """
    if args.json:
        document = {
            "source": args.model,
            "results": [],
            "placement": {name: p.to_dict() for name, p in placements.items()},
            "error": error_dict(err, EXIT_NOT_IMPORTED),
        }
        print(json.dumps(document))
    else:
        for line in placement_lines(placements, ()):
            print(line)
    say_error(err)
    return EXIT_NOT_IMPORTED

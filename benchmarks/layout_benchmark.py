"""Graph-view layout speed and edge crossings: explorer.views.layout versus Graphviz ``dot``.

For zoo transformers of about 1k, 10k and 50k ONNX nodes (``81 * layers + 11``),
this saves the model to a file and measures, in one run:

- ``load``: ``explorer.load(path)`` (parsing, shape inference, graph building);
- ``layout``: ``explorer.views.layout.layered`` (cache cleared first), uncollapsed and, for
  graphs above ``--max-items`` nodes, at the depth :func:`explorer.views.layout.auto_collapse` picks;
- ``igraph x``: the same with ``straight=False`` (igraph's own x placement, the layout
  before straight main paths), and ``ratio`` = layout / igraph x, measured interleaved;
- ``boxes``: the same with ``node_size="auto"`` (room for boxes sized from their labels);
- ``figure``: ``explorer.views.figures.graph_figure(graph, layout)`` when that function exists;
- ``dot``: ``networkx.nx_agraph.graphviz_layout(G, prog="dot")`` on the same uncollapsed
  graph, run in a child process and abandoned after ``--dot-timeout`` seconds
  (falls back to the ``dot -Tplain`` binary when pygraphviz is missing);
- crossings of both, with the same :func:`explorer.views.layout.count_crossings`: dot's layers
  are its distinct node heights and its edges are its splines, cut at every layer;
- then the same crossings for every zoo model (weights folded, and drawn as nodes).

Graphviz is needed only here: ``apt-get install -y graphviz graphviz-dev`` and
``.venv/bin/pip install pygraphviz``.

Run: ``.venv/bin/python benchmarks/layout_benchmark.py`` (``--help`` for options).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import onnx

import explorer
from explorer import zoo
from explorer.views import layout as lay

__all__ = ["DotResult", "Row", "dot_layout", "main"]

Point = tuple[float, float]


@dataclass
class DotResult:
    """Positions and edge polylines from one ``dot`` run, and how long it took."""

    seconds: float
    positions: dict[int, Point]
    splines: dict[tuple[int, int], list[Point]]


@dataclass
class Row:
    """One line of the results table."""

    model: str
    onnx_nodes: int
    items: int
    load: float
    layout: float
    figure: float | None
    crossings: int
    old_layout: float | None = None
    boxes: float | None = None
    dot: float | None = None
    dot_crossings: int | None = None
    note: str = ""


# --------------------------------------------------------------------------- dot


def _bezier(control: list[Point], samples: int = 8) -> list[Point]:
    """Sample a piecewise cubic Bezier (Graphviz spline control points) into a polyline."""
    out = [control[0]]
    for i in range(0, len(control) - 3, 3):
        p0, p1, p2, p3 = control[i : i + 4]
        for s in range(1, samples + 1):
            t = s / samples
            a, b, c, d = (1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t**2, t**3
            out.append(
                (
                    a * p0[0] + b * p1[0] + c * p2[0] + d * p3[0],
                    a * p0[1] + b * p1[1] + c * p2[1] + d * p3[1],
                )
            )
    return out


def _parse_pos(text: str) -> list[Point]:
    """Graphviz edge ``pos`` (``e,x,y s,x,y x,y ...``) -> spline control points."""
    points = []
    for token in text.split():
        if token[:2] in ("e,", "s,"):
            continue
        x, y = token.split(",")[:2]
        points.append((float(x), float(y)))
    return points


def _dot_with_pygraphviz(n: int, edges: list[tuple[int, int]]) -> DotResult:
    import pygraphviz

    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(edges)
    start = time.perf_counter()
    # the body of networkx.nx_agraph.graphviz_layout(graph, prog="dot"), keeping the AGraph
    agraph = nx.nx_agraph.to_agraph(graph)
    agraph.layout(prog="dot")
    positions: dict[int, Point] = {}
    for node in graph:
        x, y = pygraphviz.Node(agraph, node).attr["pos"].split(",")
        positions[node] = (float(x), float(y))
    seconds = time.perf_counter() - start
    splines = {}
    for edge in agraph.edges():
        pos = edge.attr.get("pos")
        if pos:
            splines[(int(edge[0]), int(edge[1]))] = _bezier(_parse_pos(pos))
    return DotResult(seconds, positions, splines)


def _dot_with_binary(n: int, edges: list[tuple[int, int]], timeout: float) -> DotResult:
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "g.dot"
        lines = ["digraph g {"] + [f"  {i};" for i in range(n)] + [f"  {a} -> {b};" for a, b in edges] + ["}"]
        source.write_text("\n".join(lines))
        start = time.perf_counter()
        done = subprocess.run(
            ["dot", "-Tplain", str(source)], capture_output=True, text=True, timeout=timeout, check=True
        )
        seconds = time.perf_counter() - start
    positions: dict[int, Point] = {}
    splines: dict[tuple[int, int], list[Point]] = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        if parts and parts[0] == "node":
            positions[int(parts[1])] = (float(parts[2]), float(parts[3]))
        elif parts and parts[0] == "edge":
            count = int(parts[3])
            control = [(float(parts[4 + 2 * i]), float(parts[5 + 2 * i])) for i in range(count)]
            splines[(int(parts[1]), int(parts[2]))] = _bezier(control)
    return DotResult(seconds, positions, splines)


def _child(n: int, edges: list[tuple[int, int]], use_binary: bool, timeout: float, conn: Any) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)  # Graphviz's fontconfig warnings
    try:
        result = _dot_with_binary(n, edges, timeout) if use_binary else _dot_with_pygraphviz(n, edges)
        conn.send(result)
    except Exception as exc:  # reported to the parent, which prints it
        conn.send(exc)
    finally:
        conn.close()


def graphviz_status() -> tuple[bool, bool]:
    """Return ``(pygraphviz importable, dot binary on PATH)``."""
    try:
        import pygraphviz  # noqa: F401

        has_pygraphviz = True
    except ImportError:
        has_pygraphviz = False
    return has_pygraphviz, shutil.which("dot") is not None


def dot_layout(graph: nx.MultiDiGraph, timeout: float) -> tuple[DotResult | None, dict[str, int], str]:
    """Lay ``graph`` out with dot in a child process; ``(result or None, node index, note)``."""
    has_pygraphviz, has_dot = graphviz_status()
    index = {node: i for i, node in enumerate(graph.nodes)}
    edges = sorted({(index[u], index[v]) for u, v in graph.edges()})
    if not (has_pygraphviz or has_dot):
        return None, index, "graphviz missing"
    context = mp.get_context("fork")
    parent, child = context.Pipe(duplex=False)
    proc = context.Process(target=_child, args=(len(index), edges, not has_pygraphviz, timeout, child))
    proc.start()
    child.close()
    result: Any = None
    if parent.poll(timeout):
        try:
            result = parent.recv()
        except EOFError:
            result = None
    proc.join(1.0)
    if proc.is_alive():
        proc.kill()
        proc.join()
    if result is None:
        return None, index, f"dot > {timeout:.0f} s"
    if isinstance(result, Exception):
        return None, index, f"dot failed: {result}"
    return result, index, ""


def dot_as_layout(graph: nx.MultiDiGraph, result: DotResult, index: dict[str, int]) -> lay.Layout:
    """Turn dot's output into a :class:`~explorer.views.layout.Layout` (layers = distinct heights)."""
    heights = sorted({round(y, 3) for _, y in result.positions.values()}, reverse=True)
    rank = {y: r for r, y in enumerate(heights)}
    names = list(index)
    positions = {names[i]: p for i, p in result.positions.items()}
    layers = {names[i]: rank[round(p[1], 3)] for i, p in result.positions.items()}
    edges = []
    edge_points: dict[tuple[str, str], tuple[Point, ...]] = {}
    for (a, b), spline in result.splines.items():
        edge = (names[a], names[b])
        edges.append(edge)
        edge_points[edge] = (positions[edge[0]], *spline, positions[edge[1]])
    return lay.Layout(
        positions=positions,
        layers=layers,
        edges=tuple(edges),
        edge_points=edge_points,
        edge_tensors={},
        groups={},
        scopes={},
        kinds=dict.fromkeys(positions, "op"),
        collapsed=frozenset(),
    )


# --------------------------------------------------------------------------- ours


def _interleaved(fns: list[Callable[[], Any]], repeat: int) -> list[tuple[float, Any]]:
    """Median time of each function, the runs interleaved so machine load hits all alike."""
    times: list[list[float]] = [[] for _ in fns]
    values: list[Any] = [None] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            lay.clear_cache()
            start = time.perf_counter()
            values[k] = fn()
            times[k].append(time.perf_counter() - start)
    return [(statistics.median(t), v) for t, v in zip(times, values, strict=True)]


def _timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times = []
    value = None
    for _ in range(repeat):
        lay.clear_cache()
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), value


def _figure_fn() -> Callable[[Any, Any], Any] | None:
    try:
        from explorer.views.figures import graph_figure  # type: ignore[attr-defined]
    except ImportError:
        return None
    return graph_figure


def measure(layers: int, args: argparse.Namespace, workdir: Path) -> list[Row]:
    """Measure one transformer size; returns one row, plus one for the collapsed view if any."""
    model = zoo.build("transformer", layers=layers, hidden=32)
    onnx_nodes = len(model.graph.node)
    path = workdir / f"transformer_{layers}.onnx"
    onnx.save(model, path)
    load_s, graph = _timed(lambda: explorer.load(path), 1)
    name = f"transformer L={layers}"
    (layout_s, full), (old_s, _), (boxes_s, _) = _interleaved(
        [
            lambda: lay.layered(graph),
            lambda: lay.layered(graph, straight=False),
            lambda: lay.layered(graph, node_size="auto"),
        ],
        args.repeat,
    )
    figure = _figure_fn()
    figure_s = _timed(lambda: figure(graph, full), 1)[0] if figure else None
    row = Row(name, onnx_nodes, len(full.positions), load_s, layout_s, figure_s, lay.count_crossings(full))
    row.old_layout, row.boxes = old_s, boxes_s
    if args.dot and graph.nx.number_of_nodes() <= args.dot_max_nodes:
        result, index, note = dot_layout(graph.nx, args.dot_timeout)
        row.note = note
        if result is not None:
            row.dot = result.seconds
            row.dot_crossings = lay.count_crossings(dot_as_layout(graph.nx, result, index))
    elif args.dot:
        row.note = f"dot skipped (> {args.dot_max_nodes} nodes)"
    rows = [row]
    depth = lay.auto_collapse(graph, max_items=args.max_items)
    if depth is not None:
        (collapsed_s, boxes), (old_c, _), (sized_c, _) = _interleaved(
            [
                lambda: lay.layered(graph, collapse=depth),
                lambda: lay.layered(graph, collapse=depth, straight=False),
                lambda: lay.layered(graph, collapse=depth, node_size="auto"),
            ],
            args.repeat,
        )
        figure_c = _timed(lambda: figure(graph, boxes), 1)[0] if figure else None
        rows.append(
            Row(
                f"  collapse={depth}",
                onnx_nodes,
                len(boxes.positions),
                load_s,
                collapsed_s,
                figure_c,
                lay.count_crossings(boxes),
                old_layout=old_c,
                boxes=sized_c,
                note="auto_collapse",
            )
        )
    return rows


def _fmt(value: float | None, unit: str = "s") -> str:
    return "-" if value is None else f"{value:.3f} {unit}" if unit else f"{value}"


def print_table(rows: list[Row]) -> None:
    """Print the results as a Markdown table."""
    head = (
        "| model | ONNX nodes | items | load | layout | igraph x | ratio | boxes | figure | file->figure "
        "| crossings | dot | dot/layout | dot crossings | note |"
    )
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        total = r.load + r.layout + (r.figure or 0.0)
        ratio = f"{r.dot / r.layout:.0f}x" if r.dot else "-"
        slower = f"{r.layout / r.old_layout:.2f}x" if r.old_layout else "-"
        print(
            f"| {r.model} | {r.onnx_nodes} | {r.items} | {_fmt(r.load)} | {_fmt(r.layout)} "
            f"| {_fmt(r.old_layout)} | {slower} | {_fmt(r.boxes)} "
            f"| {_fmt(r.figure)} | {_fmt(total)} | {r.crossings} | {_fmt(r.dot)} | {ratio} "
            f"| {'-' if r.dot_crossings is None else r.dot_crossings} | {r.note} |"
        )


def zoo_crossings(args: argparse.Namespace) -> None:
    """Print crossings of ours and dot's for every zoo model, weights folded and drawn as nodes."""
    print("\n| zoo model | items | layout | crossings | dot | dot crossings |")
    print("|---|---|---|---|---|---|")
    for name in zoo.names():
        graph = explorer.load(f"zoo:{name}")
        for view, label in ((graph, name), (graph.with_constant_nodes(), f"{name} (weights as nodes)")):
            seconds, layout = _timed(lambda view=view: lay.layered(view), args.repeat)
            dot_s, dot_c = "-", "-"
            if args.dot:
                result, index, note = dot_layout(view.nx, args.dot_timeout)
                if result is not None:
                    dot_s = f"{result.seconds:.3f} s"
                    dot_c = str(lay.count_crossings(dot_as_layout(view.nx, result, index)))
                else:
                    dot_s = note
            print(
                f"| {label} | {len(layout.positions)} | {seconds:.3f} s | {lay.count_crossings(layout)} "
                f"| {dot_s} | {dot_c} |"
            )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table.

    Examples
    --------
    >>> main(["--layers", "1", "--no-dot", "--repeat", "1"])  # doctest: +SKIP
    0
    """
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--layers", type=int, nargs="+", default=[12, 123, 617], help="transformer layers")
    parser.add_argument("--repeat", type=int, default=3, help="layout runs per size (median)")
    parser.add_argument("--max-items", type=int, default=300, help="auto_collapse budget")
    parser.add_argument("--dot-timeout", type=float, default=60.0)
    parser.add_argument("--dot-max-nodes", type=int, default=20000, help="skip dot above this many nodes")
    parser.add_argument("--no-dot", dest="dot", action="store_false")
    parser.add_argument("--no-zoo", dest="zoo", action="store_false", help="skip the zoo crossings table")
    args = parser.parse_args(argv)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    if args.dot:
        has_pygraphviz, has_dot = graphviz_status()
        if not (has_pygraphviz or has_dot):
            print(
                "graphviz is missing: dot columns stay empty. Install it with\n"
                "  apt-get update && apt-get install -y graphviz graphviz-dev\n"
                "  .venv/bin/pip install pygraphviz",
                file=sys.stderr,
            )
        elif not has_pygraphviz:
            print("pygraphviz is missing: timing the dot binary (dot -Tplain) instead", file=sys.stderr)
    if _figure_fn() is None:
        print("explorer.views.figures.graph_figure not found: figure column stays empty", file=sys.stderr)
    warm = explorer.load("zoo:mlp")  # first-use imports are not what we measure
    if _figure_fn() is not None:
        _figure_fn()(warm, lay.layered(warm))  # type: ignore[misc]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for layers in args.layers:
            rows.extend(measure(layers, args, Path(tmp)))
            print(f"  done: transformer layers={layers}", file=sys.stderr, flush=True)
    print_table(rows)
    if args.zoo:
        zoo_crossings(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

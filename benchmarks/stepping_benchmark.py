"""Diff and stepping speed on big graphs: what one step of the PassStepper costs, without the pass itself.

For zoo transformers of about 1k and 10k nodes (``81 * layers + 11``) this runs a
two-step pipeline (``eliminate_common_subexpression,fuse_qkv``: both rewrite every
encoder layer) once, then measures in the same run:

- ``load``: ``explorer.load`` of the model (the baseline every ratio is against);
- ``diff``: :func:`explorer.core.diff.diff` between consecutive snapshots;
- ``step (first)``: what :meth:`widgets.PassStepper.show` computes for a step seen for
  the first time: the diff, a stable layout of both sides (``previous=``), and both figures;
- ``step (again)``: the same step revisited (diff and layouts cached), i.e. moving the slider back.

Widget messaging to the browser is not included (it is measured by the browser tests'
timings, not here). The issue's target is under 0.3 s per step on 10k-node graphs.

Run: ``.venv/bin/python benchmarks/stepping_benchmark.py [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

from explorer import load, zoo
from explorer.core.diff import diff
from explorer.core.timeline import Timeline
from explorer.passes.pipeline import run_pipeline
from explorer.views.figures import diff_overlay, graph_figure
from explorer.views.layout import auto_collapse, clear_cache, layered

__all__ = ["main", "measure", "step_cost", "fresh_diff", "forget"]

PIPELINE = "eliminate_common_subexpression,fuse_qkv"


def measure(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``fn`` over ``repeat`` runs, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def forget(*graphs: object) -> None:
    """Drop what the diff caches on graphs, so the next diff starts from scratch."""
    for graph in graphs:
        for name in ("_diff_side", "_weight_digests"):
            if hasattr(graph, name):
                delattr(graph, name)


def fresh_diff(timeline: Timeline, index: int) -> None:
    """One diff between consecutive snapshots, nothing cached."""
    forget(timeline[index - 1].graph, timeline[index].graph)
    diff(timeline[index - 1].graph, timeline[index].graph)


def step_cost(timeline: Timeline, index: int, *, cached: bool) -> float:
    """Seconds to prepare step ``index`` the way the stepper does (diff, two layouts, two figures)."""
    if not cached:
        clear_cache()
        timeline._diffs.pop((index - 1, index), None)
        forget(timeline[index - 1].graph, timeline[index].graph)
    start = time.perf_counter()
    before, after = timeline[index - 1].graph, timeline[index].graph
    step_diff = timeline.diff(index)
    before_layout = layered(before, collapse=auto_collapse(before))
    after_layout = layered(after, collapse=auto_collapse(after), previous=before_layout)
    graph_figure(before, before_layout, diff_overlay(step_diff, "before"))
    graph_figure(after, after_layout, diff_overlay(step_diff, "after"))
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="*", default=[12, 123])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"pipeline: {PIPELINE}")
    header = f"{'nodes':>6} {'load s':>8} {'pass s':>8} {'diff s':>8} {'step 1st s':>10} {'step again s':>12}"
    print(header + f" {'diff/load':>9} {'step/load':>9} {'changed':>8}")
    for layers in args.layers:
        model = zoo.build("transformer", layers=layers, hidden=32)
        load_s = measure(lambda model=model: load(model), args.repeat)
        start = time.perf_counter()
        timeline = run_pipeline(model, PIPELINE, verify=False)
        pass_s = (time.perf_counter() - start) / 2
        steps = [i for i in range(1, len(timeline)) if timeline[i].changed]
        diff_s = statistics.median(
            measure(lambda i=i, t=timeline: fresh_diff(t, i), args.repeat) for i in steps
        )
        first_s = statistics.median(
            step_cost(timeline, i, cached=False) for i in steps for _ in range(args.repeat)
        )
        again_s = statistics.median(
            step_cost(timeline, i, cached=True) for i in steps for _ in range(args.repeat)
        )
        changed = sum(
            timeline.diff(i).counts()["modified"] + timeline.diff(i).counts()["removed"] for i in steps
        )
        print(
            f"{len(model.graph.node):>6} {load_s:>8.3f} {pass_s:>8.3f} {diff_s:>8.3f} {first_s:>10.3f} "
            f"{again_s:>12.3f} {diff_s / load_s:>9.2f} {first_s / load_s:>9.2f} {changed:>8}"
        )


if __name__ == "__main__":
    main()

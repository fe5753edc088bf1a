"""Each notebook in a fresh kernel: its wall time and the peak memory of the kernel and what it started.

For every notebook in ``notebooks/`` (or those named on the command line), in one run:

- ``wall_s``: from asking for a fresh kernel to the end of the notebook's last cell (the kernel's
  start, then every cell, as nbclient runs them; the shutdown is not counted);
- ``pss_mib``: the peak, over the run, of the summed proportional set sizes of the kernel, the
  explorer's worker and every other descendant of the kernel, read every ``--interval`` seconds
  (:class:`explorer.isolation.process_memory.ProcessTreeSampler`): a page they share counts once, as in a
  container's memory limit. Binder gives a visitor 1-2 GB for all of them (docs/course.md: under
  2 GB). ``peak_mib`` is the peak of their summed resident memory, where a shared page counts in
  every process that maps it: an upper bound.

Ratios are against a baseline measured first in the same run: a notebook whose only cell is
``pass``, in a fresh kernel of the same environment (``time_x``: against its wall time, i.e.
mostly a kernel's start; ``memory_x``: against its peak, an idle kernel). ``load`` is the
machine's 1-minute load average when the notebook started: on a shared 2-core machine, read a
slow row next to it.

Each notebook runs in a scratch copy (the kernel's working folder is a temporary folder), prints
its row as soon as it ends, and a failing notebook is reported (its first error) without stopping
the others. Ctrl-C stops the notebook running (its kernel and the kernel's children are killed),
then prints the table of what was measured. Exit status: 0, 1 when a notebook failed, 130 when
interrupted.

Run: ``.venv/bin/python benchmarks/notebook_benchmark.py [NOTEBOOK ...] [--json [PATH]]``
(``--json`` alone prints the figures as JSON instead of the table; ``--help`` for the rest).
"""

from __future__ import annotations

import argparse
import atexit
import datetime as dt
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere: explorer/ is beside benchmarks/
    sys.path.insert(0, str(ROOT))

from explorer.isolation.process_memory import ProcessTreeSampler  # noqa: E402

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["BASELINE", "BenchmarkResult", "NotebookRun", "main", "run_notebook"]

BASELINE = "(empty notebook)"
"""The baseline row's name: one ``pass`` cell in a fresh kernel."""
MIB = 2**20


@dataclass(frozen=True)
class NotebookRun:
    """One notebook run in a fresh kernel.

    Attributes
    ----------
    notebook : str
        The notebook's file name (``BASELINE`` for the baseline).
    wall_s : float
        From asking for the kernel to the end of the last cell that ran.
    kernel_start_s : float
        From asking for the kernel to the kernel being ready (0 if it never was).
    peak_rss_bytes : int
        The peak of the summed resident memory of the kernel and its descendants.
    max_processes : int
        The most processes of the kernel's tree seen at once.
    cells : int
        Code cells executed.
    error : str or None
        ``None`` when the notebook ran through; else its first error (or "interrupted").
    started_at : str
        When the run started (ISO 8601, UTC).
    load : float
        The machine's 1-minute load average when the run started.
    peak_pss_bytes : int
        The peak of the summed proportional set sizes (shared pages once).
    """

    notebook: str
    wall_s: float
    kernel_start_s: float
    peak_rss_bytes: int
    max_processes: int
    cells: int
    error: str | None
    started_at: str
    load: float
    peak_pss_bytes: int = 0

    @property
    def ok(self) -> bool:
        """Whether the notebook ran through without an error."""
        return self.error is None

    @property
    def peak_mib(self) -> float:
        """``peak_rss_bytes`` in MiB."""
        return self.peak_rss_bytes / MIB

    @property
    def pss_mib(self) -> float:
        """``peak_pss_bytes`` in MiB."""
        return self.peak_pss_bytes / MIB

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of the fields (and ``peak_mib``, ``ok``).

        Examples
        --------
        >>> run = NotebookRun("a.ipynb", 2.0, 1.0, 3 * MIB, 3, 4, None, "2026-01-01T00:00:00", 0.5)
        >>> run.to_dict()["peak_mib"], run.to_dict()["ok"]
        (3.0, True)
        """
        return {**asdict(self), "peak_mib": self.peak_mib, "pss_mib": self.pss_mib, "ok": self.ok}


@dataclass(frozen=True)
class BenchmarkResult:
    """The baseline and the notebooks' runs, measured in one run of the benchmark.

    Attributes
    ----------
    baseline : NotebookRun
        The empty notebook in a fresh kernel.
    runs : tuple of NotebookRun
        The notebooks, in the order they ran.
    interrupted : bool
        Whether Ctrl-C stopped the benchmark before the last notebook.
    machine : dict
        Where it ran: CPUs, memory, Python, platform.
    """

    baseline: NotebookRun
    runs: tuple[NotebookRun, ...]
    interrupted: bool = False
    machine: dict[str, Any] = field(default_factory=dict)

    def rows(self) -> list[dict[str, Any]]:
        """Each run (the baseline first) with its ratios to the baseline.

        Examples
        --------
        >>> base = NotebookRun(BASELINE, 2.0, 1.5, 100 * MIB, 2, 1, None, "t", 0.0, 80 * MIB)
        >>> nb = NotebookRun("a.ipynb", 10.0, 1.5, 250 * MIB, 3, 9, None, "t", 0.0, 200 * MIB)
        >>> [(r["notebook"], r["time_x"], r["memory_x"]) for r in BenchmarkResult(base, (nb,)).rows()]
        [('(empty notebook)', 1.0, 1.0), ('a.ipynb', 5.0, 2.5)]
        """
        base = self.baseline
        rows = []
        for run in (base, *self.runs):
            rows.append(
                {
                    "notebook": run.notebook,
                    "wall_s": round(run.wall_s, 2),
                    "time_x": round(run.wall_s / base.wall_s, 2) if base.wall_s else float("nan"),
                    "pss_mib": round(run.pss_mib, 1),
                    "peak_mib": round(run.peak_mib, 1),
                    "memory_x": round(run.peak_pss_bytes / base.peak_pss_bytes, 2)
                    if base.peak_pss_bytes
                    else float("nan"),
                    "processes": run.max_processes,
                    "cells": run.cells,
                    "load": round(run.load, 2),
                    "status": "ok" if run.ok else run.error,
                }
            )
        return rows

    def to_frame(self) -> pd.DataFrame:
        """Return :meth:`rows` as a DataFrame, one row per notebook, the baseline first.

        Examples
        --------
        >>> base = NotebookRun(BASELINE, 2.0, 1.5, 100 * MIB, 2, 1, None, "t", 0.0)
        >>> BenchmarkResult(base, ()).to_frame().columns.tolist()[:5]
        ['notebook', 'wall_s', 'time_x', 'pss_mib', 'peak_mib']
        """
        import pandas as pd

        return pd.DataFrame(self.rows())

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict: the machine, the baseline, every run, the table's rows.

        Examples
        --------
        >>> base = NotebookRun(BASELINE, 2.0, 1.5, 100 * MIB, 2, 1, None, "t", 0.0)
        >>> sorted(BenchmarkResult(base, ()).to_dict())
        ['baseline', 'interrupted', 'machine', 'rows', 'runs']
        """
        return {
            "machine": self.machine,
            "baseline": self.baseline.to_dict(),
            "runs": [run.to_dict() for run in self.runs],
            "rows": self.rows(),
            "interrupted": self.interrupted,
        }

    @property
    def failed(self) -> list[str]:
        """The notebooks that did not run through (interrupted ones included)."""
        return [run.notebook for run in (self.baseline, *self.runs) if not run.ok]


def _empty_notebook() -> Any:
    import nbformat

    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("pass")])


def _first_error(notebook: Any) -> str | None:
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if output.get("output_type") == "error":
                return f"cell {index}: {output.get('ename', '')}: {output.get('evalue', '')}"[:300]
    return None


def _kill_tree(pid: int) -> None:
    """End a kernel this benchmark started, and its descendants, by their process ids."""
    try:
        root = psutil.Process(pid)
        processes = [*root.children(recursive=True), root]
    except psutil.Error:
        return
    for process in processes:
        try:
            process.kill()
        except psutil.Error:
            continue
    psutil.wait_procs(processes, timeout=10)


def run_notebook(
    path: Path | None,
    *,
    timeout: float = 600.0,
    interval_s: float = 0.1,
    kernel_name: str = "python3",
    interrupted: threading.Event | None = None,
) -> NotebookRun:
    """Run one notebook top to bottom in a fresh kernel, timing it and sampling its memory.

    The notebook runs from a scratch copy in a temporary folder (the kernel's working folder),
    in a thread, so that the caller's Ctrl-C lands in the caller: set ``interrupted`` (or press
    Ctrl-C while this waits) and the kernel and its children are killed, and the run returns
    with the error ``"interrupted"``.

    Parameters
    ----------
    path : Path or None
        The notebook (``None``: the baseline, one ``pass`` cell).
    timeout : float
        Seconds a cell may take (nbclient's ``timeout``).
    interval_s : float
        Time between two reads of the kernel's process tree.
    kernel_name : str
        The kernel spec (default ``python3``: this environment's Python).
    interrupted : threading.Event, optional
        Set by the caller to stop the run.

    Returns
    -------
    NotebookRun
        The figures, and the first error when a cell failed.

    Raises
    ------
    KeyboardInterrupt
        After Ctrl-C, once the kernel is killed: the caller still gets the partial figures as
        the exception's first argument.

    Examples
    --------
    >>> run = run_notebook(None)  # the baseline: a fresh kernel runs one ``pass`` cell
    >>> run.ok, run.cells, run.peak_mib > 10, run.wall_s >= run.kernel_start_s > 0
    (True, 1, True, True)
    """
    import nbformat
    from nbclient import NotebookClient

    started_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="notebook-benchmark-") as scratch:
        if path is None:
            name, notebook = BASELINE, _empty_notebook()
        else:
            name = path.name
            copy = Path(scratch) / path.name
            shutil.copy(path, copy)
            notebook = nbformat.read(copy, as_version=4)
        sampler = ProcessTreeSampler(interval_s=interval_s)
        times = {"start": time.perf_counter(), "ready": 0.0, "last_cell": 0.0}
        cells = [0]
        kernel_pid = [0]

        def on_start(**_: object) -> None:
            times["ready"] = time.perf_counter()
            kernel_pid[0] = client.km.provisioner.pid
            sampler.start(kernel_pid[0])

        def on_cell_executed(**_: object) -> None:
            times["last_cell"] = time.perf_counter()
            cells[0] += 1

        client = NotebookClient(
            notebook,
            timeout=timeout,
            kernel_name=kernel_name,
            resources={"metadata": {"path": scratch}},
            store_widget_state=True,
            on_notebook_start=on_start,
            on_cell_executed=on_cell_executed,
        )
        failure: list[BaseException] = []
        finished = threading.Event()  # not Thread.join: on 3.11 a Ctrl-C in join() marks the thread ended

        def execute() -> None:
            try:
                client.execute()
            except BaseException as error:  # reported in the run's row
                failure.append(error)
            finally:
                finished.set()

        worker = threading.Thread(target=execute, name=f"run {name}", daemon=True)
        stop = interrupted or threading.Event()
        worker.start()
        try:
            while not finished.wait(0.2) and not stop.is_set():
                pass
        except KeyboardInterrupt:
            stop.set()
        if stop.is_set() and not finished.is_set():
            if kernel_pid[0]:
                _kill_tree(kernel_pid[0])
            finished.wait(30)
            atexit.unregister(client._cleanup_kernel)  # the kernel is gone; nothing to clean at exit
        peak = sampler.stop()
        end = times["last_cell"] or time.perf_counter()
        error = "interrupted" if stop.is_set() else _first_error(notebook)
        if error is None and failure:
            error = f"{type(failure[0]).__name__}: {failure[0]}".splitlines()[0][:300]
        run = NotebookRun(
            notebook=name,
            wall_s=end - times["start"],
            kernel_start_s=times["ready"] - times["start"] if times["ready"] else 0.0,
            peak_rss_bytes=peak.peak_rss_bytes,
            peak_pss_bytes=peak.peak_pss_bytes,
            max_processes=peak.max_processes,
            cells=cells[0],
            error=error,
            started_at=started_at,
            load=load,
        )
    if stop.is_set():
        raise KeyboardInterrupt(run)
    return run


def _machine() -> dict[str, Any]:
    return {
        "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "logical_cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
    }


def _format_table(result: BenchmarkResult) -> str:
    rows = result.rows()
    columns = [
        "notebook",
        "wall_s",
        "time_x",
        "pss_mib",
        "peak_mib",
        "memory_x",
        "processes",
        "cells",
        "load",
        "status",
    ]
    text = [[str(row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in text)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in text]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print each notebook's row as it ends, then the table (or ``--json``).

    Parameters
    ----------
    argv : list of str, optional
        The command line (default ``sys.argv[1:]``).

    Returns
    -------
    int
        0; 1 when a notebook failed; 130 when interrupted.

    Examples
    --------
    >>> main(["--help"])  # doctest: +SKIP
    """
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebooks/*.ipynb")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a cell may take (600)")
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between memory reads (0.1)")
    parser.add_argument("--kernel", default="python3", help="kernel spec name (python3: this Python)")
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="PATH",
        help="write the figures as JSON to PATH (alone: stdout)",
    )
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    to_stdout = args.json == "-"
    say = (
        (lambda *a: print(*a, file=sys.stderr, flush=True))
        if to_stdout
        else (lambda *a: print(*a, flush=True))
    )

    machine = _machine()
    say(f"{len(paths)} notebooks, each in a fresh kernel; baseline first ({machine['measured_at']})")
    runs: list[NotebookRun] = []
    baseline: NotebookRun | None = None
    interrupted = False
    todo: list[Path | None] = [None, *paths]
    for index, path in enumerate(todo):
        label = BASELINE if path is None else path.name
        say(f"[{index}/{len(paths)}] {label} ...")
        try:
            run = run_notebook(path, timeout=args.timeout, interval_s=args.interval, kernel_name=args.kernel)
        except KeyboardInterrupt as stop:
            interrupted = True
            if stop.args and isinstance(stop.args[0], NotebookRun):
                run = stop.args[0]
            else:
                break
        if baseline is None:
            baseline = run
        else:
            runs.append(run)
        ratio = (
            f", {run.wall_s / baseline.wall_s:.1f}x time" if run is not baseline and baseline.wall_s else ""
        )
        status = "ok" if run.ok else run.error
        say(
            f"      {run.wall_s:.1f} s{ratio}, peak {run.pss_mib:.0f} MiB (PSS; {run.peak_mib:.0f} MiB RSS)"
            f" over {run.max_processes} processes: {status}"
        )
        if interrupted:
            say("interrupted: the table holds what was measured")
            break
    if baseline is None:
        return 130
    result = BenchmarkResult(baseline, tuple(runs), interrupted, machine)
    if args.json:
        text = json.dumps(result.to_dict(), indent=2)
        if to_stdout:
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
            say(f"wrote {args.json}")
    if not to_stdout:
        print()
        print(_format_table(result))
        print(f"\nratios: against the empty notebook ({baseline.wall_s:.1f} s, {baseline.pss_mib:.0f} MiB)")
    if interrupted:
        return 130
    if result.failed:
        say(f"failed: {', '.join(result.failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

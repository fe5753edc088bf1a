"""Per-call times in the Relax VM, from ``VirtualMachine.set_instrument`` (TVM 0.27 has no profiler flag).

Runs where the VM is (the worker). Used by the runtimes' profile and by the tuner, which
measures each task untuned to decide where its trials go.

Examples
--------
>>> records = [{"name": "matmul", "ms": 2.0, "run": 0}, {"name": "relu", "ms": 0.5, "run": 0},
...            {"name": "matmul", "ms": 1.0, "run": 1}, {"name": "relu", "ms": 0.5, "run": 1}]
>>> time_per_symbol(records)  # what vm_call_times records, per kernel and run
{'matmul': (1, 1.5), 'relu': (1, 0.5)}
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

__all__ = ["vm_call_times", "time_per_symbol"]


def vm_call_times(
    machine: Any, args: Sequence[Any], runs: int, *, warmup: bool = True
) -> list[dict[str, Any]]:
    """Time every call ``machine["main"]`` makes (PrimFuncs and VM builtins) over ``runs`` runs.

    Parameters
    ----------
    machine : tvm.relax.VirtualMachine
        The loaded executable.
    args : sequence
        The inputs (``tvm.runtime.Tensor``).
    runs : int
        Timed runs.
    warmup : bool
        Run once, untimed, first.

    Returns
    -------
    list of dict
        ``{"name", "op", "ms", "run"}`` per call, in call order.

    Examples
    --------
    >>> import numpy as np, tvm
    >>> from tvm import relax
    >>> from explorer import zoo
    >>> from explorer.lower.tvm.relax_compile import compile_relax
    >>> vm = relax.VirtualMachine(compile_relax(zoo.build("mlp"), None)["executable"], tvm.cpu())
    >>> calls = vm_call_times(vm, [tvm.runtime.tensor(np.ones((1, 1, 28, 28), "float32"))], runs=2)
    >>> sorted({c["run"] for c in calls}), len(calls) > 2
    ([0, 1], True)
    """
    records: list[dict[str, Any]] = []
    started: list[int] = []
    state = {"run": 0}

    def instrument(func: Any, symbol: str, before_run: bool, ret_value: Any, *call_args: Any) -> int:
        if before_run:
            started.append(time.perf_counter_ns())
        else:
            elapsed = (time.perf_counter_ns() - started.pop()) / 1e6
            records.append({"name": str(symbol), "op": str(symbol), "ms": elapsed, "run": state["run"]})
        return 0  # VMInstrumentReturnKind.NO_OP

    main = machine["main"]
    if warmup:
        main(*args)
    machine.set_instrument(instrument)
    try:
        for run in range(runs):
            state["run"] = run
            main(*args)
    finally:
        machine.set_instrument(lambda *a: 0)
    return records


def time_per_symbol(records: Sequence[dict[str, Any]]) -> dict[str, tuple[int, float]]:
    """``symbol -> (calls per run, ms per run)`` from :func:`vm_call_times`'s records.

    Examples
    --------
    >>> time_per_symbol([{"name": "f", "ms": 2.0, "run": 0}, {"name": "f", "ms": 4.0, "run": 1}])
    {'f': (1, 3.0)}
    """
    runs = max(1, len({r["run"] for r in records}))
    calls: dict[str, int] = defaultdict(int)
    total: dict[str, float] = defaultdict(float)
    for record in records:
        calls[record["name"]] += 1
        total[record["name"]] += record["ms"]
    return {name: (calls[name] // runs, total[name] / runs) for name in calls}

"""(worker) Per-dispatch times from IREE's own profiler, each dispatch located on its ONNX node.

IREE 3.13's Python runtime cannot profile: ``HalDevice.begin_profiling`` with a mode answers
"Python HAL native profiling requires a profile sink and is not exposed by the runtime
bindings". Its command-line tools can. :func:`dispatch_times` runs the VM module in
``iree-benchmark-module`` (a child of the worker, on the same driver and thread count as the
session) with HAL-native profiling on (``--device_profiling_mode=host-execution``: on the CPU
drivers, one host event per dispatch with its start and duration), for a fixed number of
iterations (``--benchmark_min_time=Nx``), then reads the bundle with ``iree-profile dispatch
--dispatch_events --format=jsonl``. The first iteration is a warm-up (a fresh process: its first
dispatches run cold) and is dropped.

A dispatch is named after its executable's export (``resnet18$async_dispatch_11_matmul_like_
128x28x28x64_f32``), which says what it computes but not which ONNX node it came from. The
compiler knows: after its ``flow`` phase every ``flow.dispatch`` call site carries the location
of the ONNX node(s) it was formed from (``loc("/layer2/layer2.0/downsample/downsample.0/Conv")``,
a fused location for several). :func:`dispatch_sites` compiles the model that far again
(``--compile-to=flow``: no code generation, a second or so) and lists the call sites of every
export in program order; :func:`profile_dispatches` puts the n-th call of an export in a run on
its n-th call site (an export shared by identical layers is called once per layer). A call with
no site (the compiler merged executables after ``flow``) keeps its time, with no node.

Examples
--------
>>> text = '''
... util.func public @m(%x: tensor<4xf32>) -> tensor<4xf32> {
...   %0 = flow.dispatch @m_dispatch_0::@m_dispatch_0_elementwise_4_f32(%x)
...       : (tensor<4xf32>) -> tensor<4xf32> loc("/Relu")
...   util.return %0 : tensor<4xf32>
... }'''
>>> call_sites(text)
{'m_dispatch_0_elementwise_4_f32': [{'onnx_nodes': ['/Relu'], 'output_bytes': 16}]}
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import tempfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from explorer.lower.iree.iree_parameters import (
    PARAMETER_SCOPES,
    PARAMETERS_FROM_BYTES,
    encoder_flags,
    parameters_path,
)

__all__ = [
    "PROFILING_MODE",
    "call_sites",
    "dispatch_sites",
    "dispatch_times",
    "kernel_name",
    "profile_dispatches",
]

PROFILING_MODE = "host-execution"
"""What IREE's CPU drivers profile per dispatch (``iree-run-module --help``: the profiling families)."""

_TOOL_TIMEOUT_S = 600.0


def call_sites(text: str) -> dict[str, list[dict[str, Any]]]:
    """Every ``flow.dispatch`` of the module's functions (not its initializers, which run once at
    load), by the export it calls, in program order: the ONNX nodes of its location and the
    bytes its results take (None for a shape not known).

    Examples
    --------
    >>> call_sites("util.func @f() { util.return }")
    {}
    """
    from iree.compiler import ir

    from explorer.lower.iree.mlir_graph_data import dispatch_symbols, location_names, parse_module

    context, module = parse_module(text)
    sites: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with context:
        found: list[Any] = []

        def visit(op: Any) -> Any:
            if op.name == "util.initializer":
                return ir.WalkResult.SKIP
            if op.name == "flow.dispatch" and "entry_points" in op.attributes:
                found.append(op)
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
        for op in found:
            export = dispatch_symbols(op)[1]
            sites[export].append(
                {"onnx_nodes": location_names(op.location), "output_bytes": _result_bytes(op)}
            )
    return dict(sites)


def _result_bytes(op: Any) -> int | None:
    """Bytes an op's tensor results take, or None when a shape or an element type is not known."""
    from explorer.core.tensors import dtype_bytes
    from explorer.lower.iree.mlir_graph_data import tensor_type

    total = 0
    for result in op.results:
        typed = tensor_type(str(result.type))
        if typed is None or any(not isinstance(d, int) for d in typed[0]):
            return None
        size = dtype_bytes(typed[1])
        if size is None:
            return None
        total += math.prod(int(d) for d in typed[0]) * size
    return total


def dispatch_sites(
    path: str,
    input_shapes: Mapping[str, Sequence[int]] | None,
    *,
    target: str = "llvm-cpu",
    extra_flags: Sequence[str] = (),
    parameters_from: int = PARAMETERS_FROM_BYTES,
) -> dict[str, list[dict[str, Any]]]:
    """The ONNX model at ``path`` imported and compiled to IREE's ``flow`` phase (as
    :func:`explorer.lower.iree.iree_compile.build_vmfb` compiles it, up to there, weights as parameters
    from ``parameters_from`` bytes on as there): :func:`call_sites`.

    Examples
    --------
    >>> import os, tempfile
    >>> from explorer import zoo
    >>> from explorer.onnx_adapter.files import save_model
    >>> path = os.path.join(tempfile.mkdtemp(), "mlp.onnx")
    >>> save_model(zoo.build("mlp"), path)
    >>> sorted(n for sites in dispatch_sites(path, None).values() for s in sites for n in s["onnx_nodes"])
    ['/fc1/Gemm', '/fc2/Gemm', '/fc3/Gemm']
    """
    from explorer.lower.iree.iree_compile import compile_mlir, import_onnx

    with tempfile.TemporaryDirectory(prefix="iree-flow-") as folder:
        mlir, flow = os.path.join(folder, "model.mlirbc"), os.path.join(folder, "model.flow.mlir")
        named = import_onnx(path, input_shapes, mlir, parameters_from)["parameters"]
        encoding = encoder_flags(os.path.join(folder, "encoder.mlirbc")) if named else []  # as build_vmfb
        compile_mlir(mlir, flow, target=target, extra_flags=[*extra_flags, *encoding, "--compile-to=flow"])
        text = Path(flow).read_text(encoding="utf-8")
    return call_sites(text)


def _tool(name: str) -> str:
    from iree.runtime import benchmark

    return str(Path(benchmark.benchmark_exe()).with_name(name))


def _run_tool(command: Sequence[str]) -> str:
    done = subprocess.run(list(command), capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-1500:]
        raise RuntimeError(f"{os.path.basename(command[0])} failed (exit {done.returncode}): {tail}")
    return done.stdout


def dispatch_times(
    vmfb: str,
    function: str,
    inputs: Sequence[np.ndarray],
    runs: int,
    *,
    driver: str = "local-task",
    threads: int = 0,
) -> list[list[dict[str, Any]]]:
    """Run ``function`` of the VM module ``runs`` + 1 times in ``iree-benchmark-module`` with IREE's
    profiler on; per timed run (the first, a warm-up, dropped), its dispatches in the order the
    command buffer records them: ``key`` (the export), ``ms``.

    Examples
    --------
    >>> import tempfile
    >>> from explorer import zoo
    >>> from explorer.onnx_adapter.files import save_model
    >>> from explorer.lower.iree.iree_compile import build_vmfb
    >>> folder = tempfile.mkdtemp()
    >>> save_model(zoo.build("mlp"), os.path.join(folder, "m.onnx"))
    >>> built = build_vmfb(os.path.join(folder, "m.onnx"), None, os.path.join(folder, "m.vmfb"))
    >>> x = np.ones((1, 1, 28, 28), np.float32)
    >>> runs = dispatch_times(built["vmfb"], built["function"], [x], 2, driver="local-sync")
    >>> len(runs), all(d["ms"] >= 0 for d in runs[0])
    (2, True)
    """
    with tempfile.TemporaryDirectory(prefix="iree-profile-") as folder:
        command = [
            _tool("iree-benchmark-module"),
            f"--module={vmfb}",
            *_parameter_flags(vmfb),
            f"--device={driver}",
            f"--function={function}",
            f"--benchmark_min_time={int(runs) + 1}x",
            f"--device_profiling_mode={PROFILING_MODE}",
            f"--device_profiling_output={os.path.join(folder, 'profile.ireeprof')}",
        ]
        if driver == "local-task" and threads > 0:
            command.append(f"--task_topology_max_group_count={threads}")
        for i, value in enumerate(inputs):
            name = os.path.join(folder, f"input{i}.npy")
            np.save(name, np.ascontiguousarray(value))
            command.append(f"--input=@{name}")
        _run_tool(command)
        lines = _run_tool(
            [
                _tool("iree-profile"),
                "dispatch",
                "--dispatch_events",
                "--format=jsonl",
                os.path.join(folder, "profile.ireeprof"),
            ]
        )
    events = [json.loads(line) for line in lines.splitlines() if line.strip().startswith("{")]
    events = [e for e in events if e.get("type") in ("host_dispatch_event", "dispatch_event")]
    by_submission: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        by_submission[int(event.get("submission_id", 0))].append(event)
    submissions = [by_submission[k] for k in sorted(by_submission)]
    if len(submissions) == runs + 1:  # one submission per iteration: the first is the warm-up
        grouped = submissions[1:]
    else:  # cut the iterations by count, in time order (what is left over ran first: at load)
        ordered = sorted(events, key=lambda e: int(e.get("start_host_time_ns", 0)))
        per_run, first = divmod(len(ordered), runs + 1)
        grouped = [ordered[first + (i + 1) * per_run : first + (i + 2) * per_run] for i in range(runs)]
    return [
        [
            {"key": str(e["key"]), "ms": float(e.get("duration_ns", 0)) / 1e6}
            for e in sorted(
                group, key=lambda e: (int(e.get("command_index", 0)), e.get("start_host_time_ns", 0))
            )
        ]
        for group in grouped
    ]


def _parameter_flags(vmfb: str) -> list[str]:
    """The tools' flag that loads the module's parameter archive, where it has one."""
    archive = parameters_path(vmfb)
    return (
        [f"--parameters={scope}={archive}" for scope in PARAMETER_SCOPES] if os.path.exists(archive) else []
    )


_DISPATCH = re.compile(r".*(dispatch_\d+)(?:_(.*))?$")


def kernel_name(key: str) -> tuple[str, str]:
    """A dispatch's short name and what it computes, from its export's name.

    Examples
    --------
    >>> kernel_name("resnet18$async_dispatch_11_matmul_like_128x28x28x64_f32")
    ('dispatch_11', 'matmul_like_128x28x28x64_f32')
    >>> kernel_name("something_else")
    ('something_else', 'something_else')
    """
    found = _DISPATCH.match(key)
    if found is None:
        return key, key
    return found.group(1), found.group(2) or found.group(1)


def profile_dispatches(
    model_path: str,
    vmfb: str,
    function: str,
    input_shapes: Mapping[str, Sequence[int]] | None,
    inputs: Sequence[np.ndarray],
    runs: int,
    *,
    driver: str = "local-task",
    threads: int = 0,
    sites: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> list[dict[str, Any]]:
    """One record per dispatch call of ``runs`` runs: ``name`` (``dispatch_N``, ``#k`` for the
    k-th call site of a shared one), ``op`` (what it computes), ``ms``, ``run``, ``onnx_nodes``
    (its call site's location) and ``output_bytes``.

    ``sites`` (from :func:`dispatch_sites`) saves compiling to ``flow`` again.

    Examples
    --------
    >>> import tempfile
    >>> from explorer import zoo
    >>> from explorer.onnx_adapter.files import save_model
    >>> from explorer.lower.iree.iree_compile import build_vmfb
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "m.onnx")
    >>> save_model(zoo.build("mlp"), path)
    >>> built = build_vmfb(path, None, os.path.join(folder, "m.vmfb"))
    >>> x = np.ones((1, 1, 28, 28), np.float32)
    >>> vmfb, function = built["vmfb"], built["function"]
    >>> records = profile_dispatches(path, vmfb, function, None, [x], 1, driver="local-sync")
    >>> sorted(n for r in records for n in r["onnx_nodes"])
    ['/fc1/Gemm', '/fc2/Gemm', '/fc3/Gemm']
    """
    if sites is None:
        sites = dispatch_sites(model_path, input_shapes)
    records = []
    for run, calls in enumerate(dispatch_times(vmfb, function, inputs, runs, driver=driver, threads=threads)):
        seen: dict[str, int] = defaultdict(int)
        for call in calls:
            key = call["key"]
            nth = seen[key]
            seen[key] += 1
            known = sites.get(key, ())
            site = known[nth] if nth < len(known) else None
            short, op = kernel_name(key)
            records.append(
                {
                    "name": f"{short}#{nth}" if len(known) > 1 or nth else short,
                    "op": op,
                    "ms": call["ms"],
                    "run": run,
                    "onnx_nodes": list(site["onnx_nodes"]) if site else [],
                    "output_bytes": site["output_bytes"] if site else None,
                }
            )
    return records

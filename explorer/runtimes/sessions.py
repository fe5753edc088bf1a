"""Prepared sessions kept warm in the worker: ONNX Runtime sessions, TVM virtual machines, IREE VM modules.

Everything here runs inside the worker process (:mod:`explorer.isolation.worker`). A session is
prepared once under a key the parent computes (the model, the runtime and its options) and
kept in this process, so running or timing it again costs no session creation or compile;
preparing the same key again returns at once (``reused``). The worker keeps the last
:data:`MAX_SESSIONS`; after a crash the worker is new and the parent prepares again.

Timing happens here, next to the session, so a run's time is the runtime's and not the
pipe's: warm-up runs first, then runs until both a minimum count and a minimum time are
reached (or a maximum time is, whichever first, with at least three runs), each timed with
``time.perf_counter_ns``. Inputs are bound to the runtime once (TVM tensors made before the
clock starts), as ``onnxruntime_perf_test`` and TVM's ``time_evaluator`` do.

Examples
--------
>>> import numpy as np
>>> from explorer.isolation import worker
>>> from explorer import zoo
>>> path = str(zoo.save("mlp"))
>>> info = worker.run(prepare_ort, path, "doc-mlp", {"optimization": "all"})
>>> feeds = {"input": np.zeros((1, 1, 28, 28), np.float32)}
>>> timed = worker.run(time_session, "doc-mlp", feeds, warmup=1, min_runs=5, min_seconds=0.0)
>>> info["runtime"], len(timed["times_ms"]) >= 5, timed["outputs"][0].shape
('ort', True, (1, 10))
"""

from __future__ import annotations

import os
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from explorer.core.errors import UsageError
from explorer.isolation import worker
from explorer.isolation.cpu_cores import physical_cores, tvm_threads

__all__ = [
    "MAX_SESSIONS",
    "SessionGone",
    "prepare_ort",
    "ort_refusal",
    "ort_bad_tensor",
    "ort_node_failure",
    "prepare_tvm",
    "prepare_torch",
    "prepare_iree",
    "run_session",
    "time_session",
    "has_session",
    "profile_session",
    "RPC_REQUEST_TIMEOUT_S",
    "SETTLE_S",
    "COMPILE_INFO",
    "REPORT_EVERY_S",
]

MAX_SESSIONS = 8
"""Prepared sessions a worker keeps (least recently used dropped first)."""


class SessionGone(KeyError):
    """The worker holds no session under that key (it was dropped, or the worker is new)."""


@dataclass
class _Session:
    """A prepared session: how to bind inputs, run, and read outputs; and what was measured preparing it."""

    bind: Callable[[Mapping[str, np.ndarray]], Any]
    call: Callable[[Any], Any]
    outputs: Callable[[Any], list[np.ndarray]]
    info: dict[str, Any]
    timer: Callable[[Any], float] | None = None
    """``timer(bound inputs)`` -> milliseconds of one run measured where it ran (a remote device),
    instead of the clock here around :attr:`call`."""
    profile: Callable[[str, Any, int], list[dict[str, Any]]] | None = None
    """``profile(model path, bound inputs, runs)`` -> one record per kernel call: ``name``, ``op``,
    ``ms``, ``run`` (ONNX Runtime profiles a second session made from the file)."""


_SESSIONS: OrderedDict[str, _Session] = OrderedDict()


def _keep(key: str, session: _Session) -> dict[str, Any]:
    _SESSIONS[key] = session
    _SESSIONS.move_to_end(key)
    while len(_SESSIONS) > MAX_SESSIONS:
        _SESSIONS.popitem(last=False)
    return {**session.info, "reused": False}


def _get(key: str) -> _Session:
    session = _SESSIONS.get(key)
    if session is None:
        raise SessionGone(key)
    _SESSIONS.move_to_end(key)
    return session


def has_session(key: str) -> bool:
    """Whether this worker holds a prepared session under ``key``.

    Examples
    --------
    >>> has_session("nothing-prepared-under-this-key")
    False
    """
    return key in _SESSIONS


def prepare_ort(path: str, key: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Create (or find) an ONNX Runtime session for ``path`` under ``key``.

    ``options``: ``provider`` (default ``CPUExecutionProvider``), ``optimization`` (a level
    of :data:`explorer.onnx_adapter.ort_run.ORT_LEVELS`, default ``all``), ``threads`` (intra-op, 0 =
    ONNX Runtime's default), ``strict_placement`` (``session.disable_cpu_ep_fallback`` for a
    provider other than the CPU's).

    Returns
    -------
    dict
        ``{"runtime": "ort", "prepare_s", "providers", "threads", "version", "reused"}``, or
        ONNX Runtime's refusal of the model (``{"ok": False, "runtime": "ort", "version",
        "provider", ...}`` with what :func:`ort_refusal` read from its message), or of a tensor
        whose stored values disagree with its shape (``{"ok": False, "runtime": "ort", "version",
        "bad_tensor"}``, :func:`ort_bad_tensor`).

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> path = str(zoo.save("mlp"))
    >>> first = worker.run(prepare_ort, path, "doc-prepare-ort", {"optimization": "basic", "threads": 1})
    >>> again = worker.run(prepare_ort, path, "doc-prepare-ort", {"optimization": "basic", "threads": 1})
    >>> first["runtime"], first["threads"], first["reused"], again["reused"]
    ('ort', 1, False, True)
    """
    if key in _SESSIONS:
        return {**_get(key).info, "reused": True}
    import onnxruntime as ort

    from explorer.onnx_adapter.ort_run import ort_session

    provider = str(options.get("provider", "CPUExecutionProvider"))
    threads = int(options.get("threads", 0) or 0)
    started = time.perf_counter()
    strict = bool(options.get("strict_placement")) and provider != "CPUExecutionProvider"
    config = {"session.disable_cpu_ep_fallback": "1"} if strict else None  # the CPU's own: a conflict
    try:
        session = ort_session(
            path, [provider], str(options.get("optimization", "all")), threads=threads, config=config
        )
    except Exception as err:  # the model's fault (no kernel, unknown op, a type) comes back as data
        bad_tensor = ort_bad_tensor(str(err))
        if bad_tensor is not None:  # a corrupt model file: the caller raises InvalidModelError (exit 2)
            return {"ok": False, "runtime": "ort", "version": ort.__version__, "bad_tensor": bad_tensor}
        refusal = ort_refusal(str(err), provider)
        if strict and "fallback to CPU EP has been explicitly disabled" in str(err):
            reason = f"some nodes would fall back to the CPU provider, and {provider} was asked for strictly "
            refusal = _refusal(None, None, None, "", reason + "(session.disable_cpu_ep_fallback=1)")
        if refusal is None:
            raise  # anything else is not the model's: it stays what it is
        return {"ok": False, "runtime": "ort", "version": ort.__version__, "provider": provider, **refusal}
    prepare_s = time.perf_counter() - started
    names = [o.name for o in session.get_outputs()]

    def profile(model_path: str, feeds: Any, runs: int) -> list[dict[str, Any]]:
        return _ort_profile(
            model_path, provider, str(options.get("optimization", "all")), threads, feeds, runs
        )

    info = {
        "runtime": "ort",
        "prepare_s": prepare_s,
        "providers": session.get_providers(),
        "threads": threads or physical_cores(),  # ONNX Runtime's default: one per physical core
        "version": ort.__version__,
    }
    return _keep(
        key,
        _Session(
            bind=dict,
            call=lambda feeds: session.run(names, feeds),
            outputs=lambda result: [np.asarray(r) for r in result],
            info=info,
            profile=profile,
        ),
    )


def prepare_torch(path: str, key: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Load the model at ``path`` as eager PyTorch (:func:`explorer.runtimes.torch_eager.torch_program`)
    under ``key``: one ``torch`` call per node, the weights as torch tensors.

    ``options``: ``threads`` (PyTorch's intra-op threads; 0 = one per physical core, as ONNX
    Runtime and TVM run here).

    Returns
    -------
    dict
        ``{"runtime": "torch-eager", "prepare_s", "threads", "version", "reused"}``, or the
        refusal of a node it has no translation for (``{"ok": False, "op_type", "domain",
        "node", "reason", "version"}``).

    Examples
    --------
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> path = str(zoo.save("mlp"))
    >>> info = worker.run(prepare_torch, path, "doc-prepare-torch", {"threads": 1})
    >>> info["runtime"], info["threads"]
    ('torch-eager', 1)
    """
    if key in _SESSIONS:
        return {**_get(key).info, "reused": True}
    import onnx
    import torch

    from explorer.runtimes.torch_eager import TorchUnsupported, torch_program

    threads = int(options.get("threads", 0) or 0) or physical_cores()
    started = time.perf_counter()
    model = onnx.load(path)
    try:
        program = torch_program(model)
    except TorchUnsupported as err:  # the model's op, not our bug: data for a typed error
        domain = next((n.domain for n in model.graph.node if n.op_type == err.op_type), "")
        return {
            "ok": False,
            "runtime": "torch-eager",
            "version": torch.__version__,
            "op_type": err.op_type,
            "domain": domain,
            "node": err.node,
            "reason": str(err),
        }
    info = {
        "runtime": "torch-eager",
        "prepare_s": time.perf_counter() - started,
        "threads": threads,
        "version": torch.__version__,
    }

    def bind(feeds: Mapping[str, np.ndarray]) -> dict[str, Any]:
        torch.set_num_threads(threads)  # the worker's one PyTorch pool: this session's count
        return {name: torch.from_numpy(np.ascontiguousarray(value)) for name, value in feeds.items()}

    def call(bound: Mapping[str, Any]) -> list[Any]:
        with torch.inference_mode():
            return program(bound)

    def profile(model_path: str, bound: Mapping[str, Any], runs: int) -> list[dict[str, Any]]:
        records = []
        with torch.inference_mode():
            program(bound)  # warm-up: PyTorch's first call of a kernel picks and caches its algorithm
            for run in range(runs):
                times: list[tuple[str, str, float]] = []
                program(bound, times)
                records += [{"name": name, "op": op, "ms": ms, "run": run} for name, op, ms in times]
        return records

    return _keep(
        key,
        _Session(
            bind=bind,
            call=call,
            outputs=lambda result: [t.numpy() for t in result],
            info=info,
            profile=profile,
        ),
    )


def prepare_iree(
    path: str, key: str, input_shapes: Mapping[str, Sequence[int]] | None, options: Mapping[str, Any]
) -> dict[str, Any]:
    """Import the model at ``path`` with IREE, compile it into a VM module
    (:func:`explorer.lower.iree.iree_compile.build_vmfb`, in this process's scratch folder) and load it
    under ``key`` (:mod:`explorer.runtimes.iree_vm`).

    ``options``: ``target`` (default ``llvm-cpu``: this CPU), ``threads`` (0 = one per physical
    core, as ONNX Runtime and TVM run here; 1 runs IREE's ``local-sync`` driver).

    Returns
    -------
    dict
        ``{"runtime": "iree", "prepare_s", "import_s", "compile_s", "target", "driver", "threads",
        "function", "version", "reused"}``.

    Raises
    ------
    LoweringError
        IREE's importer or compiler refused the model (the phase, the pass, the op, its ONNX node).

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> path = str(zoo.save("mlp"))
    >>> info = worker.run(prepare_iree, path, "doc-prepare-iree", None, {"threads": 1})
    >>> info["runtime"], info["driver"], info["function"]
    ('iree', 'local-sync', 'mlp')
    """
    if key in _SESSIONS:
        return {**_get(key).info, "reused": True}
    import iree.runtime  # noqa: F401  (IREE's own import is the process's cost, not the model's)

    from explorer.lower.iree.iree_compile import build_vmfb
    from explorer.onnx_adapter.model_files import new_model_dir
    from explorer.runtimes.iree_vm import (
        bind_iree_inputs,
        iree_driver,
        iree_outputs,
        load_iree_function,
        runtime_version,
    )

    threads = int(options.get("threads", 0) or 0) or physical_cores()
    driver = iree_driver(threads)  # before the first device: IREE sizes its pool once
    target = str(options.get("target", "llvm-cpu"))
    started = time.perf_counter()
    worker.report(None, "IREE: import and compile")
    vmfb = str(new_model_dir("iree-") / "model.vmfb")
    flags = [str(f) for f in options.get("flags", ())]
    built = build_vmfb(path, input_shapes, vmfb, target=target, extra_flags=flags)
    function, device = load_iree_function(built["vmfb"], built["function"], driver)
    names = list(built["inputs"])
    info = {
        "runtime": "iree",
        "ok": True,
        "prepare_s": time.perf_counter() - started,
        "import_s": built["import_seconds"],
        "compile_s": built["compile_seconds"],
        "target": target,
        "driver": driver,
        "threads": threads,
        "function": built["function"],
        "version": runtime_version(),
    }
    sites: list[dict[str, Any]] = []  # the dispatches' call sites, compiled once on first profile

    def profile(model_path: str, bound: Any, runs: int) -> list[dict[str, Any]]:
        from explorer.runtimes.iree_dispatches import dispatch_sites, profile_dispatches

        if not sites:
            sites.append(dispatch_sites(model_path, built["inputs"], target=target, extra_flags=flags))
        inputs = [np.asarray(value.to_host()) for value in bound]
        return profile_dispatches(
            model_path,
            built["vmfb"],
            built["function"],
            built["inputs"],
            inputs,
            runs,
            driver=driver,
            threads=threads,
            sites=sites[0],
        )

    return _keep(
        key,
        _Session(
            bind=lambda feeds: bind_iree_inputs(device, feeds, names),
            call=lambda args: function(*args),
            outputs=iree_outputs,
            info=info,
            profile=profile,
        ),
    )


_NO_KERNEL = re.compile(r"Could not find an implementation for ([\w.]+)\((\d+)\) node with name '([^']*)'")
_NOT_REGISTERED = re.compile(r"Fatal error: ([\w.]*):([\w.]+)\((-?\d+)\) is not a registered function/op")
_NO_SCHEMA = re.compile(
    r"In Node, \(\"([^\"]*)\", ([\w.]+), \"([\w.]*)\", -?\d+\).*?No Op registered for [\w.]+ "
    r"with domain_version of (\d+)",
    re.S,
)
_BAD_TYPE = re.compile(
    r"Type Error: Type '([^']+)' of (input|output) parameter \(([^)]*)\) of operator \(([\w.]+)\) "
    r"in node \(([^)]*)\) is invalid"
)
_NEW_OPSET = re.compile(
    r"Opset (\d+) is under development.*?Current official support for domain ([\w.]+) is till opset (\d+)",
    re.S,
)
_NO_LOCALE = re.compile(r"Failed to construct locale with name:([^:]+):")
_BAD_EMBEDDED = re.compile(
    r"Initializer '([^']*)': (raw_data size|data field count|string_data count) \((\d+)(?: bytes)?\) "
    r"does not match expected (?:size|count) from shape[\w ]*\((\d+)(?: bytes)?\)"
)
_BAD_EXTERNAL_LENGTH = re.compile(
    r"TensorProto: (\S+) external data size mismatch\. Computed size: (\d+), external_data\.length: (\d+)"
)
_EXTERNAL_PAST_END = re.compile(
    r"External initializer: (\S+) offset: (\d+) size to read: (\d+) given file_length: (\d+) are out of "
    r"bounds"
)


_NODE_FAILURE = re.compile(
    r"Non-zero status code returned while running (\w+) node\. Name:'([^']*)' Status Message: (.*)", re.S
)


def ort_node_failure(message: str) -> dict[str, str] | None:
    """The node ONNX Runtime's error ``message`` says failed while running, and why:
    ``{"op_type", "node", "status"}`` (``status``: the kernel's own words, on one line); None when the
    message is about anything else.

    Examples
    --------
    >>> failure = ort_node_failure(
    ...     "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Non-zero status code returned while running "
    ...     "GroupQueryAttention node. Name:'/attn/GQA' Status Message: cos_cache dimension 0 shall not "
    ...     "be less than total_sequence_length."
    ... )
    >>> failure["op_type"], failure["node"], failure["status"]
    ('GroupQueryAttention', '/attn/GQA', 'cos_cache dimension 0 shall not be less than total_sequence_length')
    >>> ort_node_failure("std::bad_alloc") is None
    True
    """
    match = _NODE_FAILURE.search(message)
    if match is None:
        return None
    op_type, node, status = match.groups()
    return {"op_type": op_type, "node": node, "status": " ".join(status.split()).rstrip(".")}


def ort_bad_tensor(message: str) -> str | None:
    """What ONNX Runtime's error ``message`` says is wrong with a tensor of the model file, in words
    (the tensor, what it holds, what its shape needs); None when the message is about anything else.

    ONNX Runtime checks every initializer's stored values against its shape when it makes a
    session, and reports a mismatch as a bare ``FAIL`` (``[ONNXRuntimeError] : 1 : FAIL : ...``):
    ``raw_data`` of the wrong length, a typed field (``float_data``, ...) with the wrong count, an
    external length that is not the shape's, an external range past the end of its file.

    Examples
    --------
    >>> ort_bad_tensor("[ONNXRuntimeError] : 1 : FAIL : tensorprotoutils.cc:1730 ValidateEmbeddedTensorProto"
    ...                "DataSizeAndShape Initializer 'W': raw_data size (12 bytes) does not match expected "
    ...                "size from shape and data type (16 bytes)")
    "tensor 'W' holds 12 bytes of values (raw_data) but its shape and type need 16"
    >>> ort_bad_tensor("TensorProto: W external data size mismatch. Computed size: 16, "
    ...                "external_data.length: 8")
    "tensor 'W' stores 8 bytes of external data but its shape and type need 16"
    >>> ort_bad_tensor("std::bad_alloc") is None
    True
    """
    if match := _BAD_EMBEDDED.search(message):
        name, field, stored, expected = match.groups()
        what = {
            "raw_data size": f"{stored} bytes of values (raw_data)",
            "data field count": f"{stored} values in its typed data field",
            "string_data count": f"{stored} strings (string_data)",
        }[field]
        return f"tensor {name!r} holds {what} but its shape and type need {expected}"
    if match := _BAD_EXTERNAL_LENGTH.search(message):
        name, expected, stored = match.groups()
        return (
            f"tensor {name!r} stores {stored} bytes of external data but its shape and type need {expected}"
        )
    if match := _EXTERNAL_PAST_END.search(message):
        name, offset, length, size = match.groups()
        return (
            f"external data of tensor {name!r}: offset {int(offset):,} + length {int(length):,} bytes points "
            f"past the end of the {int(size):,}-byte file"
        )
    return None


def ort_refusal(message: str, provider: str = "CPUExecutionProvider") -> dict[str, Any] | None:
    """What ONNX Runtime's error ``message`` says about the model, when it refused the model for
    the model's sake: ``{"op_type", "domain", "schema_version", "node", "reason"}`` (``domain``
    None where the message does not say it; ``schema_version`` the op's schema version, when named);
    None for any other error (one of ours, or ONNX Runtime's own).

    Refusals read: no kernel of ``provider`` for the op at the schema version the model's opset
    resolves to, or for its input types; an op in a domain no schema or kernel is registered
    for (a custom op); an op ONNX does not define at that opset; an input type the op does not
    take; an opset newer than the build; a locale the machine lacks (``StringNormalizer``).

    Examples
    --------
    >>> r = ort_refusal("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation "
    ...                 "for AveragePool(1) node with name ''")
    >>> r["op_type"], r["schema_version"], r["reason"].startswith("the CPU provider has no kernel for")
    ('AveragePool', 1, True)
    >>> ort_refusal("Fatal error: my.custom:Foo(-1) is not a registered function/op")["domain"]
    'my.custom'
    >>> ort_refusal("std::bad_alloc") is None
    True
    """
    short = provider.removesuffix("ExecutionProvider")
    where = f"the {short} provider"
    if match := _NO_KERNEL.search(message):
        op, version, node = match.group(1), int(match.group(2)), match.group(3)
        from explorer.onnx_adapter.ort_registry import installed_kernels

        table = installed_kernels(provider)  # the message names no domain: ONNX's own, else any
        kernels = list(table.get(("ai.onnx", op), ()))
        kernels = kernels or [k for (_, name), ks in table.items() if name == op for k in ks]
        ranges = ", ".join(dict.fromkeys(k.versions for k in kernels))
        if not kernels:
            reason = f"{where} has no kernel for {op}"
        elif any(k.since <= version <= k.until for k in kernels):
            reason = f"none of {where}'s {op} kernels for version {version} takes the node's types"
        else:
            reason = f"{where} has no kernel for {op} version {version} (its kernels cover {ranges})"
            if version < min(k.since for k in kernels):
                reason += "; convert the model to a newer opset (onnx.version_converter.convert_version)"
        return _refusal(op, None, version, node, reason)
    if match := _NOT_REGISTERED.search(message):
        domain, op = match.group(1), match.group(2)
        reason = (
            f"no schema, function or kernel is registered for {op} in domain {domain or 'ai.onnx'}: a custom "
            "op runs only with its kernel library (SessionOptions.register_custom_ops_library)"
        )
        return _refusal(op, domain, None, "", reason)
    if match := _NO_SCHEMA.search(message):
        node, op, domain, opset = match.group(1), match.group(2), match.group(3), int(match.group(4))
        reason = f"ONNX defines no operator {op} in domain {domain or 'ai.onnx'} at opset {opset}"
        return _refusal(op, domain, None, node, reason)
    if match := _BAD_TYPE.search(message):
        type_string, side, param, op, node = match.groups()
        reason = f"{side} {param} has type {type_string}, which {op} does not take"
        return _refusal(op, None, None, node, reason)
    if match := _NEW_OPSET.search(message):
        opset, domain, newest = int(match.group(1)), match.group(2), int(match.group(3))
        reason = f"the model imports opset {opset} of {domain}; this ONNX Runtime knows opsets up to {newest}"
        return _refusal(None, domain, None, "", reason)
    if match := _NO_LOCALE.search(message):
        name = match.group(1)
        reason = (
            f"this machine lacks the locale {name} (`locale -a` does not list it), which StringNormalizer "
            f"needs to change case or compare case-insensitively; install it (e.g. `locale-gen {name}`)"
        )
        return _refusal("StringNormalizer", "", None, "", reason)
    return None


def _refusal(
    op: str | None, domain: str | None, version: int | None, node: str, reason: str
) -> dict[str, Any]:
    return {"op_type": op, "domain": domain, "schema_version": version, "node": node, "reason": reason}


def prepare_tvm(
    path: str, key: str, input_shapes: Mapping[str, Sequence[int]] | None, options: Mapping[str, Any]
) -> dict[str, Any]:
    """Import, compile (tuned, or not) and load into a Relax VM the model at ``path`` under ``key``.

    ``options``: ``target`` (default ``llvm``: this CPU, or with ``rpc_tracker`` the server's
    own CPU when it can say, :func:`explorer.lower.tvm.relax_target.remote_target`); ``tune_trials``
    and ``tune_minutes`` (the budget; none: untuned), ``tune_every_task`` (every task without a
    record tuned too), ``schedules`` (untuned: ``"default"``, a
    default schedule per kernel, or ``"naive"``, the plain loops), ``tuning_root`` (where the
    tuning databases live; the database is the target's:
    :func:`explorer.lower.tvm.relax_tuning.tuning_dir`) and ``tuning_key`` (model, shapes and
    target: what ``tuned.json`` records), see :func:`explorer.lower.tvm.relax_tuning.compile_tuned`.

    Returns
    -------
    dict
        ``{"runtime": "tvm", "prepare_s", "compile_s", "tune_s", "trials", "tuned_before",
        "target", "threads", "version", "reused"}``, or the import's failure
        (``{"ok": False, ...}``, see :func:`explorer.lower.tvm.relax_frontend.import_relax`).

    Examples
    --------
    Compiling with TVM takes seconds, so it is not run here:

    >>> import numpy as np
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> path = str(zoo.save("mlp"))
    >>> shapes = {"input": [1, 1, 28, 28]}
    >>> info = worker.run(prepare_tvm, path, "doc-prepare-tvm", shapes, {})  # doctest: +SKIP
    >>> info["runtime"], info["reused"]  # doctest: +SKIP
    ('tvm', False)
    """
    if key in _SESSIONS:
        return {**_get(key).info, "reused": True}
    # TVM's own import (seconds) is the process's cost, not the model's: before the clock starts
    import tvm.relax.frontend.onnx

    from explorer.lower.tvm.relax_compile import compile_relax, relax_outputs

    started = time.perf_counter()
    target, servers = str(options.get("target", "llvm")), []
    if options.get("rpc_tracker"):  # before anything compiles: no tracker or no server is a clear error
        from explorer.lower.tvm.rpc_tracker import registered_servers

        servers = registered_servers(str(options["rpc_tracker"]), str(options["rpc_key"]))
        target = _server_target(options) if target == "llvm" else target
    elif target != "llvm":  # a named CPU runs here: refuse one this CPU cannot run before it stops the worker
        from explorer.lower.tvm.relax_target import cpu_target, runs_here

        why = runs_here(cpu_target(target))
        if why is not None:  # the user's choice of target: a UsageError (a ValueError), exit 2 in the CLI
            raise UsageError(
                f"TVM target {target!r} cannot run on this machine: {why}; run it on a server that can "
                "(rpc_tracker / --rpc-tracker) or name a CPU this one runs"
            )
    trials, minutes = int(options.get("tune_trials") or 0), options.get("tune_minutes")
    if trials > 0 or minutes or options.get("pretuned"):
        from explorer.lower.tvm.relax_tuning import compile_tuned, tuning_dir

        rpc = {**options, "rpc_servers": len(servers)} if servers else None
        compiled = compile_tuned(
            path,
            input_shapes,
            target,
            trials=trials or int(float(minutes or 0) * 60),  # the minutes stop it first
            minutes=float(minutes) if minutes else None,
            work_dir=str(tuning_dir(target, options.get("tuning_root"))),  # one database per target
            key=str(options["tuning_key"]),
            pretuned=bool(options.get("pretuned")),
            rpc=rpc,
            every_task=bool(options.get("tune_every_task")),
        )
    elif options.get("schedules", "default") == "default":  # untuned: a default schedule per kernel
        from explorer.lower.tvm.relax_tuning import compile_tuned

        compiled = compile_tuned(
            path,
            input_shapes,
            target,
            trials=0,
            minutes=None,
            work_dir=None,  # no database: every task its default schedule
            key="untuned",
            fast_math=False,  # untuned keeps the exact functions; only the schedules differ
        )
    else:  # the plain loops of TVM's default pipeline
        compiled = compile_relax(path, input_shapes, target)
    if not compiled["ok"]:
        return compiled
    import tvm
    from tvm import relax

    if options.get("rpc_tracker"):
        return _keep(key, _remote_session(compiled, options, started))
    machine = relax.VirtualMachine(compiled["executable"], tvm.cpu())
    main = machine["main"]

    def profile(model_path: str, args: Any, runs: int) -> list[dict[str, Any]]:
        from explorer.lower.tvm.vm_instrument import vm_call_times  # TVM's instrument, only in a TVM worker

        return vm_call_times(machine, args, runs)

    info = {
        "runtime": "tvm",
        "ok": True,
        "prepare_s": time.perf_counter() - started,
        "compile_s": compiled["compile_s"],
        **{k: compiled[k] for k in COMPILE_INFO if k in compiled},
        "target": compiled["target"],
        "threads": tvm_threads(),
        "version": compiled["tvm"],
    }
    return _keep(
        key,
        _Session(
            bind=lambda feeds: [tvm.runtime.tensor(np.ascontiguousarray(v)) for v in feeds.values()],
            call=lambda args: main(*args),
            outputs=relax_outputs,
            info=info,
            profile=profile,
        ),
    )


COMPILE_INFO = (
    "tune_s",
    "trials",
    "trials_run",
    "tuned_before",
    "out_of_time",
    "tasks",
    "tasks_with_records",
    "task_schedules",
    "task_gflop",
    "passes",
    "defaults_failed",
    "defaults_rejected",
    "records_rejected",
    "rpc_servers",
    "rpc_notes",
    "errors",
    "plan",
    "shipped",
    "tuning_dir",
)
"""What a TVM session's info reports of its compile and tuning (from ``compile_tuned``)."""

RPC_REQUEST_TIMEOUT_S = 60.0
"""Seconds to wait for the tracker to hand out a server before giving up with a clear error."""


def _server_target(options: Mapping[str, Any]) -> str:
    """The target of the servers under the key: one server asked for its CPU (triple, CPU,
    threads); ``llvm`` (this CPU) when it has TVM's runtime only and cannot say."""
    from explorer.lower.tvm.relax_target import remote_target
    from explorer.lower.tvm.rpc_tracker import request_server

    tracker, key = str(options["rpc_tracker"]), str(options["rpc_key"])
    _, session = request_server(tracker, key, float(options.get("rpc_timeout", RPC_REQUEST_TIMEOUT_S)))
    try:
        return remote_target(session) or "llvm"
    finally:
        del session  # the server is free for the candidates again


def _remote_session(compiled: Mapping[str, Any], options: Mapping[str, Any], started: float) -> _Session:
    """Upload the compiled library to a server from the tracker, and run and time it there."""
    import tempfile

    import tvm
    from tvm import relax

    from explorer.lower.tvm.relax_compile import relax_outputs
    from explorer.lower.tvm.rpc_tracker import call_within, request_server

    tracker, key = str(options["rpc_tracker"]), str(options["rpc_key"])  # prepare_tvm checked both
    _, remote = request_server(tracker, key, float(options.get("rpc_timeout", RPC_REQUEST_TIMEOUT_S)))
    folder = tempfile.mkdtemp(prefix="explorer-rpc-")
    library = os.path.join(folder, "model.so")
    compiled["executable"].export_library(library)
    remote.upload(library)
    device = remote.cpu()
    machine = relax.VirtualMachine(remote.load_module("model.so"), device)
    evaluator = machine.time_evaluator("main", device, number=1, repeat=1)

    limit = float(options.get("rpc_timeout", RPC_REQUEST_TIMEOUT_S))

    def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` with a time limit: a server that died may leave a call waiting on its socket."""

        def call(*args: Any) -> Any:
            done, value = call_within(limit, fn, *args)
            if done:
                return value
            why = value or f"no answer within {limit:.0f} s"
            raise ConnectionError(f"the RPC server for key {key!r} (tracker {tracker}) failed: {why}")

        return call

    info = {
        "runtime": "tvm",
        "ok": True,
        "prepare_s": time.perf_counter() - started,
        **{k: compiled[k] for k in ("compile_s", *COMPILE_INFO) if k in compiled},
        "target": compiled["target"],
        "threads": 0,
        "version": compiled["tvm"],
        "rpc": f"{key}@{tracker}",
    }
    main = machine["main"]
    return _Session(
        bind=guarded(
            lambda feeds: [tvm.runtime.tensor(np.ascontiguousarray(v), device=device) for v in feeds.values()]
        ),
        call=guarded(lambda args: main(*args)),
        outputs=guarded(relax_outputs),
        info=info,
        timer=guarded(lambda args: float(evaluator(*args).mean) * 1e3),
    )


def run_session(key: str, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Run the session under ``key`` once on ``feeds``; its outputs as numpy arrays.

    Raises
    ------
    SessionGone
        No session under that key in this worker.

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> path = str(zoo.save("mlp"))
    >>> _ = worker.run(prepare_ort, path, "doc-run-session", {})
    >>> worker.run(run_session, "doc-run-session", {"input": np.ones((1, 1, 28, 28), np.float32)})[0].shape
    (1, 10)
    """
    session = _get(key)
    return session.outputs(session.call(session.bind(feeds)))


SETTLE_S = 0.2
"""Pause before timing a session: the threads of the runtime timed just before (ONNX Runtime's
and TVM's pools spin after their work) go idle instead of competing with this one's."""

REPORT_EVERY_S = 0.25
"""At most one progress message this often while timing: each wakes the parent process."""


def time_session(
    key: str,
    feeds: Mapping[str, np.ndarray],
    *,
    warmup: int = 3,
    min_runs: int = 10,
    min_seconds: float = 1.0,
    max_seconds: float = 30.0,
) -> dict[str, Any]:
    """Time the session under ``key``: ``warmup`` runs, then runs until ``min_runs`` and
    ``min_seconds`` are both reached, or ``max_seconds`` is (with at least three runs).

    Returns
    -------
    dict
        ``{"times_ms": [one per timed run], "warmup_ms": [...], "outputs": [arrays of the last run]}``.

    Raises
    ------
    SessionGone
        No session under that key in this worker.

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> path = str(zoo.save("mlp"))
    >>> _ = worker.run(prepare_ort, path, "doc-time-session", {})
    >>> feeds = {"input": np.ones((1, 1, 28, 28), np.float32)}
    >>> timed = worker.run(time_session, "doc-time-session", feeds, warmup=1, min_runs=3, min_seconds=0.0)
    >>> len(timed["warmup_ms"]), len(timed["times_ms"]), timed["outputs"][0].shape
    (1, 3, (1, 10))
    """
    session = _get(key)
    bound = session.bind(feeds)
    result: Any = None
    warm = []
    time.sleep(SETTLE_S)  # the runtime timed before this one parks its spinning threads
    shown = [0.0]

    def report(share: float | None, message: str) -> None:  # a message costs the parent CPU time:
        now = time.perf_counter()  # at most a few a second, not one a run
        if now - shown[0] >= REPORT_EVERY_S:
            shown[0] = now
            worker.report(share, message)

    def one_run() -> float:
        nonlocal result
        if session.timer is not None:  # measured where it ran (a remote device)
            return session.timer(bound)
        started = time.perf_counter_ns()
        result = session.call(bound)
        return (time.perf_counter_ns() - started) / 1e6

    for i in range(max(0, warmup)):
        warm.append(one_run())
        report(None, f"warm-up {i + 1}/{warmup}")
    times: list[float] = []
    begun = time.perf_counter()
    while True:
        elapsed = time.perf_counter() - begun
        enough = len(times) >= min_runs and elapsed >= min_seconds
        if enough or (elapsed >= max_seconds and len(times) >= 3):
            break
        times.append(one_run())
        share = min(1.0, max(len(times) / max(min_runs, 1), elapsed / max(min_seconds, 1e-9)))
        report(min(share, 1.0), f"{len(times)} runs, {elapsed:.1f} s")
    if result is None:
        result = session.call(bound)
    return {"times_ms": times, "warmup_ms": warm, "outputs": session.outputs(result)}


def _ort_profile(
    path: str, provider: str, optimization: str, threads: int, feeds: Any, runs: int
) -> list[dict[str, Any]]:
    """Per-node times from ONNX Runtime's profiler: a second session like the prepared one, with
    ``enable_profiling`` (the model file is read again: profiling is a session option)."""
    import json
    import tempfile

    from explorer.onnx_adapter.ort_run import ort_session

    with tempfile.TemporaryDirectory(prefix="ort-profile-") as folder:
        session = ort_session(
            path, [provider], optimization, threads=threads, profile_prefix=os.path.join(folder, "profile")
        )
        session.run(None, feeds)  # warm-up, discarded below
        for _ in range(runs):
            session.run(None, feeds)
        with open(session.end_profiling(), encoding="utf-8") as trace:
            events = json.load(trace)
    records = []
    run = -1  # each run's SequentialExecutor::Execute event starts before its node events
    for event in sorted(events, key=lambda e: (int(e.get("ts", 0)), e.get("cat") != "Session")):
        if event.get("cat") == "Session" and str(event.get("name", "")).endswith("Executor::Execute"):
            run += 1
        if event.get("cat") != "Node" or not str(event.get("name", "")).endswith("_kernel_time"):
            continue
        args = event.get("args", {})
        records.append(
            {
                "name": event["name"].removesuffix("_kernel_time"),
                "op": args.get("op_name", ""),
                "ms": float(event.get("dur", 0)) / 1000.0,
                "run": run,
                "provider": args.get("provider", ""),
                "output_bytes": int(args["output_size"]) if "output_size" in args else None,
            }
        )
    return [{**r, "run": r["run"] - 1} for r in records if r["run"] >= 1]  # run 0 was the warm-up


def profile_session(path: str, key: str, feeds: Mapping[str, np.ndarray], runs: int = 10) -> dict[str, Any]:
    """Per-kernel times of the session under ``key`` (prepared from the model at ``path``) over
    ``runs`` runs (after one warm-up).

    Returns
    -------
    dict
        ``{"records": [{"name", "op", "ms", "run"}, ...], "runs", "run_ms": [total per run]}``:
        ONNX Runtime's node events (names of the graph it ran), or the Relax VM's calls
        (PrimFunc and runtime-function symbols).

    Raises
    ------
    SessionGone
        No session under that key in this worker.

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> path = str(zoo.save("mlp"))
    >>> _ = worker.run(prepare_ort, path, "doc-profile-session", {"optimization": "basic"})
    >>> feeds = {"input": np.ones((1, 1, 28, 28), np.float32)}
    >>> prof = worker.run(profile_session, path, "doc-profile-session", feeds, runs=2)
    >>> prof["runs"], sorted({r["op"] for r in prof["records"]})
    (2, ['Flatten', 'Gemm', 'Relu'])
    """
    session = _get(key)
    if session.profile is None:
        raise UsageError(
            f"session {key!r} cannot be profiled: it keeps no kernel profile (a TVM session on an RPC "
            "server); profile a session prepared on this machine (without rpc_tracker)"
        )
    bound = session.bind(feeds)
    records = session.profile(path, bound, max(1, int(runs)))
    totals: dict[int, float] = {}
    for record in records:
        totals[record["run"]] = totals.get(record["run"], 0.0) + record["ms"]
    return {"records": records, "runs": len(totals), "run_ms": [totals[k] for k in sorted(totals)]}

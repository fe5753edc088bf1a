"""ONNX Runtime's kernels per execution provider: from the installed build, or from a published table.

The installed build's registry is read by the ONNX adapter
(:mod:`explorer.onnx_adapter.ort_registry`: :func:`installed_kernels`, :class:`OrtKernel`,
re-exported here): every kernel's provider, domain, op, the schema versions it covers and its
type constraints. A node is supported by a provider when a kernel of its (domain, op) covers
the schema version the model's opset resolves to and takes the node's element types, as
ONNX Runtime's kernel lookup decides. Providers the installed build lacks (CUDA without
``onnxruntime-gpu``) are read from ``explorer/data/targets/ort_cuda_kernels.csv``, made
from ONNX Runtime's ``docs/OperatorKernels.md`` (its commit in the ``.source.json`` beside it).

Examples
--------
>>> kernels = installed_kernels("CPUExecutionProvider")
>>> ("ai.onnx", "Conv") in kernels and ("ai.onnx", "NoSuchOp") not in kernels
True
>>> ("ai.onnx", "Conv") in ort_ops()
True
"""

from __future__ import annotations

import csv
import functools
import json
import sys
from collections.abc import Sequence
from importlib import resources
from typing import Any

from explorer.onnx_adapter.ort_registry import (
    OPEN_ENDED,
    KernelTable,
    OrtKernel,
    installed_kernels,
    installed_providers,
    kernel_table,
    ort_ops,
)
from explorer.targets.support import (
    ATTRIBUTE,
    DTYPE,
    NOTE,
    OP_MISSING,
    OPSET,
    NodeFacts,
    Reason,
    onnx_op_schema,
)

__all__ = [
    "OrtKernel",
    "KernelTable",
    "installed_kernels",
    "installed_providers",
    "table_kernels",
    "table_source",
    "ort_ops",
    "kernel_reasons",
    "locale_available",
    "machine_reasons",
    "STRING_NORMALIZER_LOCALE",
]


def _data(name: str) -> Any:
    return resources.files("explorer").joinpath("data", "targets", name)


@functools.cache
def table_kernels(name: str) -> KernelTable:
    """Kernels read from a table in ``explorer/data/targets/`` (``domain,op,since_version,...``).

    Examples
    --------
    >>> cuda = table_kernels("ort_cuda_kernels.csv")
    >>> ("ai.onnx", "Conv") in cuda
    True
    """
    kernels = []
    with _data(name).open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            constraints = {}
            for part in filter(None, (row.get("type_constraints") or "").split(";")):
                key, _, types = part.partition("=")
                constraints[key.strip()] = tuple(t.strip() for t in types.split("|") if t.strip())
            until = row.get("until_version") or ""
            kernels.append(
                OrtKernel(
                    row["domain"],
                    row["op"],
                    int(row["since_version"]),
                    int(until) if until else OPEN_ENDED,
                    constraints,
                )
            )
    return kernel_table(kernels)


@functools.cache
def table_source(name: str) -> dict[str, Any]:
    """The ``.source.json`` beside a kernel table (where it was read, commit, date).

    Examples
    --------
    >>> table_source("ort_cuda_kernels.csv")["repository"]
    'microsoft/onnxruntime'
    """
    stem = name.rsplit(".", 1)[0]
    return json.loads(_data(f"{stem}.source.json").read_text(encoding="utf-8"))


@functools.cache
def _contrib_schemas() -> dict[tuple[str, str], Any]:
    try:
        from onnxruntime.capi import _pybind_state
    except ImportError:
        return {}
    return {(s.domain or "ai.onnx", s.name): s for s in _pybind_state.get_all_operator_schema()}


def _formal_types(facts: NodeFacts) -> list[tuple[str, str | None]]:
    """(constraint name, the tensor's type string) for each input and output of the node."""
    schema = onnx_op_schema(facts.op, facts.domain, facts.opset) if facts.opset else None
    if schema is not None:
        params = [(p.type_str, str(p.option).endswith("Variadic")) for p in schema.inputs]
        outs = [(p.type_str, str(p.option).endswith("Variadic")) for p in schema.outputs]
    else:
        contrib = _contrib_schemas().get((facts.domain_name, facts.op))
        if contrib is None:
            return []
        params = [(p.typeStr, str(p.option).endswith("Variadic")) for p in contrib.inputs]
        outs = [(p.typeStr, str(p.option).endswith("Variadic")) for p in contrib.outputs]
    pairs = []
    for tensors, formal in ((facts.inputs, params), (facts.outputs, outs)):
        for i, tensor in enumerate(tensors):
            if tensor is None or not formal:
                continue
            if i < len(formal):
                constraint = formal[i][0]
            elif formal[-1][1]:  # the rest of a variadic parameter
                constraint = formal[-1][0]
            else:
                continue
            pairs.append((constraint, tensor.type_string))
    return pairs


def _version(facts: NodeFacts, kernels: Sequence[OrtKernel]) -> int | None:
    """The schema version kernels are matched against: ONNX's resolution, else the newest
    kernel version the domain's opset reaches."""
    if facts.domain in ("", "ai.onnx") and facts.since_version is not None:
        return facts.since_version
    if facts.opset is None:
        return None
    reachable = [k.since for k in kernels if k.since <= facts.opset]
    return max(reachable) if reachable else facts.opset


def _takes(kernel: OrtKernel, types: Sequence[tuple[str, str | None]]) -> str | None:
    """None when the kernel takes every known type, else the first mismatch in words."""
    for constraint, type_string in types:
        allowed = kernel.type_constraints.get(constraint)
        if allowed and type_string is not None and type_string not in allowed:
            return f"{constraint} = {type_string}"
    return None


def _function_reasons(facts: NodeFacts, kernels: KernelTable, provider: str) -> list[Reason]:
    """A model-local function is inlined before placement: every op of its body needs a kernel."""
    reasons = []
    for domain, op, version in facts.function_body or ():
        candidates = kernels.get((domain, op))
        shown = op if domain == "ai.onnx" else f"{domain}::{op}"
        if not candidates:
            reasons.append(
                Reason(OP_MISSING, f"{provider} has no {shown} kernel (in {facts.qualified_op}'s body)")
            )
        elif version is not None and not any(k.since <= version <= k.until for k in candidates):
            reasons.append(Reason(OPSET, f"{provider}'s {shown} kernels do not cover version {version}"))
    if reasons:
        return reasons
    ops = ", ".join(dict.fromkeys(op for _, op, _ in facts.function_body or ()))
    return [Reason(NOTE, f"a model-local function; ONNX Runtime inlines it into {ops}")]


def kernel_reasons(facts: NodeFacts, kernels: KernelTable, provider: str) -> list[Reason]:
    """Why ``provider`` (with the kernels ``kernels``) cannot run the node: empty when it can.

    Parameters
    ----------
    facts : NodeFacts
        The node.
    kernels : KernelTable
        The provider's kernels (:func:`installed_kernels` or :func:`table_kernels`).
    provider : str
        The provider's name, for the reason's text.

    Examples
    --------
    >>> from explorer.targets.support import NodeFacts, TensorFact
    >>> x = TensorFact("x", "uint16", (4,), False)
    >>> f = NodeFacts("r", "Relu", "", 17, 14, (x,), (TensorFact("y", "uint16", (4,), False),), {})
    >>> kernel_reasons(f, installed_kernels("CPUExecutionProvider"), "CPU")[0].kind
    'dtype'
    """
    if facts.function_body is not None:
        return _function_reasons(facts, kernels, provider)
    candidates = kernels.get((facts.domain_name, facts.op))
    if not candidates:
        return [Reason(OP_MISSING, f"{provider} has no {facts.qualified_op} kernel")]
    version = _version(facts, candidates)
    matching = [k for k in candidates if version is None or k.since <= version <= k.until]
    if not matching:
        ranges = ", ".join(dict.fromkeys(k.versions for k in candidates))
        return [
            Reason(
                OPSET,
                f"{provider}'s {facts.op} kernels cover versions {ranges}; "
                f"the model's opset {facts.opset} resolves to {version}",
            )
        ]
    types = _formal_types(facts)
    mismatches = [_takes(k, types) for k in matching]
    if all(m is not None for m in mismatches):
        taken = sorted({t for k in matching for ts in k.type_constraints.values() for t in ts})
        shown = ", ".join(t[len("tensor(") : -1] if t.startswith("tensor(") else t for t in taken[:8])
        text = f"none of {provider}'s {facts.op} kernels takes {mismatches[0]} (they take {shown})"
        return [Reason(DTYPE, text)]
    return []


STRING_NORMALIZER_LOCALE = "en_US.UTF-8"
"""The locale ONNX Runtime's ``StringNormalizer`` kernel builds when the node names none (Linux, macOS)."""


@functools.cache
def locale_available(name: str) -> bool:
    """Whether this machine's C library can make the locale ``name`` (``locale -a`` lists it), as
    ONNX Runtime's ``std::locale(name)`` needs; True where that cannot be asked (Windows).

    Examples
    --------
    >>> locale_available("C"), locale_available("no_SUCH.locale")
    (True, False)
    """
    import ctypes
    import ctypes.util

    masks = {"linux": 0x1FBF, "darwin": 0x3F}  # LC_ALL_MASK of glibc, and of macOS's libc
    mask = next((m for prefix, m in masks.items() if sys.platform.startswith(prefix)), None)
    library = ctypes.util.find_library("c")
    if mask is None or library is None:
        return True
    libc = ctypes.CDLL(library)
    libc.newlocale.restype = ctypes.c_void_p
    libc.newlocale.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p]
    libc.freelocale.argtypes = [ctypes.c_void_p]
    handle = libc.newlocale(mask, name.encode(), None)
    if not handle:
        return False
    libc.freelocale(handle)
    return True


def machine_reasons(facts: NodeFacts) -> list[Reason]:
    """Why ONNX Runtime's CPU kernel for the node cannot run on this machine, though it exists:
    ``StringNormalizer`` changing case or comparing case-insensitively builds its ``locale``
    (default ``en_US.UTF-8``), and fails when the machine has no such locale.

    Examples
    --------
    >>> from explorer.targets.support import NodeFacts
    >>> f = NodeFacts("n", "StringNormalizer", "", 10, 10, (), (), {"locale": "no_SUCH.locale"},
    ...               {"case_change_action": "LOWER", "is_case_sensitive": 0})
    >>> machine_reasons(f)[0].kind
    'attribute value'
    """
    if facts.op != "StringNormalizer" or facts.domain not in ("", "ai.onnx"):
        return []
    changes_case = str(facts.attribute("case_change_action") or "NONE") != "NONE"
    if not changes_case and int(facts.attribute("is_case_sensitive") or 0):
        return []
    name = str(facts.attribute("locale") or STRING_NORMALIZER_LOCALE)
    if locale_available(name):
        return []
    return [
        Reason(
            ATTRIBUTE,
            f"this machine lacks the locale {name} (`locale -a` does not list it), which ONNX Runtime's "
            "StringNormalizer needs to change case or compare case-insensitively; install it "
            f"(e.g. `locale-gen {name}`)",
        )
    ]

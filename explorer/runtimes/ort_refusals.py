"""ONNX Runtime's refusals read from its messages: the op, domain, opset and node it names.

A model ONNX Runtime will not make a session of (no kernel at the opset the model resolves
to, an unknown custom domain, a bad tensor, a missing locale) or a node that fails while
running: its message parsed into a typed refusal, so the user is told the op and the fix.

Examples
--------
>>> ort_refusal("std::bad_alloc") is None
True
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["ort_refusal", "ort_bad_tensor", "ort_node_failure"]


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

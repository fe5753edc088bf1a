"""ONNX Runtime's block-quantised weight ops in standard ONNX: ``MatMulNBits``, ``GatherBlockQuantized``.

Both become a blocked ``DequantizeLinear`` (opset 21: ``axis`` and ``block_size``) of an
unpacked weight initializer, then the float op (``MatMul``, ``Gather``). 4-bit weights stay
4-bit: the new initializer is ``uint4`` (ONNX packs two to a byte, as ONNX Runtime does), so
the model is no larger, and the dequantisation is exact (``(q - zero_point) * scale`` in the
scale's type, what ONNX Runtime's kernels compute). 8-bit weights become ``uint8``.

``MatMulNBits``' weight is written ``[K, N]`` with ``axis=0`` so ``MatMul(A, W)`` needs no
``Transpose`` (the layout ONNX Runtime's own DQ + MatMul -> MatMulNBits fusion expects).
``GatherBlockQuantized`` dequantises the whole table, then gathers: standard ``Gather`` has no
4-bit types, so gathering the quantised rows first would need the table stored as bytes.

That form (:data:`DEQUANTIZE_LINEAR`, the default) is the right ONNX for ONNX Runtime and NPU
toolchains, but TVM 0.27 reads a ``uint4`` initializer one byte an element and its
``DequantizeLinear`` has no ``block_size``, and IREE 3.13's importer has no blocked
``DequantizeLinear`` either. The :data:`PRIMITIVE` form (option ``quantized="primitive"``, what
the compilers' fix writes) says the same arithmetic in ops both import: the weight one value a
byte (``uint8``/``int8``) shaped ``[..., blocks, block_size, ...]`` along the quantised axis,
``Cast`` to the scales' type, ``Sub`` the zero points and ``Mul`` by the scales (both ``[...,
blocks, 1, ...]``: broadcast over each block), ``Reshape`` back (and ``Slice`` off a padded last
block). Every input of it is a constant, so a compiler folds it into a float weight at build time.
Both forms give ONNX Runtime's ``(q - zero_point) * scale`` exactly.

Examples
--------
>>> sorted(RULES), QUANTIZED_FORMS
(['GatherBlockQuantized', 'MatMulNBits'], ('dequantize_linear', 'primitive'))
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from explorer.passes.contrib_writer import Keep, Rule, Writer, node_attrs

__all__ = ["RULES", "unpack_bits", "int_tensor", "DEQUANTIZE_LINEAR", "PRIMITIVE", "QUANTIZED_FORMS"]

DEQUANTIZE_LINEAR = "dequantize_linear"
"""The quantised weights as ``uint4``/``uint8`` + blocked ``DequantizeLinear`` (opset 21): exact, compact."""

PRIMITIVE = "primitive"
"""The quantised weights as bytes + ``Cast``/``Sub``/``Mul``/``Reshape``: what TVM and IREE import."""

QUANTIZED_FORMS = (DEQUANTIZE_LINEAR, PRIMITIVE)
"""The forms of the ``quantized`` option of ``explorer:decompose_contrib``."""


def unpack_bits(packed: np.ndarray, bits: int) -> np.ndarray:
    """Unpack ``bits``-wide values along the last axis, low-order bits first (ONNX Runtime's layout).

    Examples
    --------
    >>> unpack_bits(np.array([[0x21, 0x43]], np.uint8), 4).tolist()
    [[1, 2, 3, 4]]
    """
    packed = packed.astype(np.uint8)
    if bits == 8:
        return packed
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    parts = [(packed >> (bits * i)) & mask for i in range(per_byte)]
    return np.stack(parts, axis=-1).reshape(*packed.shape[:-1], packed.shape[-1] * per_byte)


def int_tensor(values: np.ndarray, bits: int, signed: bool = False) -> TensorProto:
    """An ONNX tensor of ``values`` as ``uint4``/``int4`` (``bits`` 4, packed two to a byte) or
    ``uint8``/``int8``.

    Examples
    --------
    >>> t = int_tensor(np.array([[1, 2, 3]], np.uint8), 4)
    >>> t.data_type == TensorProto.UINT4, list(t.dims), t.raw_data
    (True, [1, 3], b'!\\x03')
    """
    if bits == 8:
        return numpy_helper.from_array(values.astype(np.int8 if signed else np.uint8))
    flat = (values.astype(np.int64).ravel() & 0xF).astype(np.uint8)
    if flat.size % 2:
        flat = np.append(flat, np.uint8(0))
    tensor = TensorProto()
    tensor.data_type = TensorProto.INT4 if signed else TensorProto.UINT4
    tensor.dims.extend(values.shape)
    tensor.raw_data = (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8).tobytes()
    return tensor


def _need_opset_21(w: Writer) -> None:
    if w.opset < 21:
        raise Keep(
            f"blocked DequantizeLinear needs opset 21 (the model has {w.opset}; run version_converter)"
        )


def _primitive(w: Writer) -> bool:
    """Whether the writer's ``quantized`` option asks for :data:`PRIMITIVE` (else blocked DQ, opset 21)."""
    form = w.options.get("quantized") or DEQUANTIZE_LINEAR
    if form not in QUANTIZED_FORMS:
        raise Keep(f"quantized={form!r}: the forms are {', '.join(QUANTIZED_FORMS)}")
    if form == DEQUANTIZE_LINEAR:
        _need_opset_21(w)
    return form == PRIMITIVE


def _primitive_dequantize(
    w: Writer,
    q: np.ndarray,
    scales: np.ndarray,
    zero: np.ndarray | None,
    axis: int,
    block: int,
    base: str,
    rows: str = "",
    output: str | None = None,
) -> str:
    """``(Cast(q) - zero) * scales`` blocked along ``axis`` in Cast/Sub/Mul/Reshape (and Slice);
    ``q`` holds one integer an element, ``scales`` and ``zero`` one value a block (``zero`` None: 0).

    ``rows`` (indices of known rank, ``q`` a table ``[rows, columns]`` blocked along its columns):
    the rows are gathered from the three constants first and only they are dequantised, as ONNX
    Runtime's ``GatherBlockQuantized`` does; the result is ``[*rows.shape, columns]``. A compiler
    folds nothing then, but dequantises a few rows a call rather than the whole table.
    ``output``: the name of the result (else a fresh one).

    Examples
    --------
    >>> from onnx import helper
    >>> from explorer.core.unique_names import UniqueNames
    >>> node = helper.make_node("MatMulNBits", ["a", "b", "s"], ["y"], name="/fc/MatMulNBits")
    >>> w = Writer(node, UniqueNames({"a", "b", "s", "y"}), {}, opset=17)
    >>> q, s = np.array([[1, 2], [3, 4], [5, 6]], np.uint8), np.ones((2, 2), np.float32)
    >>> _ = _primitive_dequantize(w, q, s, None, 0, 2, "b")
    >>> [n.op_type for n in w.nodes if n.op_type != "Constant"], [list(t.dims) for t in w.initializers]
    (['Cast', 'Mul', 'Reshape', 'Slice'], [[2, 2, 2], [2, 1, 2]])
    """
    shape = list(q.shape)
    blocks = scales.shape[axis]
    padded = blocks * block
    if padded != shape[axis]:  # the last block is short: pad it (zeros), slice it off after
        widths = [(0, 0)] * q.ndim
        widths[axis] = (0, padded - shape[axis])
        q = np.pad(q, widths)
    blocked = [*shape[:axis], blocks, block, *shape[axis + 1 :]]
    per_block = [*shape[:axis], blocks, 1, *shape[axis + 1 :]]
    integer = np.int8 if q.dtype.kind == "i" or (q.min(initial=0) < 0) else np.uint8

    def constant(array: np.ndarray, suffix: str) -> str:
        name = w.initializer(numpy_helper.from_array(np.ascontiguousarray(array)), f"{base}_{suffix}")
        return w.op("Gather", [name, rows], axis=0) if rows else name

    value = w.op("Cast", [constant(q.astype(integer).reshape(blocked), "bytes")], to=_float_type(scales))
    if zero is not None and np.any(zero):
        value = w.op(
            "Sub", [value, constant(zero.astype(scales.dtype).reshape(per_block), "zero_point_blocked")]
        )
    value = w.op("Mul", [value, constant(scales.reshape(per_block), "scales_blocked")])
    target = [0] * w.rank(rows) + [-1] if rows else [*shape[:axis], padded, *shape[axis + 1 :]]
    short = padded != shape[axis]
    value = w.op("Reshape", [value, w.ints(target)], None if short else output)  # 0: a gathered dim
    if short:
        cut = -1 if rows else axis
        value = w.op("Slice", [value, w.ints([0]), w.ints([shape[axis]]), w.ints([cut])], output)
    return value


def _float_type(scales: np.ndarray) -> int:
    """The ONNX element type of the scales: the type a dequantised weight has."""
    return helper.np_dtype_to_tensor_dtype(scales.dtype)


def _matmul_nbits(w: Writer) -> None:
    """``MatMul(A, DequantizeLinear(W[K, N], scales^T, zero_points^T, axis=0, block_size)) (+ bias)``."""
    attrs = node_attrs(w.node)
    inputs = list(w.node.input) + [""] * 6
    a, b, scales_name, zp_name, g_idx, bias = inputs[:6]
    k, n = int(attrs["K"]), int(attrs["N"])
    bits, block = int(attrs.get("bits", 4)), int(attrs.get("block_size", 0))
    if bits not in (4, 8):
        raise Keep(f"bits={bits}: only 4 and 8 have a standard ONNX integer type")
    if attrs.get("weight_prepacked", 0):
        raise Keep("weight_prepacked: B is in an execution provider's own layout")
    primitive = _primitive(w)
    packed, scales = w.constant(b), w.constant(scales_name)
    if packed is None or scales is None:
        raise Keep("B and scales must be initializers to be unpacked")
    k_blocks = -(-k // block)
    if packed.size != n * k_blocks * block * bits // 8 or scales.size != n * k_blocks:
        raise Keep(f"B or scales do not have the shapes K={k}, N={n}, block_size={block} give")
    if g_idx:
        groups = w.constant(g_idx)
        if groups is None or not np.array_equal(groups.ravel(), np.arange(k) // block):
            raise Keep(
                "a non-trivial g_idx (act-order) reorders K, which blocked DequantizeLinear cannot say"
            )
    weight = unpack_bits(packed.reshape(n, k_blocks * block * bits // 8), bits)[:, :k]  # [N, K]
    scales = scales.reshape(n, k_blocks)
    zero = _zero_points(w, zp_name, n, k_blocks, bits, scales.dtype)
    weight, scales, zero = (np.ascontiguousarray(x.T) for x in (weight, scales, zero))  # [K, N]
    if primitive:
        dq = _primitive_dequantize(w, weight, scales, zero, 0, block, b)
    else:
        q = w.initializer(int_tensor(weight, bits), f"{b}_unpacked")
        s = w.initializer(numpy_helper.from_array(scales), f"{scales_name}_kn")
        z = w.initializer(int_tensor(zero, bits), f"{zp_name or b + '_zero_point'}_kn")
        dq = w.op("DequantizeLinear", [q, s, z], axis=0, block_size=block)
    if bias:
        w.op("Add", [w.op("MatMul", [a, dq]), bias], w.node.output[0])
    else:
        w.op("MatMul", [a, dq], w.node.output[0])
    if int(attrs.get("accuracy_level", 0)) == 4:
        w.note = "accuracy_level 4 let ONNX Runtime quantise A to int8; this computes A in float"


def _zero_points(w: Writer, name: str, n: int, k_blocks: int, bits: int, float_type: np.dtype) -> np.ndarray:
    """The unpacked zero points, [N, k_blocks] integers (2^(bits-1) when absent)."""
    if not name:
        return np.full((n, k_blocks), 1 << (bits - 1), np.uint8)
    zp = w.constant(name)
    if zp is None:
        raise Keep("zero_points must be an initializer to be unpacked")
    if zp.dtype == np.uint8:
        per_row = -(-k_blocks * bits // 8)
        return unpack_bits(zp.reshape(n, per_row), bits)[:, :k_blocks]
    zp = zp.reshape(n, k_blocks)
    if not np.array_equal(zp, np.round(zp)) or zp.min() < 0 or zp.max() >= 1 << bits:
        raise Keep(f"float zero points that are not integers in [0, {1 << bits}) have no integer form")
    return zp.astype(np.uint8)


def _gather_block_quantized(w: Writer) -> None:
    """``Gather(DequantizeLinear(data, scales, zero_points, axis=quantize_axis, block_size), indices)``
    (or the table dequantised in primitive ops, then ``Gather``)."""
    attrs = node_attrs(w.node)
    inputs = list(w.node.input) + [""] * 4
    data_name, indices, scales_name, zp_name = inputs[:4]
    bits, block = int(attrs.get("bits", 4)), int(attrs.get("block_size", 128))
    gather_axis, quantize_axis = int(attrs.get("gather_axis", 0)), int(attrs.get("quantize_axis", 1))
    primitive = _primitive(w)
    data_proto, scales = w.weights.get(data_name), w.constant(scales_name)
    if data_proto is None or scales is None:
        raise Keep("data and scales must be initializers")
    rank = len(data_proto.dims)
    quantize_axis %= rank
    zp = w.constant(zp_name) if zp_name else None
    if zp_name and zp is None:
        raise Keep("zero_points must be an initializer to be unpacked")
    rows_first = rank == 2 and gather_axis % rank == 0 and quantize_axis == 1
    rows_first = rows_first and w.types.get(indices, (None, 0))[0] is not None
    rows = indices if primitive and rows_first else ""  # an embedding: dequantise the rows gathered
    out = w.node.output[0] if rows else None
    if data_proto.data_type in (TensorProto.INT4, TensorProto.UINT4):
        if primitive:
            dq = _primitive_dequantize(
                w, numpy_helper.to_array(data_proto), scales, zp, quantize_axis, block, data_name, rows, out
            )
        else:
            dq = w.op(
                "DequantizeLinear",
                [data_name, scales_name, *([zp_name] if zp_name else [])],
                axis=quantize_axis,
                block_size=block,
            )
    elif data_proto.data_type == TensorProto.UINT8:
        if bits not in (4, 8):
            raise Keep(f"bits={bits} in uint8 data: only 4 and 8 have a standard ONNX integer type")
        values = unpack_bits(numpy_helper.to_array(data_proto), bits)
        full = unpack_bits(zp, bits)[..., : scales.shape[-1]] if zp is not None else None
        if full is None:
            full = np.full(scales.shape, 1 << (bits - 1), np.uint8)
        full = full.reshape(scales.shape)
        if primitive:
            dq = _primitive_dequantize(w, values, scales, full, quantize_axis, block, data_name, rows, out)
        else:
            q = w.initializer(int_tensor(values, bits), f"{data_name}_unpacked")
            z = w.initializer(int_tensor(full, bits), f"{zp_name or data_name + '_zero_point'}_unpacked")
            dq = w.op("DequantizeLinear", [q, scales_name, z], axis=quantize_axis, block_size=block)
    else:
        raise Keep(
            f"data of type {helper.tensor_dtype_to_string(data_proto.data_type)} (FP8/FP4): no rule here"
        )
    if not rows:
        w.op("Gather", [dq, indices], w.node.output[0], axis=gather_axis)
    w.out_types[w.node.output[0]] = w.elem_type(scales_name) or helper.np_dtype_to_tensor_dtype(scales.dtype)
    w.note = "indices must be in range: Gather has no zero rows for out-of-range indices"


RULES: dict[str, Rule] = {
    "MatMulNBits": _matmul_nbits,
    "GatherBlockQuantized": _gather_block_quantized,
}
"""The op types this module writes in standard ONNX."""

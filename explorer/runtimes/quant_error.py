"""Where quantisation hurts, per node: the SQNR of each tensor of a QDQ model against the float model.

For every activation the QDQ model quantises (a ``QuantizeLinear`` -> ``DequantizeLinear`` pair) and
every quantised weight, the signal-to-quantisation-noise ratio in dB, as ONNX Runtime's
``onnxruntime.quantization.qdq_loss_debug`` defines it (``compute_signal_to_quantization_noice_ratio``:
``20 log10(|float| / |float - quantised|)``, the norms over every sample): ``sqnr_db`` is the QDQ model's
dequantised tensor against the float model's same tensor (``xmodel_err`` there: the error so far, all
the layers before included), ``local_sqnr_db`` the tensor before its Q/DQ pair against after it
(``qdq_err``: this pair's own rounding and clipping). Weights are compared by ONNX
Runtime's ``compute_weight_error``, each dequantised by ONNX Runtime's ``DequantizeLinear`` kernel (see
:func:`measure_tensors` for why not by ``create_weight_matching``). Each row is put on the float
model's ONNX node: an activation on the node that writes it, a weight on the node that reads it.

Both models run in the worker (:mod:`explorer.isolation.worker`) on ONNX Runtime's CPU provider with its
graph optimisations off (as ``collect_activations`` runs them), one sample at a time: the sums behind
the norms are kept, not the tensors (``collect_activations`` keeps every tensor of every sample, which
for a ResNet-18 is gigabytes). The inputs are the user's (a list of feeds or an ``.npz``); random ones
are the fallback, and the report says so.

Examples
--------
>>> from explorer.runtimes.qdq_pairs import tiny_pair
>>> report = quant_error(*tiny_pair(), samples=4)
>>> [(t.node, t.kind) for t in report.nodes][:3]
[('/fc/MatMul', 'weight'), ('/fc/MatMul', 'activation'), ('/fc/Add', 'weight')]
>>> report.random_inputs, report.samples, report.to_dict()["graph_inputs"][0]["tensor"]
(True, 4, 'x')
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from explorer.core.tensors import over_protobuf_limit
from explorer.isolation import worker
from explorer.runtimes.qdq_pairs import (
    QDQ_OPS,
    ModelPair,
    Samples,
    dequantized_source,
    model_file,
    pair_models,
    producers_of,
    read_samples,
    runtime_refusal,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["TensorError", "QuantErrorReport", "quant_error", "sqnr_db", "measure_tensors"]

_EPS = float(np.finfo("float").eps)  # ONNX Runtime's epsilon in compute_signal_to_quantization_noice_ratio


def sqnr_db(signal_sq: float, noise_sq: float) -> float:
    """ONNX Runtime's SQNR in dB from the sums of squares of the signal and of the noise.

    ``20 log10(max(|x|, eps) / max(|x - y|, eps))``, as ``compute_signal_to_quantization_noice_ratio``
    computes it from the arrays (``eps``: float64's).

    Examples
    --------
    >>> x = np.array([3.0, 4.0]); y = np.array([3.0, 3.5])
    >>> round(sqnr_db(float((x * x).sum()), float(((x - y) ** 2).sum())), 3)
    20.0
    >>> sqnr_db(1.0, 0.0) > 300
    True
    """
    return 20 * math.log10(max(math.sqrt(signal_sq), _EPS) / max(math.sqrt(noise_sq), _EPS))


@dataclass(frozen=True)
class TensorError:
    """One quantised tensor's error.

    Attributes
    ----------
    node : str or None
        The float model's ONNX node: the one that writes an activation, the one that reads a weight (None:
        a graph input).
    op_type : str or None
        Its op.
    tensor : str
        The tensor's name in the float model.
    kind : {"activation", "weight"}
        What was quantised.
    sqnr_db : float
        Quantised against float, in dB (higher is better; about 6 dB a bit).
    local_sqnr_db : float or None
        An activation's value before its own Q/DQ pair against after it (an activation the quantiser
        folded, a ``Relu``, counts as this pair's: its clipping is the pair's range).
    """

    node: str | None
    op_type: str | None
    tensor: str
    kind: str
    sqnr_db: float
    local_sqnr_db: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields, SQNRs rounded to 4 decimals.

        Examples
        --------
        >>> TensorError("/conv/Conv", "Conv", "w", "weight", 41.234567).to_dict()["sqnr_db"]
        41.2346
        """
        data = asdict(self)
        for key in ("sqnr_db", "local_sqnr_db"):
            if data[key] is not None:
                data[key] = round(float(data[key]), 4)
        return data


@dataclass(frozen=True)
class QuantErrorReport:
    """The SQNR of every quantised tensor of a QDQ model against its float model.

    Attributes
    ----------
    float_source, qdq_source : str
        The two models.
    tensors : tuple of TensorError
        In the float model's graph order (a node's weights before its output).
    inputs : str
        What the models ran on, in words.
    samples : int
        How many samples.
    random_inputs : bool
        Whether the inputs were generated (no real ones given).
    notes : tuple of str
        What could not be compared, and why.

    Examples
    --------
    >>> rows = (TensorError("a", "Conv", "a_out", "activation", 30.0, 35.0),
    ...         TensorError("b", "Conv", "b_out", "activation", 12.0, 20.0))
    >>> report = QuantErrorReport("f.onnx", "q.onnx", rows, "2 samples given", 2, False)
    >>> report.node_sqnr(), report.worst(1)[0].node
    ({'a': 30.0, 'b': 12.0}, 'b')
    """

    float_source: str
    qdq_source: str
    tensors: tuple[TensorError, ...]
    inputs: str
    samples: int
    random_inputs: bool
    notes: tuple[str, ...] = ()

    @property
    def nodes(self) -> tuple[TensorError, ...]:
        """The rows put on a node (graph inputs' rows left out)."""
        return tuple(t for t in self.tensors if t.node is not None)

    def node_sqnr(self, kind: str = "activation") -> dict[str, float]:
        """Node -> the lowest ``sqnr_db`` of its rows of ``kind`` (what the overlay draws).

        Examples
        --------
        >>> rows = (TensorError("a", "Conv", "w", "weight", 40.0),)
        >>> QuantErrorReport("f", "q", rows, "", 1, False).node_sqnr("weight")
        {'a': 40.0}
        """
        found: dict[str, float] = {}
        for t in self.nodes:
            if t.kind == kind:
                found[t.node] = min(found.get(t.node, math.inf), t.sqnr_db)  # type: ignore[index]
        return found

    def worst(self, count: int = 10, kind: str | None = "activation") -> list[TensorError]:
        """The ``count`` rows of ``kind`` (None: any) with the lowest SQNR, worst first.

        Examples
        --------
        >>> QuantErrorReport("f", "q", (), "", 1, False).worst()
        []
        """
        rows = [t for t in self.nodes if kind is None or t.kind == kind]
        return sorted(rows, key=lambda t: t.sqnr_db)[:count]

    def to_frame(self) -> pd.DataFrame:
        """One row per tensor: node, op_type, tensor, kind, sqnr_db, local_sqnr_db.

        Examples
        --------
        >>> list(QuantErrorReport("f", "q", (), "", 1, False).to_frame().columns)[:3]
        ['node', 'op_type', 'tensor']
        """
        import pandas as pd

        columns = list(TensorError.__dataclass_fields__)
        return pd.DataFrame([t.to_dict() for t in self.tensors], columns=columns)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``nodes`` (each with ``node`` and ``sqnr_db``), ``graph_inputs``, and what ran.

        Examples
        --------
        >>> sorted(QuantErrorReport("f", "q", (), "", 1, False).to_dict())
        ['float_model', 'graph_inputs', 'inputs', 'nodes', 'notes', 'qdq_model', 'random_inputs', 'samples']
        """
        return {
            "float_model": self.float_source,
            "qdq_model": self.qdq_source,
            "inputs": self.inputs,
            "samples": self.samples,
            "random_inputs": self.random_inputs,
            "nodes": [t.to_dict() for t in self.nodes],
            "graph_inputs": [t.to_dict() for t in self.tensors if t.node is None],
            "notes": list(self.notes),
        }


def _activation_pairs(pair: ModelPair) -> tuple[list[tuple[str, str, str]], list[str]]:
    """``(float tensor, before Q/DQ, after Q/DQ)`` in the QDQ model, for each quantised activation."""
    producers = producers_of(pair.qdq_model)
    float_tensors = {o for n in pair.float_model.graph.node for o in n.output}
    float_tensors |= {v.name for v in pair.float_model.graph.input}
    found: dict[str, tuple[str, str, str]] = {}
    unmatched = []
    for node in pair.qdq_model.graph.node:
        if node.op_type != "DequantizeLinear":
            continue
        source = dequantized_source(producers, node.output[0])
        if source is None or source[0] != "activation":
            continue
        before, after = source[1], node.output[0]
        name = before if before in float_tensors else after if after in float_tensors else None
        if name is None:
            unmatched.append(before)
        elif name not in found:
            found[name] = (name, before, after)
    return list(found.values()), unmatched


def _augmented(model: onnx.ModelProto, names: Sequence[str], folder: str, label: str) -> str:
    """``model`` with ``names`` made graph outputs too, saved in ``folder``."""
    declared = {o.name for o in model.graph.output}
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in dict.fromkeys(names) if n not in declared)
    target = os.path.join(folder, f"{label}.onnx")
    large = over_protobuf_limit(model)
    onnx.save_model(model, target, save_as_external_data=large, location=f"{label}.onnx.data")
    return target


def measure_tensors(
    qdq_path: str,
    float_path: str,
    samples: Sequence[Mapping[str, np.ndarray]],
    pairs: Sequence[tuple[str, str, str]],
    weights: Sequence[tuple[str, str]] = (),
    *,
    optimization_level: str = "disable",
) -> dict[str, Any]:
    """The sums behind each activation's SQNRs, and each weight's SQNR (call it in the worker).

    A weight's dequantised value is the QDQ model's ``DequantizeLinear`` output as ONNX Runtime computes
    it; the dB are ONNX Runtime's ``compute_weight_error``. (Its ``create_weight_matching`` dequantises in
    the quantised integer type, so ``q - zero_point`` wraps around for asymmetric weights: ``127 - (-128)``
    in int8 is ``-1``; ONNX Runtime's own kernel does not.)

    Parameters
    ----------
    qdq_path, float_path : str
        The two model files.
    samples : sequence of mapping
        The inputs.
    pairs : sequence of (str, str, str)
        ``(float tensor, QDQ tensor before its Q/DQ pair, after it)``.
    weights : sequence of (str, str)
        ``(float model's initializer, the QDQ model's DequantizeLinear output of it)``.
    optimization_level : str
        ONNX Runtime's graph optimisation level (``disable``: ``collect_activations``'s).

    Returns
    -------
    dict
        ``activations``: float tensor -> ``[sum float^2, sum (float - after)^2, sum before^2,
        sum (before - after)^2]`` (None where the shapes differ); ``weights``: weight -> dB.

    Examples
    --------
    >>> from explorer.runtimes.qdq_pairs import tiny_pair
    >>> import onnx, tempfile, os
    >>> f, q = tiny_pair(); tmp = tempfile.mkdtemp()
    >>> onnx.save(f, os.path.join(tmp, "f.onnx")); onnx.save(q, os.path.join(tmp, "q.onnx"))
    >>> out = measure_tensors(os.path.join(tmp, "q.onnx"), os.path.join(tmp, "f.onnx"),
    ...                       [{"x": np.ones((1, 4), np.float32)}], [("h", "h", "h_DequantizeLinear_Output")],
    ...                       [("b", "b_DequantizeLinear_Output")])
    >>> len(out["activations"]["h"]), out["weights"]["b"] > 40
    (4, True)
    """
    from onnx import numpy_helper
    from onnxruntime.quantization.qdq_loss_debug import compute_weight_error

    from explorer.onnx_adapter.ort_run import ort_session

    sums: dict[str, list[float] | None] = {name: [0.0, 0.0, 0.0, 0.0] for name, _, _ in pairs}
    float_model = onnx.load(float_path)
    float_weights = {t.name: t for t in float_model.graph.initializer}
    matched: dict[str, dict[str, np.ndarray]] = {}
    with tempfile.TemporaryDirectory(prefix="quant-error-") as folder:
        wanted = [p for _, b, a in pairs for p in (b, a)] + [d for _, d in weights]
        qdq = ort_session(_augmented(onnx.load(qdq_path), wanted, folder, "qdq"), None, optimization_level)
        flt = ort_session(
            _augmented(float_model, [n for n, _, _ in pairs], folder, "float"), None, optimization_level
        )
        qnames = [o.name for o in qdq.get_outputs()]
        fnames = [o.name for o in flt.get_outputs()]
        for i, sample in enumerate(samples):
            worker.report(i / max(1, len(samples)), f"sample {i + 1} of {len(samples)}")
            qv = dict(zip(qnames, qdq.run(qnames, dict(sample)), strict=True))
            fv = dict(zip(fnames, flt.run(fnames, dict(sample)), strict=True))
            if i == 0:
                for name, dequantized in weights:
                    value = numpy_helper.to_array(float_weights[name])
                    if value.shape == np.shape(qv[dequantized]):
                        matched[name] = {"float": value, "dequantized": np.asarray(qv[dequantized])}
            for name, before, after in pairs:
                acc = sums[name]
                if acc is None:
                    continue
                x, b, a = (np.asarray(v, np.float64) for v in (fv[name], qv[before], qv[after]))
                if x.shape != a.shape or b.shape != a.shape:
                    sums[name] = None
                    continue
                acc[0] += float((x * x).sum())
                acc[1] += float(((x - a) ** 2).sum())
                acc[2] += float((b * b).sum())
                acc[3] += float(((b - a) ** 2).sum())
        del qdq, flt
    errors = compute_weight_error(matched)
    return {"activations": sums, "weights": {k: float(v) for k, v in errors.items()}}


def _weight_pairs(pair: ModelPair) -> list[tuple[str, str, str]]:
    """``(float weight, its DequantizeLinear output in the QDQ model, the float node that reads it)``."""
    producers = producers_of(pair.qdq_model)
    float_nodes = {n.name: n for n in pair.float_model.graph.node}
    float_weights = {t.name for t in pair.float_model.graph.initializer}
    found: dict[str, tuple[str, str, str]] = {}
    for node in pair.qdq_model.graph.node:
        if node.op_type in QDQ_OPS or node.name not in pair.node_map:
            continue
        reference = float_nodes[pair.node_map[node.name]]
        for i, tensor in enumerate(node.input):
            source = dequantized_source(producers, tensor) if tensor else None
            if source is None or source[0] != "weight":
                continue
            name = reference.input[i] if i < len(reference.input) else ""
            if name not in float_weights:
                name = source[1].removesuffix("_quantized")
            if name in float_weights:
                found.setdefault(name, (name, tensor, reference.name))
    return list(found.values())


def quant_error(
    float_model: Any,
    qdq_model: Any,
    feeds: Any = None,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    samples: int = 8,
    seed: int = 0,
    optimization: str = "disable",
    timeout: float | None = None,
) -> QuantErrorReport:
    """The SQNR of each quantised activation and weight of ``qdq_model`` against ``float_model``, per node.

    Parameters
    ----------
    float_model, qdq_model : ModelGraph, ModelPair's models, or anything :func:`explorer.load` accepts
        The float model that was quantised, and its QDQ version (or a :class:`~explorer.runtimes.
        qdq_pairs.ModelPair` as ``float_model`` with ``qdq_model`` None).
    feeds : None, mapping, sequence of mappings, or path to an ``.npz``
        Calibration or evaluation inputs (:func:`~explorer.runtimes.qdq_pairs.read_samples`); None:
        ``samples`` random ones.
    input_shapes : mapping, optional
        Shapes of the random inputs' dynamic dimensions.
    samples, seed : int
        How many random inputs, from which seed.
    optimization : str
        ONNX Runtime's graph optimisation level for both models (``disable``, as ONNX Runtime's
        ``collect_activations``).
    timeout : float, optional
        The worker's limit.

    Returns
    -------
    QuantErrorReport

    Raises
    ------
    ModelsDoNotCorrespond
        Not a QDQ version of the float model (exit 2).
    RuntimeUnsupportedError
        ONNX Runtime cannot run one of them (exit 3).

    Examples
    --------
    >>> from explorer.runtimes.qdq_pairs import tiny_pair
    >>> import numpy as np
    >>> feeds = [{"x": np.full((1, 4), 0.5, np.float32)}]
    >>> report = quant_error(*tiny_pair(), feeds)
    >>> report.inputs, {k: round(v, 4) for k, v in report.node_sqnr("weight").items()}
    ('1 samples given', {'/fc/MatMul': 48.7259, '/fc/Add': 297.8424})
    """
    pair = float_model if isinstance(float_model, ModelPair) else pair_models(float_model, qdq_model)
    given = read_samples(
        pair.float_model,
        feeds,
        input_shapes=input_shapes,
        samples=samples,
        seed=seed,
        label=pair.float_source,
    )
    return _report(pair, given, optimization, timeout)


def _report(pair: ModelPair, given: Samples, optimization: str, timeout: float | None) -> QuantErrorReport:
    pairs, unmatched = _activation_pairs(pair)
    weight_pairs = _weight_pairs(pair)
    try:
        out = worker.run_on_model(
            measure_tensors,
            model_file(pair.qdq_graph),
            model_file(pair.float_graph),
            list(given.feeds),
            pairs,
            [(name, dequantized) for name, dequantized, _ in weight_pairs],
            optimization_level=optimization,
            step="quantisation error per tensor",
            timeout=timeout,
        )
    except Exception as err:
        refused = runtime_refusal(err, f"{pair.float_source} or {pair.qdq_source}")
        if refused is None:
            raise
        raise refused from None
    float_nodes = list(pair.float_model.graph.node)
    writer = {o: n for n in float_nodes for o in n.output}
    ops = {n.name: n.op_type for n in float_nodes}
    rank = {n.name: i for i, n in enumerate(float_nodes)}
    rows: list[tuple[tuple[float, int], TensorError]] = []
    notes = list(pair.notes)
    for name, _, kind_node in weight_pairs:
        if name in out["weights"]:
            row = TensorError(kind_node, ops.get(kind_node), name, "weight", out["weights"][name])
            rows.append(((rank.get(kind_node, -1), 0), row))
    skipped = []
    for name, _, _ in pairs:
        acc = out["activations"][name]
        if acc is None:
            skipped.append(name)
            continue
        made = writer.get(name)
        node = made.name if made is not None else None
        row = TensorError(
            node, ops.get(node or ""), name, "activation", sqnr_db(acc[0], acc[1]), sqnr_db(acc[2], acc[3])
        )
        rows.append(((rank.get(node or "", -1), 1), row))
    if skipped:
        notes.append(f"shapes differ between the models, not compared: {', '.join(skipped[:8])}")
    if unmatched:
        notes.append(f"quantised tensors with no float counterpart: {', '.join(unmatched[:8])}")
    rows.sort(key=lambda item: item[0])
    return QuantErrorReport(
        pair.float_source,
        pair.qdq_source,
        tuple(row for _, row in rows),
        given.description,
        len(given.feeds),
        given.random,
        tuple(notes),
    )

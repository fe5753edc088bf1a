"""The first node that breaks accuracy: bisect a QDQ model between float and quantised, as Polygraphy's
``debug precision`` bisects a TensorRT engine's layers.

The QDQ model's nodes that own quantisation (:attr:`~explorer.runtimes.qdq_pairs.ModelPair.order`, in
graph order) are split at a point: on one side they stay quantised, on the other they are kept in float
(:func:`~explorer.runtimes.qdq_pairs.keep_in_float`: their Q/DQ pairs removed, their weights the float
model's). Each split runs on the given inputs and a metric against the float model's outputs says
whether it passes the threshold. Assuming more float never hurts, a binary search finds the split where
it starts passing, in about ``log2(nodes)`` runs:

- ``direction="reverse"`` (the default; Polygraphy's name: float from the outputs back): the nodes before
  the split are quantised, the rest float; the answer is the **first node in graph order whose
  quantisation breaks the metric** (quantising everything before it passes, quantising it too fails);
- ``direction="forward"`` (float from the inputs on): the nodes before the split are float; the answer is
  the last node of the shortest float prefix that passes.

The answer is an ONNX node name of the float model, never a runtime's kernel name. The search then
measures the metric with only that node kept in float (everything else quantised), the fully quantised
and the fully float model: the numbers that say whether that one node is the culprit.

Examples
--------
>>> from explorer.runtimes.qdq_pairs import tiny_pair
>>> found = first_breaking_node(*tiny_pair(), samples=4, threshold=100.0)
>>> found.node, found.float_metric > 100, found.quantized_metric < 100
('/fc/MatMul', True, True)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from explorer.core.errors import UsageError
from explorer.isolation import worker
from explorer.runtimes.qdq_pairs import (
    ModelPair,
    Samples,
    keep_in_float,
    model_file,
    pair_models,
    read_samples,
    run_samples,
    runtime_refusal,
)
from explorer.runtimes.quant_error import sqnr_db

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["METRICS", "BisectStep", "FirstBreaking", "first_breaking_node", "output_sqnr", "top1"]

Outputs = Sequence[Sequence[np.ndarray]]


def output_sqnr(outputs: Outputs, reference: Outputs, labels: Any = None) -> float:
    """SQNR in dB of every output of every sample against the float model's (ONNX Runtime's formula).

    Examples
    --------
    >>> ref = [[np.array([3.0, 4.0])]]
    >>> round(output_sqnr([[np.array([3.0, 3.5])]], ref), 3)
    20.0
    """
    signal = sum(float(np.sum(np.asarray(r, np.float64) ** 2)) for rs in reference for r in rs)
    noise = sum(
        float(np.sum((np.asarray(r, np.float64) - np.asarray(o, np.float64)) ** 2))
        for os_, rs in zip(outputs, reference, strict=True)
        for o, r in zip(os_, rs, strict=True)
    )
    return sqnr_db(signal, noise)


def top1(outputs: Outputs, reference: Outputs, labels: Any = None) -> float:
    """Top-1 of the first output (argmax of its last axis): against ``labels`` when given, else the share
    of rows whose top-1 is the float model's.

    Examples
    --------
    >>> ref = [[np.array([[0.1, 0.9]])]]
    >>> top1([[np.array([[0.9, 0.1]])]], ref), top1([[np.array([[0.2, 0.8]])]], ref, labels=[1])
    (0.0, 1.0)
    """
    guessed = np.concatenate([np.asarray(o[0]).reshape(-1, np.shape(o[0])[-1]).argmax(-1) for o in outputs])
    if labels is None:
        truth = np.concatenate(
            [np.asarray(r[0]).reshape(-1, np.shape(r[0])[-1]).argmax(-1) for r in reference]
        )
    else:
        truth = np.asarray(labels).reshape(-1)
    return float((guessed == truth).mean())


METRICS: Mapping[str, tuple[Callable[..., float], bool, float | None]] = {
    "sqnr": (output_sqnr, True, 20.0),
    "top1": (top1, True, None),
}
"""Metric name -> (function(outputs, float outputs, labels), higher is better, default threshold). ``top1``'s
default threshold is the float model's top-1 less 0.05."""


@dataclass(frozen=True)
class BisectStep:
    """One model the search ran.

    Attributes
    ----------
    quantized : tuple of int
        ``(start, stop)``: the nodes of the order quantised (the others in float).
    first, last : str or None
        The first and last of them (None: none quantised).
    metric : float
        The metric on the given inputs.
    passes : bool
        Whether it meets the threshold.
    what : str
        The step's role: ``float``, ``quantized``, ``bisect`` or ``node in float``.
    """

    quantized: tuple[int, int]
    first: str | None
    last: str | None
    metric: float
    passes: bool
    what: str = "bisect"

    def to_dict(self) -> dict[str, Any]:
        """The fields (metric rounded to 4 decimals, infinite as a string).

        Examples
        --------
        >>> BisectStep((0, 3), "a", "c", 12.345678, False).to_dict()["metric"]
        12.3457
        """
        data = asdict(self)
        data["quantized"] = list(self.quantized)
        data["metric"] = _number(self.metric)
        return data


def _number(value: float | None) -> float | str | None:
    if value is None:
        return None
    return round(float(value), 4) if math.isfinite(value) else str(value)


@dataclass(frozen=True)
class FirstBreaking:
    """What the search found.

    Attributes
    ----------
    node : str or None
        The float model's node (None: the fully quantised model passes, or the fully float one fails).
    op_type : str or None
        Its op.
    metric : str
        The metric's name.
    threshold : float
        What passes.
    higher_is_better : bool
        The metric's direction.
    direction : {"reverse", "forward"}
        The search's.
    float_metric, quantized_metric : float
        The metric with every node in float, and with none.
    kept_float_metric : float or None
        With only ``node`` kept in float.
    boundary_metric : float or None
        At the split the search ended on, on the passing side.
    candidates : int
        Nodes the search split between.
    steps : tuple of BisectStep
        Every model run, in order.
    inputs : str
        What the models ran on.
    """

    node: str | None
    op_type: str | None
    metric: str
    threshold: float
    higher_is_better: bool
    direction: str
    float_metric: float
    quantized_metric: float
    kept_float_metric: float | None
    boundary_metric: float | None
    candidates: int
    steps: tuple[BisectStep, ...]
    inputs: str

    @property
    def restores(self) -> bool | None:
        """Whether keeping only ``node`` in float meets the threshold (None: no node).

        Examples
        --------
        >>> none = FirstBreaking(None, None, "sqnr", 20, True, "reverse", 300, 25, None, None, 5, (), "")
        >>> none.restores is None
        True
        """
        if self.kept_float_metric is None:
            return None
        return self._passes(self.kept_float_metric)

    def _passes(self, value: float) -> bool:
        return value >= self.threshold if self.higher_is_better else value <= self.threshold

    @property
    def verdict(self) -> str:
        """The answer in one sentence.

        Examples
        --------
        >>> none = FirstBreaking(None, None, "sqnr", 20, True, "reverse", 300, 25, None, None, 5, (), "")
        >>> none.verdict
        'the fully quantised model meets sqnr >= 20: no node breaks it'
        """
        sign = ">=" if self.higher_is_better else "<="
        goal = f"{self.metric} {sign} {self.threshold:g}"
        if self.node is None:
            if self._passes(self.quantized_metric):
                return f"the fully quantised model meets {goal}: no node breaks it"
            return f"even the float model misses {goal} ({self.float_metric:.4g}): lower the threshold"
        kept = self.kept_float_metric
        alone = (
            "restores it"
            if self.restores
            else "does not restore it alone (other nodes break it too: keep the range in float)"
        )
        return (
            f"{self.node} ({self.op_type}) breaks {goal}: quantised {self.quantized_metric:.4g}, float "
            f"{self.float_metric:.4g}; keeping it alone in float gives {kept:.4g}, which {alone}"
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per model run.

        Examples
        --------
        >>> list(FirstBreaking(None, None, "sqnr", 20.0, True, "reverse", 1.0, 1.0, None, None, 0, (), "")
        ...      .to_frame().columns)
        ['quantized', 'first', 'last', 'metric', 'passes', 'what']
        """
        import pandas as pd

        columns = list(BisectStep.__dataclass_fields__)
        return pd.DataFrame([s.to_dict() for s in self.steps], columns=columns)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``node``, the metrics (``kept_float_metric``: with it kept in float), the steps.

        Examples
        --------
        >>> found = FirstBreaking("n", "Conv", "sqnr", 20, True, "reverse", 300, 5, 25, 25, 4, (), "")
        >>> found.to_dict()["restores"]
        True
        """
        return {
            "node": self.node,
            "op_type": self.op_type,
            "metric": self.metric,
            "threshold": self.threshold,
            "higher_is_better": self.higher_is_better,
            "direction": self.direction,
            "kept_float_metric": _number(self.kept_float_metric),
            "restores": self.restores,
            "quantized_metric": _number(self.quantized_metric),
            "float_metric": _number(self.float_metric),
            "boundary_metric": _number(self.boundary_metric),
            "candidates": self.candidates,
            "inputs": self.inputs,
            "verdict": self.verdict,
            "steps": [s.to_dict() for s in self.steps],
        }


class _Runner:
    """Runs models made from the pair on the samples and scores them against the float model."""

    def __init__(
        self,
        pair: ModelPair,
        samples: Samples,
        score: Callable[..., float],
        labels: Any,
        optimization: str,
        timeout: float | None,
    ) -> None:
        self.pair, self.samples, self.score, self.labels = pair, samples, score, labels
        self.optimization, self.timeout = optimization, timeout
        self.reference = self._run(model_file(pair.float_graph), pair.float_source)

    def _run(self, model: Any, source: str) -> list[list[np.ndarray]]:
        try:
            return worker.run_on_model(
                run_samples,
                model,
                list(self.samples.feeds),
                optimization_level=self.optimization,
                step="first breaking node: a run",
                timeout=self.timeout,
            )
        except Exception as err:
            refused = runtime_refusal(err, source)
            if refused is None:
                raise
            raise refused from None

    def metric(self, float_nodes: Sequence[str]) -> float:
        if not float_nodes:
            outputs = self._run(model_file(self.pair.qdq_graph), self.pair.qdq_source)
        else:
            outputs = self._run(keep_in_float(self.pair, float_nodes), self.pair.qdq_source)
        return float(self.score(outputs, self.reference, self.labels))


def first_breaking_node(
    float_model: Any,
    qdq_model: Any = None,
    feeds: Any = None,
    *,
    metric: str | Callable[..., float] = "sqnr",
    threshold: float | None = None,
    higher_is_better: bool | None = None,
    labels: Any = None,
    direction: str = "reverse",
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    samples: int = 8,
    seed: int = 0,
    optimization: str = "disable",
    timeout: float | None = None,
) -> FirstBreaking:
    """Bisect the QDQ model's nodes between float and quantised for the node that breaks ``metric``.

    Parameters
    ----------
    float_model, qdq_model : ModelGraph or anything :func:`explorer.load` accepts
        The float model that was quantised and its QDQ version (or a ``ModelPair`` and None).
    feeds : None, mapping, sequence of mappings, or path to an ``.npz``
        Calibration or evaluation inputs (:func:`~explorer.runtimes.qdq_pairs.read_samples`); None:
        ``samples`` random ones (said in ``inputs``).
    metric : {"sqnr", "top1"} or callable
        :data:`METRICS`, or ``metric(outputs, float_outputs, labels) -> float`` (each a list per sample of
        the model's outputs).
    threshold : float, optional
        What passes (default: the metric's, :data:`METRICS`).
    higher_is_better : bool, optional
        A callable metric's direction (default True).
    labels : array, optional
        For ``top1``: the true class of each sample's rows (default: the float model's top-1).
    direction : {"reverse", "forward"}
        ``reverse``: quantise a growing prefix (the first node whose quantisation breaks it);
        ``forward``: keep a growing prefix in float.
    input_shapes, samples, seed
        The random inputs' shapes, count and seed, when no feeds are given.
    optimization : str
        ONNX Runtime's graph optimisation level for every run (``disable``: Q/DQ run as written).
    timeout : float, optional
        Each run's limit in the worker.

    Returns
    -------
    FirstBreaking

    Raises
    ------
    ModelsDoNotCorrespond
        Not a QDQ version of the float model (exit 2).
    UsageError
        An unknown metric or direction.

    Examples
    --------
    >>> from explorer.runtimes.qdq_pairs import tiny_pair
    >>> found = first_breaking_node(*tiny_pair(), metric="top1", samples=2)
    >>> found.node, found.threshold, found.verdict
    (None, 0.95, 'the fully quantised model meets top1 >= 0.95: no node breaks it')
    """
    if direction not in ("reverse", "forward"):
        raise UsageError(f"direction must be 'reverse' or 'forward', not {direction!r}")
    if callable(metric):
        score, default, name = metric, None, getattr(metric, "__name__", "metric")
        higher = True if higher_is_better is None else higher_is_better
    elif metric in METRICS:
        score, higher, default = METRICS[metric]
        name = metric
    else:
        raise UsageError(f"unknown metric {metric!r}; the metrics are {', '.join(METRICS)} or a function")
    pair = float_model if isinstance(float_model, ModelPair) else pair_models(float_model, qdq_model)
    given = read_samples(
        pair.float_model,
        feeds,
        input_shapes=input_shapes,
        samples=samples,
        seed=seed,
        label=pair.float_source,
    )
    runner = _Runner(pair, given, score, labels, optimization, timeout)
    order = list(pair.order)
    n = len(order)
    steps: list[BisectStep] = []
    float_value = runner.metric(order)
    if threshold is None:
        if default is None and name != "top1":
            raise UsageError(f"give a threshold for the metric {name!r}")
        threshold = default if default is not None else float_value - 0.05

    def passes(value: float) -> bool:
        return value >= threshold if higher else value <= threshold  # type: ignore[operator]

    def record(quantized: tuple[int, int], value: float, what: str = "bisect") -> None:
        start, stop = quantized
        first, last = (order[start], order[stop - 1]) if stop > start else (None, None)
        steps.append(BisectStep(quantized, first, last, value, passes(value), what))

    record((0, 0), float_value, "float")
    quant_value = runner.metric([])
    record((0, n), quant_value, "quantized")
    node = kept = boundary = None
    if passes(float_value) and not passes(quant_value) and n:
        # reverse: quantise order[:k]; forward: order[n-k:] (a float prefix of n-k); k=0 passes, k=n fails
        good, bad = 0, n
        boundary = float_value
        while bad - good > 1:
            k = (good + bad) // 2
            span = (0, k) if direction == "reverse" else (n - k, n)
            value = runner.metric([m for i, m in enumerate(order) if not span[0] <= i < span[1]])
            record(span, value)
            if passes(value):
                good, boundary = k, value
            else:
                bad = k
        index = bad - 1 if direction == "reverse" else n - bad
        found = order[index]
        kept = runner.metric([found])
        record((0, n), kept, "node in float")
        node = pair.node_map[found]
    return FirstBreaking(
        node,
        pair.op_of(node) if node else None,
        name,
        float(threshold),  # type: ignore[arg-type]
        higher,
        direction,
        float_value,
        quant_value,
        kept,
        boundary,
        n,
        tuple(steps),
        given.description,
    )

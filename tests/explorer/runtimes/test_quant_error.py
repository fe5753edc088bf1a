"""Where quantisation hurts, per node, and the first node that breaks accuracy, on real models quantised
in the test by ONNX Runtime's ``quantize_static``, run on real ONNX Runtime.

The sensitive model: a ResNet-18 (the zoo's, 8 channels wide at 32x32) whose ``layer2.0.conv1`` has
output channel 0 scaled by 1000 and ``layer2.0.bn1``'s running mean and variance scaled to match, so the
float model computes the same function while that conv's output spans a thousand times the range of its
other channels. Weights are quantised per channel (fine); the 8-bit activation of that conv's output
loses every other channel, and the node that reads it, ``/layer2/layer2.0/bn1/BatchNormalization``,
is the one the search must name.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

from explorer import load, zoo
from explorer.isolation import worker
from explorer.overlays.export import export_overlays
from explorer.overlays.quant import quant_error_overlay, quant_error_overlays
from explorer.runtimes.qdq_bisect import first_breaking_node
from explorer.runtimes.qdq_pairs import (
    ModelsDoNotCorrespond,
    keep_in_float,
    pair_models,
    read_samples,
    run_samples,
    tiny_pair,
)
from explorer.runtimes.quant_error import quant_error

SENSITIVE = "/layer2/layer2.0/bn1/BatchNormalization"
"""The node the planted outlier makes break: it reads the 8-bit activation of the outlier conv."""


class _Reader(CalibrationDataReader):
    def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
        self.items = iter(feeds)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.items, None)


def _resnet(outlier: float = 1.0) -> onnx.ModelProto:
    model = zoo.build("resnet18", width=8, image_size=32, num_classes=10)
    weights = {t.name: t for t in model.graph.initializer}
    for name, power in (
        ("layer2.0.conv1.weight", 1),
        ("layer2.0.bn1.running_mean", 1),
        ("layer2.0.bn1.running_var", 2),
    ):
        value = numpy_helper.to_array(weights[name]).copy()
        value[0] *= outlier**power
        weights[name].CopyFrom(numpy_helper.from_array(value, name))
    return model


def _images(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"input": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(count)]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``plain`` and ``planted`` float ResNets and their QDQ versions, calibrated on 8 inputs."""
    folder = tmp_path_factory.mktemp("quant-error")
    paths = {}
    for name, outlier in (("plain", 1.0), ("planted", 1000.0)):
        onnx.save(_resnet(outlier), folder / f"{name}.onnx")
        quantize_static(
            folder / f"{name}.onnx",
            folder / f"{name}_qdq.onnx",
            _Reader(_images(8, seed=0)),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
        )
        paths[name], paths[f"{name}_qdq"] = folder / f"{name}.onnx", folder / f"{name}_qdq.onnx"
    return paths


EVAL = _images(8, seed=1)


def test_sqnr_per_node_is_onnx_runtimes_own(models: dict[str, Path], tmp_path: Path) -> None:
    """Our streamed sums give what qdq_loss_debug's own pipeline gives, tensor by tensor."""
    from onnxruntime.quantization.qdq_loss_debug import (
        collect_activations,
        compute_activation_error,
        create_activation_matching,
        modify_model_output_intermediate_tensors,
    )

    report = quant_error(models["plain"], models["plain_qdq"], EVAL)
    for label in ("plain", "plain_qdq"):
        modify_model_output_intermediate_tensors(str(models[label]), str(tmp_path / f"{label}.onnx"))
    qdq = collect_activations(str(tmp_path / "plain_qdq.onnx"), _Reader(list(EVAL)))
    flt = collect_activations(str(tmp_path / "plain.onnx"), _Reader(list(EVAL)))
    theirs = compute_activation_error(create_activation_matching(qdq, flt))
    ours = {t.tensor: t for t in report.tensors if t.kind == "activation"}
    assert set(theirs) == set(ours)
    for name, errors in theirs.items():
        assert ours[name].sqnr_db == pytest.approx(errors["xmodel_err"], abs=0.01), name
        assert ours[name].local_sqnr_db == pytest.approx(errors["qdq_err"], abs=0.01), name
    assert all(np.isfinite(t.sqnr_db) for t in report.tensors)
    assert report.samples == 8 and not report.random_inputs and report.inputs == "8 samples given"
    float_nodes = {n.name for n in onnx.load(models["plain"]).graph.node}
    assert {t.node for t in report.nodes} <= float_nodes  # the float model's ONNX node names
    weights = [t for t in report.nodes if t.kind == "weight"]
    assert {t.node for t in weights if t.op_type == "Conv"} == {n for n in float_nodes if n.endswith("Conv")}
    assert min(t.sqnr_db for t in weights) > 15  # 8-bit per-channel weights: about 6 dB a bit


def test_the_planted_outlier_is_where_the_sqnr_drops(models: dict[str, Path]) -> None:
    plain = {t.tensor: t.sqnr_db for t in quant_error(models["plain"], models["plain_qdq"], EVAL).tensors}
    planted = quant_error(models["planted"], models["planted_qdq"], EVAL)
    rows = {t.tensor: t for t in planted.tensors}
    before = [
        t for t in planted.tensors if t.kind == "activation" and t.node and t.node.startswith("/layer1/")
    ]
    assert all(plain[t.tensor] == pytest.approx(t.sqnr_db, abs=1e-6) for t in before)  # upstream: the same
    after_bn = rows["/layer2/layer2.0/relu/Relu_output_0"]  # bn1's output, through its folded Relu
    assert (
        after_bn.node == "/layer2/layer2.0/relu/Relu" and after_bn.sqnr_db < 3 < 25 < plain[after_bn.tensor]
    )
    assert planted.worst(1)[0].sqnr_db < 3
    # the node overlay on the float graph: lowest at the planted layer, none beyond the graph
    graph = load(models["planted"])
    overlay = quant_error_overlay(planted, graph, below=10.0)
    assert set(overlay.values) <= set(graph.op_nodes())
    assert overlay.values["/layer2/layer2.0/relu/Relu"].color == "#d62728"
    assert overlay.values["/layer1/layer1.0/conv1/Conv"].color is None


def test_keeping_every_node_in_float_is_the_float_model_and_none_the_qdq_model(
    models: dict[str, Path],
) -> None:
    pair = pair_models(models["planted"], models["planted_qdq"])
    assert len(pair.order) > 40 and not pair.notes
    run = lambda model: worker.run_on_model(run_samples, model, EVAL[:3])  # noqa: E731
    for (a,), (b,) in zip(run(str(models["planted"])), run(keep_in_float(pair, pair.order)), strict=True):
        np.testing.assert_array_equal(a, b)  # folded Relus put back, float weights restored
    for (a,), (b,) in zip(run(str(models["planted_qdq"])), run(keep_in_float(pair, [])), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("direction", ["reverse", "forward"])
def test_the_search_names_the_planted_node_and_keeping_it_in_float_restores_the_metric(
    models: dict[str, Path], direction: str
) -> None:
    found = first_breaking_node(models["planted"], models["planted_qdq"], EVAL, direction=direction)
    assert found.node == SENSITIVE and found.op_type == "BatchNormalization"
    assert found.quantized_metric < 20 <= found.kept_float_metric  # type: ignore[operator]
    assert found.restores and found.float_metric > 100
    assert len(found.steps) <= 3 + int(np.ceil(np.log2(found.candidates)))  # a bisection, not a sweep
    assert json.loads(json.dumps(found.to_dict()))["node"] == SENSITIVE
    assert list(found.to_frame()["what"])[:2] == ["float", "quantized"]


def _largest_error(outputs: list, reference: list, labels: object = None) -> float:
    """The largest logit error over the largest float logit (lower is better)."""
    top = max(float(np.abs(r[0]).max()) for r in reference)
    return max(float(np.abs(o[0] - r[0]).max()) for o, r in zip(outputs, reference, strict=True)) / top


def test_a_quantisation_that_does_not_hurt_and_a_metric_of_ones_own(models: dict[str, Path]) -> None:
    plain = first_breaking_node(models["plain"], models["plain_qdq"], EVAL)
    assert plain.node is None and "no node breaks it" in plain.verdict and plain.kept_float_metric is None
    planted = first_breaking_node(
        models["planted"],
        models["planted_qdq"],
        EVAL,
        metric=_largest_error,
        threshold=0.2,
        higher_is_better=False,
    )
    assert planted.node == SENSITIVE and planted.metric == "_largest_error"
    assert planted.kept_float_metric <= 0.2 < planted.quantized_metric  # type: ignore[operator]
    top1 = first_breaking_node(models["planted"], models["planted_qdq"], EVAL, metric="top1")
    assert top1.threshold == pytest.approx(0.95)  # the float model's top-1 (1.0 against itself) less 0.05


def test_weights_are_dequantised_as_onnx_runtime_runs_them() -> None:
    """qdq_loss_debug's create_weight_matching subtracts the zero point in int8 (127 - (-128) wraps to -1);
    the weight SQNR here is from ONNX Runtime's DequantizeLinear kernel."""
    report = quant_error(*tiny_pair(), [{"x": np.full((1, 4), 0.5, np.float32)}])
    bias = next(t for t in report.tensors if t.tensor == "b")
    assert bias.kind == "weight" and bias.node == "/fc/Add" and bias.sqnr_db > 40


def test_random_inputs_are_the_fallback_and_say_so() -> None:
    report = quant_error(*tiny_pair(), samples=3, seed=5)
    assert report.random_inputs and report.inputs.startswith("3 random inputs (seeds 5..7")
    assert report.to_dict()["random_inputs"] is True


def test_inputs_from_an_npz_and_its_mistakes(tmp_path: Path) -> None:
    float_model, _ = tiny_pair()
    np.savez(tmp_path / "ok.npz", x=np.ones((3, 1, 4), np.float64))
    samples = read_samples(float_model, tmp_path / "ok.npz")
    assert len(samples.feeds) == 3 and samples.feeds[0]["x"].dtype == np.float32
    assert samples.description == f"3 samples from {tmp_path / 'ok.npz'}"
    np.savez(tmp_path / "wrong.npz", y=np.ones((1, 4), np.float32))
    with pytest.raises(Exception, match=r"wrong.npz: no array for input 'x'"):
        read_samples(float_model, tmp_path / "wrong.npz")
    with pytest.raises(Exception, match="takes rank 2"):
        read_samples(float_model, [{"x": np.ones(4, np.float32)}])
    with pytest.raises(Exception, match="no such file"):
        read_samples(float_model, os.fspath(tmp_path / "missing.npz"))


def test_models_that_do_not_correspond_are_refused_naming_the_files(models: dict[str, Path]) -> None:
    qdq_model = tiny_pair()[1]
    with pytest.raises(ModelsDoNotCorrespond, match="not a QDQ model"):
        pair_models(models["plain"], models["plain"])
    with pytest.raises(ModelsDoNotCorrespond, match="not a float model"):
        pair_models(models["plain_qdq"], models["plain_qdq"])
    with pytest.raises(ModelsDoNotCorrespond, match=f"{models['plain']} and tiny do not correspond: inputs"):
        pair_models(models["plain"], qdq_model)


def test_the_overlays_export_as_model_explorer_node_data(models: dict[str, Path], tmp_path: Path) -> None:
    graph = load(models["planted"])
    report = quant_error(models["planted"], models["planted_qdq"], EVAL[:2])
    paths = export_overlays(quant_error_overlays(report, graph), tmp_path / "sqnr.json", graph)
    assert paths[0].name == "sqnr.json" and len(paths) == 2
    data = json.loads(paths[0].read_text())
    results = next(iter(data.values()))["results"]
    assert results["/layer2/layer2.0/relu/Relu"]["value"] < 3

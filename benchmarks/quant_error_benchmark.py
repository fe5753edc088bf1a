"""Issue #40's "done when", measured: on the course's QDQ CNN (chapter 6's ResNet-18 with a fitted 10-class
head, synthetic "photos", prepared for qnn-htp), the SQNR per node, and the first node that breaks
accuracy, found on the calibration photos, kept in float and judged by top-1 on held-out photos.

The setup is notebooks/06_mobile_npu.ipynb's, copied here (``photos``, the ridge-fitted ``fc``, the
calibration and held-out photos): ``prepare_for_target(classifier, "qnn-htp", ...)`` at its defaults
(uint8 activations and weights) keeps top-1 (the notebook: float 85.0%, uint8 87.5%). The quantisation
that hurts is the notebook's Exercise 3 setting: the same last step with 16-bit activations and
**uint16 weights** (``prepare_pipeline("qnn-htp", ..., activation_type="uint16", weight_type="uint16")``),
where a bias stored in int32 at ``input_scale * weight_scale`` no longer fits and is clipped.

The search (``first_breaking_node``, direction reverse, metric top-1 agreement with the float model on
the 10 calibration photos, threshold the float model's 1.0 less 0.05) runs on the calibration photos only;
top-1 against the labels is then measured on the 40 held-out photos for the float model, the QDQ model,
and the QDQ model with the node found kept in float (``keep_in_float``). Everything runs on ONNX
Runtime's CPU provider in the explorer's worker.

Run: ``.venv/bin/python benchmarks/quant_error_benchmark.py`` (a few minutes: ResNet-18 at 224x224 is
prepared twice).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from explorer import load, zoo  # noqa: E402
from explorer.core.graph import ModelGraph  # noqa: E402
from explorer.isolation import worker  # noqa: E402
from explorer.runtimes.qdq_bisect import first_breaking_node  # noqa: E402
from explorer.runtimes.qdq_pairs import keep_in_float, model_file, pair_models, run_samples  # noqa: E402
from explorer.runtimes.quant_error import quant_error  # noqa: E402
from explorer.targets.prepare import judge_pipeline, prepare_for_target, prepare_pipeline  # noqa: E402

SHAPES = {"input": [1, 3, 224, 224]}
CLASSES, FEATURES = 10, 512
MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)
TINTS = np.random.default_rng(7).random((CLASSES, 3, 1, 1), dtype=np.float32)


def photos(labels: np.ndarray, seed: int, size: int = 224) -> np.ndarray:
    """Chapter 6's stand-in photos: smooth 8x8 colour blocks, sensor noise, each label's colour cast."""
    rng = np.random.default_rng(seed)
    blocks = rng.random((len(labels), 3, 8, 8), dtype=np.float32).repeat(size // 8, 2).repeat(size // 8, 3)
    noise = rng.standard_normal(blocks.shape, dtype=np.float32) * (8 / 255)
    return (np.clip(0.5 * TINTS[labels] + 0.5 * blocks + noise, 0, 1) - MEAN) / STD


def run(model: object, images: np.ndarray) -> np.ndarray:
    """Logits of each image (batch 1, as deployed), ONNX Runtime CPU at its default optimisation level."""
    if isinstance(model, ModelGraph):
        model = model_file(model)
    outputs = worker.run_on_model(
        run_samples, model, [{"input": i[None]} for i in images], optimization_level="all"
    )
    return np.concatenate([o[0] for o in outputs])


def resnet_with_head(weight: np.ndarray, bias: np.ndarray):
    """The zoo's ResNet-18 (same seed, same backbone) with its last layer's weights replaced."""
    model = zoo.build("resnet18", num_classes=len(weight))
    for tensor in model.graph.initializer:
        if tensor.name in ("fc.weight", "fc.bias"):
            value = weight if tensor.name == "fc.weight" else bias
            tensor.CopyFrom(numpy_helper.from_array(value.astype(np.float32), tensor.name))
    return model


def classifier() -> object:
    """The notebook's classifier: fc fitted by ridge regression on 40 labelled photos."""
    backbone = resnet_with_head(np.eye(FEATURES), np.zeros(FEATURES))
    labels = np.repeat(np.arange(CLASSES), 4)
    features = run(backbone, photos(labels, seed=0))
    centre = features.mean(0)
    centred = features - centre
    targets = np.eye(CLASSES)[labels] - 1 / CLASSES
    ridge = 0.1 * np.trace(centred @ centred.T) / len(centred)
    weight = targets.T @ np.linalg.solve(centred @ centred.T + ridge * np.eye(len(centred)), centred)
    return load(resnet_with_head(weight, 1 / CLASSES - weight @ centre))


def main() -> None:
    started = time.perf_counter()
    held_out_labels = np.tile(np.arange(CLASSES), 4)
    held_out = photos(held_out_labels, seed=2)
    calibration_images = photos(np.arange(CLASSES), seed=1)
    calibration = [{"input": image[None]} for image in calibration_images]
    model = classifier()

    def top1(m: object) -> float:
        return float((run(m, held_out).argmax(1) == held_out_labels).mean())

    prepared = prepare_for_target(model, "qnn-htp", input_shapes=SHAPES, calibration=calibration)
    float_graph = prepared.timeline[prepared.timeline.index("ort-quant:qnn_preprocess")].graph
    uint8 = prepared.graph
    print("setup: notebooks/06's ResNet-18 + fitted 10-class fc, prepare_for_target(qnn-htp), calibrated on")
    print(f"  {len(calibration)} photos (one per class), top-1 on {len(held_out)} held-out photos (ORT CPU)")
    print(f"float top-1: {top1(float_graph):.1%}   QDQ a8w8 (uint8/uint8, the course's): {top1(uint8):.1%}")
    worker.shutdown()

    report = quant_error(float_graph, uint8, calibration)
    worst = report.worst(3)
    print(
        f"a8w8 SQNR per node ({len(report.nodes)} tensors on {len(report.node_sqnr())} nodes, on calibration "
        f"photos): lowest activations {', '.join(f'{t.node} {t.sqnr_db:.1f} dB' for t in worst)}"
    )

    last = prepare_pipeline(
        "qnn-htp", SHAPES, calibration=calibration, activation_type="uint16", weight_type="uint16"
    )[-1:]
    hurt = judge_pipeline(float_graph, "qnn-htp", SHAPES, last).graph
    worker.shutdown()
    print("\nthe quantisation that hurts: the same QNN QDQ step with uint16 activations and uint16 weights")
    hurt_report = quant_error(float_graph, hurt, calibration)
    weights = hurt_report.worst(3, kind="weight")
    lowest = ", ".join(f"{t.tensor} ({t.node}) {t.sqnr_db:.1f} dB" for t in weights)
    print(f"a16w16u SQNR: lowest weights {lowest or 'none compared'}")
    pair = pair_models(float_graph, hurt)
    t0 = time.perf_counter()
    found = first_breaking_node(pair, None, calibration, metric="top1")
    searched = time.perf_counter() - t0
    print(
        f"first-breaking search on the {len(calibration)} calibration photos ({found.direction}, top-1 "
        f"agreement >= {found.threshold:.2f}, {found.candidates} nodes, {len(found.steps)} runs, "
        f"{searched:.1f} s):"
    )
    print(f"  {found.verdict}")
    kept = keep_in_float(pair, [found.node]) if found.node else None
    print(f"\ntop-1 on {len(held_out)} held-out photos:")
    print(f"  float                          {top1(float_graph):.1%}")
    print(f"  QDQ a16w16 (uint16 weights)    {top1(hurt):.1%}")
    if kept is not None:
        print(f"  same, {found.node} in float  {top1(kept):.1%}")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

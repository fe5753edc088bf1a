"""Default CPU schedules (real TVM): every CNN task gets one, the result agrees, tuning's gaps are filled."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from explorer import load, zoo
from explorer.isolation import worker
from explorer.lower.tvm.default_schedules import default_database
from explorer.lower.tvm.relax_frontend import run_importer
from explorer.lower.tvm.relax_target import cpu_target
from explorer.lower.tvm.relax_tuning import tuning_module
from explorer.runtimes import TvmRuntime, random_feeds, run_onnxruntime

SMALL_CNNS = {
    "resnet18": {"width": 8, "image_size": 32},
    "mobilenetv2": {"width_mult": 0.25, "image_size": 32},
}
"""The zoo CNNs at a size that compiles in seconds; their tasks are the kinds the full ones have."""


def _schedules_of(model: object, shapes: dict[str, list[int]] | None) -> dict[str, str]:
    """In the worker: how each task of the model got its default schedule."""
    from tvm.s_tir import meta_schedule as ms

    target = cpu_target()
    module = tuning_module(run_importer(model, shapes)["module"], target)
    return default_database(ms.relax_integration.extract_tasks(module, target), target).how


@pytest.mark.parametrize("name", sorted(SMALL_CNNS))
def test_every_cnn_task_gets_a_default_schedule(name: str) -> None:
    model = zoo.build(name, **SMALL_CNNS[name])
    how = worker.run(_schedules_of, model, {"input": [1, 3, 32, 32]}, step="default schedules")
    assert how and set(how.values()) <= {"heuristic", "sampled"}, how  # no task left as plain loops
    assert sum(v == "heuristic" for v in how.values()) >= len(how) // 2


def test_a_symbolic_shape_leaves_plain_loops_instead_of_failing() -> None:
    how = worker.run(_schedules_of, zoo.build("mlp"), None, step="default schedules")
    assert set(how.values()) <= {"heuristic", "sampled", "naive"} and len(how) >= 3


@pytest.mark.parametrize("name", sorted(SMALL_CNNS))
def test_pretuned_builds_fill_the_tasks_without_records_and_agree_with_onnx_runtime(
    name: str, tmp_path: Path
) -> None:
    graph = load(zoo.build(name, **SMALL_CNNS[name]))
    shapes = {"input": [1, 3, 32, 32]}
    session = TvmRuntime(pretuned=True, tuning_root=str(tmp_path)).prepare(graph, shapes)
    schedules = session.info["task_schedules"]
    assert len(schedules) == session.info["tasks"]
    assert sum(v == "record" for v in schedules.values()) == session.info["tasks_with_records"]
    assert "naive" not in schedules.values(), schedules
    feeds = random_feeds(graph.model, shapes)
    np.testing.assert_allclose(
        session.run(feeds)[0], run_onnxruntime(graph.model, feeds)[0], rtol=1e-3, atol=1e-3
    )


def test_hf_bert_dynamo_export_agrees_with_onnx_runtime_through_the_default_schedules(tmp_path: Path) -> None:
    """The smallest HF BertModel that broke: its mask's ``te_gather_nd`` got a layout from TVM's
    RewriteLayout that dropped half its indices (max |diff| 8e-4 against ONNX Runtime)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        vocab_size=64,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    ids, mask = torch.randint(0, 64, (1, 128)), torch.ones(1, 128, dtype=torch.int64)
    path = tmp_path / "bert.onnx"
    torch.onnx.export(model, (ids, mask), str(path), dynamo=True, verbose=False)
    graph = load(str(path))
    session = TvmRuntime().prepare(graph)
    assert session.info["defaults_rejected"] == {}  # the fix, not the guard, keeps the gather right
    assert session.info["task_schedules"]["te_gather_nd1"] == "heuristic"
    feeds = random_feeds(graph.model)  # the attention mask's random 0..7: some positions masked
    np.testing.assert_allclose(
        session.run(feeds)[0], run_onnxruntime(graph.model, feeds)[0], rtol=1e-4, atol=1e-5
    )

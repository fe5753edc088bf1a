"""A decoder LLM made HTP-ready: prefill (AR-N) and decode (AR-1) graphs at a fixed context, contrib ops
rewritten, A16W8 QDQ; each graph runs in ONNX Runtime and agrees with the original on the same call."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from explorer import load, zoo
from explorer.cli import main
from explorer.core.errors import UsageError
from explorer.runtimes import random_feeds, run_onnxruntime
from explorer.targets.decoder_mask import bound_masks
from explorer.targets.decoder_prepare import PreparedDecoder, prepare_decoder
from explorer.targets.decoder_split import decoder_split
from tests.conftest import digest

# the measured worst relative drift (max |diff| over the original's max |output|, any output, seeds 0-1)
# after A16W8 QDQ was 1.4% (zoo:llama prefill) and 0.14% (the int4 builder decoder's prefill)
DRIFT_BOUND = 0.05


def _static(model: onnx.ModelProto) -> bool:
    values = (*model.graph.input, *model.graph.output)
    return all(d.HasField("dim_value") for v in values for d in v.type.tensor_type.shape.dim)


def _agrees_with_original(prepared: PreparedDecoder, original: onnx.ModelProto, seed: int = 1) -> float:
    """Run each prepared graph and the original on one call of its shapes; the worst relative drift."""
    worst = 0.0
    for call in prepared.calls:
        feeds = random_feeds(call.graph.model, call.prepared.input_shapes, seed=seed)
        assert feeds["input_ids"].shape == (1, call.tokens)
        assert feeds["attention_mask"].shape == (1, prepared.split.context)
        expected = run_onnxruntime(original, feeds)
        got = run_onnxruntime(call.graph.model, feeds)
        assert [g.shape for g in got] == [e.shape for e in expected]
        scale = max(float(np.abs(e).max()) for e in expected)
        worst = max(
            worst, max(float(np.abs(g - e).max()) for g, e in zip(got, expected, strict=True)) / scale
        )
    return worst


def _check(prepared: PreparedDecoder, original: onnx.ModelProto) -> None:
    assert [c.name for c in prepared.calls] == ["prefill", "decode"]
    assert prepared.problems() == []
    for call in prepared.calls:
        steps = call.prepared.steps
        assert [s.error for s in steps] == [None] * len(steps)
        assert steps[0].coverage < 0.2 and steps[-1].coverage == 1.0 and steps[-1].partitions == 1
        assert call.fallback == ()
        model = call.graph.model
        assert _static(model)
        qdq = ("QuantizeLinear", "DequantizeLinear")  # com.microsoft's: 16-bit QDQ below opset 21
        assert not [n for n in model.graph.node if n.domain == "com.microsoft" and n.op_type not in qdq]
        assert call.graph.op_counts["QuantizeLinear"] > 0
        assert steps[-1].relative_diff is not None and steps[-1].relative_diff < DRIFT_BOUND
    assert _agrees_with_original(prepared, original) < DRIFT_BOUND


def test_the_split_sizes_prefill_and_decode_by_the_decoders_roles() -> None:
    model = zoo.build("llama")
    split = decoder_split(model, prompt_tokens=8, context=32)
    assert split.prefill["past_key_values.1.value"] == [1, 2, 24, 8]
    assert split.decode["past_key_values.1.value"] == [1, 2, 31, 8]
    assert split.prefill["attention_mask"] == split.decode["attention_mask"] == [1, 32]
    assert decoder_split(model).to_dict()["prompt_tokens"] == 64  # N <= L / 2 for the 128-token context
    with pytest.raises(UsageError, match="between 1 and the context"):
        decoder_split(model, prompt_tokens=32, context=32)
    with pytest.raises(UsageError, match="not a decoder"):
        decoder_split(zoo.build("mlp"))


def test_masks_are_bounded_for_sixteen_bit_activations() -> None:
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
    low = np.finfo(np.float32).min
    nodes = [
        helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(low, np.float32))),
        helper.make_node("Where", ["b", "x", "c"], ["w"]),
        helper.make_node("MatMul", ["w", "big"], ["y"]),
    ]
    big = numpy_helper.from_array(np.full((3, 3), -1e9, np.float32), "big")  # a "weight": left alone
    b = numpy_helper.from_array(np.array([True, False, True]), "b")
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [big, b]))
    bounded, log = bound_masks(model)
    assert numpy_helper.to_array(bounded.graph.node[0].attribute[0].t) == -100.0
    assert numpy_helper.to_array(bounded.graph.initializer[0]).min() == -1e9
    assert log == ["c: 1 values below -10000 set to -100 (read by Where)"]
    assert numpy_helper.to_array(model.graph.node[0].attribute[0].t) == low  # the input is kept


def test_zoo_llama_becomes_static_a16w8_prefill_and_decode_graphs() -> None:
    original = zoo.build("llama")
    prepared = prepare_decoder(load(original), prompt_tokens=8, context=32, samples=2)
    _check(prepared, original)
    assert prepared.prefill.past == 24 and prepared.decode.past == 31
    frame = prepared.to_frame()
    assert frame.loc[("prefill", "explorer:bound_masks"), "changed"]  # -1e9 became -100 before QDQ
    assert frame.loc[("prefill", "explorer:bound_masks"), "max_abs_diff"] == 0.0  # and changed nothing


def test_the_int4_builder_decoder_loses_its_contrib_ops_and_gains_the_htp(genai_decoder_int4: Path) -> None:
    graph = load(str(genai_decoder_int4))
    contrib = {n.op_type for n in graph.model.graph.node if n.domain == "com.microsoft"}
    assert {"MatMulNBits", "GroupQueryAttention", "GatherBlockQuantized"} <= contrib
    prepared = prepare_decoder(graph, prompt_tokens=8, context=32, samples=2)
    _check(prepared, graph.model)
    assert prepared.weight_type == "int8" and prepared.activation_type == "uint16"
    log = " ".join(prepared.decode.prepared.timeline[1].log)
    assert "GroupQueryAttention" in log and "MatMulNBits" in log


def test_the_cli_writes_both_graphs_and_leaves_the_input(genai_decoder_int4: Path, tmp_path: Path) -> None:
    before = digest(genai_decoder_int4)
    out = tmp_path / "small.onnx"
    args = ["prepare", str(genai_decoder_int4), "--ar", "8", "--context", "32", "--samples", "1"]
    assert main([*args, "--output", str(out), "--json"]) == 0
    assert digest(genai_decoder_int4) == before
    assert not out.exists()
    for name in ("prefill", "decode"):
        model = onnx.load(str(tmp_path / f"small_{name}.onnx"))
        assert _static(model)
        ids = next(v for v in model.graph.input if v.name == "input_ids")
        assert [d.dim_value for d in ids.type.tensor_type.shape.dim] == [1, 8 if name == "prefill" else 1]


def test_the_cli_prints_each_graph_and_refuses_bad_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prepare", "zoo:llama", "--ar", "4", "--context", "16", "--samples", "1"]) == 0
    text = capsys.readouterr().out
    assert "prefill AR-4 and decode AR-1 at context 16" in text
    assert "prefill: 4 new tokens after 12 cached" in text and "decode: 1 new tokens after 15 cached" in text
    assert text.count("runs on Qualcomm Hexagon NPU (HTP) as one partition") == 2
    assert main(["prepare", "zoo:llama", "--ar", "16", "--context", "16", "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert "between 1 and the context" in error["message"]
    assert main(["prepare", "zoo:mlp", "--context", "16"]) == 2

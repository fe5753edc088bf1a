"""Every node's output on ONNX Runtime and on TVM Relax (real runtimes), compared in graph order."""

from __future__ import annotations

from explorer import load
from explorer.runtimes.intermediates import compare_intermediates


def test_a_cnn_agrees_node_by_node_and_nearly_every_node_is_compared() -> None:
    graph = load("zoo:mobilenetv2")
    result = compare_intermediates(graph)
    assert result.first_disagreement is None, result.first_disagreement
    compared = {t.node for t in result.tensors}
    assert len(compared) >= 0.9 * len(graph.op_nodes()), result.not_compared
    frame = result.to_frame()
    assert frame["node"].tolist() == [n for n in graph.op_nodes() if n in compared]  # graph order
    assert frame.loc[frame["op_type"] == "Conv", "max_abs_err"].max() < 1e-3
    assert result.to_dict()["first_disagreement"] is None

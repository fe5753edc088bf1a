"""Partitioning as ONNX Runtime does it: maximal groups, no cycle through an unsupported node."""

from __future__ import annotations

from explorer import load
from explorer.targets import get_target, partition
from explorer.targets.partition import supported_groups

from .models import diamond, unknown_op


def test_no_partition_has_a_path_out_and_back_in() -> None:
    graph = load(diamond())
    groups = supported_groups(graph, {"a": True, "b": False, "c": True})
    assert groups == [["a"], ["c"]]  # a and c together would need Erf in the middle of one partition


def test_overlay_frame_and_dict() -> None:
    p = partition(load(diamond()), get_target("nnapi"))
    assert p.overlay() == {"a": "partition 1", "b": "CPU", "c": "partition 2"}
    frame = p.to_frame()
    assert list(frame["placement"]) == ["partition 1", "CPU", "partition 2"]
    d = p.to_dict()
    assert d["partitions"] == 2 and d["fallback_ops"] == {
        "Erf": {"count": 1, "reasons": d["fallback_ops"]["Erf"]["reasons"]}
    }
    assert d["coverage"] == round(2 / 3, 4)


def test_without_a_fallback_an_unsupported_node_stops_the_session() -> None:
    p = partition(load(unknown_op()), get_target("ort-cpu"))
    assert p.fallback is None and p.transitions == ()
    assert p.verdict.startswith("the session cannot be created") and "my.ops::Frobnicate" in p.verdict


def test_boundary_marks_reach_the_edge_labels_of_the_figure() -> None:
    from explorer.views.figures import EDGE_LABELS, graph_figure
    from explorer.views.layout import layered

    from .models import chain

    graph = load(chain("Erf"))
    p = partition(graph, get_target("nnapi"))
    marks = p.boundary_marks()
    assert marks == {"a": "⇄ CPU", "b": "⇄ partition 2"}
    fig = graph_figure(graph, layered(graph), p.overlay(), edge_marks=marks)
    texts = list(
        fig.data[EDGE_LABELS].meta["text"] if fig.data[EDGE_LABELS].meta else fig.data[EDGE_LABELS].text
    )
    assert any("⇄ CPU" in t for t in texts) and any("⇄ partition 2" in t for t in texts)

"""Qualcomm HTP: the project's table (with its sources), static shapes, constant inputs, dtypes."""

from __future__ import annotations

from explorer import load, zoo
from explorer.targets import get_target, partition
from explorer.targets.qnn_htp import qnn_table

from .models import chain, reshape_from_shape


def test_the_table_keeps_its_sources_and_dates() -> None:
    table = qnn_table()
    keys = {s["key"] for s in table.info["sources"]}
    assert {"MS", "QQ", "D1", "D2", "RN", "QC"} <= keys
    assert all(row.sources for row in table.ops.values())
    assert table.date >= "2026-01-01" and "HTP" in table.sources_text()


def test_a_dynamic_shape_keeps_every_node_off_the_htp() -> None:
    target = get_target("qnn-htp")
    dynamic = partition(load(zoo.build("resnet18")), target)
    assert dynamic.supported_nodes == 0 and dynamic.partition_count == 0
    reasons = {r.kind for s in dynamic.support.values() for r in s.blocking}
    assert reasons == {"dynamic shape"}
    fixed = partition(load(zoo.build("resnet18"), input_shapes={"input": [1, 3, 224, 224]}), target)
    assert fixed.coverage == 1.0 and fixed.partition_count == 1
    notes = {r.text for s in fixed.support.values() for r in s.reasons if r.kind == "note"}
    assert any("FP16" in n for n in notes)  # a float model runs, at FP16 precision


def test_a_shape_computed_at_run_time_and_a_missing_op() -> None:
    support = get_target("qnn-htp").support(load(reshape_from_shape()))
    assert [r.kind for r in support["reshape"].blocking] == ["constant input"]
    erf = get_target("qnn-htp").support(load(chain("Erf")))["middle"]
    assert erf.blocking[0].kind == "op missing"

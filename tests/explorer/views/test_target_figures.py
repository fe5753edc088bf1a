"""Coverage heatmaps and partition colours."""

from __future__ import annotations

from explorer import load, zoo
from explorer.targets import coverage, get_target, partition
from explorer.views.target_figures import (
    FALLBACK_COLOR,
    coverage_heatmap,
    op_support_heatmap,
    partition_palette,
)


def test_heatmaps_across_ops_and_models() -> None:
    reports = {
        name: coverage(load(zoo.build(name)), ["ort-cpu", "coreml-mlprogram"]) for name in ("mlp", "resnet18")
    }
    fig = coverage_heatmap(reports)
    assert list(fig.data[0].y) == ["mlp", "resnet18"] and list(fig.data[0].x) == [
        "ort-cpu",
        "coreml-mlprogram",
    ]
    assert fig.data[0].z[1][0] == 1.0 and fig.data[0].z[1][1] < 1.0
    ops = op_support_heatmap(reports["resnet18"])
    row = list(ops.data[0].y).index("BatchNormalization")
    assert ops.data[0].z[row] == [1.0, 0.0]


def test_each_partition_its_own_colour_and_the_fallback_grey() -> None:
    p = partition(load(zoo.build("resnet18")), get_target("coreml-mlprogram"))
    palette = partition_palette(p)
    assert palette["CPU"] == FALLBACK_COLOR and len(palette) == p.partition_count + 1
    assert set(p.overlay().values()) <= set(palette)

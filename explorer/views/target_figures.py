"""Figures of op support: heatmaps of coverage across targets and models, and partition colours.

Pure functions from :mod:`explorer.targets` results to plotly figures and palettes (the
CoveragePanel only shows them): :func:`op_support_heatmap` (rows: the model's op types,
columns: targets, cells: the supported share of that op's nodes), :func:`coverage_heatmap`
(rows: models, columns: targets, cells: coverage by nodes), and :func:`partition_palette`
(each partition its own colour, the CPU fallback grey: :mod:`explorer.targets.palette`, which the
placement written for Model Explorer shares) for the graph's partition overlay.

Examples
--------
>>> from explorer import load
>>> from explorer.targets import coverage
>>> fig = op_support_heatmap(coverage(load("zoo:mlp"), ["ort-cpu", "coreml-mlprogram"]))
>>> fig.data[0].type, list(fig.data[0].x)
('heatmap', ['ort-cpu', 'coreml-mlprogram'])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from explorer.targets.palette import FALLBACK_COLOR, PARTITION_COLORS, partition_palette

if TYPE_CHECKING:
    from explorer.targets.coverage import CoverageReport

__all__ = [
    "op_support_heatmap",
    "coverage_heatmap",
    "partition_palette",
    "FALLBACK_COLOR",
    "PARTITION_COLORS",
]

_SCALE = [[0.0, "#f2d0cc"], [0.5, "#f6e7a8"], [1.0, "#8bc48a"]]  # none, some, all supported


def _heatmap(
    z: list[list[float | None]], x: list[str], y: list[str], text: list[list[str]], title: str
) -> go.Figure:
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=x,
            y=y,
            text=text,
            texttemplate="%{text}",
            colorscale=_SCALE,
            zmin=0.0,
            zmax=1.0,
            hovertemplate="%{y} on %{x}: %{text}<extra></extra>",
            colorbar={"title": "supported", "tickformat": ".0%"},
        )
    )
    fig.update_layout(
        title=title,
        height=max(260, 60 + 22 * len(y)),
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        yaxis={"autorange": "reversed", "automargin": True},
        xaxis={"side": "top", "automargin": True},
        plot_bgcolor="white",
    )
    return fig


def op_support_heatmap(report: CoverageReport) -> go.Figure:
    """Rows: the model's op types; columns: targets; cells: supported nodes of that op (share and count).

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.targets import coverage
    >>> fig = op_support_heatmap(coverage(load("zoo:resnet18"), ["coreml-mlprogram"]))
    >>> dict(zip(fig.data[0].y, fig.data[0].text))["BatchNormalization"]
    ['0/20']
    """
    table = report.op_table()
    fractions = report.op_fractions()
    ops, targets = list(table.index), list(table.columns)
    z = [[_none_if_nan(fractions.loc[op, t]) for t in targets] for op in ops]
    text = [[str(table.loc[op, t]) for t in targets] for op in ops]
    return _heatmap(z, targets, ops, text, f"op support of {report.source}")


def coverage_heatmap(reports: Mapping[str, CoverageReport]) -> go.Figure:
    """Rows: models; columns: targets; cells: coverage by node count (and the partitions).

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.targets import coverage
    >>> fig = coverage_heatmap({"mlp": coverage(load("zoo:mlp"), ["ort-cpu"])})
    >>> fig.data[0].z, fig.data[0].text
    (([1.0],), (['100% (1)'],))
    """
    models = list(reports)
    targets = list(dict.fromkeys(t.target for r in reports.values() for t in r.targets))
    z, text = [], []
    for model in models:
        by_target = {t.target: t for t in reports[model].targets}
        z.append([by_target[t].coverage if t in by_target else None for t in targets])
        text.append(
            [
                f"{by_target[t].coverage:.0%} ({by_target[t].partitions})" if t in by_target else ""
                for t in targets
            ]
        )
    return _heatmap(z, targets, models, text, "coverage by nodes (partitions)")


def _none_if_nan(value: float) -> float | None:
    return None if value != value else float(value)

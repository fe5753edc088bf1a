"""The HTML report: self-contained, atomic, with the pipeline when asked."""

from __future__ import annotations

from pathlib import Path

from explorer.views.report import build_html, save


def test_report_is_self_contained(tmp_path: Path) -> None:
    path = save("zoo:mlp", tmp_path / "mlp.html")
    text = path.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert "<script src=" not in text and len(text) > 3_000_000  # plotly.js inline, nothing to fetch
    assert text.count('class="plotly-graph-div"') == 2  # op histogram and graph
    assert not list(tmp_path.glob(".*tmp"))


def test_report_with_a_pipeline_shows_steps_and_the_final_diff(tmp_path: Path) -> None:
    text = save("zoo:resnet18", tmp_path / "r.html", pipeline="fuse_bn_into_conv").read_text()
    assert "fuse_bn_into_conv" in text and "oge-final" in text and "oge-timeline" in text


def test_build_html_titles() -> None:
    from explorer import load

    assert "<title>My model</title>" in build_html(load("zoo:mlp"), title="My model")

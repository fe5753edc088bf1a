"""Layouts, styles and the CSS a GraphView shares with the kernel's other views: fewer models to send."""

from __future__ import annotations

import ipywidgets as w

from explorer import load
from widgets import GraphView
from widgets.shared_models import shared, shared_layout


def _models() -> int:
    return len(w.Widget._active_widgets)


def test_a_second_view_sends_only_its_own_models() -> None:
    graph = load("zoo:resnet18")
    GraphView(graph)
    before = _models()
    second = GraphView(graph)
    made = _models() - before
    assert made <= 20, made  # 40 when every control brought its own Layout and style
    third = GraphView(graph)
    assert third.next_match.layout is second.next_match.layout  # one model, two views
    third.back_button.layout.display = None  # a layout a view changes stays its own
    assert second.back_button.layout.display == "none"


def test_a_closed_shared_model_is_made_again() -> None:
    layout = shared_layout(width="123px")
    layout.close()
    again = shared_layout(width="123px")
    assert again is not layout and again.comm is not None and again.width == "123px"
    assert shared(("test-key",), w.HTML) is shared(("test-key",), w.HTML)

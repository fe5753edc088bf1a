"""GraphFigureWidget: plotly's FigureWidget with the shared bundle and a one-line repr."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from widgets import GraphView
from widgets.figure_widget import GraphFigureWidget


def test_a_figure_and_the_views_that_hold_it_show_a_one_line_text() -> None:
    view = GraphView("zoo:resnet18")
    figure_text = repr(view.figure)
    assert figure_text.startswith("GraphFigureWidget(") and "scatter" in figure_text
    assert "650 px" in figure_text
    assert len(figure_text) < 120  # not plotly's JSON dump of the figure (tens of KB)
    plain = view._repr_mimebundle_()["text/plain"]
    assert plain.startswith("GraphView(zoo:resnet18: ") and "items drawn" in plain
    assert view.figure.to_dict()["data"], "the whole figure is still there for whoever asks"


def test_an_empty_figure_says_so() -> None:
    assert repr(GraphFigureWidget()) == "GraphFigureWidget(0 traces; height auto)"
    assert "heatmap" in repr(GraphFigureWidget(go.Figure(go.Heatmap(z=[[1]]))))


def test_a_checked_figure_is_taken_as_it_is_and_every_later_edit_is_checked_and_sent() -> None:
    figure = go.Figure([go.Scatter(x=[0, 1], y=[1, 0], marker={"color": "red"}), go.Bar(y=[2])])
    widget = GraphFigureWidget(figure)
    first = widget.to_dict()["data"][0]
    assert first["x"] == [0, 1] and first["marker"] == {"color": "red"}
    sent: list[tuple[str, list[str]]] = []
    widget._send_restyle_msg = lambda data, trace_indexes=None, source_view_id=None: sent.append(
        ("restyle", sorted(data))
    )
    widget._send_relayout_msg = lambda data, source_view_id=None: sent.append(("relayout", sorted(data)))
    widget.data[0].x = [2, 3]
    widget.data[0].marker.line.width = 3
    widget.layout.xaxis.range = [0, 1]
    assert sent == [("restyle", ["x"]), ("restyle", ["marker.line.width"]), ("relayout", ["xaxis.range"])]
    with pytest.raises(ValueError):
        widget.data[0].marker.color = "not a colour"
    with pytest.raises(ValueError):
        widget.layout.height = "tall"
    with pytest.raises(ValueError):
        GraphFigureWidget({"data": [{"type": "scatter", "colour": "red"}]})  # a dict is checked here

"""Widgets drawn from their stored state, for the rendered course (no kernel, no CDN)."""

from __future__ import annotations

import base64

import nbformat
import numpy as np

from widgets.offline_html import (
    WIDGET_STATE_MIME,
    WIDGET_VIEW_MIME,
    make_widgets_static,
    render_offline_page,
    static_widget_html,
)


def _figure_state(xs: np.ndarray) -> dict:
    """A plotly FigureWidget's stored state: its x array's bytes kept apart, as nbclient stores it."""
    return {
        "model_name": "AnyModel",
        "state": {
            "_widget_data": [
                {"type": "scatter", "x": {"dtype": "float64", "shape": [len(xs)]}, "y": [1, 2, 3]}
            ],
            "_widget_layout": {"height": 300},
        },
        "buffers": [
            {
                "path": ["_widget_data", 0, "x", "buffer"],
                "encoding": "base64",
                "data": base64.b64encode(xs.tobytes()).decode(),
            }
        ],
    }


def test_a_figure_gets_its_arrays_back_from_the_buffers() -> None:
    state = {"f": _figure_state(np.array([10.5, 20.5, 30.5]))}
    html = static_widget_html(state, "f")
    assert 'class="oge-static-figure"' in html and 'id="oge-static-figure-f"' in html
    assert '"x":[10.5,20.5,30.5]' in html


def test_containers_controls_and_hidden_children() -> None:
    state = {
        "box": {
            "model_name": "HBoxModel",
            "state": {"children": ["IPY_MODEL_a", "IPY_MODEL_b", "IPY_MODEL_c"]},
        },
        "a": {"model_name": "ButtonModel", "state": {"description": "run"}},
        "b": {"model_name": "IntSliderModel", "state": {"description": "step", "value": 3}},
        "c": {"model_name": "HTMLModel", "state": {"value": "secret", "layout": "IPY_MODEL_l"}},
        "l": {"model_name": "LayoutModel", "state": {"display": "none"}},
        "t": {"model_name": "TabModel", "state": {"children": ["IPY_MODEL_box"], "titles": ["Graph"]}},
    }
    html = static_widget_html(state, "t")
    assert "Graph" in html and "<button" in html and "disabled>run</button>" in html
    assert "<code>3</code>" in html and "secret" not in html


def test_an_unknown_widget_says_it_needs_a_kernel() -> None:
    html = static_widget_html({"x": {"model_name": "ColorPickerModel", "state": {}}}, "x")
    assert "ColorPickerModel" in html and "running kernel" in html


def test_a_page_loads_no_widget_manager_and_plotly_once() -> None:
    notebook = nbformat.v4.new_notebook()
    state = {"f": _figure_state(np.arange(3.0)), "g": _figure_state(np.arange(3.0))}
    notebook.metadata["widgets"] = {WIDGET_STATE_MIME: {"state": state}}
    cells = []
    for model_id in ("f", "g"):
        cell = nbformat.v4.new_code_cell("view")
        cell.outputs = [nbformat.v4.new_output("display_data", {WIDGET_VIEW_MIME: {"model_id": model_id}})]
        cells.append(cell)
    notebook.cells = cells
    page = render_offline_page(notebook, "two figures")
    assert "html-manager" not in page and "require.min.js" not in page
    assert page.count("window.PlotlyConfig") == 1
    assert page.count('class="oge-static-figure"') == 2


def test_a_widget_whose_state_was_not_stored_is_named() -> None:
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("view")
    cell.outputs = [nbformat.v4.new_output("display_data", {WIDGET_VIEW_MIME: {"model_id": "lost"}})]
    notebook.cells = [cell]
    assert make_widgets_static(notebook) == 1
    assert "was not stored" in notebook.cells[0].outputs[0]["data"]["text/html"]

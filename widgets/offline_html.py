"""Widgets as static HTML, for pages read with no kernel and no network (the rendered course).

An executed notebook keeps its widgets' state (``nbclient``'s ``store_widget_state``), and
nbconvert's HTML page would draw them with ``@jupyter-widgets/html-manager`` loaded from a CDN,
which then loads ``anywidget`` from a CDN too; and even then the explorer's figures would stay
blank, since their plotly.js comes over the kernel's comm (:mod:`widgets.plotly_bundle`), which a
page has not. So the pages draw each widget from its stored state here instead, in Python: a
figure becomes a plotly plot (zoom, pan and hover work; plotly.js inline, once per page), the
boxes, tabs and accordions their children, text and HTML their value, and a control (button,
dropdown, slider, ...) a disabled copy showing its value. What needs the kernel (a click that
opens a node's details, a pass stepped) does nothing, as in any page without a kernel.

Examples
--------
>>> state = {
...     "b": {"model_name": "HTMLModel", "state": {"value": "<b>before</b>"}},
...     "v": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_b"]}},
... }
>>> static_widget_html(state, "v")  # doctest: +ELLIPSIS
'<div class="oge-static-vbox" style="display:flex;flex-direction:column">...<b>before</b></div></div>'
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "STATIC_WIDGET_CSS",
    "WIDGET_VIEW_MIME",
    "WIDGET_STATE_MIME",
    "static_widget_html",
    "make_widgets_static",
    "render_offline_page",
]

WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
"""The mimetype of a displayed widget in a notebook's outputs."""

WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"
"""The key of the stored widget state in a notebook's ``metadata.widgets``."""

STATIC_WIDGET_CSS = """<style>
.oge-static-hbox > * { margin-right: 6px; }
.oge-static-control { font-size: 12px; margin: 2px 0; color: #333; }
.oge-static-control label { margin-right: 6px; }
.oge-static-tab-title { font-weight: bold; border-bottom: 1px solid #ccc; margin: 6px 0 2px 0; }
.oge-static-note { font-size: 11px; color: #777; font-style: italic; }
.oge-static-hbox > .oge-static-figure, .oge-static-hbox > .oge-static-vbox { flex: 1 1 0; min-width: 0; }
</style>"""
"""Styles of the static widgets, once per page."""

_REFERENCE = re.compile(r"^IPY_MODEL_(.+)$")
_CONTAINERS = {"VBoxModel": "column", "BoxModel": "column", "GridBoxModel": "column", "HBoxModel": "row"}
_TITLED = {"TabModel", "AccordionModel", "StackModel"}
_TEXT_VALUES = {"HTMLModel", "HTMLMathModel", "LabelModel"}
_CHOICES = {"DropdownModel", "SelectModel", "RadioButtonsModel", "ToggleButtonsModel", "SelectionSliderModel"}
_INPUTS = {
    "TextModel", "TextareaModel", "IntTextModel", "FloatTextModel", "BoundedIntTextModel",
    "BoundedFloatTextModel", "IntSliderModel", "FloatSliderModel", "FloatLogSliderModel",
    "IntRangeSliderModel", "FloatRangeSliderModel", "CheckboxModel", "ToggleButtonModel",
    "PasswordModel", "ComboboxModel",
}  # fmt: skip
_PROGRESS = {"IntProgressModel", "FloatProgressModel"}


def _model_id(reference: Any) -> str | None:
    match = _REFERENCE.match(reference) if isinstance(reference, str) else None
    return match.group(1) if match else None


def _label(state: Mapping[str, Any]) -> str:
    description = state.get("description") or ""
    return f"<label>{html.escape(str(description))}</label>" if description else ""


def _control(values: Mapping[str, Any], inner: str, css_class: str = "oge-static-control") -> str:
    return f'<div class="{css_class}">{_label(values)}{inner}</div>'


def _options(labels: list[str], selected: set[Any]) -> str:
    return "".join(
        f"<option{' selected' if index in selected else ''}>{html.escape(label)}</option>"
        for index, label in enumerate(labels)
    )


def _with_buffers(values: Mapping[str, Any], buffers: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The state with its binary buffers put back: plotly's arrays as numpy arrays again.

    A stored widget state keeps each array's bytes apart, as ``{"path": [...], "data": base64}``,
    and leaves ``{"dtype": ..., "shape": [...]}`` where the array was.
    """
    import base64
    import copy

    import numpy as np

    restored = copy.deepcopy(dict(values))
    for buffer in buffers:
        path = list(buffer.get("path") or [])
        if len(path) < 2 or buffer.get("encoding", "base64") != "base64":
            continue
        holder: Any = restored
        try:
            for key in path[:-2]:
                holder = holder[key]
            spec = holder[path[-2]]
            raw = base64.b64decode(buffer.get("data") or "")
            holder[path[-2]] = np.frombuffer(raw, dtype=spec["dtype"]).reshape(spec.get("shape") or -1)
        except (KeyError, IndexError, TypeError, ValueError):
            continue  # a buffer that is not one of plotly's arrays: the figure draws without it
    return restored


def _figure_html(state: Mapping[str, Any], model_id: str, buffers: list[Mapping[str, Any]]) -> str:
    from plotly.io import to_html

    state = _with_buffers(state, buffers)
    figure = {"data": state.get("_widget_data") or [], "layout": state.get("_widget_layout") or {}}
    config = state.get("_config") or {}
    return to_html(
        figure,
        include_plotlyjs=False,
        full_html=False,
        config=config,
        div_id=f"oge-static-figure-{model_id}",
        validate=False,
    )


def _output_html(outputs: list[Mapping[str, Any]]) -> str:
    parts = []
    for output in outputs:
        data = output.get("data") or {}
        if "text/html" in data:
            parts.append(_joined(data["text/html"]))
        elif "image/png" in data:
            parts.append(f'<img src="data:image/png;base64,{_joined(data["image/png"]).strip()}">')
        elif "text/plain" in data:
            parts.append(f"<pre>{html.escape(_joined(data['text/plain']))}</pre>")
        elif output.get("output_type") == "stream":
            parts.append(f"<pre>{html.escape(_joined(output.get('text', '')))}</pre>")
    return "".join(parts)


def _joined(text: str | list[str]) -> str:
    return "".join(text) if isinstance(text, list) else str(text)


def static_widget_html(state: Mapping[str, Mapping[str, Any]], model_id: str, _depth: int = 0) -> str:
    """Draw one widget, and the widgets inside it, from a notebook's stored widget state.

    Parameters
    ----------
    state
        The ``state`` mapping of ``metadata.widgets[WIDGET_STATE_MIME]``: model id to
        ``{"model_name": ..., "state": {...}}``.
    model_id
        The id of the widget to draw (a displayed output's ``model_id``).

    Returns
    -------
    str
        An HTML fragment: plotly figures as ``div``s that need plotly.js on the page (see
        :func:`make_widgets_static`), every other widget as plain HTML.

    Examples
    --------
    >>> state = {"d": {"model_name": "DropdownModel",
    ...                "state": {"description": "pass", "_options_labels": ["a", "b"], "index": 1}}}
    >>> "<option selected>b</option>" in static_widget_html(state, "d")
    True
    >>> static_widget_html({}, "gone")
    ''
    """
    entry = state.get(model_id)
    if entry is None or _depth > 64:
        return ""
    name = entry.get("model_name", "")
    values = entry.get("state") or {}
    layout_id = _model_id(values.get("layout"))
    layout = (state.get(layout_id) or {}).get("state", {}) if layout_id else {}
    if layout.get("display") == "none" or layout.get("visibility") == "hidden":
        return ""

    def children() -> list[str]:
        drawn = (
            static_widget_html(state, child, _depth + 1)
            for child in map(_model_id, values.get("children") or [])
        )
        return [part for part in drawn if part]

    if "_widget_data" in values and "_widget_layout" in values:
        figure = _figure_html(values, model_id, list(entry.get("buffers") or []))
        return f'<div class="oge-static-figure">{figure}</div>'
    if name in _CONTAINERS:
        kind = name[:-5].lower()
        return (
            f'<div class="oge-static-{kind}" style="display:flex;flex-direction:{_CONTAINERS[name]}">'
            + "".join(children())
            + "</div>"
        )
    if name in _TITLED:
        titles = list(values.get("titles") or [])
        parts = []
        for index, child in enumerate(map(_model_id, values.get("children") or [])):
            drawn = static_widget_html(state, child, _depth + 1) if child else ""
            title = titles[index] if index < len(titles) and titles[index] else f"({index + 1})"
            parts.append(f'<div class="oge-static-tab-title">{html.escape(str(title))}</div>{drawn}')
        return f'<div class="oge-static-tabs">{"".join(parts)}</div>'
    if name in _TEXT_VALUES:
        value = str(values.get("value") or "")
        text = value if name != "LabelModel" else html.escape(value)
        return _control(values, text, "oge-static-html") if text or values.get("description") else ""
    if name == "ButtonModel":
        description = html.escape(str(values.get("description") or ""))
        return f'<button class="oge-static-control" disabled>{description}</button>'
    if name in _CHOICES:
        labels = [str(label) for label in values.get("_options_labels") or []]
        return _control(values, f"<select disabled>{_options(labels, {values.get('index')})}</select>")
    if name == "SelectMultipleModel":
        labels = [str(label) for label in values.get("_options_labels") or []]
        chosen = set(values.get("index") or [])
        return _control(values, f"<select multiple disabled>{_options(labels, chosen)}</select>")
    if name in _INPUTS:
        value = values.get("value")
        if isinstance(value, bool):
            shown = "&#10003;" if value else "&#10007;"
        else:
            shown = html.escape(
                json.dumps(value) if isinstance(value, list) else ("" if value is None else str(value))
            )
        return _control(values, f"<code>{shown}</code>")
    if name in _PROGRESS:
        value, top = values.get("value", 0), values.get("max", 100)
        return _control(values, f'<progress value="{value}" max="{top}"></progress>')
    if name == "OutputModel":
        return f'<div class="oge-static-output">{_output_html(values.get("outputs") or [])}</div>'
    if name.endswith("StyleModel") or name == "LayoutModel":
        return ""
    return (
        f'<div class="oge-static-note">[{html.escape(name or "widget")}: shown with a running kernel]</div>'
    )


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return (
        "<script type=\"text/javascript\">window.PlotlyConfig = {MathJaxConfig: 'local'};</script>"
        f'<script type="text/javascript">{get_plotlyjs()}</script>'
    )


def _has_plotly_js(notebook: Any) -> bool:
    for cell in notebook.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if "window.PlotlyConfig" in _joined((output.get("data") or {}).get("text/html", "")):
                return True
    return False


def make_widgets_static(notebook: Any) -> int:
    """Replace every displayed widget of an executed notebook with its static HTML, in place.

    Each widget-view output becomes a ``text/html`` output drawn by :func:`static_widget_html`;
    the first one that holds a figure brings plotly.js (unless a plotly output of the notebook
    already inlines it), and the stored widget state is dropped, so nbconvert's page loads no
    widget manager from a CDN.

    Parameters
    ----------
    notebook
        An executed ``nbformat`` notebook, with widget state stored in its metadata.

    Returns
    -------
    int
        How many widget outputs were replaced.

    Examples
    --------
    >>> import nbformat
    >>> notebook = nbformat.v4.new_notebook()
    >>> notebook.metadata["widgets"] = {WIDGET_STATE_MIME: {"state": {
    ...     "h": {"model_name": "HTMLModel", "state": {"value": "<i>hi</i>"}}}}}
    >>> cell = nbformat.v4.new_code_cell("w")
    >>> cell.outputs = [nbformat.v4.new_output("display_data", {WIDGET_VIEW_MIME: {"model_id": "h"}})]
    >>> notebook.cells = [cell]
    >>> make_widgets_static(notebook), "widgets" in notebook.metadata
    (1, False)
    >>> "<i>hi</i>" in notebook.cells[0].outputs[0]["data"]["text/html"]
    True
    """
    widgets = notebook.metadata.pop("widgets", None) or {}
    state = (widgets.get(WIDGET_STATE_MIME) or {}).get("state") or {}
    need_plotly = not _has_plotly_js(notebook)
    styled = False
    replaced = 0
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            data = output.get("data") or {}
            view = data.get(WIDGET_VIEW_MIME)
            if not view:
                continue
            body = static_widget_html(state, str(view.get("model_id", "")))
            if not body:
                body = '<div class="oge-static-note">[a widget whose state was not stored]</div>'
            prefix = "" if styled else STATIC_WIDGET_CSS
            styled = True
            if need_plotly and "oge-static-figure" in body:
                prefix += _plotly_js()
                need_plotly = False
            output["data"] = {"text/html": prefix + body, "text/plain": data.get("text/plain", "")}
            replaced += 1
    return replaced


_OFF_MACHINE_SCRIPT = re.compile(r'<script src="https?://[^"]*require[^"]*"></script>\s*')


def render_offline_page(notebook: Any, name: str) -> str:
    """An executed notebook as one HTML page that draws its widgets and figures with no network.

    The widgets become static (:func:`make_widgets_static`), and the require.js that nbconvert's
    page loads from a CDN is left out (nothing on the page needs it then). MathJax, for the few
    formulas in markdown, still comes from its CDN when there is one: offline, they read as TeX.

    Parameters
    ----------
    notebook
        An executed ``nbformat`` notebook (changed in place: its widgets become HTML).
    name
        The page's title when the notebook has none.

    Returns
    -------
    str
        The page's HTML.

    Examples
    --------
    >>> import nbformat
    >>> page = render_offline_page(nbformat.v4.new_notebook(), "empty")
    >>> "<title>empty</title>" in page, "require.min.js" in page
    (True, False)
    """
    from nbconvert import HTMLExporter

    make_widgets_static(notebook)
    body, _ = HTMLExporter().from_notebook_node(notebook, resources={"metadata": {"name": name}})
    return _OFF_MACHINE_SCRIPT.sub("", body)

"""An overlay (:class:`~explorer.overlays.value.Overlay`, another tool's data or ours) as colourings
of our graph, as rows of the details panel and as a report section, a measured placement against
the predicted one as a table (:func:`placement_agreement_html`) and a file that could not be read as
one line (:func:`could_not_read_html`): pure functions, the widgets and the report only show them.

Time and numeric values are continuous (the graph's colour scale); compute unit, provider and
string values (placements, reasons) are categories, each in the colour the file gives its nodes
(else a stable colour per category).

Examples
--------
>>> from explorer.overlays.value import NodeValue, Overlay
>>> overlay = Overlay("ai-hub-profile", None, "m", {"a": NodeValue("a", time_ms=2.0, compute_unit="NPU")})
>>> {name: values for name, (values, _) in overlay_colorings(overlay).items()}
{'ai-hub-profile: time_ms': {'a': 2.0}, 'ai-hub-profile: compute_unit': {'a': 'NPU'}}
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from explorer.views.tables import html_table

if TYPE_CHECKING:
    from explorer.overlays.agreement import NodeAgreement, PlacementAgreement
    from explorer.overlays.value import NodeValue, Overlay

__all__ = [
    "COLORED_FIELDS",
    "overlay_colorings",
    "overlay_rows",
    "overlay_details_html",
    "overlay_section",
    "placement_agreement_html",
    "could_not_read_html",
]

COLORED_FIELDS = ("time_ms", "value", "compute_unit", "provider")
"""The fields of an overlay the graph can be coloured by, in the order the colour menu lists them."""

_SHOWN = 15


def _label(overlay: Overlay) -> str:
    return overlay.name or overlay.format


def overlay_colorings(overlay: Overlay) -> dict[str, tuple[dict[str, Any], dict[str, str] | None]]:
    """Colour-menu name -> (node -> value or category, category -> colour or None), one per field
    of :data:`COLORED_FIELDS` the overlay fills.

    Examples
    --------
    >>> from explorer.overlays.value import NodeValue, Overlay
    >>> values = {"a": NodeValue("a", value="CPU", color="#b4b4b4")}
    >>> overlay = Overlay("p", None, "m", values, name="placement")
    >>> overlay_colorings(overlay)
    {'placement': ({'a': 'CPU'}, {'CPU': '#b4b4b4'})}
    """
    found: dict[str, tuple[dict[str, Any], dict[str, str] | None]] = {}
    for field in COLORED_FIELDS:
        values = overlay.by_node(field)
        if not values:
            continue
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values.values())
        palette = None
        if not numeric:
            values = {node: str(v) for node, v in values.items()}
            colors = overlay.by_node("color")
            palette = {values[n]: colors[n] for n in values if n in colors} or None
        found[f"{_label(overlay)}: {field}"] = (values, palette)
    if len(found) == 1 and overlay.name:  # one colouring: the overlay's own name
        ((_, item),) = found.items()
        return {overlay.name: item}
    return found


def overlay_rows(value: NodeValue) -> list[tuple[str, str]]:
    """A node's overlay fields as (name, text) rows (times in ms with 3 decimals).

    Examples
    --------
    >>> from explorer.overlays.value import NodeValue
    >>> overlay_rows(NodeValue("a", time_ms=1.23456, provider="CPUExecutionProvider", entries=("k",)))
    [('time_ms', '1.235 ms'), ('provider', 'CPUExecutionProvider'), ('entries', 'k')]
    """
    rows = []
    for key, item in value.to_dict().items():
        if key in ("node", "color", "text_color"):
            continue
        if key == "time_ms":
            text = f"{item:.3f} ms"
        elif isinstance(item, list):
            text = ", ".join(str(i) for i in item)
        else:
            text = str(item)
        rows.append((key, text))
    return rows


def overlay_details_html(overlay: Overlay, node: str) -> str:
    """The details panel's overlay section for ``node`` (empty when the overlay has nothing on it).

    Examples
    --------
    >>> from explorer.overlays.value import NodeValue, Overlay
    >>> overlay = Overlay("ort-profile", "p.json", "m", {"a": NodeValue("a", time_ms=1.0)})
    >>> 'class="oge-overlay"' in overlay_details_html(overlay, "a"), overlay_details_html(overlay, "b")
    (True, '')
    """
    value = overlay.values.get(node)
    if value is None:
        return ""
    rows = "".join(
        f"<tr><td>{html.escape(k)}</td><td><code>{html.escape(v)}</code></td></tr>"
        for k, v in overlay_rows(value)
    )
    source = f" <small>({html.escape(overlay.source)})</small>" if overlay.source else ""
    return (
        f'<div class="oge-overlay"><b>overlay: {html.escape(_label(overlay))}</b>{source}'
        f'<table class="oge-details">{rows}</table></div>'
    )


def overlay_section(overlay: Overlay, shown: int = _SHOWN) -> str:
    """A report's HTML section: the overlay's counts, its top nodes (by time, else by value) and the
    names that did not map, with why.

    Examples
    --------
    >>> from explorer.overlays.value import NodeValue, Overlay, Unmapped
    >>> overlay = Overlay("ort-profile", "p.json", "m", {"a": NodeValue("a", time_ms=1.0)},
    ...                   (Unmapped("x", "no node of the model is named 'x'", 0.5),), total_ms=1.5)
    >>> text = overlay_section(overlay)
    >>> "oge-overlay-top" in text and "no node of the model is named" in text and "66.7%" in text
    True
    """
    timed = [v for v in overlay.values.values() if v.time_ms is not None]
    if timed:
        top = sorted(timed, key=lambda v: -(v.time_ms or 0.0))[:shown]
        what = "slowest nodes"
    else:
        numbers = [v for v in overlay.values.values() if isinstance(v.value, (int, float))]
        top = (
            sorted(numbers, key=lambda v: -float(v.value or 0))[:shown]
            or list(overlay.values.values())[:shown]
        )
        what = "top nodes"
    share = overlay.time_share_mapped
    facts = [
        f"format <code>{html.escape(overlay.format)}</code>",
        f"{overlay.mapped_nodes} nodes mapped",
        f"{len(overlay.unmapped)} names unmapped",
    ]
    if share is not None:
        facts.append(f"{share:.1%} of the file's time on the model's nodes")
    rows = "".join(
        "<tr><td><code>{}</code></td><td>{}</td></tr>".format(
            html.escape(v.node), html.escape("; ".join(f"{k} {t}" for k, t in overlay_rows(v)))
        )
        for v in top
    )
    unmapped = "".join(
        f"<li><code>{html.escape(u.name)}</code>: {html.escape(u.reason)}</li>"
        for u in overlay.unmapped[:shown]
    )
    more = len(overlay.unmapped) - shown
    if more > 0:
        unmapped += f"<li>... {more} more</li>"
    source = f" from <code>{html.escape(overlay.source)}</code>" if overlay.source else ""
    return (
        f'<div class="oge-overlay-section"><p>{html.escape(_label(overlay))}{source}: {", ".join(facts)}.</p>'
        f'<h3>{what}</h3><table class="oge-overlay-top">{rows}</table>'
        + (f'<h3>unmapped</h3><ul class="oge-overlay-unmapped">{unmapped}</ul>' if unmapped else "")
        + "</div>"
    )


def could_not_read_html(label: str, err: BaseException, path: str | os.PathLike[str] | None = None) -> str:
    """The line that says a file (or parsed value) could not be read, and why: ``could not read LABEL:
    REASON``, the reason naming the file as ``label`` does (not as ``path``, e.g. an upload's private
    copy) and never a traceback.

    Parameters
    ----------
    label : str
        How the user knows the file: its path, or the name of the file uploaded.
    err : BaseException
        What reading it raised.
    path : str or path-like, optional
        The path read, where it is a file: a reason starting with it loses it, and elsewhere in the
        reason it becomes ``label``.

    Examples
    --------
    >>> could_not_read_html("hub.json", ValueError("/tmp/x/hub.json: not valid JSON"), "/tmp/x/hub.json")
    '<b>could not read</b> hub.json: not valid JSON'
    >>> could_not_read_html("<value>", ValueError("no node has a compute unit"))
    '<b>could not read</b> &lt;value&gt;: no node has a compute unit'
    """
    reason = str(err)
    if path is not None:
        where = os.fspath(path)
        reason = reason.removeprefix(f"{where}: ").replace(where, label)
    return f"<b>could not read</b> {html.escape(label)}: {html.escape(reason)}"


def _agreement_rows(nodes: Sequence[NodeAgreement], shown: int) -> list[tuple[str, ...]]:
    """Nodes of a placement agreement as table rows (node, op, predicted, measured, reasons), the first
    ``shown`` of them and a row saying how many more."""
    from explorer.overlays.agreement import NOT_MEASURED

    rows = [
        (
            f"<code>{html.escape(n.node)}</code>",
            html.escape(n.op),
            html.escape(n.predicted),
            html.escape(n.measured) if n.measured is not None else f"<i>{NOT_MEASURED}</i>",
            html.escape(n.reasons),
        )
        for n in nodes[:shown]
    ]
    if len(nodes) > shown:
        rows.append((f"... {len(nodes) - shown} more", "", "", "", ""))
    return rows


def placement_agreement_html(
    agreement: PlacementAgreement, shown: int = _SHOWN, *, with_not_measured: bool = False
) -> str:
    """A measured placement against the predicted one (:func:`explorer.overlays.placement_agreement`):
    the summary, the node count per category, the disagreeing nodes with the target's reasons (those
    predicted on the NPU that ran elsewhere and the reverse, in graph order) and, with
    ``with_not_measured``, the nodes the measured file says nothing about; at most ``shown`` of each.

    Examples
    --------
    >>> from explorer.overlays.agreement import NodeAgreement, PlacementAgreement
    >>> rows = (NodeAgreement("a", "Relu", "NPU", "NPU", True),
    ...         NodeAgreement("b", "Add", "NPU", "CPU", False),
    ...         NodeAgreement("c", "Loop", "CPU", None, None, "no Loop"))
    >>> text = placement_agreement_html(PlacementAgreement("qnn-htp", "m", "hub.json", rows))
    >>> "1 of 2 nodes agree" in text, "<td><code>b</code></td>" in text, "<td><code>c</code></td>" in text
    (True, True, False)
    >>> text = placement_agreement_html(PlacementAgreement("qnn-htp", "m", "hub.json", rows),
    ...                                 with_not_measured=True)
    >>> "<td><code>c</code></td>" in text and "oge-agreement-not-measured" in text
    True
    """
    counts = html_table(
        ((html.escape(category), count) for category, count in agreement.categories().items()),
        ("predicted vs measured", "nodes"),
        attrs={"class": "oge-agreement-counts"},
    )
    columns = ("node", "op", "predicted", "measured", "why the target does not take it")
    unmeasured = set(agreement.not_measured) if with_not_measured else set()
    tables = [
        ([n for n in agreement.nodes if n.agrees is False], "oge-agreement-nodes"),
        ([n for n in agreement.nodes if n.node in unmeasured], "oge-agreement-not-measured"),
    ]
    shown_tables = "".join(
        html_table(_agreement_rows(nodes, shown), columns, attrs={"class": css})
        for nodes, css in tables
        if nodes
    )
    source = f" <small>({html.escape(agreement.measured_from)})</small>" if agreement.measured_from else ""
    return (
        f'<div class="oge-agreement"><p>{html.escape(agreement.summary())}{source}</p>'
        f"{counts}{shown_tables}</div>"
    )

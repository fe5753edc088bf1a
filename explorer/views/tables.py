"""HTML tables: one helper for the small tables the widgets and pages show.

Cells and column headings are HTML, written as they are: escape text first
(:func:`html.escape`), so a cell can hold markup such as ``<b>no</b>``. Attribute values
are escaped here.

Examples
--------
>>> table = html_table([("Conv", 20), ("Relu", 17)], ["op", "count"], attrs={"class": "ops"})
>>> print(table.replace("</tr>", "</tr>\\n"))
<table class='ops'><tr><th>op</th><th>count</th></tr>
<tr><td>Conv</td><td>20</td></tr>
<tr><td>Relu</td><td>17</td></tr>
</table>
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["html_table"]


def _attributes(attrs: Mapping[str, object] | None) -> str:
    return "".join(f" {name}='{html.escape(str(value))}'" for name, value in (attrs or {}).items())


def html_table(
    rows: Iterable[Sequence[object]],
    columns: Sequence[str] | None = None,
    *,
    attrs: Mapping[str, object] | None = None,
    row_attrs: Sequence[Mapping[str, object] | None] | None = None,
) -> str:
    """An HTML table: an optional heading row, then one row per item of ``rows``.

    Parameters
    ----------
    rows : iterable of sequence
        The cells of each row, as HTML (``str()`` of each).
    columns : sequence of str, optional
        The column headings (HTML); no heading row when None.
    attrs : mapping, optional
        Attributes of the ``<table>`` element (``class``, ``style``).
    row_attrs : sequence of mapping, optional
        Attributes of each row's ``<tr>`` element, one mapping (or None) per row.

    Returns
    -------
    str
        The table, on one line.

    Examples
    --------
    >>> html_table([["a", "<b>no</b>"]])
    '<table><tr><td>a</td><td><b>no</b></td></tr></table>'
    >>> table = html_table([[1], [2]], ["#"], row_attrs=[{"data-step": 1}, {"style": "color:#aaa;"}])
    >>> print(table.replace("</tr>", "</tr>\\n"))
    <table><tr><th>#</th></tr>
    <tr data-step='1'><td>1</td></tr>
    <tr style='color:#aaa;'><td>2</td></tr>
    </table>
    """
    head = "<tr>" + "".join(f"<th>{c}</th>" for c in columns) + "</tr>" if columns is not None else ""
    body = []
    for k, row in enumerate(rows):
        tag = _attributes(row_attrs[k]) if row_attrs is not None else ""
        body.append(f"<tr{tag}>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>")
    return f"<table{_attributes(attrs)}>{head}{''.join(body)}</table>"

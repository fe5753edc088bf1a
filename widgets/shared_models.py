"""Widget models made once per kernel and shared by every view that uses the same settings.

Each ipywidgets control brings a ``Layout`` and a ``Style`` model of its own, and every model is a
comm the page opens and builds before it can draw the view: a ``GraphView`` was 41 models, 16 of
them Layouts. Layouts and styles that nothing changes after creation (a button's fixed width, the
default style) can be one model shown by many views, as can a static widget such as the view's
CSS. :func:`shared` keeps one per key for the kernel, and makes a new one if it was closed
(``Widget.close_all()``), so a second ``GraphView`` sends only the models that are its own.

Examples
--------
>>> shared_layout(width="60px") is shared_layout(width="60px")
True
>>> shared_layout(width="60px") is shared_layout(width="61px")
False
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import ipywidgets as w

__all__ = ["shared", "shared_layout", "shared_style", "is_shared", "close_own"]

_Model = TypeVar("_Model", bound=w.Widget)
_SHARED: dict[tuple[Any, ...], w.Widget] = {}


def shared(key: tuple[Any, ...], make: Callable[[], _Model]) -> _Model:
    """The kernel's one model under ``key``, made by ``make`` the first time (or again once closed).

    Only for models that no view changes after creation: a change shows in every view.

    Parameters
    ----------
    key : tuple
        What the model is (a kind and its settings).
    make : callable
        Makes it.

    Returns
    -------
    ipywidgets.Widget

    Examples
    --------
    >>> css = shared(("example-css",), lambda: w.HTML("<style></style>"))
    >>> css is shared(("example-css",), lambda: w.HTML("other"))
    True
    >>> css.close()
    >>> shared(("example-css",), lambda: w.HTML("new")).value
    'new'
    """
    model = _SHARED.get(key)
    if model is None or getattr(model, "comm", None) is None:  # closed: its comm is gone
        model = _SHARED[key] = make()
    return model  # type: ignore[return-value]


def shared_layout(**settings: str) -> w.Layout:
    """A ``Layout`` with these settings, one per kernel (never change it: use your own for that).

    Examples
    --------
    >>> shared_layout(width="230px").width
    '230px'
    """
    return shared(("layout", *sorted(settings.items())), lambda: w.Layout(**settings))


def shared_style(kind: type[_Model]) -> _Model:
    """The default style model of ``kind`` (``ipywidgets.ButtonStyle``, ``HTMLStyle``, ...), one per kernel.

    Examples
    --------
    >>> shared_style(w.ButtonStyle) is shared_style(w.ButtonStyle)
    True
    """
    return shared(("style", kind.__module__, kind.__qualname__), kind)


def is_shared(model: object) -> bool:
    """Whether ``model`` is one of the kernel's shared models.

    Examples
    --------
    >>> is_shared(shared_layout(width="60px")), is_shared(w.Layout(width="60px"))
    (True, False)
    """
    return any(model is kept for kept in _SHARED.values())


def close_own(root: w.Widget) -> int:
    """Close ``root``, the widgets inside it, and their layouts and styles, except shared ones.

    Returns
    -------
    int
        How many models were closed.

    Examples
    --------
    >>> box = w.HBox([w.Button(layout=shared_layout(width="60px"))])
    >>> close_own(box)  # the box, its layout, the button and its style; the shared layout stays
    4
    >>> shared_layout(width="60px").comm is not None
    True
    """
    closed, todo, seen = 0, [root], set()
    while todo:
        model = todo.pop()
        if id(model) in seen or is_shared(model) or getattr(model, "comm", None) is None:
            continue
        seen.add(id(model))
        todo += [c for c in getattr(model, "children", ()) if isinstance(c, w.Widget)]
        todo += [
            part
            for name in ("layout", "style")
            if name in model.trait_names() and isinstance(part := getattr(model, name), w.Widget)
        ]
        model.close()
        closed += 1
    return closed

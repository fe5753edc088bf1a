"""Where an overlay comes from: a file, read bounded (:func:`explorer.isolation.io.read_json_file`),
or a value already in memory (a dict, a list), and how messages name it.

Examples
--------
>>> load_source({"main_graph": {"results": {}}})
({'main_graph': {'results': {}}}, None)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from explorer.core.errors import UsageError
from explorer.isolation.io import read_json_file

__all__ = ["WHAT", "Source", "load_source", "is_path", "label"]

WHAT = "a profile or overlay file"
"""How a refusal names what the file should have been."""

Source = str | os.PathLike[str] | dict[str, Any] | Sequence[Any]
"""What :func:`explorer.overlays.read` takes: a path, a parsed JSON value, or two paths (TensorRT's
profile and layer information)."""


def is_path(value: object) -> bool:
    """Whether ``value`` names a file (a ``str`` or an ``os.PathLike``).

    Examples
    --------
    >>> is_path("profile.json"), is_path({"a": 1})
    (True, False)
    """
    return isinstance(value, (str, os.PathLike))


def label(source: object) -> str:
    """How messages name ``source``: its path, or ``<value>`` for one in memory.

    Examples
    --------
    >>> label("a.json"), label([])
    ('a.json', '<value>')
    """
    return os.fspath(source) if is_path(source) else "<value>"  # type: ignore[arg-type]


def load_source(source: Any) -> tuple[Any, str | None]:
    """The parsed JSON of ``source`` and its path (None for a value given in memory).

    Raises
    ------
    ModelNotFoundError
        A path that does not exist, or is not a regular file.
    UsageError
        A file that is empty, too large or not JSON (the message names it), or a value that is
        neither a path nor a dict or list.

    Examples
    --------
    >>> load_source([{"cat": "Node"}])[0]
    [{'cat': 'Node'}]
    """
    if is_path(source):
        return read_json_file(source, what=WHAT), os.fspath(source)
    if isinstance(source, (dict, list)):
        return source, None
    raise UsageError(
        f"an overlay is read from a path, a dict or a list (parsed JSON), not a {type(source).__name__}"
    )

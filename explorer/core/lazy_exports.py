"""A package whose public names are imported on first use: the one way ``explorer``'s packages do it.

A worker that unpickles one small function (``explorer.runtimes.ort_prepare.prepare_ort``) imports the
package around it, and must not pay for everything the package exports (the benchmark,
profiles, the TVM runtime, networkx). :func:`lazy_exports` turns a package into one whose
names are imported from their modules when first asked for (PEP 562), listed by ``dir()``,
and kept as the exported value even where a submodule has the same name (``bench``,
``partition`` and ``coverage`` are both a submodule and the function the package exports:
importing the submodule would otherwise replace the function by the module).

Examples
--------
>>> import explorer.runtimes as runtimes
>>> type(runtimes).__name__, callable(runtimes.bench)  # the function, not the submodule
('LazyPackage', True)
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Mapping
from typing import Any

__all__ = ["LazyPackage", "lazy_exports"]


class LazyPackage(types.ModuleType):
    """A package module whose exports (``_lazy_exports``: name -> module) are imported on first use.

    Examples
    --------
    >>> import explorer.targets as targets
    >>> isinstance(targets, LazyPackage), "partition" in dir(targets)
    (True, True)
    """

    _lazy_exports: Mapping[str, str]

    def __getattr__(self, name: str) -> Any:
        exports = self.__dict__.get("_lazy_exports", {})
        if name in exports:
            value = getattr(importlib.import_module(exports[name]), name)
            super().__setattr__(name, value)
            return value
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")

    def __dir__(self) -> list[str]:
        return sorted({*self.__dict__, *self.__dict__.get("__all__", ())})

    def __setattr__(self, name: str, value: Any) -> None:
        exports = self.__dict__.get("_lazy_exports", {})
        if isinstance(value, types.ModuleType) and exports.get(name) == f"{self.__name__}.{name}":
            return  # the import system setting submodule `name`: the export of that name stays
        super().__setattr__(name, value)


def lazy_exports(package: str, exports: Mapping[str, str]) -> None:
    """Make the already imported ``package`` import each of ``exports`` (name -> module) on first use.

    Call it at the end of the package's ``__init__.py`` with ``__name__``.

    Examples
    --------
    >>> import sys, types
    >>> sys.modules["demo_pkg"] = types.ModuleType("demo_pkg")
    >>> lazy_exports("demo_pkg", {"dedent": "textwrap"})
    >>> sys.modules["demo_pkg"].dedent("  x")
    'x'
    >>> del sys.modules["demo_pkg"]
    """
    module = sys.modules[package]
    module._lazy_exports = dict(exports)  # type: ignore[attr-defined]
    module.__class__ = LazyPackage

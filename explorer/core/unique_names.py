"""Fresh names that do not collide with those already taken: ``base``, else ``base_2``, ``base_3``, ...

One rule for every place that makes names: the rewrites that add ONNX nodes and values, and
the Relax graph builder (whose variables share name hints; it separates with ``#``, the
graph model's ``NAME#INDEX`` convention).

Examples
--------
>>> fresh = UniqueNames({"x"})
>>> fresh("x"), fresh("x"), fresh("y")
('x_2', 'x_3', 'y')
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["UniqueNames"]


class UniqueNames:
    """Hands out names not in ``taken`` (and remembers them).

    Parameters
    ----------
    taken : iterable of str
        Names already in use.
    separator : str
        Between a base and its number.

    Examples
    --------
    >>> UniqueNames(["lv"], separator="#")("lv")
    'lv#2'
    """

    def __init__(self, taken: Iterable[str] = (), separator: str = "_") -> None:
        self.taken = set(taken)
        self.separator = separator

    def __call__(self, base: str) -> str:
        """A name not taken yet: ``base`` itself, or ``base`` with the first free number after it.

        Examples
        --------
        >>> UniqueNames()("a")
        'a'
        """
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}{self.separator}{n}"
        self.taken.add(name)
        return name

"""The lowering timeline every compiler shares: the graph after each step, and the code of each step.

A compiler's pipeline (TVM Relax's passes, IREE's phases) produces a :class:`LoweringTimeline`:
the :class:`~explorer.core.timeline.Timeline` of graphs plus, per snapshot, the code that
step left as text, split into named units (TVM: one PrimFunc each; IREE: one MLIR symbol
each). The stepper's code panel lists the units of a step, diffs one against the step
before (:func:`code_diff`) and sums it up in one line (:meth:`LoweringTimeline.code_summary`,
which each compiler's own timeline overrides with what its code is made of).

Examples
--------
>>> t = LoweringTimeline((), "none", tir=({}, {"add": "x = 1"}))
>>> t.prim_funcs(1), t.tir_diff(1, "add").splitlines()[-1], t.code_summary(1, "add")
(['add'], '+x = 1', '1 line')
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from explorer.core.timeline import Timeline

__all__ = ["LoweringTimeline", "code_diff"]


def code_diff(before: str, after: str, name: str = "prim_func", context: int = 3) -> str:
    """A unified diff of two texts of one code unit (empty when they are the same).

    Examples
    --------
    >>> print(code_diff("a = 1\\n", "a = 2\\n", "f"))
    --- f (before)
    +++ f (after)
    @@ -1 +1 @@
    -a = 1
    +a = 2
    """
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"{name} (before)",
        tofile=f"{name} (after)",
        n=context,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines).rstrip("\n")


@dataclass(frozen=True)
class LoweringTimeline(Timeline):
    """A Timeline of a lowering, with the code of every snapshot.

    Attributes
    ----------
    tir : tuple of dict
        Per snapshot, code unit name -> its text (TVM: PrimFunc -> TVMScript, empty before
        LegalizeOps; IREE: MLIR symbol -> its text).

    Examples
    --------
    >>> LoweringTimeline((), "none").tir
    ()
    """

    tir: tuple[Mapping[str, str], ...] = field(default=(), compare=False)

    code_label: ClassVar[str] = "code unit"
    """What one unit of :attr:`tir` is called in the stepper's code panel."""

    def code_summary(self, index: int, name: str) -> str:
        """One line on unit ``name`` of snapshot ``index`` (here its length; compilers say more).

        Examples
        --------
        >>> LoweringTimeline((), "none", tir=({"f": "a\\nb"},)).code_summary(0, "f")
        '2 lines'
        """
        lines = len(self.tir[index].get(name, "").splitlines())
        return f"{lines} line{'' if lines == 1 else 's'}"

    def prim_funcs(self, index: int) -> list[str]:
        """The code units of snapshot ``index``, by name.

        Examples
        --------
        >>> LoweringTimeline((), "none", tir=({"add": "..."},)).prim_funcs(0)
        ['add']
        """
        return sorted(self.tir[index]) if index < len(self.tir) else []

    def tir_diff(self, index: int, name: str) -> str:
        """How step ``index`` changed unit ``name`` (a unified diff; added or removed whole).

        Examples
        --------
        >>> t = LoweringTimeline((), "none", tir=({}, {"add": "x = 1"}))
        >>> t.tir_diff(1, "add").splitlines()[-1]
        '+x = 1'
        """
        before = self.tir[index - 1].get(name, "") if index > 0 else ""
        return code_diff(before, self.tir[index].get(name, ""), name)

"""TIR at each lowering step: every PrimFunc's TVMScript, a text diff between steps, loop-nest statistics.

The worker sends each step's PrimFuncs as TVMScript text (:func:`explorer.lower.tvm.relax_pipeline`
keeps them on the :class:`TirTimeline`); everything here reads that text, so it needs no
TVM: a learner sees what LegalizeOps wrote for a conv2d, what FuseTIR merged, and the loops
the schedule will later reorder, parallelise and vectorise.

Examples
--------
>>> script = '''
... @T.prim_func
... def main(a: T.Buffer((4, 8), "float32")):
...     b = T.alloc_buffer((4, 8))
...     for i, j in T.grid(4, 8):
...         with T.sblock("b"):
...             b[i, j] = a[i, j]
...     for k in T.parallel(4):
...         for l in T.vectorized(8):
...             a[k, l] = b[k, l]
... '''
>>> stats = loop_stats(script)
>>> stats.loops, stats.serial, stats.parallel, stats.vectorized, stats.allocations, stats.max_depth
(4, 2, 1, 1, 1, 2)
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from explorer.lower.timeline import LoweringTimeline, code_diff

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["LoopStats", "loop_stats", "tir_diff", "TirTimeline"]

_FOR = re.compile(r"^(?P<indent>\s*)for (?P<vars>.+?) in (?P<kind>T\.\w+|range)\(")
_KINDS = {
    "T.grid": "serial",
    "T.serial": "serial",
    "range": "serial",
    "T.parallel": "parallel",
    "T.vectorized": "vectorized",
    "T.unroll": "unrolled",
    "T.thread_binding": "thread_bound",
}
_ALLOCATION = re.compile(r"\bT\.(?:sblock_)?alloc_buffer\(|\bT\.allocate\(|\bT\.decl_buffer\(")
_BLOCK = re.compile(r"\bT\.(?:s)?block\(")


@dataclass(frozen=True)
class LoopStats:
    """Loop nest of one PrimFunc, counted from its TVMScript.

    Attributes
    ----------
    loops : int
        Loop variables (``for i, j in T.grid(...)`` is two).
    serial, parallel, vectorized, unrolled, thread_bound : int
        Loops by kind.
    blocks : int
        ``T.sblock`` / ``T.block`` computations.
    allocations : int
        Buffers allocated inside the function (intermediate storage).
    max_depth : int
        Deepest nesting of ``for`` statements.
    """

    loops: int = 0
    serial: int = 0
    parallel: int = 0
    vectorized: int = 0
    unrolled: int = 0
    thread_bound: int = 0
    blocks: int = 0
    allocations: int = 0
    max_depth: int = 0

    def to_dict(self) -> dict[str, int]:
        """The counts by name.

        Examples
        --------
        >>> LoopStats(loops=2, serial=2).to_dict()["serial"]
        2
        """
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        """One row: the counts.

        Examples
        --------
        >>> LoopStats().to_frame().shape
        (1, 9)
        """
        import pandas as pd

        return pd.DataFrame([self.to_dict()])


def loop_stats(script: str) -> LoopStats:
    """Count the loops (by kind), blocks and allocations of a PrimFunc's TVMScript.

    Examples
    --------
    >>> loop_stats("for i in range(4):\\n    for j in T.unroll(2):\\n        pass").to_dict()["max_depth"]
    2
    """
    counts = dict.fromkeys(("serial", "parallel", "vectorized", "unrolled", "thread_bound"), 0)
    stack: list[int] = []
    depth = 0
    for line in script.splitlines():
        match = _FOR.match(line)
        if match is None:
            continue
        indent = len(match["indent"])
        while stack and stack[-1] >= indent:
            stack.pop()
        stack.append(indent)
        depth = max(depth, len(stack))
        kind = _KINDS.get(match["kind"], "serial")
        counts[kind] += len([v for v in match["vars"].split(",") if v.strip()])
    return LoopStats(
        loops=sum(counts.values()),
        **counts,
        blocks=len(_BLOCK.findall(script)),
        allocations=len(_ALLOCATION.findall(script)),
        max_depth=depth,
    )


tir_diff = code_diff
"""A unified diff of two TVMScript texts (:func:`~explorer.lower.timeline.code_diff`, by its TIR name).

Examples
--------
>>> tir_diff("a = 1\\n", "a = 2\\n", "f").splitlines()[-1]
'+a = 2'
"""


@dataclass(frozen=True)
class TirTimeline(LoweringTimeline):
    """TVM's lowering timeline: the code units are PrimFuncs, summed up by their loop nests.

    Examples
    --------
    >>> t = TirTimeline((), "none", tir=({"f": "for i in T.parallel(4):\\n  pass"},))
    >>> t.code_label, t.code_summary(0, "f")
    ('PrimFunc', 'loops 1, parallel 1, max_depth 1')
    """

    code_label: ClassVar[str] = "PrimFunc"

    def code_summary(self, index: int, name: str) -> str:
        """One line on PrimFunc ``name`` of snapshot ``index``: its loops by kind (the stepper's panel).

        Examples
        --------
        >>> t = TirTimeline((), "none", tir=({"f": "for i in T.parallel(4):\\n  pass"},))
        >>> t.code_summary(0, "f")
        'loops 1, parallel 1, max_depth 1'
        """
        stats = loop_stats(self.tir[index].get(name, ""))
        return ", ".join(f"{k} {v}" for k, v in stats.to_dict().items() if v)

    def loop_stats(self, index: int) -> pd.DataFrame:
        """Loop-nest statistics of every PrimFunc of snapshot ``index``, one row each.

        Examples
        --------
        >>> t = TirTimeline((), "none", tir=({"f": "for i in range(2):\\n  pass"},))
        >>> t.loop_stats(0)[["prim_func", "loops"]].values.tolist()
        [['f', 1]]
        """
        import pandas as pd

        rows: list[dict[str, Any]] = [
            {"prim_func": name, **loop_stats(text).to_dict()}
            for name, text in sorted(self.tir[index].items())
        ]
        return pd.DataFrame(rows, columns=["prim_func", *LoopStats().to_dict()])

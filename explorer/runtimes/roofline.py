"""Each node's achieved throughput against the machine's roofline: is it slow, and bound by what.

A node's FLOPs and bytes (:func:`explorer.runtimes.cost_model.node_costs`) and its measured time
(:class:`~explorer.runtimes.profile.Profile`'s ``node_ms``: a fused kernel's time is on the
node doing its work) give its achieved GFLOP/s and its arithmetic intensity; the machine's
measured peaks (:func:`~explorer.runtimes.machine.measure_peak`) give what is attainable
at that intensity, ``min(peak, bandwidth * intensity)``. A node far below its roof is where
a runtime leaves time on the table; one on the sloped part is memory-bound, and only fusion
(fewer bytes) helps it.

Examples
--------
>>> from explorer import load
>>> from explorer.runtimes.cost_model import node_costs
>>> from explorer.runtimes import OrtRuntime, random_feeds
>>> from explorer.runtimes.machine import MachinePeak
>>> from explorer.runtimes.profile import profile
>>> g = load("zoo:mlp")
>>> prof = profile(OrtRuntime().prepare(g), random_feeds(g.model), runs=2)
>>> line = roofline(prof, node_costs(g), MachinePeak(100.0, 20.0, 2))
>>> "/fc1/Gemm" in line.to_frame()["node"].tolist()
True
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from explorer.runtimes.machine import MachinePeak, measure_peak

if TYPE_CHECKING:
    import pandas as pd

    from explorer.runtimes.cost_model import CostModel
    from explorer.runtimes.profile import Profile

__all__ = ["RooflinePoint", "Roofline", "roofline"]


@dataclass(frozen=True)
class RooflinePoint:
    """One node under the roofline.

    Attributes
    ----------
    node, op_type : str
        The ONNX node and its op.
    ms : float
        Its measured time per inference.
    flops, bytes : float
        Its work (:class:`~explorer.runtimes.cost_model.NodeCost`).
    intensity : float
        FLOPs per byte.
    gflops : float
        Achieved: ``flops / ms``.
    attainable : float
        The roof at its intensity.
    bound : str
        ``"memory"`` left of the ridge point, ``"compute"`` right of it.
    """

    node: str
    op_type: str
    ms: float
    flops: float
    bytes: float
    intensity: float
    gflops: float
    attainable: float
    bound: str

    @property
    def efficiency(self) -> float:
        """Achieved over attainable (1.0: on the roof).

        Examples
        --------
        >>> RooflinePoint("a", "Conv", 1.0, 1e6, 1e5, 10.0, 1.0, 4.0, "compute").efficiency
        0.25
        """
        return self.gflops / self.attainable if self.attainable else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The fields and the efficiency.

        Examples
        --------
        >>> RooflinePoint("a", "Conv", 1.0, 1e6, 1e5, 10.0, 1.0, 4.0, "compute").to_dict()["efficiency"]
        0.25
        """
        return {**asdict(self), "efficiency": self.efficiency}


@dataclass(frozen=True)
class Roofline:
    """One runtime's nodes under this machine's roofline.

    Attributes
    ----------
    runtime, label : str
        Who ran it.
    peak : MachinePeak
        The roofs.
    points : tuple of RooflinePoint
        Nodes with time and FLOPs, slowest first.
    launches : float
        Kernels launched per inference (from the profile).
    written_bytes : float or None
        Bytes written between kernels per inference (from the profile).
    """

    runtime: str
    label: str
    peak: MachinePeak
    points: tuple[RooflinePoint, ...]
    launches: float = 0.0
    written_bytes: float | None = None

    @property
    def achieved_gflops(self) -> float:
        """All the points' FLOPs over all their time.

        Examples
        --------
        >>> Roofline("r", "r", MachinePeak(1.0, 1.0, 1), ()).achieved_gflops
        0.0
        """
        ms = sum(p.ms for p in self.points)
        return sum(p.flops for p in self.points) / ms / 1e6 if ms else 0.0

    def to_frame(self) -> pd.DataFrame:
        """One row per node, slowest first.

        Examples
        --------
        >>> Roofline("r", "r", MachinePeak(1.0, 1.0, 1), ()).to_frame().empty
        True
        """
        import pandas as pd

        columns = [*RooflinePoint.__dataclass_fields__, "efficiency"]
        return pd.DataFrame([p.to_dict() for p in self.points], columns=columns)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: who, the peak, the totals and every point.

        Examples
        --------
        >>> Roofline("r", "r", MachinePeak(1.0, 1.0, 1), ()).to_dict()["achieved_gflops"]
        0.0
        """
        return {
            "runtime": self.runtime,
            "label": self.label,
            "peak": self.peak.to_dict(),
            "achieved_gflops": self.achieved_gflops,
            "launches": self.launches,
            "written_bytes": self.written_bytes,
            "points": [p.to_dict() for p in self.points],
        }


def roofline(profile: Profile, costs: CostModel, peak: MachinePeak | None = None) -> Roofline:
    """Place every timed node with known FLOPs under the roofline.

    Parameters
    ----------
    profile : Profile
        Times per node (``node_ms``).
    costs : CostModel
        FLOPs and bytes per node, for the same input shapes.
    peak : MachinePeak, optional
        Default: measured now (:func:`~explorer.runtimes.machine.measure_peak`).

    Returns
    -------
    Roofline

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.runtimes.cost_model import node_costs
    >>> from explorer.runtimes.profile import Profile
    >>> times = Profile("ort", "ort", 1, 0.02, (), {"/fc1/Gemm": 0.01, "/relu1/Relu": 0.01})
    >>> line = roofline(times, node_costs(load("zoo:mlp")), MachinePeak(100.0, 20.0, 2))
    >>> [(p.node, p.bound, round(p.gflops, 1)) for p in line.points]
    [('/fc1/Gemm', 'memory', 40.1), ('/relu1/Relu', 'memory', 0.0)]
    """
    peak = peak or measure_peak()
    points = []
    for node, ms in profile.node_ms.items():
        cost = costs.get(node)
        if cost is None or not cost.flops or not cost.bytes or ms <= 0:
            continue
        intensity = cost.flops / cost.bytes
        points.append(
            RooflinePoint(
                node=node,
                op_type=cost.op_type,
                ms=ms,
                flops=cost.flops,
                bytes=cost.bytes,
                intensity=intensity,
                gflops=cost.flops / ms / 1e6,
                attainable=peak.attainable(intensity),
                bound="memory" if intensity < peak.ridge else "compute",
            )
        )
    points.sort(key=lambda p: -p.ms)
    return Roofline(
        profile.runtime,
        profile.label,
        peak,
        tuple(points),
        launches=profile.launches,
        written_bytes=profile.written_bytes,
    )

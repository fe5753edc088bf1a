"""A target's partitions and fallback islands as ONNX models of their own, and the pieces run chained.

:func:`plan_pieces` cuts a graph where a target's placement changes: each supported
partition (:func:`~explorer.targets.partition.partition`, ONNX Runtime's grouping) is a
piece, and the nodes that fall back are grouped into islands by the same rule, taken over
the graph with each partition contracted to one node, so that no island reaches out through
another piece and back in: the pieces form a chain (a DAG) that runs in :attr:`Piece.order`.
:func:`split_partitions` writes each piece as a valid model (``onnx.checker`` passes), its
boundary tensors as graph inputs and outputs with their types and shapes, the weights and
folded ``Constant`` nodes it reads copied in, beside a manifest (:data:`MANIFEST`): the
order, file, kind, placement, nodes, inputs and outputs of each piece. The folder is
written whole or not at all: the pieces are staged in a temp folder beside it (written in
the worker) and renamed into place. :func:`run_split` runs the pieces in order on ONNX
Runtime in the worker, each fed from the model's inputs and the outputs of the pieces
before it, and returns the model's outputs. (Polygraphy's ``inspect capability
--with-partitioning`` does the same for TensorRT.)

Examples
--------
>>> from explorer import load
>>> from explorer.targets import get_target
>>> pieces = plan_pieces(load("zoo:mlp"), get_target("ort-cpu"))
>>> [(p.file, p.kind, len(p.nodes)) for p in pieces]
[('01-partition1.onnx', 'supported', 6)]
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from explorer.core.errors import InvalidModelError, OutputPathError, UsageError
from explorer.core.tensors import Shape
from explorer.isolation.io import check_writable_folder, input_model_at

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from explorer.core.graph import ModelGraph
    from explorer.targets.coverage import CoverageReport
    from explorer.targets.partition import Partitioning
    from explorer.targets.target import Target

__all__ = [
    "MANIFEST",
    "MANIFEST_FORMAT",
    "BoundaryTensor",
    "Piece",
    "SplitResult",
    "plan_pieces",
    "check_split_folder",
    "split_partitions",
    "read_split",
    "run_split",
    "write_pieces",
    "run_pieces",
]

MANIFEST = "partitions.json"
"""The manifest's file name in a split's folder."""
MANIFEST_FORMAT = "onnx-graph-explorer partitions 1"
"""The manifest's ``format``: what wrote it and the version of its layout."""

SUPPORTED = "supported"
FALLBACK = "fallback"


@dataclass(frozen=True)
class BoundaryTensor:
    """A tensor crossing into or out of a piece: a graph input or output of the piece's model.

    Attributes
    ----------
    name : str
        The tensor's name in the original model.
    dtype : str or None
        Its element type (``"float32"``...), None when the graph does not know it.
    shape : tuple or None
        Its shape (sizes, symbolic names), None when the rank is unknown.
    """

    name: str
    dtype: str | None
    shape: Shape | None

    def to_dict(self) -> dict[str, Any]:
        """``{"name", "dtype", "shape"}``.

        Examples
        --------
        >>> BoundaryTensor("x", "float32", (1, "n")).to_dict()
        {'name': 'x', 'dtype': 'float32', 'shape': [1, 'n']}
        """
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": None if self.shape is None else list(self.shape),
        }


@dataclass(frozen=True)
class Piece:
    """One piece of a split: a supported partition or a fallback island, as its own model.

    Attributes
    ----------
    order : int
        Its place in the chain, from 1: every piece reads only the model's inputs and the
        outputs of pieces before it.
    file : str
        The model's file name in the split's folder.
    kind : {"supported", "fallback"}
        A partition the target takes, or nodes that fall back.
    placement : str
        ``"partition K"`` (as the coverage report numbers them), or the fallback device
        (``"unsupported"`` for a target without one).
    device : str
        Where it runs.
    nodes : tuple of str
        The graph's node ids in it, in node-list order.
    inputs, outputs : tuple of BoundaryTensor
        Its model's graph inputs and outputs.
    """

    order: int
    file: str
    kind: str
    placement: str
    device: str
    nodes: tuple[str, ...]
    inputs: tuple[BoundaryTensor, ...]
    outputs: tuple[BoundaryTensor, ...]

    def to_dict(self) -> dict[str, Any]:
        """The piece's entry in the manifest.

        Examples
        --------
        >>> from explorer import load
        >>> from explorer.targets import get_target
        >>> entry = plan_pieces(load("zoo:mlp"), get_target("ort-cpu"))[0].to_dict()
        >>> entry["kind"], entry["inputs"][0]["name"], entry["outputs"][0]["shape"]
        ('supported', 'input', ['batch', 10])
        """
        return {
            "order": self.order,
            "file": self.file,
            "kind": self.kind,
            "placement": self.placement,
            "device": self.device,
            "node_count": len(self.nodes),
            "nodes": list(self.nodes),
            "inputs": [t.to_dict() for t in self.inputs],
            "outputs": [t.to_dict() for t in self.outputs],
        }


@dataclass(frozen=True)
class SplitResult:
    """A graph split at a target's placement boundaries, written to a folder.

    Attributes
    ----------
    folder : str
        Where the pieces and the manifest are.
    source : str
        The model.
    target, device : str
        The target and where its partitions run.
    fallback : str or None
        Where the rest runs (None: nowhere, the target cannot run those nodes).
    pieces : tuple of Piece
        In chain order.
    inputs, outputs : tuple of str
        The model's own inputs and outputs (what the chain takes and gives).
    """

    folder: str
    source: str
    target: str
    device: str
    fallback: str | None
    pieces: tuple[Piece, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @property
    def manifest(self) -> Path:
        """The manifest's path."""
        return Path(self.folder) / MANIFEST

    def count(self, kind: str) -> int:
        """The pieces of ``kind`` (``"supported"`` or ``"fallback"``).

        Examples
        --------
        >>> SplitResult("out", "m", "t", "NPU", "CPU", (), (), ()).count("fallback")
        0
        """
        return sum(1 for p in self.pieces if p.kind == kind)

    @property
    def summary(self) -> str:
        """The split in one sentence."""
        supported, fallback = self.count(SUPPORTED), self.count(FALLBACK)
        islands = f", {fallback} fallback island{'s' if fallback != 1 else ''}" if fallback else ""
        where = f" on the {self.fallback}" if fallback and self.fallback else ""
        return (
            f"{len(self.pieces)} piece{'s' if len(self.pieces) != 1 else ''}: {supported} "
            f"partition{'s' if supported != 1 else ''} on {self.device}{islands}{where}"
        )

    def to_dict(self) -> dict[str, Any]:
        """The manifest (:data:`MANIFEST`), with ``folder``.

        Examples
        --------
        >>> list(SplitResult("out", "m", "t", "NPU", "CPU", (), ("x",), ("y",)).to_dict())[:4]
        ['format', 'folder', 'manifest', 'source']
        """
        return {
            "format": MANIFEST_FORMAT,
            "folder": self.folder,
            "manifest": str(self.manifest),
            "source": self.source,
            "target": self.target,
            "device": self.device,
            "fallback": self.fallback,
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "pieces": [p.to_dict() for p in self.pieces],
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per piece: file, kind, placement, and its node, input and output counts.

        Examples
        --------
        >>> SplitResult("out", "m", "t", "NPU", "CPU", (), (), ()).to_frame().shape
        (0, 6)
        """
        import pandas as pd

        columns = ["order", "file", "kind", "placement", "nodes", "inputs", "outputs"]
        rows = [
            (p.order, p.file, p.kind, p.placement, len(p.nodes), len(p.inputs), len(p.outputs))
            for p in self.pieces
        ]
        return pd.DataFrame(rows, columns=columns).set_index("order")


# --------------------------------------------------------------------------- planning


def _greedy_groups(
    units: Sequence[Hashable],
    consumers: Mapping[Hashable, Sequence[Hashable]],
    take: Callable[[Hashable], bool],
) -> list[list[Hashable]]:
    """ONNX Runtime's grouping (as :func:`~explorer.targets.partition.supported_groups`) over any DAG:
    the maximal groups of units ``take`` accepts, none with a path out and back in."""
    in_degree = dict.fromkeys(units, 0)
    for unit in units:
        for consumer in consumers[unit]:
            in_degree[consumer] += 1
    to_process = deque(u for u in units if in_degree[u] == 0)
    deferred: deque[Hashable] = deque()
    groups: list[list[Hashable]] = []
    group: list[Hashable] = []
    border: set[Hashable] = set()
    seen = 0
    while to_process or deferred:
        if not to_process:
            if group:
                groups.append(list(group))
            group.clear()
            border.clear()
            to_process, deferred = deferred, deque()
            continue
        unit = to_process.popleft()
        if take(unit):
            group.append(unit)
            border.discard(unit)
            border.update(consumers[unit])
        elif unit in border:
            deferred.append(unit)  # taken after the open group closes
            continue
        seen += 1
        for consumer in consumers[unit]:
            in_degree[consumer] -= 1
            if in_degree[consumer] == 0:
                to_process.append(consumer)
    if group:
        groups.append(group)
    if seen != len(units):
        raise UsageError(
            "target: the partitioning's groups form a cycle between devices (a path leaves a group and "
            "comes back into it), so they cannot run one after another; give groups without such a path, "
            "as partition() makes"
        )
    return groups


def _contracted(
    ops: Sequence[str], edges: Iterable[tuple[str, str]], owner: Mapping[str, Hashable]
) -> tuple[list[Hashable], dict[Hashable, list[Hashable]]]:
    """Units (each owner once, in node-list order) and their consumers, each node replaced by its owner."""
    units = list(dict.fromkeys(owner[n] for n in ops))
    consumers: dict[Hashable, list[Hashable]] = {u: [] for u in units}
    for u, v in edges:
        a, b = owner[u], owner[v]
        if a != b and b not in consumers[a]:
            consumers[a].append(b)
    return units, consumers


def _chain(
    pieces: Sequence[Sequence[str]], ops: Sequence[str], edges: Sequence[tuple[str, str]]
) -> list[int]:
    """The pieces' indices in a run order: each after the pieces it reads from (the earliest node first)."""
    index = {n: i for i, n in enumerate(ops)}
    owner = {n: k for k, piece in enumerate(pieces) for n in piece}
    _, consumers = _contracted(ops, edges, owner)
    in_degree = dict.fromkeys(range(len(pieces)), 0)
    for k in consumers:
        for c in consumers[k]:
            in_degree[c] += 1
    first = [min(index[n] for n in piece) for piece in pieces]
    ready = [(first[k], k) for k in in_degree if in_degree[k] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, k = heapq.heappop(ready)
        order.append(k)
        for c in consumers.get(k, ()):
            in_degree[c] -= 1
            if in_degree[c] == 0:
                heapq.heappush(ready, (first[c], c))
    if len(order) != len(pieces):
        raise UsageError(
            "target: the partitioning's pieces form a cycle, so they cannot run one after another; give "
            "groups without a path that leaves a group and comes back into it, as partition() makes"
        )
    return order


def _partitioning(graph: ModelGraph, target: str | Target | Partitioning | CoverageReport) -> Partitioning:
    """The partitioning to split by: given, the one target of a coverage report, or made for a target."""
    from explorer.targets.partition import Partitioning, partition
    from explorer.targets.registry import get_target

    if isinstance(target, Partitioning):
        return target
    if hasattr(target, "partitionings"):  # a CoverageReport
        found = target.partitionings
        if len(found) != 1:
            raise UsageError(
                f"a split is of one target; the report has {len(found)} ({', '.join(found) or 'none'})"
            )
        return next(iter(found.values()))
    chosen = get_target(target) if isinstance(target, str) else target
    return partition(graph, chosen)


def _tensor_types(graph: ModelGraph) -> dict[str, tuple[str | None, Shape | None]]:
    """Tensor -> (dtype, shape) as the graph's edges carry them (the loader's shape inference)."""
    types: dict[str, tuple[str | None, Shape | None]] = {}
    for _, _, tensor, data in graph.nx.edges(keys=True, data=True):
        dtype, shape = data.get("dtype"), data.get("shape")
        known = types.get(tensor)
        if known is None or (known[0] is None and dtype) or (known[1] is None and shape is not None):
            types[tensor] = (dtype or None, None if shape is None else tuple(shape))
    return types


def plan_pieces(graph: ModelGraph, target: str | Target | Partitioning | CoverageReport) -> tuple[Piece, ...]:
    """The pieces ``graph`` splits into for ``target``, in chain order (nothing is written).

    Parameters
    ----------
    graph : ModelGraph
        An ONNX graph.
    target : str, Target, Partitioning or CoverageReport
        A target (name), its partitioning of ``graph``, or a coverage report of one target.

    Returns
    -------
    tuple of Piece

    Raises
    ------
    UsageError
        A report of several targets; or the partitioning's groups cannot be chained (a cycle
        between pieces; never for :func:`~explorer.targets.partition.partition`'s groups).

    Examples
    --------
    >>> from explorer import load
    >>> pieces = plan_pieces(load("zoo:detection_head"), "nnapi")
    >>> [p.kind for p in pieces][:4]
    ['fallback', 'supported', 'fallback', 'supported']
    >>> pieces[1].placement, pieces[1].device
    ('partition 1', 'Android NNAPI (NPU / DSP / GPU)')
    """
    p = _partitioning(graph, target)
    ops = graph.op_nodes()
    is_op = set(ops)
    edges = [(u, v) for u, v in graph.nx.edges() if u in is_op and v in is_op and u != v]
    owner: dict[str, Hashable] = {n: n for n in ops}
    for k, group in enumerate(p.groups):
        for n in group:
            owner[n] = ("partition", k)
    units, consumers = _contracted(ops, edges, owner)
    islands = _greedy_groups(units, consumers, lambda u: isinstance(u, str))
    groups: list[tuple[str, str, list[str]]] = [
        (SUPPORTED, f"partition {k}", list(g)) for k, g in enumerate(p.groups, start=1)
    ]
    fallback_place = p.fallback or "unsupported"
    groups += [(FALLBACK, fallback_place, [str(n) for n in island]) for island in islands]
    order = _chain([g[2] for g in groups], ops, edges)
    position = {n: i for i, n in enumerate(ops)}
    types = _tensor_types(graph)

    def boundary(names: Iterable[str]) -> tuple[BoundaryTensor, ...]:
        return tuple(BoundaryTensor(t, *types.get(t, (None, None))) for t in dict.fromkeys(names))

    width = max(2, len(str(len(groups))))
    islands_seen = 0
    pieces = []
    for rank, k in enumerate(order, start=1):
        kind, placement, nodes = groups[k]
        nodes = sorted(nodes, key=position.__getitem__)
        inside = set(nodes)
        reads = sorted(
            (position[v], min(data.get("slots") or (0,)), tensor)
            for v in nodes
            for u, _, tensor, data in graph.nx.in_edges(v, keys=True, data=True)
            if u not in inside
        )
        writes = [
            tensor
            for n in nodes
            for tensor in graph.nx.nodes[n].get("outputs") or ()
            if any(v not in inside for _, v, t in graph.nx.out_edges(n, keys=True) if t == tensor)
        ]
        if not writes:  # nothing of it is read on: its dead ends are its outputs (a model needs one)
            writes = [t for n in nodes for t in graph.nx.nodes[n].get("outputs") or () if t]
        if kind == SUPPORTED:
            name = f"partition{placement.split()[-1]}"
        else:
            islands_seen += 1
            name = f"fallback{islands_seen}"
        pieces.append(
            Piece(
                order=rank,
                file=f"{rank:0{width}d}-{name}.onnx",
                kind=kind,
                placement=placement,
                device=p.device
                if kind == SUPPORTED
                else (p.fallback or "nowhere (the target has no fallback)"),
                nodes=tuple(nodes),
                inputs=boundary(t for _, _, t in reads),
                outputs=boundary(writes),
            )
        )
    return tuple(pieces)


# --------------------------------------------------------------------------- the folder


def check_split_folder(
    folder: str | os.PathLike[str], inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] = ()
) -> Path:
    """Check, before any work, that a split can be written to ``folder``.

    The folder must be new (its parent exists and can be written in) or empty: a split's
    files replace the folder as a whole, so a folder holding anything (the input model's
    own folder, an earlier split) is refused rather than mixed into or emptied.

    Parameters
    ----------
    folder : path
        The split's folder.
    inputs : path or sequence of paths
        The input model files (named in the refusal when the folder holds one).

    Returns
    -------
    Path
        ``folder``.

    Raises
    ------
    OutputPathError
        Naming the folder and what is wrong; nothing was written.

    Examples
    --------
    >>> from explorer import zoo
    >>> model = zoo.save("mlp")
    >>> check_split_folder(model.parent / "pieces-new", str(model)).name
    'pieces-new'
    >>> try:
    ...     check_split_folder(model.parent, str(model))
    ... except OutputPathError as err:
    ...     print("refused:", "holds the input model" in str(err))
    refused: True
    """
    target = Path(folder)
    sources = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    try:
        if target.exists() and not target.is_dir():
            if (same := input_model_at(target, sources)) is not None:
                raise OutputPathError(
                    f"{target}: the split's output is the input model {same}; give a folder (new or empty)"
                )
            raise OutputPathError(f"{target}: the split's output is a file; give a folder (new or empty)")
        parent = target.absolute().parent
        if not parent.is_dir():
            what = "is not a folder" if parent.exists() else "does not exist"
            raise OutputPathError(f"{target}: cannot write the split: the folder {parent} {what}")
        held = sorted(p.name for p in target.iterdir()) if target.is_dir() else []
    except OSError as err:  # a folder on the way this user may not enter
        raise OutputPathError(f"{target}: cannot write the split: {err.strerror or err}") from None
    if held:
        inside = [
            str(s) for s in sources if os.path.isfile(s) and Path(s).absolute().parent == target.absolute()
        ]
        why = (
            f"it holds the input model {inside[0]}"
            if inside
            else f"it holds {len(held)} file(s): {held[0]}, ..."
        )
        raise OutputPathError(
            f"{target}: the split's folder is not empty ({why}); a split is written as a whole into a "
            "new or empty folder: choose another"
        )
    check_writable_folder(parent, target)  # the pieces are staged beside the folder, then renamed into it
    return target


def _folder_mode() -> int:
    """The mode a new folder gets here (0777 less the umask), as ``mkdir`` would make it."""
    from explorer.isolation.io import new_file_mode

    mode = new_file_mode()
    return mode | ((mode & 0o444) >> 2)  # read implies search, as 0777 & ~umask gives it


def _publish(staging: Path, target: Path) -> None:
    """Rename the staged folder to ``target`` (new, or empty: rename replaces an empty folder)."""
    for item in staging.iterdir():
        with contextlib.suppress(OSError):
            from explorer.isolation.io import new_file_mode

            os.chmod(item, new_file_mode())
    with contextlib.suppress(OSError):
        os.chmod(staging, _folder_mode())
    try:
        os.replace(staging, target)
    except OSError as err:
        raise OutputPathError(
            f"{target}: cannot put the split in place ({err.strerror or err}); nothing was written there"
        ) from None


def split_partitions(
    graph: ModelGraph,
    target: str | Target | Partitioning | CoverageReport,
    out_dir: str | os.PathLike[str],
    *,
    timeout: float | None = None,
) -> SplitResult:
    """Write each piece of ``graph`` for ``target`` as an ONNX model in ``out_dir``, with the manifest.

    Parameters
    ----------
    graph : ModelGraph
        An ONNX graph (load it with ``input_shapes`` to write pieces with fixed shapes).
    target : str, Target, Partitioning or CoverageReport
        As :func:`plan_pieces`.
    out_dir : path
        A new or empty folder (:func:`check_split_folder`).
    timeout : float, optional
        The worker's time limit for writing and checking the pieces.

    Returns
    -------
    SplitResult

    Raises
    ------
    OutputPathError
        The folder cannot take the split (checked before any work); nothing is left behind.
    UsageError
        A model output no piece produces (an initializer), or a report of several targets.
    InvalidModelError
        The model fails the ONNX checker, so its pieces do (nothing is written).

    Examples
    --------
    >>> import os, tempfile
    >>> from explorer import load
    >>> out = os.path.join(tempfile.mkdtemp(), "pieces")
    >>> result = split_partitions(load("zoo:detection_head"), "nnapi", out)
    >>> result.summary
    '7 pieces: 3 partitions on Android NNAPI (NPU / DSP / GPU), 4 fallback islands on the CPU'
    >>> sorted(os.listdir(out))[:2], os.path.basename(result.manifest)
    (['01-fallback1.onnx', '02-partition1.onnx'], 'partitions.json')
    """
    from explorer.isolation import worker
    from explorer.isolation.io import write_text_atomic
    from explorer.onnx_adapter.adapter import onnx_model
    from explorer.onnx_adapter.model_files import worker_source

    folder = check_split_folder(out_dir, graph.source)
    model = onnx_model(graph, "a split")
    p = _partitioning(graph, target)
    pieces = plan_pieces(graph, p)
    inputs = tuple(
        v.name for v in model.graph.input if v.name not in {t.name for t in model.graph.initializer}
    )
    outputs = tuple(v.name for v in model.graph.output)
    made = {t.name for piece in pieces for t in piece.outputs} | set(inputs)
    missing = [o for o in outputs if o not in made]
    if missing:
        raise UsageError(
            f"{graph.source}: the output {missing[0]} is no node's output (an initializer or a constant): "
            "no piece produces it, so the pieces cannot give the model's outputs"
        )
    result = SplitResult(str(folder), graph.source, p.target, p.device, p.fallback, pieces, inputs, outputs)
    staging = Path(
        tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".split.tmp", dir=folder.absolute().parent)
    )
    try:
        specs = [
            {
                "file": piece.file,
                "name": f"{model.graph.name or 'graph'}.{piece.file.removesuffix('.onnx').split('-', 1)[1]}",
                "indices": [graph.nx.nodes[n]["index"] for n in piece.nodes],
                "inputs": [t.to_dict() for t in piece.inputs],
                "outputs": [t.to_dict() for t in piece.outputs],
            }
            for piece in pieces
        ]
        try:
            worker.run_on_model(
                write_pieces,
                worker_source(graph),
                specs,
                str(staging),
                timeout=timeout,
                step=f"split for {p.target}",
            )
        except InvalidModelError as err:  # raised in the worker, where the model's name is not known
            raise InvalidModelError(err.reason, path=graph.source) from None
        write_text_atomic(json.dumps(result.to_dict(), indent=1), staging / MANIFEST)
        _publish(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return result


# --------------------------------------------------------------------------- the worker's part


def _names_read(node: Any) -> set[str]:
    """The tensor names a node reads, its subgraphs' reads included (names they define are left in:
    the caller keeps only those the main graph defines)."""
    from explorer.onnx_adapter.protos import subgraph_attrs

    names = {n for n in node.input if n}
    stack = [g for attr in node.attribute for _, g in subgraph_attrs(attr)]
    while stack:
        sub = stack.pop()
        for inner in sub.node:
            names.update(n for n in inner.input if n)
            stack.extend(g for attr in inner.attribute for _, g in subgraph_attrs(attr))
    return names


def _value_info(entry: Mapping[str, Any], inferred: Mapping[str, Any]) -> Any:
    """A graph input or output of a piece: its type from the plan, else from shape inference."""
    import onnx

    from explorer.onnx_adapter.tensor_protos import dtype_from_name

    elem = dtype_from_name(entry["dtype"]) if entry.get("dtype") else onnx.TensorProto.UNDEFINED
    if elem == onnx.TensorProto.UNDEFINED and entry["name"] in inferred:
        value = onnx.ValueInfoProto()
        value.CopyFrom(inferred[entry["name"]])
        return value
    shape = entry.get("shape")
    dims = None if shape is None else [d if isinstance(d, (int, str)) else None for d in shape]
    return onnx.helper.make_tensor_value_info(entry["name"], elem, dims)


def write_pieces(path: str | os.PathLike[str], specs: Sequence[Mapping[str, Any]], folder: str) -> list[str]:
    """Write each piece of ``specs`` as a model file in ``folder``, and check it (call it in the worker).

    Each spec has ``file``, ``name`` (the graph's), ``indices`` (its nodes' positions in the
    model's node list), ``inputs`` and ``outputs`` (``{"name", "dtype", "shape"}``). A piece
    gets its nodes, copies of the initializers and folded ``Constant`` nodes they read (in
    their subgraphs too), the model's opsets, IR version and local functions. Pieces over
    2 GiB keep their weights in ``<file>.data`` beside them.

    Parameters
    ----------
    path : path
        The model file (read only; its external data is read beside it).
    specs : sequence of mapping
        The pieces.
    folder : str
        Where to write them.

    Returns
    -------
    list of str
        The files written.

    Raises
    ------
    UsageError
        A spec with no node indices.
    InvalidModelError
        A piece fails the ONNX checker because the model does.
    onnx.checker.ValidationError
        A piece is not a valid model though the model is (a bug of the split).

    Examples
    --------
    >>> import os, tempfile
    >>> from explorer import zoo
    >>> spec = {"file": "relu.onnx", "name": "relu", "indices": [0],
    ...         "inputs": [{"name": "x", "dtype": "float32", "shape": [3]}],
    ...         "outputs": [{"name": "y", "dtype": "float32", "shape": [3]}]}
    >>> import onnx
    >>> folder = tempfile.mkdtemp()
    >>> onnx.save(zoo.single_op("Relu", (3,)), os.path.join(folder, "model.onnx"))
    >>> write_pieces(os.path.join(folder, "model.onnx"), [spec], folder)
    ['relu.onnx']
    """
    import onnx

    from explorer.onnx_adapter.files import check_model, save_model

    model = onnx.load(os.fspath(path))
    nodes = list(model.graph.node)
    initializers = {t.name: t for t in model.graph.initializer}
    taken = {i for spec in specs for i in spec["indices"]}
    constants = {  # folded Constant nodes: in no piece; each piece that reads one gets its copy
        n.output[0]: n for i, n in enumerate(nodes) if i not in taken and n.op_type == "Constant" and n.output
    }
    written = []
    for spec in specs:
        if not spec["indices"]:
            raise UsageError(
                f"specs: piece {spec['file']!r} has no nodes (its 'indices' is empty); "
                "each piece needs one node index or more"
            )
        chosen = [nodes[i] for i in sorted(spec["indices"])]
        produced = {o for n in chosen for o in n.output}
        boundary = {e["name"] for e in spec["inputs"]}
        read = set().union(*(_names_read(n) for n in chosen)) - produced - boundary
        own_constants = [constants[name] for name in sorted(read) if name in constants]
        weights = [initializers[name] for name in sorted(read) if name in initializers]
        graph = onnx.helper.make_graph(
            [*own_constants, *chosen],
            spec["name"],
            [_value_info(e, {}) for e in spec["inputs"]],
            [_value_info(e, {}) for e in spec["outputs"]],
            initializer=weights,
        )
        piece = onnx.helper.make_model(
            graph,
            opset_imports=list(model.opset_import),
            ir_version=model.ir_version,
            functions=list(model.functions),
            producer_name="onnx-graph-explorer split",
        )
        if any(e.type.tensor_type.elem_type == onnx.TensorProto.UNDEFINED for e in graph.output):
            inferred = onnx.shape_inference.infer_shapes(piece)
            known = {v.name: v for v in (*inferred.graph.value_info, *inferred.graph.output)}
            graph.ClearField("output")
            graph.output.extend(_value_info(e, known) for e in spec["outputs"])
            piece.graph.CopyFrom(graph)
        target = Path(folder) / spec["file"]
        save_model(piece, target)
        try:
            check_model(target, full_check=True)
        except Exception as err:  # the model's own fault, or the split's (a bug)
            try:
                check_model(path, full_check=True)
            except Exception as original:
                first = (str(original).strip().splitlines() or [type(original).__name__])[0]
                raise InvalidModelError(
                    f"the model does not pass the ONNX checker ({type(original).__name__}: {first}), "
                    f"so neither does its piece {spec['file']}"
                ) from None
            raise err
        written.append(spec["file"])
    return written


# --------------------------------------------------------------------------- running the chain


def read_split(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of a split's folder (its pieces, inputs and outputs).

    Raises
    ------
    UsageError
        No manifest there, or one of another format.

    Examples
    --------
    >>> import os, tempfile
    >>> from explorer import load
    >>> out = os.path.join(tempfile.mkdtemp(), "pieces")
    >>> _ = split_partitions(load("zoo:mlp"), "ort-cpu", out)
    >>> [p["file"] for p in read_split(out)["pieces"]]
    ['01-partition1.onnx']
    """
    from explorer.isolation.io import read_json_file

    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise UsageError(
            f"{folder}: no {MANIFEST} here: not a split's folder (onnx-explorer coverage --split)"
        )
    manifest = read_json_file(path, what="a split's manifest")
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise UsageError(f"{path}: not a manifest of {MANIFEST_FORMAT!r}")
    return manifest


def run_pieces(folder: str, feeds: Mapping[str, Any], optimization: str = "all") -> dict[str, Any]:
    """Run a split's pieces in order on ONNX Runtime's CPU provider (call it in the worker).

    Parameters
    ----------
    folder : str
        The split's folder.
    feeds : mapping
        The model's inputs by name.
    optimization : str
        ONNX Runtime's graph optimisation level for each piece's session.

    Returns
    -------
    dict
        The model's outputs by name, in its output order.

    Examples
    --------
    >>> import os, tempfile
    >>> from explorer import load
    >>> from explorer.isolation import worker
    >>> from explorer.onnx_adapter.inputs import random_feeds
    >>> graph, out = load("zoo:mlp"), os.path.join(tempfile.mkdtemp(), "pieces")
    >>> _ = split_partitions(graph, "ort-cpu", out)
    >>> {k: v.shape for k, v in worker.run(run_pieces, out, random_feeds(graph.model)).items()}
    {'logits': (1, 10)}
    """
    from explorer.isolation.worker import report
    from explorer.onnx_adapter.ort_run import ort_session

    manifest = read_split(folder)
    values: dict[str, Any] = dict(feeds)
    pieces = manifest["pieces"]
    for k, piece in enumerate(pieces):
        report(k / max(1, len(pieces)), f"piece {piece['order']} of {len(pieces)}: {piece['file']}")
        session = ort_session(Path(folder) / piece["file"], None, optimization)
        wanted = [i.name for i in session.get_inputs()]
        absent = [name for name in wanted if name not in values]
        if absent:
            raise UsageError(f"{piece['file']} reads {absent[0]}, which no input or earlier piece gives")
        names = [o.name for o in session.get_outputs()]
        values.update(zip(names, session.run(names, {n: values[n] for n in wanted}), strict=True))
    return {name: values[name] for name in manifest["outputs"]}


def run_split(
    out_dir: str | os.PathLike[str],
    feeds: Mapping[str, np.ndarray],
    *,
    optimization: str = "all",
    timeout: float | None = None,
) -> dict[str, np.ndarray]:
    """Run a split's pieces chained on ONNX Runtime (CPU) in the worker; return the model's outputs.

    Parameters
    ----------
    out_dir : path
        A folder :func:`split_partitions` wrote.
    feeds : mapping
        The model's inputs by name.
    optimization : str
        ONNX Runtime's graph optimisation level for each piece.
    timeout : float, optional
        The worker's time limit.

    Returns
    -------
    dict
        Output name -> array, in the model's output order.

    Raises
    ------
    UsageError
        Not a split's folder, or an input missing from ``feeds``.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from explorer import load
    >>> from explorer.onnx_adapter.inputs import random_feeds
    >>> from explorer.onnx_adapter.ort_run import run_onnxruntime
    >>> graph, out = load("zoo:detection_head"), os.path.join(tempfile.mkdtemp(), "pieces")
    >>> _ = split_partitions(graph, "nnapi", out)
    >>> feeds = random_feeds(graph.model)
    >>> chained = run_split(out, feeds)
    >>> whole = run_onnxruntime(graph.model, feeds)
    >>> all(np.allclose(a, b, atol=1e-5) for a, b in zip(whole, chained.values()))
    True
    """
    import numpy as np

    from explorer.isolation import worker

    folder = os.path.abspath(out_dir)  # a warm worker does not follow the caller's chdir
    read_split(folder)  # refused here, by name, before the worker starts
    outputs = worker.run(run_pieces, folder, dict(feeds), optimization, timeout=timeout, step="split: pieces")
    return {name: np.asarray(value) for name, value in outputs.items()}

"""A float model and its QDQ version side by side: which node is which, which Q/DQ pairs belong to whom,
the inputs to run them on, and the QDQ model with chosen nodes kept in float.

A QDQ model (ONNX Runtime's ``quantize_static`` in QDQ format, :func:`explorer.targets.prepare.
prepare_for_target` for ``qnn-htp``, or another tool's) keeps the float model's ops and node names, and puts a
``QuantizeLinear`` -> ``DequantizeLinear`` pair on the tensors between them and a ``DequantizeLinear`` on
each quantised weight. :func:`pair_models` checks that two models correspond (same inputs and outputs,
every float node found in the QDQ model by its name, except the activations a quantiser folds into
the range of the tensor before them: ``Relu``, ``Clip``) and maps the QDQ model's nodes onto the float
model's names.

:func:`keep_in_float` removes quantisation around chosen nodes. Each Q/DQ pair belongs to the node that
reads it (a graph output's to the node that writes it): a node kept in float reads its activations
without their Q/DQ pair (an activation the quantiser folded, a ``Relu`` say, is put back) and its
weights from the float model. Keeping every node in float gives the float model's outputs; keeping none
gives the QDQ model as it is.

Examples
--------
>>> pair = pair_models(*tiny_pair())
>>> pair.order, [o.name for o in keep_in_float(pair, {"/fc/MatMul"}).graph.output]
(['/fc/MatMul', '/fc/Add'], ['y'])
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import ModelProto, numpy_helper

from explorer.core.errors import ExplorerError, RuntimeUnsupportedError, UsageError
from explorer.onnx_adapter.inputs import concrete_input_shapes, random_feeds
from explorer.onnx_adapter.model_files import new_model_dir, own_folder, worker_source
from explorer.onnx_adapter.tensor_protos import shape_from_type
from explorer.onnx_adapter.weights import external_tensors, tensor_array

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = [
    "QDQ_OPS",
    "FOLDED_OPS",
    "ModelsDoNotCorrespond",
    "ModelPair",
    "Samples",
    "pair_models",
    "keep_in_float",
    "read_samples",
    "run_samples",
    "model_file",
    "runtime_refusal",
    "producers_of",
    "dequantized_source",
    "tiny_pair",
]

QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
"""The ops of the quantisation itself (never reported as a node of the model)."""

FOLDED_OPS = frozenset({"Relu", "Clip"})
"""Activations a QDQ quantiser may remove, their clipping done by the range of the tensor before them."""

_SHOWN = 8


class ModelsDoNotCorrespond(UsageError):
    """The second model is not a QDQ version of the first (or not a QDQ model at all): exit 2.

    Examples
    --------
    >>> str(ModelsDoNotCorrespond("q.onnx: no QuantizeLinear", path="q.onnx"))
    'q.onnx: no QuantizeLinear'
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


@dataclass(frozen=True)
class ModelPair:
    """A float model and its QDQ version, nodes matched.

    Attributes
    ----------
    float_graph, qdq_graph : ModelGraph
        The two models as loaded.
    float_model, qdq_model : onnx.ModelProto
        Their protos with every weight in memory.
    node_map : mapping
        QDQ model's compute node (not Q/DQ) -> the float model's node of the same name.
    order : list of str
        The QDQ model's compute nodes that have quantisation of their own to remove (a Q/DQ pair on an
        input, a quantised weight, a quantised graph output), in graph order: what the search bisects.
    notes : tuple of str
        What did not match, in words.
    """

    float_graph: ModelGraph = field(repr=False)
    qdq_graph: ModelGraph = field(repr=False)
    float_model: ModelProto = field(repr=False)
    qdq_model: ModelProto = field(repr=False)
    node_map: Mapping[str, str]
    order: list[str]
    notes: tuple[str, ...] = ()

    @property
    def float_source(self) -> str:
        """What messages call the float model."""
        return self.float_graph.source

    @property
    def qdq_source(self) -> str:
        """What messages call the QDQ model."""
        return self.qdq_graph.source

    def op_of(self, node: str) -> str | None:
        """The op of a float model's node (None: no such node).

        Examples
        --------
        >>> pair_models(*tiny_pair()).op_of("/act/Relu")
        'Relu'
        """
        return next((n.op_type for n in self.float_model.graph.node if n.name == node), None)


def tiny_pair() -> tuple[ModelProto, ModelProto]:
    """A float ``MatMul -> Add -> Relu`` model and its QDQ version from ``quantize_static`` (examples, tests).

    Examples
    --------
    >>> float_model, qdq_model = tiny_pair()
    >>> sorted({n.op_type for n in qdq_model.graph.node})
    ['Add', 'DequantizeLinear', 'MatMul', 'QuantizeLinear']
    """
    import tempfile

    from onnx import TensorProto, helper
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "W")
    bias = numpy_helper.from_array(np.full(3, 0.1, np.float32), "b")
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="/fc/MatMul"),
        helper.make_node("Add", ["h", "b"], ["z"], name="/fc/Add"),
        helper.make_node("Relu", ["z"], ["y"], name="/act/Relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [weight, bias],
    )
    float_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    float_model.ir_version = 8
    samples = [{"x": rng.standard_normal((1, 4)).astype(np.float32)} for _ in range(4)]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(samples)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.items, None)

    with tempfile.TemporaryDirectory() as tmp:
        onnx.save(float_model, os.path.join(tmp, "f.onnx"))
        quantize_static(
            os.path.join(tmp, "f.onnx"), os.path.join(tmp, "q.onnx"), Reader(), quant_format=QuantFormat.QDQ
        )
        qdq_model = onnx.load(os.path.join(tmp, "q.onnx"))
    return float_model, qdq_model


# --------------------------------------------------------------------------- the models


def _graph(source: Any) -> ModelGraph:
    from explorer.core.graph import ModelGraph
    from explorer.onnx_adapter.load import load

    return source if isinstance(source, ModelGraph) else load(source)


def _full_model(graph: ModelGraph) -> ModelProto:
    """A copy of the graph's model with every weight's values in memory."""
    model = ModelProto()
    model.CopyFrom(graph.model)
    for tensor in external_tensors(model):
        values = tensor_array(tensor, graph.weights_dir, graph.source)
        tensor.CopyFrom(numpy_helper.from_array(np.asarray(values), tensor.name))
    return model


def _inputs(model: ModelProto) -> dict[str, onnx.ValueInfoProto]:
    weights = {t.name for t in model.graph.initializer}
    return {v.name: v for v in model.graph.input if v.name not in weights}


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_SHOWN])
    return shown + (f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")


def pair_models(float_model: Any, qdq_model: Any) -> ModelPair:
    """Check that ``qdq_model`` is a QDQ version of ``float_model`` and match their nodes.

    Parameters
    ----------
    float_model, qdq_model : ModelGraph or anything :func:`explorer.load` accepts
        The float model (the one that was quantised) and its QDQ version.

    Returns
    -------
    ModelPair

    Raises
    ------
    ModelsDoNotCorrespond
        The QDQ model has no Q/DQ nodes, the float model has some, their inputs or outputs differ, or a
        float node (other than a folded activation) has no node of its name in the QDQ model: each named.

    Examples
    --------
    >>> pair = pair_models(*tiny_pair())
    >>> dict(pair.node_map), pair.notes
    ({'/fc/MatMul': '/fc/MatMul', '/fc/Add': '/fc/Add'}, ())
    >>> pair_models(tiny_pair()[0], tiny_pair()[0])
    Traceback (most recent call last):
    ...
    explorer.runtimes.qdq_pairs.ModelsDoNotCorrespond: tiny: not a QDQ model: it has no QuantizeLinear or \
DequantizeLinear nodes (give the float model first, its QDQ version second)
    """
    fgraph, qgraph = _graph(float_model), _graph(qdq_model)
    fsrc, qsrc = fgraph.source, qgraph.source
    fnodes, qnodes = list(fgraph.model.graph.node), list(qgraph.model.graph.node)
    if not any(n.op_type in QDQ_OPS for n in qnodes):
        raise ModelsDoNotCorrespond(
            f"{qsrc}: not a QDQ model: it has no QuantizeLinear or DequantizeLinear nodes (give the float "
            "model first, its QDQ version second)",
            path=qsrc,
        )
    quantised_float = sum(n.op_type in QDQ_OPS for n in fnodes)
    if quantised_float:
        raise ModelsDoNotCorrespond(
            f"{fsrc}: not a float model: it has {quantised_float} QuantizeLinear/DequantizeLinear nodes "
            "(give the float model first, its QDQ version second)",
            path=fsrc,
        )
    problems = []
    fin, qin = sorted(_inputs(fgraph.model)), sorted(_inputs(qgraph.model))
    if fin != qin:
        problems.append(f"inputs {fin} against {qin}")
    fout = sorted(o.name for o in fgraph.model.graph.output)
    qout = sorted(o.name for o in qgraph.model.graph.output)
    if fout != qout:
        problems.append(f"outputs {fout} against {qout}")
    compute = {n.name: n for n in qnodes if n.op_type not in QDQ_OPS}
    missing = [
        f"{n.name} [{n.op_type}]" for n in fnodes if n.name not in compute and n.op_type not in FOLDED_OPS
    ]
    if missing:
        problems.append(
            f"{len(missing)} of {len(fnodes)} nodes of {fsrc} are not in {qsrc}: {_listed(missing)}"
        )
    by_name = {n.name: n for n in fnodes}
    changed = [
        f"{name} ({by_name[name].op_type} -> {node.op_type})"
        for name, node in compute.items()
        if name in by_name and by_name[name].op_type != node.op_type
    ]
    if changed:
        problems.append(f"nodes of the same name run other ops: {_listed(changed)}")
    if problems:
        raise ModelsDoNotCorrespond(
            f"{fsrc} and {qsrc} do not correspond: {'; '.join(problems)} (give the float model that was "
            "quantised: for `prepare --target qnn-htp`, the model after its onnxsim and QNN preprocessing "
            "steps)",
            path=qsrc,
        )
    node_map = {name: name for name in compute if name in by_name}
    extra = [f"{name} [{node.op_type}]" for name, node in compute.items() if name not in by_name]
    notes = (f"nodes of {qsrc} not in {fsrc}, left quantised: {_listed(extra)}",) if extra else ()
    fmodel, qmodel = _full_model(fgraph), _full_model(qgraph)
    order = [n.name for n in qmodel.graph.node if n.name in node_map and _owns_quantisation(qmodel, n)]
    return ModelPair(fgraph, qgraph, fmodel, qmodel, node_map, order, notes)


def producers_of(model: ModelProto) -> dict[str, onnx.NodeProto]:
    """Tensor name -> the node that writes it.

    Examples
    --------
    >>> producers_of(tiny_pair()[0])["h"].name
    '/fc/MatMul'
    """
    return {out: node for node in model.graph.node for out in node.output if out}


def dequantized_source(producers: Mapping[str, onnx.NodeProto], tensor: str) -> tuple[str, str] | None:
    """``(kind, source)`` of a tensor a DequantizeLinear made: ``("activation", the float tensor before its
    Q/DQ pairs)`` or ``("weight", the quantised initializer)``; None for any other tensor.

    Examples
    --------
    >>> made = producers_of(tiny_pair()[1])
    >>> dequantized_source(made, "W_DequantizeLinear_Output"), dequantized_source(made, "x")
    (('weight', 'W_quantized'), None)
    """
    node = producers.get(tensor)
    if node is None or node.op_type != "DequantizeLinear":
        return None
    quantize = producers.get(node.input[0])
    if quantize is None:
        return "weight", node.input[0]
    if quantize.op_type != "QuantizeLinear":
        return None
    before = quantize.input[0]
    deeper = dequantized_source(producers, before)  # Q/DQ chains (a requantisation): the float-most tensor
    return deeper if deeper is not None and deeper[0] == "activation" else ("activation", before)


def _owns_quantisation(model: ModelProto, node: onnx.NodeProto) -> bool:
    producers = producers_of(model)
    if any(dequantized_source(producers, t) for t in node.input if t):
        return True
    outputs = {o.name for o in model.graph.output}
    for out in outputs:
        found = dequantized_source(producers, out)
        if found and found[0] == "activation" and producers.get(found[1]) is node:
            return True
    return False


# --------------------------------------------------------------------------- keeping nodes in float


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = f"{name}__float", 2
    while candidate in taken:
        candidate, n = f"{name}__float{n}", n + 1
    taken.add(candidate)
    return candidate


def keep_in_float(pair: ModelPair, nodes: Iterable[str]) -> ModelProto:
    """The QDQ model with ``nodes`` (QDQ model node names) kept in float, the rest quantised as it is.

    A node kept in float reads each activation from before its Q/DQ pairs (a folded ``Relu``/``Clip`` of
    the float model put back on it) and each quantised weight from the float model's same input; a
    graph output it writes loses its Q/DQ pair. Q/DQ nodes nobody reads any more are removed.

    Parameters
    ----------
    pair : ModelPair
        The models (:func:`pair_models`).
    nodes : iterable of str
        The nodes to keep in float.

    Returns
    -------
    onnx.ModelProto
        A new model (``pair`` is not changed).

    Examples
    --------
    >>> pair = pair_models(*tiny_pair())
    >>> every = keep_in_float(pair, pair.order)
    >>> sorted({n.op_type for n in every.graph.node})
    ['Add', 'Identity', 'MatMul', 'Relu']
    >>> len(keep_in_float(pair, []).graph.node) == len(pair.qdq_model.graph.node)
    True
    """
    keep = set(nodes)
    model = ModelProto()
    model.CopyFrom(pair.qdq_model)
    graph = model.graph
    producers = producers_of(model)
    float_producers = producers_of(pair.float_model)
    float_nodes = {n.name: n for n in pair.float_model.graph.node}
    float_weights = {t.name: t for t in pair.float_model.graph.initializer}
    compute = set(pair.node_map)
    taken = {t for n in graph.node for t in (*n.input, *n.output)} | {t.name for t in graph.initializer}
    taken |= {v.name for v in graph.input}
    after: dict[str, list[onnx.NodeProto]] = {}  # producer node name ("" for a graph input) -> nodes to add
    restored: dict[str, str] = {}

    def restore(tensor: str, as_float: str) -> str:
        """``tensor`` (``as_float`` in the float model) as the float model has it: a folded activation
        put back on it."""
        if tensor in restored:
            return restored[tensor]
        made = float_producers.get(tensor if tensor in float_producers else as_float)
        result = tensor
        if made is not None and made.name not in compute and made.op_type in FOLDED_OPS:
            extra = []
            for name in made.input[1:]:
                if name and name in float_weights and name not in taken:
                    graph.initializer.append(float_weights[name])
                    taken.add(name)
                extra.append(name)
            result = _unique(tensor, taken)
            copy = onnx.helper.make_node(made.op_type, [tensor, *extra], [result], name=result)
            copy.attribute.extend(made.attribute)
            owner = producers.get(tensor)
            after.setdefault(owner.name if owner is not None else "", []).append(copy)
        restored[tensor] = result
        return result

    for node in graph.node:
        if node.name not in keep or node.op_type in QDQ_OPS:
            continue
        for i, tensor in enumerate(node.input):
            found = dequantized_source(producers, tensor) if tensor else None
            if found is None:
                continue
            kind, source = found
            if kind == "activation":
                node.input[i] = restore(source, tensor)
                continue
            reference = float_nodes.get(pair.node_map.get(node.name, ""))
            name = reference.input[i] if reference is not None and i < len(reference.input) else ""
            if name not in float_weights:
                name = source.removesuffix("_quantized")
            weight = float_weights.get(name)
            dequantized = next((t for t in graph.initializer if t.name == source), None)
            if weight is None or (dequantized is not None and list(weight.dims) != list(dequantized.dims)):
                continue  # no float counterpart: the weight stays quantised
            copy = onnx.TensorProto()
            copy.CopyFrom(weight)
            copy.name = _unique(name, taken)
            graph.initializer.append(copy)
            node.input[i] = copy.name
    dropped = set()
    for out in graph.output:
        found = dequantized_source(producers, out.name)
        owner = producers.get(found[1]) if found and found[0] == "activation" else None
        if owner is None or owner.name not in keep:
            continue
        dropped.add(producers[out.name].name)  # its DequantizeLinear; the output is now an Identity's
        identity = onnx.helper.make_node(
            "Identity", [restore(found[1], out.name)], [out.name], name=f"{out.name}__float"
        )
        after.setdefault(owner.name, []).append(identity)
    nodes_now = []
    for node in [*after.pop("", []), *graph.node]:
        if node.name in dropped and node.op_type == "DequantizeLinear":
            continue
        nodes_now.append(node)
        nodes_now.extend(after.pop(node.name, []))
    _prune(graph, nodes_now)
    return model


def _prune(graph: onnx.GraphProto, nodes: list[onnx.NodeProto]) -> None:
    """Set ``graph``'s nodes to ``nodes`` less the Q/DQ nodes nobody reads; drop unread initializers."""
    outputs = {o.name for o in graph.output}
    while True:
        read = {t for n in nodes for t in n.input} | outputs
        kept = [n for n in nodes if n.op_type not in QDQ_OPS or any(o in read for o in n.output)]
        if len(kept) == len(nodes):
            break
        nodes = kept
    del graph.node[:]
    graph.node.extend(nodes)
    read = {t for n in nodes for t in n.input}
    weights = [t for t in graph.initializer if t.name in read]
    del graph.initializer[:]
    graph.initializer.extend(weights)


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Samples:
    """The inputs both models run on.

    Attributes
    ----------
    feeds : tuple of dict
        One dict (input name -> array) per sample.
    description : str
        Where they come from, in words (random ones say so).
    random : bool
        Whether they were generated (the fallback when none are given).
    """

    feeds: tuple[dict[str, np.ndarray], ...] = field(repr=False)
    description: str
    random: bool = False


def _declared(model: ModelProto) -> dict[str, tuple[list[Any], np.dtype]]:
    out = {}
    for name, value in _inputs(model).items():
        dims, elem = shape_from_type(value.type)
        out[name] = (list(dims or []), np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem or 1)))
    return out


def read_samples(
    model: ModelProto,
    feeds: Any = None,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    samples: int = 8,
    seed: int = 0,
    label: str = "the model",
) -> Samples:
    """The inputs to run ``model`` on: the user's, or ``samples`` random ones (the fallback, said so).

    Parameters
    ----------
    model : onnx.ModelProto
        The model whose inputs they are.
    feeds : None, mapping, sequence of mappings, path to an ``.npz``, or Samples
        One sample (input name -> array), a list of them, or an ``.npz`` holding an array per input: the
        samples stacked along a new first axis (an array of the input's own rank is one sample); Samples
        read already are returned as they are.
    input_shapes : mapping, optional
        Shapes of the random inputs' dynamic dimensions.
    samples : int
        How many random inputs to make when none are given.
    seed : int
        Seed of the first random input (``seed + i`` for the i-th).
    label : str
        What messages call the model.

    Raises
    ------
    UsageError
        A missing input, an array of the wrong rank or type, sample counts that differ, an unreadable file.

    Examples
    --------
    >>> float_model, _ = tiny_pair()
    >>> read_samples(float_model, samples=2).description
    '2 random inputs (seeds 0..1; give real ones for real ranges)'
    >>> s = read_samples(float_model, {"x": np.ones((5, 1, 4))})
    >>> len(s.feeds), s.feeds[0]["x"].dtype.name, s.description
    (5, 'float32', '5 samples given')
    """
    if isinstance(feeds, Samples):
        return feeds
    declared = _declared(model)
    if feeds is None:
        shapes = concrete_input_shapes(model, input_shapes)
        made = tuple(random_feeds(model, shapes, seed + i) for i in range(int(samples)))
        seeds = f"seeds {seed}..{seed + len(made) - 1}"
        words = f"{len(made)} random inputs ({seeds}; give real ones for real ranges)"
        return Samples(made, words, random=True)
    where = "the inputs given"
    if isinstance(feeds, (str, os.PathLike)):
        where = os.fspath(feeds)
        feeds = _read_npz(where)
    if isinstance(feeds, Mapping):
        feeds = _split(feeds, declared, where)
    items = [dict(sample) for sample in feeds]
    if not items:
        raise UsageError(f"{where}: no samples to run {label} on")
    checked = tuple(_check_sample(sample, declared, where, label) for sample in items)
    what = (
        f"{len(checked)} samples given"
        if where == "the inputs given"
        else f"{len(checked)} samples from {where}"
    )
    return Samples(checked, what)


def _read_npz(path: str) -> dict[str, np.ndarray]:
    from explorer.isolation.io import check_model_file

    check_model_file(Path(path), label=path)  # missing, a folder, a FIFO: refused naming the file
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (OSError, ValueError, EOFError) as err:
        raise UsageError(f"{path}: not a readable .npz of input arrays ({err})") from None


def _split(arrays: Mapping[str, Any], declared: Mapping[str, tuple[list[Any], np.dtype]], where: str) -> list:
    """An ``.npz``'s (or one dict's) arrays as samples: stacked along a new first axis, or one sample."""
    missing = [name for name in declared if name not in arrays]
    if missing:
        raise UsageError(
            f"{where}: no array for input {', '.join(map(repr, missing))} (it holds {sorted(arrays)})"
        )
    counts = {}
    for name, (dims, _) in declared.items():
        value = np.asarray(arrays[name])
        counts[name] = value.shape[0] if value.ndim == len(dims) + 1 else None
    if all(c is None for c in counts.values()):
        return [{name: arrays[name] for name in declared}]
    if len(set(counts.values())) != 1:
        raise UsageError(f"{where}: the inputs hold different numbers of samples: {counts}")
    n = next(iter(counts.values()))
    return [{name: np.asarray(arrays[name])[i] for name in declared} for i in range(n)]


def _check_sample(
    sample: Mapping[str, Any], declared: Mapping[str, tuple[list[Any], np.dtype]], where: str, label: str
) -> dict[str, np.ndarray]:
    out = {}
    for name, (dims, dtype) in declared.items():
        if name not in sample:
            raise UsageError(f"{where}: no value for input {name!r} of {label}")
        value = np.asarray(sample[name])
        if value.ndim != len(dims):
            raise UsageError(
                f"{where}: input {name!r} has shape {list(value.shape)}, {label} takes rank {len(dims)} "
                f"({dims})"
            )
        fixed = [(i, d) for i, d in enumerate(dims) if isinstance(d, int) and d > 0 and value.shape[i] != d]
        if fixed:
            raise UsageError(f"{where}: input {name!r} has shape {list(value.shape)}, {label} takes {dims}")
        if value.dtype != dtype:
            if value.dtype.kind != dtype.kind or dtype.kind not in "fiu":
                raise UsageError(f"{where}: input {name!r} is {value.dtype}, {label} takes {dtype}")
            value = value.astype(dtype)
        out[name] = value
    return out


# --------------------------------------------------------------------------- running


def model_file(graph: ModelGraph) -> str:
    """A file of the graph's model a worker can read (the graph's own, or one written for it).

    Examples
    --------
    >>> from explorer import load, zoo
    >>> model_file(load(zoo.save("mlp"))).endswith("mlp.onnx"), model_file(load("zoo:mlp")).endswith(".onnx")
    (True, True)
    """
    source = worker_source(graph)
    if isinstance(source, str):
        return source
    folder = new_model_dir("pair-")
    own_folder(graph, folder)
    target = folder / "model.onnx"
    from explorer.core.tensors import over_protobuf_limit

    if over_protobuf_limit(source):
        onnx.save_model(source, str(target), save_as_external_data=True, location="model.onnx.data")
    else:
        target.write_bytes(source.SerializeToString())
    return str(target)


def run_samples(
    path: str, samples: Sequence[Mapping[str, np.ndarray]], *, optimization_level: str = "disable"
) -> list[list[np.ndarray]]:
    """Run a model file on each sample with ONNX Runtime's CPU provider (call it in the worker).

    Examples
    --------
    >>> from explorer.isolation import worker
    >>> outputs = worker.run_on_model(run_samples, tiny_pair()[1], [{"x": np.ones((1, 4), np.float32)}] * 2)
    >>> len(outputs), outputs[0][0].shape
    (2, (1, 3))
    """
    from explorer.onnx_adapter.ort_run import ort_session

    session = ort_session(path, None, optimization_level)
    names = [o.name for o in session.get_outputs()]
    return [session.run(names, dict(sample)) for sample in samples]


def runtime_refusal(err: BaseException, source: str) -> ExplorerError | None:
    """ONNX Runtime's refusal of a model (no kernel for an op, an unknown domain) as the typed error of
    exit 3; None for any other failure.

    Examples
    --------
    >>> message = ("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for "
    ...            "ConvInteger(10) node with name 'c'")
    >>> runtime_refusal(RuntimeError(message), "q.onnx").path
    'q.onnx'
    """
    from explorer.runtimes.ort_refusals import ort_refusal

    found = ort_refusal(str(err))
    if found is None:
        return None
    import onnxruntime

    return RuntimeUnsupportedError(
        found["reason"],
        runtime=f"onnxruntime {onnxruntime.__version__} CPUExecutionProvider",
        op_type=found.get("op_type"),
        domain=found.get("domain") or "",
        path=source,
    )

"""ONNX Runtime as a :class:`~explorer.runtimes.base.Runtime`, one per execution provider of the build.

Options are the graph optimisation level (``disable`` ... ``all``, ONNX Runtime's default
``all``) and the intra-op thread count (0: ONNX Runtime's default, one per physical core).
A provider the installed build lacks, or CUDA without a GPU, is not :meth:`~OrtRuntime.available`
and is skipped, not failed.

Examples
--------
>>> OrtRuntime().name, OrtRuntime(provider="CUDAExecutionProvider").name
('ort', 'ort-cuda')
>>> OrtRuntime(optimization="basic", threads=1).label
'ONNX Runtime CPU (basic, 1 thread)'
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from explorer.core.errors import ExplorerError, InvalidModelError, RuntimeUnsupportedError, UsageError
from explorer.isolation import worker
from explorer.isolation.worker import ProgressEvent
from explorer.onnx_adapter.adapter import opset_versions
from explorer.onnx_adapter.ort_run import ORT_LEVELS
from explorer.runtimes.base import PreparedSession, prepare_in_worker
from explorer.runtimes.ort_prepare import prepare_ort
from explorer.runtimes.ort_refusals import ort_node_failure

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = ["OrtRuntime", "PROVIDER_NAMES", "available_providers", "run_refused"]

PROVIDER_NAMES = {"CPUExecutionProvider": "cpu", "CUDAExecutionProvider": "cuda"}
"""Execution provider -> the short name after ``ort-`` (the CPU's is plain ``ort``)."""


def _providers_here() -> list[str]:
    import onnxruntime as ort

    return list(ort.get_available_providers())


@functools.cache
def available_providers() -> tuple[str, ...]:
    """The execution providers of the installed ONNX Runtime build (asked in the worker, once).

    Examples
    --------
    >>> "CPUExecutionProvider" in available_providers()
    True
    """
    return tuple(worker.run(_providers_here))


def _gpu_present() -> bool:
    import shutil

    return shutil.which("nvidia-smi") is not None


@dataclass(frozen=True)
class OrtRuntime:
    """ONNX Runtime with one execution provider.

    Parameters
    ----------
    provider : str
        The execution provider (``CPUExecutionProvider``, ``CUDAExecutionProvider``, ...).
    optimization : str
        Graph optimisation level: one of :data:`explorer.onnx_adapter.ort_run.ORT_LEVELS`.
    threads : int
        Intra-op threads; 0 is ONNX Runtime's default.
    strict_placement : bool
        Make the session with ``session.disable_cpu_ep_fallback`` = ``"1"`` for a provider other than
        the CPU's, so a node it does not take fails the session instead of running on the CPU
        (``bench --strict-placement``; :mod:`explorer.targets.strict_placement` lists those nodes).

    Examples
    --------
    >>> OrtRuntime().available()
    True
    """

    provider: str = "CPUExecutionProvider"
    optimization: str = "all"
    threads: int = 0
    strict_placement: bool = False

    family: ClassVar[str] = "ort"
    """How its profile names kernels and what memory it needs (:class:`~explorer.runtimes.base.Runtime`)."""
    places_nodes: ClassVar[bool] = True
    """It places each node on a provider (``--strict-placement`` applies)."""

    def __post_init__(self) -> None:
        if self.optimization not in ORT_LEVELS:
            raise UsageError(
                f"optimization must be one of {', '.join(ORT_LEVELS)}, not {self.optimization!r}"
            )

    @property
    def name(self) -> str:
        """``ort``, or ``ort-<provider>`` for other providers (``ort-cuda``)."""
        short = PROVIDER_NAMES.get(self.provider, self.provider.removesuffix("ExecutionProvider").lower())
        return "ort" if short == "cpu" else f"ort-{short}"

    @property
    def label(self) -> str:
        """``ONNX Runtime CPU (all)``, with the thread count when one was set."""
        short = PROVIDER_NAMES.get(self.provider, self.provider.removesuffix("ExecutionProvider"))
        threads = f", {self.threads} thread{'s' if self.threads != 1 else ''}" if self.threads else ""
        return f"ONNX Runtime {short.upper()} ({self.optimization}{threads})"

    @property
    def tuned(self) -> bool:
        """ONNX Runtime does not tune: False."""
        return False

    @property
    def missing(self) -> str | None:
        """Why it cannot run here, in words; None when it can: the installed build has the provider
        (and, for CUDA, a GPU is present).

        Examples
        --------
        >>> OrtRuntime().missing is None
        True
        >>> OrtRuntime("NoSuchExecutionProvider").missing.split(" (")[0]
        'this onnxruntime build has no NoSuchExecutionProvider'
        """
        providers = available_providers()
        if self.provider not in providers:
            return f"this onnxruntime build has no {self.provider} (it has {', '.join(providers)})"
        if self.provider == "CUDAExecutionProvider" and not _gpu_present():
            return "no NVIDIA GPU here (nvidia-smi is not on the PATH)"
        return None

    def explain_run_error(
        self, err: BaseException, graph: ModelGraph, shapes: Mapping[str, Sequence[int]], *, given: bool
    ) -> ExplorerError | None:
        """A contrib op's refusal of the inputs' shapes as a typed error (:func:`run_refused`); else None.

        Examples
        --------
        >>> from explorer import load
        >>> OrtRuntime().explain_run_error(RuntimeError("other"), load("zoo:mlp"), {}, given=False) is None
        True
        """
        return run_refused(err, graph, self.label, shapes, given=given)

    def available(self) -> bool:
        """Whether it can run here: :attr:`missing` is None."""
        return self.missing is None

    def options(self) -> dict[str, Any]:
        """``{"provider", "optimization", "threads"}`` (and ``"strict_placement": True`` when set)."""
        options = {"provider": self.provider, "optimization": self.optimization, "threads": self.threads}
        return {**options, "strict_placement": True} if self.strict_placement else options

    def prepare(
        self,
        graph: ModelGraph,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        *,
        progress: Callable[[ProgressEvent], object] | None = None,
    ) -> PreparedSession:
        """Create the ONNX Runtime session in the worker (or find it there).

        Raises
        ------
        RuntimeUnsupportedError
            ONNX Runtime refused the model for the model's sake: no kernel for an op at the
            version its opset resolves to (or for its types), an op of a domain it does not
            know, an opset newer than the build, a locale the machine lacks. The error names
            the op, its domain and opset, and the runtime (see
            :func:`explorer.runtimes.ort_refusals.ort_refusal`). Any other failure stays as it is.
        InvalidModelError
            A tensor's stored values disagree with its shape (ONNX Runtime checks them when it makes
            the session; :func:`explorer.runtimes.ort_refusals.ort_bad_tensor`): the error names the tensor.

        Examples
        --------
        >>> from explorer import load
        >>> OrtRuntime().prepare(load("zoo:mlp")).info["providers"]
        ['CPUExecutionProvider']
        >>> from onnx import TensorProto, helper
        >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
        >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
        >>> node = helper.make_node("Foo", ["x"], ["y"], domain="my.ops")
        >>> opsets = [helper.make_opsetid("", 17), helper.make_opsetid("my.ops", 3)]
        >>> custom = helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=opsets)
        >>> try:
        ...     OrtRuntime().prepare(load(custom))
        ... except RuntimeUnsupportedError as err:
        ...     print(err.op_type, err.domain, err.opset)
        Foo my.ops 3
        """
        key, info = prepare_in_worker(
            self, graph, input_shapes, prepare_ort, step=f"{self.label}: session", progress=progress
        )
        if not info.get("ok", True) and info.get("bad_tensor"):  # the file's fault, not a refusal
            raise InvalidModelError(
                f"{info['bad_tensor']} (ONNX Runtime {info.get('version', '')} refused the file): a corrupt "
                "or hand-edited model; re-export it, or make the tensor's dims match its values",
                path=graph.source,
            )
        if not info.get("ok", True):
            raise _refused(info, graph)
        return PreparedSession(self, key, info, graph, dict(input_shapes) if input_shapes else None)


def _refused(info: Mapping[str, Any], graph: ModelGraph) -> RuntimeUnsupportedError:
    """The typed error of ONNX Runtime's refusal (what ``prepare_ort`` returned), with the domain
    of the op (when the message did not say it) and the opset the model imports for it."""
    model = graph.model
    op, domain = info.get("op_type"), info.get("domain")
    if op and domain is None and model is not None:
        domain = _node_domain(model, str(op), str(info.get("node") or ""))
    opsets = opset_versions(graph)
    key = "" if domain in (None, "ai.onnx") else str(domain)
    node = f" (node {info['node']})" if info.get("node") else ""
    return RuntimeUnsupportedError(
        f"{info['reason']}{node}",
        runtime=f"onnxruntime {info.get('version', '')} {info.get('provider', '')}".replace("  ", " "),
        op_type=str(op) if op else None,
        domain=str(domain or ""),
        opset=opsets.get(key),
        path=graph.source,
    )


def _node_domain(model: Any, op: str, node: str) -> str:
    """The domain of the node called ``node`` with op ``op`` (or of any node with that op) in the
    model's graphs and functions; ``""`` when none has it."""
    from explorer.onnx_adapter.protos import iter_graphs

    graphs = [g.node for g, _ in iter_graphs(model.graph)] + [f.node for f in model.functions]
    found = [n for nodes in graphs for n in nodes if n.op_type == op]
    named = [n for n in found if node and n.name == node]
    return (named or found)[0].domain if found else ""


def run_refused(
    err: BaseException,
    graph: ModelGraph,
    runtime: str,
    shapes: Mapping[str, Sequence[int]],
    *,
    given: bool,
) -> ExplorerError | None:
    """ONNX Runtime's refusal, while running, of the inputs one of its contrib ops was given, as a typed
    error naming the op, the node, ONNX Runtime's reason and what to give instead; None for any other error.

    A ``com.microsoft`` op checks its inputs' shapes against each other when it runs (``GroupQueryAttention``:
    the KV cache's head dimension, the batch once a cache is given, the total length against the mask and
    the rotary cache), and ONNX Runtime reports a refusal as ``INVALID_ARGUMENT : Non-zero status code
    returned while running GroupQueryAttention node ...``. With shapes the user ``given``
    (``--input-shape``): a :class:`~explorer.core.errors.UsageError` (exit 2). With shapes made here: a
    :class:`~explorer.core.errors.RuntimeUnsupportedError` (exit 3), the runtime cannot take the model at
    the inputs made for it. A standard op's failure on shapes the user gave is a UsageError too; on
    shapes made here it stays what it is (our bug).

    Parameters
    ----------
    err : BaseException
        What running the session raised.
    graph : ModelGraph
        The model run.
    runtime : str
        The runtime's label.
    shapes : mapping
        The inputs' shapes of the call.
    given : bool
        Whether the user gave the shapes.

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:llama")
    >>> err = RuntimeError("Non-zero status code returned while running GroupQueryAttention node. "
    ...                    "Name:'gqa' Status Message: batch_size must be 1 when sequence_length > 1 and "
    ...                    "past context is given.")
    >>> shapes = {"input_ids": [2, 8], "past_key_values.0.key": [2, 2, 32, 8]}
    >>> refused = run_refused(err, g, "ONNX Runtime CPU (all)", shapes, given=True)
    >>> type(refused).__name__, "give a batch of 1 (--input-shape input_ids=1,8)" in str(refused)
    ('UsageError', True)
    >>> run_refused(ValueError("no"), g, "ONNX Runtime CPU (all)", shapes, given=True) is None
    True
    """
    failure = ort_node_failure(str(err))
    if failure is None:
        return None
    op, node, status = failure["op_type"], failure["node"], failure["status"]
    domain = _node_domain(graph.model, op, node)
    if not given and domain != "com.microsoft":
        return None  # a standard op refusing inputs made here: ours to fix, not the model's
    where = f"ONNX Runtime's {op} ({domain or 'ai.onnx'}, node {node!r}) refused"
    if given:
        hint = _shape_hint(op, status, graph, shapes)
        return UsageError(
            f"{graph.source}: {where} the inputs of --input-shape ({_shape_words(shapes)}): {status}; {hint}"
        )
    return RuntimeUnsupportedError(
        f"{where} the inputs made for it ({_shape_words(shapes)}): {status}; give the inputs' shapes with "
        "--input-shape, or time it on another runtime",
        runtime=runtime,
        op_type=op,
        domain=domain,
        opset=opset_versions(graph).get(domain),
        path=graph.source,
    )


def _shape_words(shapes: Mapping[str, Sequence[int]]) -> str:
    """``input_ids [2, 8], past_key_values.0.key [2, 2, 32, 16], ...``: the first few inputs' shapes."""
    words = [f"{name} {list(shape)}" for name, shape in list(shapes.items())[:3]]
    return ", ".join(words) + (", ..." if len(shapes) > 3 else "")


def _decoder_sizes(graph: ModelGraph, shapes: Mapping[str, Sequence[int]]) -> dict[str, int]:
    """batch, sequence (new tokens) and past (cached tokens) of a decoder's call, as its inputs say them."""
    from explorer.onnx_adapter.decoder import decoder_spec

    spec = decoder_spec(graph.model, graph.model_path)
    sizes: dict[str, int] = {}
    if spec is None:
        return sizes
    ids = shapes.get(spec.input_ids or "")
    if ids is not None and len(ids) == 2:
        sizes.update(batch=int(ids[0]), sequence=int(ids[1]))
    past = shapes.get(spec.past_inputs[0][0]) if spec.past_inputs else None
    if past is not None and len(past) == 4:
        sizes.update(past=int(past[2]), head_size=int(spec.head_size or 0), kv_heads=int(past[1]))
    return sizes


def _shape_hint(op: str, status: str, graph: ModelGraph, shapes: Mapping[str, Sequence[int]]) -> str:
    """What to give instead, for a refusal of the user's shapes (``GroupQueryAttention``'s checks in
    words; any other op's: shapes it takes, or the shapes made for it)."""
    sizes = _decoder_sizes(graph, shapes)
    batch, sequence, past = sizes.get("batch", 1), sizes.get("sequence", 1), sizes.get("past", 0)
    if op == "GroupQueryAttention" and "batch_size must be 1" in status:
        return (
            "ONNX Runtime's GroupQueryAttention runs a batch of more than one sequence a token at a time "
            f"once a KV cache is given: give a batch of 1 (--input-shape input_ids=1,{sequence}) or a "
            f"sequence of 1 (input_ids={batch},1, a decode step)"
        )
    if op == "GroupQueryAttention" and (
        head := re.search(r"head dimension, got (\d+) expected (\d+)", status)
    ):
        return (
            f"the KV cache's last dimension is the head size, {head.group(2)}, not {head.group(1)}: give "
            f"{head.group(2)} as the last dimension of the past inputs in --input-shape, or leave them out "
            "(their shapes follow input_ids)"
        )
    if op == "GroupQueryAttention" and "cos_cache" in status:
        rows = _rotary_rows(graph)
        fits = f" of {rows} tokens (the rows of its rotary cache, cos_cache)" if rows else ""
        return (
            f"the cached and new tokens together ({past} + {sequence}) must fit the model's context{fits}: "
            "give fewer tokens in --input-shape"
        )
    if op == "GroupQueryAttention" and "total_sequence_length" in status:
        return (
            "attention_mask's length is the cached and new tokens together: give attention_mask="
            f"{batch},{past + sequence}, or leave attention_mask out of --input-shape (it follows the other "
            "inputs)"
        )
    return (
        f"give shapes {op} takes, or leave --input-shape out to run it on the shapes made for the model "
        "(a decoder LLM: its generation, sized by --prompt-tokens and --context)"
    )


def _rotary_rows(graph: ModelGraph) -> int | None:
    """The rows of the first ``GroupQueryAttention``'s ``cos_cache`` initializer: the context it can take."""
    dims = {t.name: list(t.dims) for t in graph.model.graph.initializer}
    for node in graph.model.graph.node:
        if node.op_type == "GroupQueryAttention" and len(node.input) > 7 and dims.get(node.input[7]):
            return int(dims[node.input[7]][0])
    return None

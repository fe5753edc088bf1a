"""A peer's test suite: the model tests the onnx wheel ships (``onnx/backend/test/data``), through the
explorer's Python API, with real ONNX Runtime and real TVM.

Every model with its reference data (the folders ``pytorch-converted``, ``pytorch-operator`` and
``simple``: a ``model.onnx`` and ``test_data_set_*/input_*.pb, output_*.pb``) must load; ONNX
Runtime (:class:`~explorer.runtimes.ort_runtime.OrtRuntime`) and TVM
(:class:`~explorer.runtimes.tvm_runtime.TvmRuntime`) must each reproduce the reference outputs
within the tolerance ONNX's own backend tests use (``rtol=1e-3``, ``atol=1e-7``, or the model's
``data.json``), or refuse the model with a typed :class:`~explorer.core.errors.ExplorerError` that
says why; and the ``ort-cpu`` target's prediction (every node supported, or not) must be what
ONNX Runtime does with the model (prepares and runs it, or refuses it). The models are tiny:
the whole sweep is one pass over them, shared by the tests below.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from explorer import load
from explorer.core.errors import ExplorerError, RuntimeUnsupportedError
from explorer.runtimes.ort_runtime import OrtRuntime
from explorer.runtimes.tvm_runtime import TvmRuntime
from explorer.targets import get_target

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
KINDS = ("pytorch-converted", "pytorch-operator", "simple")
CASES = sorted(p.parent for kind in KINDS for p in (DATA / kind).glob("*/model.onnx"))
RTOL, ATOL = 1e-3, 1e-7  # onnx.backend.test.loader's defaults

TVM_WRONG = {
    "simple/test_expand_shape_model3": "Expand with its shape given at run time: TVM takes the shape's 1s "
    "literally where ONNX broadcasts them, (3, 1, 3) for (3, 3, 3)",
    "simple/test_expand_shape_model4": "the same, (3, 3, 1, 3) for (3, 3, 3, 3)",
    "simple/test_sequence_model3": "SequenceErase/SequenceInsert/SequenceAt at negative positions: X where "
    "ONNX gives Z",
}
"""The models TVM 0.27 compiles and runs but answers wrongly: bugs of TVM's importer (the same
with ``tvm.relax.frontend.onnx.from_onnx`` and ``tvm.compile`` called directly), pinned so
that a fix in TVM, or a new wrong answer, is noticed."""


@dataclass
class Outcome:
    """What happened to one model: its load, the prediction, and each runtime's result."""

    name: str
    loaded: str = ""  # "" when it loaded, else the error
    predicted: bool | None = None  # the ort-cpu target: every node supported
    why_not: list[str] = field(default_factory=list)
    ort: str = ""  # "reproduced", "typed: ...", or what went wrong
    ort_ran: bool = False
    tvm: str = ""


def _tensors(folder: Path, prefix: str) -> list[np.ndarray]:
    files = sorted(folder.glob(f"{prefix}_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
    out = []
    for file in files:
        proto = onnx.TensorProto()
        proto.ParseFromString(file.read_bytes())
        out.append(numpy_helper.to_array(proto))
    return out


def _tolerance(case: Path) -> tuple[float, float]:
    data = case / "data.json"
    if not data.is_file():
        return RTOL, ATOL
    given = json.loads(data.read_text())
    return float(given.get("rtol", RTOL)), float(given.get("atol", ATOL))


def _differs(got: list[np.ndarray], want: list[np.ndarray], rtol: float, atol: float) -> str:
    """How ``got`` differs from ``want`` as ONNX's backend test compares them ("" when it does not)."""
    if len(got) != len(want):
        return f"{len(got)} outputs, want {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        g = np.asarray(g)
        if g.shape != w.shape:
            return f"output {i} has shape {g.shape}, want {w.shape}"
        if w.dtype == object:
            if not np.array_equal(g.astype(str), w.astype(str)):
                return f"output {i}: {g.tolist()} != {w.tolist()}"
            continue
        if g.dtype != w.dtype:
            return f"output {i} is {g.dtype}, want {w.dtype}"
        if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):  # as assert_allclose
            return f"output {i} differs by up to {np.max(np.abs(g.astype(float) - w.astype(float))):.3g}"
    return ""


def _run(runtime: Any, graph: Any, feeds: dict[str, np.ndarray], want: list[np.ndarray], tol: Any) -> str:
    try:
        session = runtime.prepare(graph)
        got = session.run(feeds)
    except ExplorerError as err:
        return f"typed: {type(err).__name__}: {err}"
    except Exception as err:  # an untyped error fails the test below, with its words
        return f"untyped: {type(err).__name__}: {err}"
    differs = _differs(got, want, *tol)
    return f"wrong: {differs}" if differs else "reproduced"


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Outcome]:
    target = get_target("ort-cpu")
    out = {}
    for case in CASES:
        name = f"{case.parent.name}/{case.name}"
        outcome = out[name] = Outcome(name)
        try:
            graph = load(case / "model.onnx")
        except Exception as err:
            outcome.loaded = f"{type(err).__name__}: {err}"
            continue
        support = target.support(graph)
        outcome.predicted = all(s.supported for s in support.values())
        outcome.why_not = [str(r) for s in support.values() for r in s.blocking]
        data = sorted(case.glob("test_data_set_*"))[0]
        inputs, want = _tensors(data, "input"), _tensors(data, "output")
        feeds = {graph.model.graph.input[i].name: array for i, array in enumerate(inputs)}
        tol = _tolerance(case)
        outcome.ort = _run(OrtRuntime(), graph, feeds, want, tol)
        outcome.ort_ran = not outcome.ort.startswith(("typed", "untyped"))
        outcome.tvm = _run(TvmRuntime(), graph, feeds, want, tol)
    return out


def _failing(outcomes: dict[str, Outcome], bad: Any) -> list[str]:
    return [f"{o.name}: {bad(o)}" for o in outcomes.values() if bad(o)]


def test_the_wheel_ships_the_backend_models() -> None:
    assert len(CASES) >= 140, f"found {len(CASES)} backend test models under {DATA}"
    assert {c.parent.name for c in CASES} == set(KINDS)


def test_every_backend_model_loads(outcomes: dict[str, Outcome]) -> None:
    assert not _failing(outcomes, lambda o: o.loaded)


def test_onnx_runtime_reproduces_the_reference_outputs_or_says_why(outcomes: dict[str, Outcome]) -> None:
    assert not _failing(outcomes, lambda o: "" if o.ort.startswith(("reproduced", "typed")) else o.ort)
    refused = [o for o in outcomes.values() if o.ort.startswith("typed")]
    assert all(RuntimeUnsupportedError.__name__ in o.ort and "onnxruntime" in o.ort for o in refused)


def test_tvm_reproduces_the_reference_outputs_or_says_why(outcomes: dict[str, Outcome]) -> None:
    def bad(o: Outcome) -> str:
        if o.tvm.startswith(("reproduced", "typed")) or (o.name in TVM_WRONG and o.tvm.startswith("wrong")):
            return ""
        return o.tvm

    assert not _failing(outcomes, bad)
    assert {o.name for o in outcomes.values() if o.tvm.startswith("wrong")} == set(TVM_WRONG)


def test_tvm_refuses_the_multiparam_prelu_models_naming_the_op() -> None:
    for dims in ("1d", "2d", "3d"):  # opset 6 PRelu: TVM's importer puts the slope on the last axis
        graph = load(DATA / "pytorch-converted" / f"test_PReLU_{dims}_multiparam" / "model.onnx")
        with pytest.raises(ExplorerError) as caught:
            TvmRuntime().prepare(graph)
        path, _, words = str(caught.value).partition("model.onnx: ")  # the file's name says PReLU too
        assert path.endswith(f"test_PReLU_{dims}_multiparam/") and "TVM" in words and "prelu" in words.lower()


def test_the_ort_cpu_prediction_is_what_onnx_runtime_does(outcomes: dict[str, Outcome]) -> None:
    def disagreement(o: Outcome) -> str:
        if o.predicted == o.ort_ran:
            return ""
        return f"predicted {'supported' if o.predicted else o.why_not[:1]}, ONNX Runtime: {o.ort[:200]}"

    assert not _failing(outcomes, disagreement)


def test_refusals_name_the_op_its_opset_and_the_runtime() -> None:
    graph = load(DATA / "pytorch-converted" / "test_AvgPool1d" / "model.onnx")  # opset 6: AveragePool-1
    with pytest.raises(RuntimeUnsupportedError) as caught:
        OrtRuntime().prepare(graph)
    err = caught.value
    assert (err.op_type, err.domain, err.opset) == ("AveragePool", "", 6)
    assert "onnxruntime" in err.runtime and "CPUExecutionProvider" in err.runtime
    assert "version 1" in str(err) and "test_AvgPool1d" in str(err)
    gradient = load(DATA / "simple" / "test_gradient_of_add" / "model.onnx")  # a domain ORT does not know
    with pytest.raises(RuntimeUnsupportedError) as caught:
        OrtRuntime().prepare(gradient)
    assert (caught.value.op_type, caught.value.domain) == ("Gradient", "ai.onnx.preview.training")


def test_the_counts(outcomes: dict[str, Outcome]) -> None:
    counts = Counter()
    for o in outcomes.values():
        counts["models"] += 1
        counts["load"] += not o.loaded
        counts["ort reproduces"] += o.ort == "reproduced"
        counts["ort typed error"] += o.ort.startswith("typed")
        counts["tvm reproduces"] += o.tvm == "reproduced"
        counts["tvm typed error"] += o.tvm.startswith("typed")
        counts["tvm wrong (TVM's bugs)"] += o.tvm.startswith("wrong")
        counts["prediction agrees"] += o.predicted == o.ort_ran
    print(dict(counts))  # the figures docs/architecture.md quotes (pytest -s)
    assert counts["load"] == counts["prediction agrees"] == counts["models"]
    assert counts["ort reproduces"] + counts["ort typed error"] == counts["models"]
    assert counts["tvm reproduces"] + counts["tvm typed error"] + len(TVM_WRONG) == counts["models"]

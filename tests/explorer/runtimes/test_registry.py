"""The runtime registry: every name makes its runtime, and options go only where they belong."""

from __future__ import annotations

import pytest

from explorer.core.errors import UsageError
from explorer.runtimes.registry import RUNTIME_NAMES, RUNTIMES, get_runtime


@pytest.mark.parametrize("name", RUNTIME_NAMES)
def test_every_name_makes_a_runtime_of_that_name_with_the_interface(name: str) -> None:
    runtime = get_runtime(name)
    assert runtime.name == name and runtime.label
    assert isinstance(runtime.family, str) and isinstance(runtime.places_nodes, bool)
    assert isinstance(runtime.available(), bool)


def test_the_flags_reach_only_the_runtimes_that_take_them() -> None:
    flags = {"threads": 2, "tune_trials": 16, "optimization": "basic", "target": None}
    assert RUNTIMES["tvm"].flag_options(flags) == {"tune_trials": 16}
    assert RUNTIMES["tvm-naive"].flag_options(flags) == {}  # the untuned baseline
    assert RUNTIMES["ort"].flag_options(flags) == {"threads": 2, "optimization": "basic"}
    assert RUNTIMES["iree"].flag_options(flags) == {"threads": 2}
    assert (
        get_runtime("ort", **RUNTIMES["ort"].flag_options(flags)).label
        == "ONNX Runtime CPU (basic, 2 threads)"
    )


def test_an_unknown_name_lists_the_runtimes() -> None:
    with pytest.raises(UsageError, match="the runtimes are ort, ort-cuda"):
        get_runtime("onnx-mlir")


def test_only_onnx_runtime_places_nodes() -> None:
    assert [n for n in RUNTIME_NAMES if get_runtime(n).places_nodes] == ["ort", "ort-cuda"]

"""Targets named the way users write them: parsed, checked, built for, and keyed for records."""

from __future__ import annotations

import numpy as np
import pytest

from explorer import load
from explorer.lower.tvm.relax_target import cpu_target, parse_target, target_text
from explorer.lower.tvm.tvm_records import records_key
from explorer.runtimes import OrtRuntime, TvmRuntime, random_feeds


@pytest.mark.parametrize(
    "text",
    [
        "llvm",
        "llvm -mcpu=haswell -num-cores=2",
        "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76 -mattr=+neon,+dotprod -num-cores=4",
    ],
)
def test_a_target_string_round_trips(text: str) -> None:
    assert target_text(parse_target(text)) == text
    assert parse_target(target_text(parse_target(text))) == parse_target(text)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("cuda", r"only llvm \(CPU\) targets"),
        ("llvm -mcpu", "-NAME=VALUE"),
        ("llvm mcpu=haswell", "-NAME=VALUE"),
        ("llvm -opt-level=3", "unknown target flag -opt-level"),
        ("llvm -num-cores=0", "positive number of threads"),
        ('{"kind": "llvm", ', "not a JSON object"),
    ],
)
def test_a_bad_target_says_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_target(text)
    with pytest.raises(ValueError, match=words):
        TvmRuntime(text)  # refused when made, not later in the worker


def test_a_named_cpu_is_built_for_as_named() -> None:
    target = cpu_target("llvm -mcpu=haswell -num-cores=2")
    assert str(target.attrs["mcpu"]) == "haswell" and int(target.attrs["num-cores"]) == 2
    here = cpu_target()
    assert str(here.attrs["mcpu"]) and int(here.attrs["num-cores"]) >= 1  # this CPU, filled in
    json_form = cpu_target('{"kind": "llvm", "mcpu": "haswell"}')
    assert str(json_form.attrs["mcpu"]) == "haswell"


def test_records_are_keyed_by_the_target_vector_width_not_this_machine() -> None:
    assert records_key("llvm -mcpu=haswell") == "llvm-x86_64-avx2"
    assert records_key("llvm -mcpu=skylake-avx512") == "llvm-x86_64-avx512"
    assert records_key("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76") == "llvm-aarch64-neon"


def test_avx2_code_runs_here_and_agrees_with_onnx_runtime() -> None:
    graph = load("zoo:mlp")
    runtime = TvmRuntime("llvm -mcpu=haswell -num-cores=2")
    assert runtime.available() and runtime.name == "tvm-llvm -mcpu=haswell -num-cores=2"
    session = runtime.prepare(graph)
    assert '"mcpu":"haswell"' in session.info["target"]
    feeds = random_feeds(graph.model)
    want = OrtRuntime().prepare(graph).run(feeds)[0]
    np.testing.assert_allclose(session.run(feeds)[0], want, rtol=1e-4, atol=1e-5)
    assert not TvmRuntime("llvm -mtriple=aarch64-linux-gnu").available()  # another architecture


def test_a_cpu_this_machine_cannot_run_is_refused_in_words_not_run() -> None:
    from explorer.lower.tvm.relax_target import runs_here
    from explorer.lower.tvm.relax_tuning import tuning_dir

    arm = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76 -num-cores=4"
    assert "aarch64" in runs_here(cpu_target(arm)) and runs_here(cpu_target()) is None
    assert not TvmRuntime(arm).available()
    assert TvmRuntime(arm, rpc_tracker="127.0.0.1:9190", rpc_key="phone").available()  # a server runs it
    with pytest.raises(ValueError, match="cannot run on this machine: it is built for aarch64"):
        TvmRuntime(arm).prepare(load("zoo:mlp"))
    assert tuning_dir("llvm -num-cores=2 -mcpu=haswell") == tuning_dir("llvm -mcpu=haswell -num-cores=2")
    assert tuning_dir("llvm -mattr=+avx2") != tuning_dir("llvm -mattr=-avx2")

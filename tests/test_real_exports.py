"""Every command on models from today's PyTorch exporter, on the torch install and on the base install.

The set is :mod:`explorer.zoo.torch_exports`'s, at its small size (the real architectures at reduced
width and depth), exported once per session with ``torch.onnx.export(..., dynamo=True)``:
opset 20, ``node_*`` names, IsNaN/Where around the attention mask. Each command runs on each
model, first in this process (:func:`tests.explorer.in_process.run_cli`, the install the
tests run in, with torch), then as the ``onnx-explorer`` command of a fresh virtual
environment that has the project without extras (no torch): the README's promise is that the
base install runs what it shows, and ONNX Runtime's transformer optimizer imports torch on one
of its paths (issue 25). That environment is built as tests/test_binder.py builds Binder's,
from the same wheelhouse of the lock's wheels (no network beyond the package proxy), with the
project installed editable, so it runs this tree's code. The full-size set is timed in
benchmarks/real_exports_benchmark.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import onnx
import pytest

from explorer.zoo import torch_exports as torch_zoo
from tests.explorer.in_process import run_cli
from tests.test_binder import ROOT, _run, _scratch, _wheelhouse, lock_requirements, venv_environment

pytestmark = pytest.mark.torch

COMMANDS = ("info", "passes", "coverage", "lower", "bench", "prepare")

PIPELINES = {
    "bert_encoder": "onnxscript:optimize,ort-transformers:bert(num_heads={heads},hidden_size={hidden})",
    "gpt2_decoder": "onnxscript:optimize,ort-transformers:gpt2(num_heads={heads},hidden_size={hidden})",
    "convnext": "onnxscript:optimize,ort:extended",
    "efficientnet": "onnxscript:optimize,fuse_bn_into_conv,ort:extended",
    "llama_kv_decoder": "onnxscript:optimize,ort:extended",
}
"""What a user runs on each: the transformer optimiser (with the heads and hidden size) on the two
transformers, onnxscript's clean-up and ONNX Runtime's level on the CNNs and the KV-cache decoder."""

NEEDS_FIX = {"gpt2_decoder", "llama_kv_decoder"}
"""Models whose TVM import needs the fix the importer offers (fixed shapes and onnxsim): the
causal mask's shapes are computed at run time, and LegalizeOps cannot emit a tensor of unknown shape
(the KV decoder's importer stops at the ``Expand`` of its grouped-query attention's repeated heads)."""

QUICK_BENCH = ("--warmup", "1", "--min-runs", "3", "--min-seconds", "0")


@pytest.fixture
def exports(torch_exports: dict[str, Path]) -> dict[str, Path]:
    """Every model of :data:`explorer.zoo.torch_exports.NAMES`, small, exported once for the session."""
    return torch_exports


def _shape_args(name: str) -> list[str]:
    return [
        arg
        for input_name, shape in torch_zoo.spec(name)["example"].items()
        for arg in ("--input-shape", f"{input_name}={','.join(map(str, shape))}")
    ]


def command_args(name: str, command: str, model: Path, out: Path) -> list[str]:
    """The arguments of ``onnx-explorer COMMAND`` on the exported ``name`` (outputs under ``out``)."""
    shapes, fix = _shape_args(name), ["--fix"] if name in NEEDS_FIX else []
    config = torch_zoo.spec(name)["config"]
    if command == "info":
        return ["info", str(model), "--json"]
    if command == "passes":
        pipeline = PIPELINES[name].format(heads=config.get("heads"), hidden=config.get("hidden"))
        return [
            "passes",
            str(model),
            "--pipeline",
            pipeline,
            "--json",
            "-o",
            str(out / f"{name}-passes.onnx"),
        ]
    if command == "coverage":
        return ["coverage", str(model), *shapes, "--json"]
    if command == "lower":
        return ["lower", str(model), *shapes, *fix, "--json"]
    if command == "bench":
        return [
            "bench",
            str(model),
            "--runtime",
            "ort",
            "--runtime",
            "tvm",
            *shapes,
            *fix,
            *QUICK_BENCH,
            "--json",
        ]
    assert command == "prepare"
    output = out / f"{name}-qnn-htp.onnx"
    return [
        "prepare",
        str(model),
        "--target",
        "qnn-htp",
        *shapes,
        "--samples",
        "2",
        "--output",
        str(output),
        "--json",
    ]


def check(name: str, command: str, done: subprocess.CompletedProcess[str]) -> None:
    """What each command must give on each model: exit 0, one JSON document, and its figures."""
    said = f"{' '.join(done.args)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, said
    assert "Traceback" not in done.stderr and "No module named" not in done.stderr + done.stdout, said
    result = json.loads(done.stdout)
    if command == "info":
        assert result["opsets"]["ai.onnx"] >= 18 and result["producer"].startswith("pytorch")
        assert result["nodes"] > 50 and not result["unknown_ops"]
        if name == "bert_encoder":
            assert {"IsNaN", "Where"} <= set(result["ops"]), "the exporter's attention-mask pattern"
    elif command == "passes":
        steps = result["steps"]
        assert all(step["error"] is None for step in steps), [(s["pass"], s["error"]) for s in steps]
        if name in ("bert_encoder", "gpt2_decoder"):
            fused = steps[-1]
            assert fused["op_deltas"].get("SkipLayerNormalization", 0) > 0, fused["log"]
            # the dynamo exporter's attention is not a pattern ORT knows: the step says so in words
            assert any(line.startswith("attention not fused:") for line in fused["log"]), fused["log"]
        if name == "gpt2_decoder":  # ORT's BiasGelu fusion ignores approximate="tanh": said in words
            assert any("from Gelu(approximate='tanh')" in line for line in steps[-1]["log"]), steps[-1]["log"]
    elif command == "coverage":
        by_target = {t["target"]: t for t in result["targets"]}
        assert by_target["ort-cpu"]["coverage"] == 1.0 and 0 < by_target["tvm-llvm"]["coverage"] <= 1
    elif command == "lower":
        assert result["steps"] and result["steps"][-1]["kernels"] > 0
    elif command == "bench":
        assert [r["runtime"] for r in result["results"]] == ["ort", "tvm"]
        assert all(r["agrees"] for r in result["results"]), result["results"]
    else:
        assert Path(result["output"]).stat().st_size > 0
        assert result["steps"][-1]["pass"] == "ort-quant:qnn_qdq"


CELLS = [(name, command) for name in torch_zoo.NAMES for command in COMMANDS]


@pytest.mark.parametrize(("name", "command"), CELLS, ids=[f"{n}-{c}" for n, c in CELLS])
def test_command_on_export(name: str, command: str, exports: dict[str, Path], tmp_path: Path) -> None:
    check(name, command, run_cli(*command_args(name, command, exports[name], tmp_path)))


# --- the base install: the project without extras, no torch -----------------------------------


@dataclass(frozen=True)
class BaseEnv:
    """A fresh virtual environment with the project (editable) and its dependencies, no extras."""

    venv: Path
    env: dict[str, str]

    def run(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """``onnx-explorer ARGS`` of this environment, in a process of its own."""
        command = [str(self.venv / "bin" / "onnx-explorer"), *args]
        return subprocess.run(command, capture_output=True, text=True, env=self.env, cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def base_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BaseEnv]:
    if sys.version_info[:2] != (3, 11):
        pytest.skip(f"the lock's wheelhouse is for Python 3.11; this is {sys.version.split()[0]}")
    work = _scratch(tmp_path_factory)
    try:
        venv, tmp, log = work / "venv", work / "tmp", work / "build.log"
        tmp.mkdir()
        _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(venv)], log)
        env = venv_environment(venv, tmp)
        wheelhouse = _wheelhouse(lock_requirements(work), venv / "bin" / "python", log, env)
        # the project's own dependencies from the wheelhouse: no extras, so no torch
        install = ["install", "--no-index", "--find-links", str(wheelhouse), "-e", str(ROOT)]
        _run([str(venv / "bin" / "python"), "-m", "pip", *install], log, env=env)
        yield BaseEnv(venv, {**env, "TMPDIR": tempfile.gettempdir()})
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.slow
def test_base_install_has_no_torch(base_env: BaseEnv) -> None:
    probe = (
        "import importlib.util, explorer; print(importlib.util.find_spec('torch')); print(explorer.__file__)"
    )
    done = subprocess.run(
        [str(base_env.venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, env=base_env.env
    )
    spec, where = done.stdout.split()
    assert spec == "None"
    assert Path(where).resolve().is_relative_to(ROOT), "the project is installed editable: this tree"


@pytest.mark.slow
@pytest.mark.parametrize(("name", "command"), CELLS, ids=[f"{n}-{c}" for n, c in CELLS])
def test_command_on_export_base_install(
    name: str, command: str, exports: dict[str, Path], base_env: BaseEnv, tmp_path: Path
) -> None:
    check(name, command, base_env.run(*command_args(name, command, exports[name], tmp_path)))


def readme_commands() -> list[str]:
    """The command-line block of README.md, one ``onnx-explorer ...`` line each, as documented."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```\n(onnx-explorer info .*?)```", text, re.S)
    assert block, "README.md has no block of onnx-explorer commands"
    return [line for line in block.group(1).splitlines() if line.startswith("onnx-explorer ")]


def runnable(line: str, substitute: Callable[[str], str]) -> list[str]:
    """A README line without its optional ``[...]`` parts, with its placeholders substituted.

    Examples
    --------
    >>> runnable("onnx-explorer info MODEL [--input-shape N=1,3]... [--fix | --simplify] [--json]", str.upper)
    ['INFO', 'MODEL']
    """
    while (stripped := re.sub(r"\s*\[[^\[\]]*\](\.\.\.)?", "", line)) != line:
        line = stripped
    return [substitute(word) for word in shlex.split(line)[1:]]


@pytest.mark.slow
def test_readme_commands_on_base_install(exports: dict[str, Path], base_env: BaseEnv, tmp_path: Path) -> None:
    """Each line of the README's command block, on a real export, runs in the base install."""
    names = {"MODEL": exports["convnext"], "A.onnx": exports["convnext"], "B.onnx": exports["efficientnet"]}
    names["report.html"] = tmp_path / "report.html"
    names["DECODER"] = "zoo:llama"  # a decoder LLM in standard ONNX: the base install generates with it
    node_data = tmp_path / "node_data.json"  # overlay's FILE: Model Explorer node data, no ONNX Runtime run
    node_data.write_text('{"main_graph": {"results": {"no-such-node": {"value": 1}}}}')
    names["FILE"] = node_data
    from explorer.runtimes.qdq_pairs import tiny_pair

    for name, model in zip(("FLOAT.onnx", "QDQ.onnx"), tiny_pair(), strict=True):  # quant-error's pair
        names[name] = tmp_path / name
        onnx.save(model, names[name])
    lines = readme_commands()
    assert len(lines) >= 10 and any("ort-transformers:bert" in line for line in lines)
    failed = []
    for line in lines:
        args = runnable(line, lambda word: str(names.get(word, word)))
        if args[0] == "bench":
            args += QUICK_BENCH
        done = base_env.run(*args, cwd=tmp_path)
        if "iree" in args:  # the MLIR path needs its extra: the base install says which, and exits 2
            if done.returncode != 2 or "onnx-graph-explorer[iree]" not in done.stderr:
                failed.append(f"{shlex.join(args)} -> {done.returncode}: {done.stderr.strip()[-800:]}")
            continue
        if "ort-genai" in args:  # named, it needs the llm extra: the others are timed, then exit 3 naming it
            named = "onnx-graph-explorer[llm]" in done.stderr and "only ONNX Runtime" in done.stderr
            if done.returncode != 3 or not named or "Traceback" in done.stderr:
                failed.append(f"{shlex.join(args)} -> {done.returncode}: {done.stderr.strip()[-800:]}")
            continue
        if done.returncode != 0 or "Traceback" in done.stderr:
            failed.append(f"{shlex.join(args)} -> {done.returncode}: {done.stderr.strip()[-800:]}")
    assert not failed, "\n".join(failed)
    assert (tmp_path / "report.html").stat().st_size > 0
    assert os.listdir(tmp_path)

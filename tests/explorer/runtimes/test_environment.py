"""The environment cell: this machine and the installed stack, without heavy imports."""

from __future__ import annotations

import json
import subprocess
import sys

from explorer.runtimes.environment import PACKAGES, environment


def test_the_environment_names_cores_isa_versions_and_records() -> None:
    env = environment()
    assert env.physical_cores >= 1 and env.logical_cpus >= env.physical_cores
    assert set(env.versions) == set(PACKAGES) and env.versions["onnx"]
    assert env.isa in {"avx512", "avx2", "sse", "neon", "sve"}
    text = env.to_text()
    assert "physical cores" in text and ("shipped TVM tuning records" in text)
    json.dumps(env.to_dict())
    assert env.to_frame().loc["version: onnx", "value"] == env.versions["onnx"]


def test_describing_the_environment_imports_neither_tvm_nor_torch() -> None:
    code = (
        "import sys; from explorer.runtimes.environment import environment; environment(); "
        "print(sorted(m for m in ('tvm', 'torch', 'onnxruntime') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"

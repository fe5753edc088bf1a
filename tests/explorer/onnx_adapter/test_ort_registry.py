"""The installed ONNX Runtime's kernel registry, read by the ONNX adapter (and re-exported by the targets)."""

from __future__ import annotations

from explorer.onnx_adapter.ort_registry import installed_kernels, installed_providers, ort_ops
from explorer.targets import ort_kernels


def test_the_installed_registry_knows_the_cpu_kernels() -> None:
    cpu = installed_kernels("CPUExecutionProvider")
    assert {k.versions for k in cpu[("ai.onnx", "Relu")]} >= {"6-12", "14+"}
    assert "CPUExecutionProvider" in installed_providers() and ("ai.onnx", "Relu") in ort_ops()


def test_the_targets_old_names_are_the_registry_s() -> None:
    assert ort_kernels.installed_kernels is installed_kernels
    assert ort_kernels.installed_providers is installed_providers

"""tuned.json: which models a database was tuned for, the shipped record sets it holds, forgetting models."""

from __future__ import annotations

from pathlib import Path

from explorer.lower.tvm.tuning_log import SHIPPED_PREFIX, forget_models, record_trials, tuned_trials


def test_forgetting_the_models_keeps_the_shipped_record_sets_noted(tmp_path: Path) -> None:
    record_trials(tmp_path, "tvm-resnet18", 1500)
    record_trials(tmp_path, "tvm-mobilenetv2", 1800)
    record_trials(tmp_path, f"{SHIPPED_PREFIX}llvm-x86_64-avx512-1", 1)
    assert forget_models(tmp_path) == ["tvm-mobilenetv2", "tvm-resnet18"]
    assert tuned_trials(tmp_path, "tvm-resnet18") == 0  # the next run tunes, whatever its budget
    assert tuned_trials(tmp_path, f"{SHIPPED_PREFIX}llvm-x86_64-avx512-1") == 1  # not added twice
    assert forget_models(tmp_path) == []


def test_a_database_never_tuned_has_nothing_to_forget(tmp_path: Path) -> None:
    assert forget_models(tmp_path / "never") == [] and not (tmp_path / "never").exists()

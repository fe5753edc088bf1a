"""The Compiler interface and its registry, with the real TVM and IREE behind it."""

from __future__ import annotations

import pytest

from explorer import load
from explorer.core.errors import UsageError
from explorer.lower.compilers import COMPILER_NAMES, COMPILERS, STEP_METRICS, LowerOptions, get_compiler
from explorer.lower.timeline import LoweringTimeline
from explorer.runtimes.registry import RUNTIMES
from explorer.targets.registry import TARGET_NAMES


@pytest.mark.parametrize("name", COMPILER_NAMES)
def test_each_compiler_names_a_runtime_and_a_coverage_target_that_exist(name: str) -> None:
    compiler = get_compiler(name)
    assert compiler.name == name and COMPILERS[name].endswith(type(compiler).__name__)
    assert compiler.runtime in RUNTIMES and compiler.coverage_target in TARGET_NAMES
    assert compiler.table_columns and compiler.step_word and compiler.label


def test_each_compiler_refuses_the_others_options_before_any_work() -> None:
    with pytest.raises(UsageError, match="--passes"):
        get_compiler("iree").check_options(LowerOptions(passes="zero"))
    with pytest.raises(UsageError, match="--detail"):
        get_compiler("tvm").check_options(LowerOptions(detail="passes"))
    with pytest.raises(UsageError, match="NoSuchPass"):
        get_compiler("tvm").check_options(LowerOptions(passes="LegalizeOps,NoSuchPass"))
    with pytest.raises(UsageError, match="the compilers are tvm, iree"):
        get_compiler("xla")


@pytest.mark.parametrize("name", COMPILER_NAMES)
def test_each_compiler_lowers_step_by_step_into_rows_the_cli_prints(name: str) -> None:
    if name == "iree":
        pytest.importorskip("iree.compiler")  # the iree extra
    compiler = get_compiler(name)
    options = compiler.check_options(LowerOptions(passes="zero") if name == "tvm" else LowerOptions())
    timeline = compiler.lower(load("zoo:mlp"), options=options)
    assert isinstance(timeline, LoweringTimeline) and len(timeline.snapshots) > 2
    rows = compiler.step_rows(timeline)
    assert set(STEP_METRICS) <= set(rows[0]) and all(key in rows[0] for _, key, _ in compiler.table_columns)
    assert [r["pass"] for r in rows] == [s.name for s in timeline.snapshots]
    assert rows[0][compiler.import_metric] > 0  # the import's line counts something
    last = len(timeline.snapshots) - 1
    unit = timeline.prim_funcs(last)[0]
    assert timeline.code_summary(last, unit) and type(timeline).code_label != LoweringTimeline.code_label

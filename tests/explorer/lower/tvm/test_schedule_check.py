"""A default schedule checked against its plain loops (real TVM): kept when it agrees, refused when it
does not, the verdict read from disk the second time; a model's tasks checked with one build, a task
that does not build refused alone.

The task is the one that once broke BERT's dynamo export: ``te_gather_nd`` picking the attention
mask's elements through a constant index tensor (1x1x1x128x2, marked layout-free). TVM's
RewriteLayout postprocessor suggested that tensor a 2x64 layout, from one of its two loads: half
its index pairs were overwritten, and the kernel read the wrong mask elements.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from explorer import zoo
from explorer.lower.tvm import schedule_check
from explorer.lower.tvm.default_schedules import SCHEDULES_VERSION, default_database, default_schedule
from explorer.lower.tvm.relax_frontend import run_importer
from explorer.lower.tvm.relax_target import cpu_target, register_cpu_intrinsics
from explorer.lower.tvm.relax_tuning import tuning_module
from explorer.lower.tvm.schedule_check import check_schedule, check_schedules

SEQUENCE = 128
"""BERT-base's sequence; 64 is the smallest that still broke (the vectorised loop is 64 long)."""


def _gather_nd(n: int) -> Any:
    """The ``te_gather_nd`` task of HF BertModel's dynamo export at sequence ``n``, as TVM lowered it."""
    import tvm
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def main(
        lv24: T.Buffer((T.int64(1), T.int64(n)), "bool"),
        lv30: T.Buffer((T.int64(1), T.int64(1), T.int64(1), T.int64(n), T.int64(2)), "int64"),
        T_gather_nd: T.Buffer((T.int64(1), T.int64(1), T.int64(1), T.int64(n)), "bool"),
    ) -> None:
        T.func_attr({"layout_free_buffers": [1], "op_pattern": 8, "tirx.noalias": True})
        T_transpose = T.sblock_alloc_buffer(
            (T.int64(2), T.int64(1), T.int64(1), T.int64(1), T.int64(n)), "int64"
        )
        for ax0, ax1, ax2, ax3, ax4 in T.grid(T.int64(2), T.int64(1), T.int64(1), T.int64(1), T.int64(n)):
            with T.sblock("T_transpose"):
                v_ax0, v_ax1, v_ax2, v_ax3, v_ax4 = T.axis.remap("SSSSS", [ax0, ax1, ax2, ax3, ax4])
                T.reads(lv30[v_ax1, v_ax2, v_ax3, v_ax4, v_ax0])
                T.writes(T_transpose[v_ax0, v_ax1, v_ax2, v_ax3, v_ax4])
                T_transpose[v_ax0, v_ax1, v_ax2, v_ax3, v_ax4] = lv30[v_ax1, v_ax2, v_ax3, v_ax4, v_ax0]
        for ax0, ax1, ax2, ax3 in T.grid(T.int64(1), T.int64(1), T.int64(1), T.int64(n)):
            with T.sblock("T_gather_nd"):
                v_ax0, v_ax1, v_ax2, v_ax3 = T.axis.remap("SSSS", [ax0, ax1, ax2, ax3])
                T.reads(
                    lv24[
                        T_transpose[T.int64(0), v_ax0, v_ax1, v_ax2, v_ax3],
                        T_transpose[T.int64(1), v_ax0, v_ax1, v_ax2, v_ax3],
                    ],
                    T_transpose[T.int64(0) : T.int64(2), v_ax0, v_ax1, v_ax2, v_ax3],
                )
                T.writes(T_gather_nd[v_ax0, v_ax1, v_ax2, v_ax3])
                T_gather_nd[v_ax0, v_ax1, v_ax2, v_ax3] = lv24[
                    T_transpose[T.int64(0), v_ax0, v_ax1, v_ax2, v_ax3],
                    T_transpose[T.int64(1), v_ax0, v_ax1, v_ax2, v_ax3],
                ]

    return tvm.IRModule({"main": main})


@pytest.fixture(scope="module")
def target() -> Any:
    register_cpu_intrinsics()
    return cpu_target()


def _layout_rewrites(schedule: Any) -> int:
    root = schedule.get_sblock("root")
    blocks = [schedule.get(b) for b in schedule.get_child_blocks(root)]
    return sum("meta_schedule.layout_rewrite_preproc" in b.annotations for b in blocks)


def test_the_default_schedule_of_the_gather_keeps_its_index_layout_and_passes(
    target: Any, tmp_path: Path
) -> None:
    plain = _gather_nd(SEQUENCE)
    schedule, how = default_schedule(plain, target)
    assert how == "heuristic" and _layout_rewrites(schedule) == 0  # RewriteLayout's layout refused
    check = check_schedule(plain, schedule.mod, target, code_version=SCHEDULES_VERSION, folder=tmp_path)
    assert check.agrees and check.max_abs_err == 0.0 and not check.cached and check.reason() == ""


def test_the_check_rejects_tvms_rewritten_index_layout(target: Any, tmp_path: Path) -> None:
    from tvm.s_tir import meta_schedule as ms

    plain = _gather_nd(SEQUENCE)
    schedule, _ = default_schedule(plain, target)
    assert ms.postproc.RewriteLayout().apply(schedule)  # what the default schedule was before the fix
    assert _layout_rewrites(schedule) == 1
    check = check_schedule(plain, schedule.mod, target, code_version=SCHEDULES_VERSION, folder=tmp_path)
    assert not check.agrees and check.max_abs_err == 1.0  # mask elements read from the wrong places
    assert check.reason() == "default schedule differs from the plain loops by max |diff| 1; plain loops used"


def test_a_second_check_of_the_same_task_reads_the_verdict_and_builds_nothing(
    target: Any, tmp_path: Path
) -> None:
    plain = _gather_nd(SEQUENCE)
    schedule, _ = default_schedule(plain, target)
    first = check_schedule(plain, schedule.mod, target, code_version=SCHEDULES_VERSION, folder=tmp_path)
    assert len(list(tmp_path.glob("*.json"))) == 1
    # nothing to build: a second check that tried to build would fail on it
    again = check_schedule(plain, None, target, code_version=SCHEDULES_VERSION, folder=tmp_path)
    assert again.cached and (again.agrees, again.max_abs_err) == (first.agrees, first.max_abs_err)
    other = check_schedule(plain, schedule.mod, target, code_version="another", folder=tmp_path)
    assert not other.cached  # the schedule code's version is part of the key


@pytest.fixture(scope="module")
def mlp_tasks(target: Any) -> list[Any]:
    """The zoo MLP's tasks (four kernels, static shapes)."""
    from tvm.s_tir import meta_schedule as ms

    module = tuning_module(run_importer(zoo.build("mlp"), {"input": [1, 1, 28, 28]})["module"], target)
    return list(ms.relax_integration.extract_tasks(module, target))


class _Builds:
    """A build hook: the functions of each module built; a module holding ``failing`` fails."""

    def __init__(self, failing: str | None = None) -> None:
        self.failing = failing
        self.modules: list[list[str]] = []

    def __call__(self, module: Any, target: Any) -> Any:
        import tvm

        names = sorted(gv.name_hint for gv in module.get_global_vars())
        self.modules.append(names)
        if self.failing in names:
            raise RuntimeError(f"cannot build {self.failing}")
        return tvm.compile(module, target=target)


def test_a_models_tasks_are_checked_with_one_build_and_none_the_second_time(
    target: Any, mlp_tasks: list[Any], tmp_path: Path
) -> None:
    pairs = [(t.dispatched[0], default_schedule(t.dispatched[0], target)[0].mod) for t in mlp_tasks]
    builds = _Builds()
    found = check_schedules(pairs, target, code_version=SCHEDULES_VERSION, folder=tmp_path, build=builds)
    assert [f.agrees for f in found] == [True] * len(pairs) and not any(f.cached for f in found)
    every = sorted(f"{kind}_{i}" for i in range(len(pairs)) for kind in ("plain", "scheduled"))
    assert builds.modules == [every]  # one module: each task's plain loops and its schedule
    again = check_schedules(pairs, target, code_version=SCHEDULES_VERSION, folder=tmp_path, build=builds)
    assert all(f.cached for f in again) and len(builds.modules) == 1
    assert [(f.agrees, f.max_abs_err) for f in again] == [(f.agrees, f.max_abs_err) for f in found]
    assert len(list(tmp_path.glob("*.json"))) == len(pairs)  # one verdict per task, as check_schedule keeps


def test_default_database_builds_the_checks_of_all_its_tasks_once(
    target: Any, mlp_tasks: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds = _Builds()
    monkeypatch.setattr(schedule_check, "_build", builds)
    defaults = default_database(mlp_tasks, target, tmp_path)
    assert set(defaults.how.values()) == {"heuristic"} and defaults.rejected == {}
    assert len(builds.modules) == 1 and len(builds.modules[0]) == 2 * len(mlp_tasks)


def test_a_task_that_does_not_build_gets_its_own_verdict_and_the_others_theirs(
    target: Any, mlp_tasks: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds = _Builds(failing="scheduled_1")
    monkeypatch.setattr(schedule_check, "_build", builds)
    defaults = default_database(mlp_tasks, target, tmp_path)
    names = [t.task_name for t in mlp_tasks]
    # the model's module failed; then each task alone: only the second fails
    assert builds.modules[0] == sorted(f"{k}_{i}" for i in range(len(names)) for k in ("plain", "scheduled"))
    assert builds.modules[1:] == [[f"plain_{i}", f"scheduled_{i}"] for i in range(len(names))]
    assert defaults.rejected == {
        names[1]: "the default schedule could not be built to check it (RuntimeError: cannot build "
        "scheduled_1); plain loops used"
    }
    assert defaults.how == {name: "naive" if name == names[1] else "heuristic" for name in names}
    again = _Builds()
    monkeypatch.setattr(schedule_check, "_build", again)
    assert default_database(mlp_tasks, target, tmp_path).rejected == defaults.rejected
    assert again.modules == []  # every verdict kept, the failed build's too: nothing is built again


def _records(folder: Path, plain: Any, schedule: Any, target: Any) -> Any:
    """A tuning database in ``folder`` holding one record: ``schedule`` for ``plain``."""
    from tvm.s_tir import meta_schedule as ms

    folder.mkdir(parents=True)
    database = ms.database.JSONDatabase(work_dir=str(folder))
    workload = database.commit_workload(plain)
    args = ms.arg_info.ArgInfo.from_prim_func(plain["main"])
    database.commit_tuning_record(ms.database.TuningRecord(schedule.trace, workload, [1e-5], target, args))
    return database


def test_a_tuned_record_that_computes_something_else_is_not_used(target: Any, tmp_path: Path) -> None:
    """A tuned record goes through the postprocessor that broke the gather: checked like a default."""
    from types import SimpleNamespace

    from tvm.s_tir import meta_schedule as ms

    plain = _gather_nd(SEQUENCE)
    task = SimpleNamespace(task_name="te_gather_nd", dispatched=[plain])
    broken, _ = default_schedule(plain, target)
    assert ms.postproc.RewriteLayout().apply(broken)
    records = _records(tmp_path / "broken", plain, broken, target)
    verified, rejected = schedule_check.checked_records(records, [task], target, tmp_path / "checks")
    assert len(verified) == 0
    assert rejected == {
        "te_gather_nd": "tuned record differs from the plain loops by max |diff| 1; its default schedule used"
    }

    good, _ = default_schedule(plain, target)
    records = _records(tmp_path / "good", plain, good, target)
    verified, rejected = schedule_check.checked_records(records, [task], target, tmp_path / "checks")
    assert rejected == {} and len(verified) == 1

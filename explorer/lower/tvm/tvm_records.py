"""Tuning records shipped with the project, per CPU family and vector width, as TopHub did for Relay.

A MetaSchedule record is a schedule for one task (a fused PrimFunc) on one target. The
zoo's models were tuned on this kind of machine by ``scripts/pretune_zoo.py``, which keeps
the best record of each task and writes it here (gzipped MetaSchedule JSON database files
and a ``manifest.json`` saying how, when, with which TVM and on which CPU). A runtime
asked for ``pretuned`` adds them to its tuning database once
(:func:`seed_database`), so tuned TVM is there at once for a demo, and further tuning
starts from them. Records match a task by its structure (MetaSchedule's workload hash),
so they help any model with the same task, and a TVM whose lowering differs simply finds
none. This CPU's feature flags come from :func:`explorer.lower.tvm.relax_target.cpu_flags`
(re-exported here).

Examples
--------
>>> records_key(machine="x86_64", flags={"avx2", "fma"}), records_key(machine="aarch64", flags=set())
('llvm-x86_64-avx2', 'llvm-aarch64-neon')
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from explorer.isolation.io import write_bytes_atomic
from explorer.lower.tvm.relax_target import cpu_flags, parse_target
from explorer.lower.tvm.tuning_log import SHIPPED_PREFIX, record_trials, tuned_trials

__all__ = [
    "RECORDS_ROOT",
    "MANIFEST",
    "DATABASE_FILES",
    "records_key",
    "shipped_records",
    "seed_database",
    "export_records",
    "cpu_flags",
]

RECORDS_ROOT = Path(__file__).resolve().parent.parent.parent / "data" / "tvm_records"
"""Where the shipped records live: one folder per :func:`records_key`."""

MANIFEST = "manifest.json"
DATABASE_FILES = ("database_workload.json", "database_tuning_record.json")
"""MetaSchedule's JSON database: the tasks, and the records (stored gzipped here)."""


def records_key(
    target: str = "llvm", *, machine: str | None = None, flags: Iterable[str] | None = None
) -> str:
    """The shipped records' folder for a target: kind, architecture and widest vector unit.

    A schedule depends on the vector width (AVX-512, AVX2, SSE; NEON) more than on the exact
    model, which only changes how LLVM compiles it. For ``llvm`` (this CPU) the architecture and
    flags are this machine's; a target that names its CPU or triple (``llvm -mcpu=haswell``,
    :func:`explorer.lower.tvm.relax_target.parse_target`) is asked of TVM's LLVM instead.

    Examples
    --------
    >>> records_key(machine="x86_64", flags={"avx512f", "avx2"})
    'llvm-x86_64-avx512'
    >>> records_key("llvm -mcpu=haswell -num-cores=2")  # an AVX2 CPU, whatever this one is
    'llvm-x86_64-avx2'
    """
    spec = parse_target(target)
    if flags is None and ("mcpu" in spec or "mtriple" in spec):
        machine, flags = _target_machine_flags(spec)
    machine = (machine or platform.machine()).lower()
    have = set(cpu_flags() if flags is None else flags)
    if machine in ("aarch64", "arm64"):
        width = "sve" if "sve" in have else "neon"
    elif "avx512f" in have:
        width = "avx512"
    elif "avx2" in have:
        width = "avx2"
    else:
        width = "sse"
    return f"{spec['kind']}-{machine}-{width}"


_WIDTH_FEATURES = ("avx512f", "avx2", "sve")
"""The CPU features :func:`records_key` tells vector widths by."""


def _target_machine_flags(spec: dict[str, Any]) -> tuple[str, set[str]]:
    """The architecture (from the triple, else this machine's) and vector features of a named target."""
    import tvm
    from tvm.target import codegen

    triple = str(spec.get("mtriple") or codegen.llvm_get_system_triple())
    machine = triple.split("-", 1)[0]
    target = tvm.target.Target(spec)
    with target:
        have = {feature for feature in _WIDTH_FEATURES if codegen.llvm_cpu_has_features(feature, target)}
    return machine, have


def shipped_records(target: str = "llvm", root: str | os.PathLike[str] | None = None) -> Path | None:
    """The folder of records shipped for this CPU and ``target``, or None when there are none.

    Examples
    --------
    >>> shipped_records("llvm", "/nonexistent") is None
    True
    """
    folder = Path(root or RECORDS_ROOT) / records_key(target)
    return folder if (folder / MANIFEST).is_file() else None


def _manifest(folder: Path) -> dict[str, Any]:
    return json.loads((folder / MANIFEST).read_text())


def _copy_record(record: Any, into: Any) -> None:
    """Commit ``record`` (and its task) to the database ``into``."""
    from tvm.s_tir import meta_schedule as ms

    workload = into.commit_workload(record.workload.mod)
    into.commit_tuning_record(
        ms.database.TuningRecord(record.trace, workload, record.run_secs, record.target, record.args_info)
    )


def seed_database(
    work_dir: str | os.PathLike[str], target: str = "llvm", root: str | None = None
) -> dict[str, Any] | None:
    """Add the records shipped for this CPU to the tuning database in ``work_dir``, once.

    Returns
    -------
    dict or None
        The shipped manifest, with ``"added"``: records added now (0 when added before), or
        None when nothing is shipped for this CPU.

    Examples
    --------
    >>> seed_database("/tmp/never-made", root="/nonexistent") is None
    True
    """
    shipped = shipped_records(target, root)
    if shipped is None:
        return None
    manifest = _manifest(shipped)
    mark = f"{SHIPPED_PREFIX}{manifest['id']}"
    folder = Path(work_dir)
    if tuned_trials(folder, mark):
        return {**manifest, "added": 0}
    from tvm.s_tir import meta_schedule as ms

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as unpacked:
        for name in DATABASE_FILES:
            with gzip.open(shipped / f"{name}.gz", "rb") as src, open(Path(unpacked) / name, "wb") as dst:
                shutil.copyfileobj(src, dst)
        source = ms.database.JSONDatabase(work_dir=unpacked)
        into = ms.database.JSONDatabase(work_dir=str(folder))
        added = 0
        for record in source.get_all_tuning_records():
            _copy_record(record, into)
            added += 1
    record_trials(folder, mark, 1)
    return {**manifest, "added": added}


def export_records(
    work_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], manifest: dict[str, Any]
) -> int:
    """Write the best record of every task in ``work_dir``'s database to ``out_dir`` (gzipped),
    with ``manifest`` (plus ``"records"``) beside them.

    Returns
    -------
    int
        Records written.

    Examples
    --------
    >>> import os, tempfile
    >>> out = tempfile.mkdtemp()
    >>> export_records(tempfile.mkdtemp(), out, {"id": "demo"})  # an empty database: no records
    0
    >>> sorted(os.listdir(out))
    ['database_tuning_record.json.gz', 'database_workload.json.gz', 'manifest.json']
    """
    from tvm.s_tir import meta_schedule as ms

    source = ms.database.JSONDatabase(work_dir=str(work_dir))
    best: dict[int, Any] = {}
    for record in source.get_all_tuning_records():
        secs = [float(s) for s in (record.run_secs or [])]
        if not secs or min(secs) >= 1e9:  # a failed candidate
            continue
        key = hash(record.workload)  # the database holds one object per workload
        mean = sum(secs) / len(secs)
        if key not in best or mean < best[key][0]:
            best[key] = (mean, record)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as staged:
        into = ms.database.JSONDatabase(work_dir=staged)
        for _, record in sorted(best.values(), key=lambda pair: pair[0]):
            _copy_record(record, into)
        for name in DATABASE_FILES:
            data = (Path(staged) / name).read_bytes()
            write_bytes_atomic(gzip.compress(data, mtime=0), out / f"{name}.gz")
    write_bytes_atomic(
        json.dumps({**manifest, "records": len(best)}, indent=1, sort_keys=True).encode() + b"\n",
        out / MANIFEST,
    )
    return len(best)

"""mybinder.org's environment, from binder/ alone: a fresh venv, the lock, postBuild, the notebooks.

repo2docker installs Python from binder/runtime.txt, runs ``pip install -r binder/requirements.txt``,
then binder/postBuild in the repository's root. The slow tests here do the same in a fresh virtual
environment (no project extras, nothing of .venv), then run the notebooks a visitor opens first in
a kernel of that environment, and measure what Binder limits: the environment's disk and the
notebooks' memory (kernel, worker and their children together; a visitor gets 1-2 GB).

One difference, on purpose: the lock's ``--extra-index-url`` line (PyPI's ``torch`` is the CUDA
build; the CPU build, ``torch==X+cpu``, lives on PyTorch's CPU index) is left out here. That host
is not reachable from this project's machines, and pip asks every index about every package,
retrying an unreachable one for seconds each time (about 8 s a package with pip's 5 retries, more
when a name lookup hangs: ``PIP_DEFAULT_TIMEOUT`` is 180 s here). The same file, ``torch==X+cpu``,
lies in these machines' find-links folder (/opt/wheels), which pip reads from its global
configuration. The fast tests check the lock's own lines.

pip's HTTP cache keeps nothing here (this network's package proxy sends no caching headers), so the
wheels the lock names are kept instead, per lock, in a wheelhouse under
``$ONNX_EXPLORER_CACHE/binder-wheels`` (``~/.cache/onnx-graph-explorer``): the first run downloads
them with ``pip download -r`` (from the same indexes), every run installs with ``pip install
--no-index --find-links WHEELHOUSE -r`` into the fresh environment. Dependencies are resolved at
install, from the wheelhouse alone, so a package missing from the lock fails the install. The
environment itself lives in memory (/dev/shm) where there is room: 2 GB in 55,000 files took
minutes to write and delete on this shared disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from explorer.isolation.io import cache_folder
from tests.notebooks.executor import execute_with_memory

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
LOCK = BINDER / "requirements.txt"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
BINDER_NOTEBOOKS = [
    ROOT / "notebooks" / name
    for name in ("00_tour.ipynb", "explorer.ipynb")
    if (ROOT / "notebooks" / name).exists()
]
"""What a visitor opens first: the tour, and the Explorer app (Voila); those that exist yet."""
MEMORY_LIMIT = 2 * 2**30
"""Kernel + worker + children, summed PSS (a shared page once): the most a Binder visitor may have."""
DISK_LIMIT = 3 * 2**30
"""The environment at its largest while it installs (with pip's temporary files): a CUDA torch
alone is several GB, the CPU build under 1 GB."""
TEST_ONLY = {"pytest", "playwright", "ruff", "iniconfig", "pluggy"}
"""The test extra's packages that nothing the notebooks need depends on."""


def _lock_lines() -> list[str]:
    return [
        line.strip() for line in LOCK.read_text().splitlines() if line.strip() and not line.startswith("#")
    ]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_runtime_pins_python_3_11() -> None:
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"


def test_lock_pins_every_requirement_exactly() -> None:
    lines = _lock_lines()
    options = [line for line in lines if line.startswith("-")]
    assert options == [f"--extra-index-url {TORCH_INDEX}"]
    pins = dict(line.split("==", 1) for line in lines if not line.startswith("-"))
    assert len(pins) == len(lines) - 1, "every requirement is NAME==VERSION"
    assert all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) for name in pins)
    assert all(re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", version) for version in pins.values())
    names = {_canonical(name) for name in pins}
    assert pins.get("torch", "").endswith("+cpu"), "torch must be the CPU build"
    assert not {n for n in names if n.startswith(("nvidia-", "triton"))}, "CUDA packages in the lock"
    assert not names & TEST_ONLY, "the test extra is not Binder's"
    assert {"ipykernel", "jupyterlab", "voila", "notebook", "onnx", "apache-tvm"} <= names
    assert "onnx-graph-explorer" not in names, "postBuild installs the project, editable"


def test_lock_matches_the_environment_the_tests_run_in() -> None:
    """The lock pins what this environment (CI's .venv) resolved; stale: run scripts/lock_binder.sh."""
    if "+cpu" not in _installed_version("torch"):
        pytest.skip("this environment has no CPU build of torch to lock (bootstrap.sh test,torch)")
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "lock_binder.sh"), "--check"],
        env={**os.environ, "VENV": sys.prefix},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def _installed_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return ""


def test_postbuild_installs_the_project_alone_and_the_kernel_config() -> None:
    text = (BINDER / "postBuild").read_text()
    assert os.access(BINDER / "postBuild", os.X_OK)
    assert re.search(r"pip install .*--no-deps -e \.", text)
    assert "scripts/install_kernel_config.sh" in text


# --- the environment itself, built as mybinder.org builds it (slow) -----------------------------


@dataclass(frozen=True)
class BinderEnv:
    """A fresh environment built from binder/ and what building it took."""

    venv: Path
    download_s: float
    install_s: float
    postbuild_s: float
    venv_bytes: int
    peak_disk_bytes: int

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


def _disk_bytes(*folders: Path) -> int:
    """Bytes allocated to the files under the folders (each inode once)."""
    total, seen, stack = 0, set(), [str(f) for f in folders if f.exists()]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
                stat = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.st_ino not in seen:
                seen.add(stat.st_ino)
                total += stat.st_blocks * 512
    return total


class _DiskPeak:
    """Reads the folders' size every ``interval_s`` in a thread; keeps the largest."""

    def __init__(self, *folders: Path, interval_s: float = 2.0) -> None:
        self.folders, self.interval_s, self.peak = folders, interval_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.peak = max(self.peak, _disk_bytes(*self.folders))
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> _DiskPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _disk_bytes(*self.folders))


def _run(command: list[str], log: Path, **kwargs: object) -> float:
    start = time.perf_counter()
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, **kwargs)  # type: ignore[call-overload]
    if done.returncode != 0:
        pytest.fail(f"{' '.join(command)} exited {done.returncode}:\n{log.read_text()[-4000:]}")
    return time.perf_counter() - start


def _wheelhouse(requirements: Path, python: Path, log: Path, env: dict[str, str]) -> Path:
    """The wheels ``requirements`` pins, downloaded once per lock (other locks' wheels are removed)."""
    root = cache_folder("binder-wheels")
    key = hashlib.sha256(requirements.read_bytes()).hexdigest()[:16]
    wheelhouse = root / key
    if (wheelhouse / ".complete").exists():
        return wheelhouse
    partial = root / f"{key}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    _run(
        [str(python), "-m", "pip", "download", "--no-deps", "-d", str(partial), "-r", str(requirements)],
        log,
        env=env,
    )
    (partial / ".complete").touch()
    for old in root.iterdir():
        if not old.name.startswith(key):  # another lock's wheels
            shutil.rmtree(old, ignore_errors=True)
    try:
        partial.rename(wheelhouse)
    except OSError:  # another run finished the same wheelhouse first
        shutil.rmtree(partial, ignore_errors=True)
    return wheelhouse


def _scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for the environment: in memory (/dev/shm) where there is room, else pytest's tmp.

    Writing 2 GB in some 55,000 files, and deleting them, takes minutes on a disk other jobs
    share, seconds in memory. A folder left by a run that died is removed by the next one.
    """
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        return tmp_path_factory.mktemp("binder")
    for stale in shm.glob("onnx-explorer-binder-*"):
        pid = stale.name.split("-")[3]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(stale, ignore_errors=True)
    if shutil.disk_usage(shm).free < 2 * DISK_LIMIT:
        return tmp_path_factory.mktemp("binder")
    return Path(tempfile.mkdtemp(prefix=f"onnx-explorer-binder-{os.getpid()}-", dir=shm))


@pytest.fixture(scope="module")
def binder_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BinderEnv]:
    if sys.version_info[:2] != (3, 11):
        pytest.skip(f"binder/runtime.txt pins Python 3.11; this is {sys.version.split()[0]}")
    work = _scratch(tmp_path_factory)
    try:
        yield _build(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def lock_requirements(folder: Path) -> Path:
    """The lock less the unreachable CPU index (see above), as ``folder/requirements.txt``."""
    requirements = folder / "requirements.txt"
    requirements.write_text(
        "".join(line + "\n" for line in LOCK.read_text().splitlines() if TORCH_INDEX not in line)
    )
    return requirements


def venv_environment(venv: Path, tmp: Path) -> dict[str, str]:
    """This process's environment with ``venv`` activated, ``tmp`` as TMPDIR and pip quiet."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        VIRTUAL_ENV=str(venv),
        TMPDIR=str(tmp),
        PIP_NO_INPUT="1",
        PIP_PROGRESS_BAR="off",
    )
    return env


def _build(work: Path) -> BinderEnv:
    """Python's venv, then ``pip install -r`` the lock, then postBuild in the repository's root."""
    venv, tmp, log = work / "venv", work / "tmp", work / "build.log"
    tmp.mkdir()
    base_python = getattr(sys, "_base_executable", sys.executable)
    _run([base_python, "-m", "venv", str(venv)], log)
    requirements = lock_requirements(work)
    env = venv_environment(venv, tmp)
    python = venv / "bin" / "python"
    start = time.perf_counter()
    wheelhouse = _wheelhouse(requirements, python, log, env)
    download_s = time.perf_counter() - start
    with _DiskPeak(venv, tmp) as disk:
        install = ["install", "--no-index", "--find-links", str(wheelhouse), "-r", str(requirements)]
        install_s = _run([str(python), "-m", "pip", *install], log, env=env)
        postbuild_s = _run(["bash", str(BINDER / "postBuild")], log, env=env, cwd=ROOT)
    return BinderEnv(venv, download_s, install_s, postbuild_s, _disk_bytes(venv), disk.peak)


@pytest.mark.slow
def test_binder_env_is_consistent_cpu_only_and_fits(binder_env: BinderEnv) -> None:
    check = subprocess.run([str(binder_env.python), "-m", "pip", "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    listed = subprocess.run(
        [str(binder_env.python), "-m", "pip", "list", "--format=json"],
        capture_output=True,
        text=True,
        check=True,
    )
    versions = {_canonical(p["name"]): p["version"] for p in json.loads(listed.stdout)}
    assert versions["torch"].endswith("+cpu")
    assert not [n for n in versions if n.startswith(("nvidia-", "triton"))]
    assert "onnx-graph-explorer" in versions
    config = binder_env.venv / "etc" / "ipython" / "ipython_kernel_config.py"
    assert config.read_text() == (ROOT / "scripts" / "ipython_kernel_config.py").read_text()
    e = binder_env
    print(
        f"\nbinder env: wheels {e.download_s:.0f} s, pip install {e.install_s:.0f} s,"
        f" postBuild {e.postbuild_s:.0f} s, venv {e.venv_bytes / 2**20:.0f} MiB,"
        f" peak disk {e.peak_disk_bytes / 2**20:.0f} MiB"
    )
    assert binder_env.peak_disk_bytes < DISK_LIMIT


@pytest.fixture
def binder_kernel(binder_env: BinderEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A kernel spec, in a JUPYTER_PATH of its own, that starts the Binder environment's Python."""
    name = "binder-env"
    spec = tmp_path / "jupyter" / "kernels" / name
    spec.mkdir(parents=True)
    path = f"{binder_env.venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    kernel = {
        "argv": [str(binder_env.python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Binder environment",
        "language": "python",
        "env": {"PATH": path, "VIRTUAL_ENV": str(binder_env.venv)},
    }
    (spec / "kernel.json").write_text(json.dumps(kernel))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    return name


@pytest.mark.slow
@pytest.mark.parametrize("path", BINDER_NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_in_the_binder_env(
    path: Path, binder_env: BinderEnv, binder_kernel: str, tmp_path: Path
) -> None:
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    notebook = nbformat.read(copy, as_version=4)
    # Last, a cell that says which Python ran the notebook: the Binder environment's, not .venv's.
    probe = "import sys, explorer; print(sys.prefix); print(explorer.__file__)"
    notebook.cells.append(nbformat.v4.new_code_cell(probe))
    run = execute_with_memory(notebook, binder_kernel, tmp_path)
    errors, peak = run.errors, run.peak
    assert not errors, errors[0]["evalue"] if errors else ""
    said = "".join(o.get("text", "") for o in notebook.cells[-1].outputs).split()
    assert Path(said[0]).resolve() == binder_env.venv.resolve()
    assert Path(said[1]).resolve().is_relative_to(ROOT), "the project is installed editable"
    print(f"\n{path.name}: peak {peak.peak_pss_mib:.0f} MiB (PSS) over {peak.max_processes} processes")
    assert peak.peak_pss_bytes < MEMORY_LIMIT, (
        f"{peak.peak_pss_mib:.0f} MiB (PSS), {peak.peak_mib:.0f} MiB RSS"
    )

"""Every name the README, the docs and the notebooks import from the project still imports.

Users copy these lines; a module moved or a name renamed must keep them working (a re-export
where it moved from). The imports are read from the text (Python code blocks of the Markdown
files, code cells of the notebooks) and each is imported here, name by name.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

OURS = ("explorer", "widgets")

CODE_BLOCK = re.compile(r"```(?:python|py|pycon)?\n(.*?)```", re.S)


def _sources() -> Iterator[tuple[str, str]]:
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for block in CODE_BLOCK.findall(path.read_text(encoding="utf-8")):
            yield path.relative_to(ROOT).as_posix(), block
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for cell in cells:
            if cell["cell_type"] == "code":
                yield path.relative_to(ROOT).as_posix(), "".join(cell["source"])


def _statements(code: str) -> Iterator[ast.stmt]:
    """The import statements of ``code``, each line of a doctest-style block without its prompt."""
    code = "\n".join(line[4:] if line.startswith((">>> ", "... ")) else line for line in code.splitlines())
    try:
        tree = ast.parse(code)
    except SyntaxError:  # a shell block, or magics: take the import lines alone
        for line in code.splitlines():
            if re.match(r"\s*(from|import)\s+(explorer|widgets)\b", line) and not line.rstrip().endswith("("):
                try:
                    yield from ast.parse(line.strip()).body
                except SyntaxError:
                    continue
        return
    yield from (n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom))


def _used_names() -> dict[tuple[str, str | None], str]:
    """(module, name or None) -> where it was seen first."""
    used: dict[tuple[str, str | None], str] = {}
    for where, code in _sources():
        for node in _statements(code):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in OURS:
                for alias in node.names:
                    used.setdefault((node.module, alias.name), where)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in OURS:
                        used.setdefault((alias.name, None), where)
    return used


USED = _used_names()


def test_the_docs_and_notebooks_import_something_of_ours() -> None:
    assert len(USED) > 20 and any(m.startswith("widgets") for m, _ in USED)


@pytest.mark.parametrize(("module", "name"), sorted(USED, key=str), ids=lambda v: str(v))
def test_each_public_name_the_docs_use_imports(module: str, name: str | None) -> None:
    where = USED[(module, name)]
    imported = importlib.import_module(module)
    if name is not None and name != "*":
        if not hasattr(imported, name):
            importlib.import_module(f"{module}.{name}")  # a submodule
        else:
            getattr(imported, name)
    assert where


DOTTED = re.compile(r"(?<![\w./-])((?:explorer|widgets)(?:\.[A-Za-z_]\w*)+)")
FILE_PATH = re.compile(
    r"(?<![\w./-])((?:explorer|widgets|tests|benchmarks|notebooks|scripts|binder)/[\w./-]*\w)"
)


def _doc_texts() -> Iterator[tuple[str, str]]:
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        yield path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")


FILE_SUFFIXES = {"py", "ipynb", "md", "json", "html", "onnx", "csv", "txt", "log"}
"""``explorer.ipynb`` is a notebook's file name, not a module."""


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    if parts[-1] in FILE_SUFFIXES:
        return True
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(value, attribute):
                return False
            value = getattr(value, attribute)
        return True
    return False


def test_every_module_and_name_the_docs_write_out_exists() -> None:
    missing = sorted(
        {
            f"{where}: {name}"
            for where, text in _doc_texts()
            for name in DOTTED.findall(text)
            if not _resolves(name)
        }
    )
    assert not missing, "the docs name what is not there (moved or renamed?):\n" + "\n".join(missing)


PACKAGE_PATH = re.compile(
    r"(?<![\w./-])((?:core|onnx_adapter|lower|runtimes|targets|overlays|passes|views|isolation|cli|zoo)"
    r"/[\w/]*\w\.py)\b"
)
"""A module written relative to ``explorer/`` (``lower/tvm/relax_build.py``), as the package map does."""


def test_every_module_written_relative_to_the_package_exists() -> None:
    missing = sorted(
        {
            f"{where}: {path}"
            for where, text in _doc_texts()
            for path in PACKAGE_PATH.findall(text)
            if "NAME" not in path and not (ROOT / "explorer" / path).exists()
        }
    )
    assert not missing, "the docs name modules that are not there:\n" + "\n".join(missing)


def test_every_file_the_docs_write_out_exists() -> None:
    missing = sorted(
        {
            f"{where}: {path}"
            for where, text in _doc_texts()
            for path in FILE_PATH.findall(text)
            if not any(part in path for part in ("*", "<", "NAME", "tests/artifacts/"))  # patterns, outputs
            and not (ROOT / path.rstrip(".")).exists()
        }
    )
    assert not missing, "the docs name files that are not there:\n" + "\n".join(missing)

"""The layering of ``explorer/``: which package may import which, no import circles, no borrowed privates.

The folders say what the architecture is (``docs/architecture.md``, "Layers"):

- ``explorer.core``: the neutral graph model, tensors, errors, summaries, diffs, the
  Timeline and the adapter interface. It imports no other explorer package.
- ``explorer.isolation``: the worker, CPU cores, process memory, atomic writes. Core only.
- adapters: ``explorer.onnx_adapter`` (ONNX files and protos into the graph model) and
  ``explorer.zoo`` (sample models). Core and isolation (the zoo also the ONNX adapter).
- stages: ``explorer.passes``, ``explorer.lower``, ``explorer.runtimes``, ``explorer.targets``,
  ``explorer.overlays``. Core, isolation, adapters and each other; never a view or the CLI.
  (``overlays`` is a stage, not an adapter: its ONNX Runtime reader runs the ``ort:*`` passes to
  map a fused kernel back to the model's nodes, and adapters may not import a stage.)
- ``explorer.views``: pure figures and pages from any of the above.
- ``explorer.cli``: the command line, on top of everything in ``explorer``.
- nothing in ``explorer`` imports ``widgets`` (the UI sits on top and may import anything).

Every import counts, at module level or inside a function, except those under
``if TYPE_CHECKING:`` (annotations only). Circles are counted over module-level imports,
the ones that run when a module is imported.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent

LAYER_OF = {
    "core": "core",
    "isolation": "isolation",
    "onnx_adapter": "adapter",
    "zoo": "adapter",
    "passes": "stage",
    "lower": "stage",
    "runtimes": "stage",
    "targets": "stage",
    "overlays": "stage",
    "views": "view",
    "cli": "app",
}
"""Top-level package of ``explorer`` -> its layer."""

MAY_IMPORT = {
    "core": {"core"},
    "isolation": {"core", "isolation"},
    "adapter": {"core", "isolation", "adapter"},
    "stage": {"core", "isolation", "adapter", "stage"},
    "view": {"core", "isolation", "adapter", "stage", "view"},
    "app": {"core", "isolation", "adapter", "stage", "view", "app"},
}
"""Layer -> the layers its modules may import."""

ADAPTER_USES = {"zoo": {"zoo"}, "onnx_adapter": {"onnx_adapter", "zoo"}}
"""Between the two adapters: ``load("zoo:NAME")`` builds from the zoo; the zoo stands alone."""

IR_SWITCH = re.compile(r"\.ir\s*[!=]=|\bir\s*[!=]=\s*[\"']|\.model is (not )?None")
"""An ``if ir ==`` / ``model is not None`` switch: per-IR behaviour belongs to the adapters."""

ADAPTER_FILES = {"explorer/onnx_adapter", "explorer/lower/relax_adapter.py", "explorer/lower/mlir_adapter.py"}


def _modules(top: str) -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / top).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = {**_modules("explorer"), **_modules("widgets")}


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _imports(name: str, path: Path) -> Iterator[tuple[str, str | None, int, bool]]:
    """(imported module, imported name or None, line, at module level) of one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = _type_checking_lines(tree)
    top_level = {id(node) for node in tree.body}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in typing_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno, id(node) in top_level
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            for alias in node.names:
                yield module, alias.name, node.lineno, id(node) in top_level


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "explorer" and len(parts) > 1 else None


def _target(module: str, name: str | None) -> str:
    """The module an import resolves to (``from explorer.core import graph`` imports explorer.core.graph)."""
    if name is not None and f"{module}.{name}" in MODULES:
        return f"{module}.{name}"
    return module


def test_every_package_of_explorer_has_a_layer() -> None:
    packages = {p.name for p in (ROOT / "explorer").iterdir() if (p / "__init__.py").exists()}
    assert packages == set(LAYER_OF), "a new package needs a layer here and in docs/architecture.md"
    loose = sorted(p.name for p in (ROOT / "explorer").glob("*.py") if p.name != "__init__.py")
    assert not loose, f"modules outside the layer packages: {loose}"


def test_each_layer_imports_only_the_layers_below_it() -> None:
    wrong = []
    for name, path in MODULES.items():
        source = _package(name)
        if source is None:
            continue
        for module, imported, line, _ in _imports(name, path):
            target = _target(module, imported)
            if target.split(".")[0] == "widgets":
                wrong.append(
                    f"{path.relative_to(ROOT)}:{line} imports {target} (explorer never imports widgets)"
                )
                continue
            to = _package(target)
            if to is None or to == source:
                continue
            layer, other = LAYER_OF[source], LAYER_OF[to]
            allowed = other in MAY_IMPORT[layer]
            if allowed and layer == "adapter" and other == "adapter":
                allowed = to in ADAPTER_USES[source]
            if not allowed:
                wrong.append(f"{path.relative_to(ROOT)}:{line} ({layer}) imports {target} ({other})")
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_the_package_root_is_a_facade_over_core_and_the_onnx_adapter() -> None:
    targets = {_package(_target(m, n)) for m, n, _, _ in _imports("explorer", ROOT / "explorer/__init__.py")}
    assert targets - {None} <= {"core", "onnx_adapter"}


def test_no_import_circle_between_modules() -> None:
    graph = nx.DiGraph()
    for name, path in MODULES.items():
        for module, imported, _, top_level in _imports(name, path):
            target = _target(module, imported)
            # importing a package's submodule runs the package first; a package importing
            # its own submodules is how packages are built, not a circle
            related = name.startswith(target + ".") or target.startswith(name + ".")
            if top_level and target in MODULES and target != name and not related:
                graph.add_edge(name, target)
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not circles, f"import circles: {circles}"


def _home(module: str) -> str:
    """The package a module belongs to (``explorer.views.layout`` for its submodules)."""
    return (
        module if module in MODULES and MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    )


def test_no_private_name_is_imported_from_another_package() -> None:
    borrowed = []
    for name, path in MODULES.items():
        for module, imported, line, _ in _imports(name, path):
            private = imported is not None and imported.startswith("_") and not imported.startswith("__")
            ours = module.split(".")[0] in ("explorer", "widgets")
            if private and ours and _home(module) != _home(name):
                borrowed.append(f"{path.relative_to(ROOT)}:{line} imports {module}.{imported}")
    assert not borrowed, "private names used outside their package:\n" + "\n".join(borrowed)


def _is_adapter(path: Path) -> bool:
    relative = path.relative_to(ROOT).as_posix()
    return any(relative == a or relative.startswith(a + "/") for a in ADAPTER_FILES)


@pytest.mark.parametrize("top", ["explorer", "widgets"])
def test_no_ir_switch_outside_the_adapters(top: str) -> None:
    switches = []
    for path in sorted((ROOT / top).rglob("*.py")):
        if _is_adapter(path):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if IR_SWITCH.search(code) and ">>>" not in line:
                switches.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not switches, "per-IR switches belong to the adapters (graph.adapter):\n" + "\n".join(switches)

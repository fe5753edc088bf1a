"""The layering of ``explorer/``: which package may import which, no import circles, no borrowed privates.

The folders say what the architecture is (``docs/architecture.md``, "Layers"):

- ``explorer.core``: the neutral graph model, tensors, errors, summaries, diffs, the
  Timeline and the adapter interface. It imports no other explorer package.
- ``explorer.isolation``: the worker, CPU cores, process memory, atomic writes. Core only.
- adapters: ``explorer.onnx_adapter`` (ONNX files and protos into the graph model) and
  ``explorer.zoo`` (sample models). Core and isolation (the zoo also the ONNX adapter).
- stages, in this order: ``explorer.passes`` < ``explorer.lower`` < ``explorer.runtimes`` <
  ``explorer.targets`` < ``explorer.overlays``. Core, isolation, adapters, their own stage and
  the stages before it; never a view or the CLI. What every stage needs sits below them all:
  the agreement check in the core (``core/compare.py``), ONNX Runtime's reference run and kernel
  registry in the ONNX adapter (``onnx_adapter/ort_run.py``, ``onnx_adapter/ort_registry.py``).
  (``overlays`` is a stage, not an adapter, and the last one: its ONNX Runtime reader runs the
  ``ort:*`` passes to map a fused kernel back to the model's nodes, it joins AI Hub's placement to
  the targets' predictions, and adapters may not import a stage.)
- ``explorer.views``: pure figures and pages from any of the above.
- ``explorer.cli``: the command line, on top of everything in ``explorer``.
- nothing in ``explorer`` imports ``widgets`` (the UI sits on top and may import anything).

Every import counts, at module level or inside a function, except those under
``if TYPE_CHECKING:`` (annotations only); so does a string that names an explorer module
(``importlib.import_module``, lazy exports): the worker names none, its caller hands in what it
pre-imports (``explorer.onnx_adapter.PRESTART_IMPORTS``). Circles are counted over module-level
imports, the ones that run when a module is imported; counting the imports inside functions too
(a circle at run time), only the circles in :data:`RUN_TIME_CIRCLES` remain, and none may be added.
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

STAGE_ORDER = ("passes", "lower", "runtimes", "targets", "overlays")
"""The stages, lowest first: a stage imports only itself and the stages before it."""

RUN_TIME_CIRCLES = {
    frozenset(
        {
            "explorer.lower.tvm.default_schedules",
            "explorer.lower.tvm.relax_tuning",
            "explorer.lower.tvm.schedule_check",
        }
    ),
    frozenset({"explorer.overlays.mapping", "explorer.overlays.model_explorer", "explorer.overlays.value"}),
}
"""Circles closed only by imports inside functions, still to be broken (no new one may appear)."""

MODULE_NAME = re.compile(r"explorer(\.\w+)+")

IR_SWITCH = re.compile(r"\.ir\s*[!=]=|\bir\s*[!=]=\s*[\"']|\.model is (not )?None")
"""An ``if ir ==`` / ``model is not None`` switch: per-IR behaviour belongs to the adapters."""

ADAPTER_FILES = {
    "explorer/onnx_adapter",
    "explorer/lower/tvm/relax_adapter.py",
    "explorer/lower/iree/mlir_adapter.py",
}


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


def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _named_in_strings(path: Path) -> Iterator[tuple[str, int]]:
    """(module, line) of each string in the code (not a docstring) that is an explorer module's name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings, typing_only = _docstrings(tree), _type_checking_lines(tree)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and MODULE_NAME.fullmatch(node.value)
            and node.value in MODULES
            and id(node) not in docstrings
            and node.lineno not in typing_only
        ):
            yield node.value, node.lineno


def _imports(name: str, path: Path) -> Iterator[tuple[str, str | None, int, bool]]:
    """(imported module, imported name or None, line, at module level) of one module; a module
    named in a string is imported by name when the code runs (never at module level here)."""
    for module, line in _named_in_strings(path):
        yield module, None, line, False
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


def test_each_stage_imports_only_the_stages_before_it() -> None:
    assert set(STAGE_ORDER) == {package for package, layer in LAYER_OF.items() if layer == "stage"}
    wrong = []
    for name, path in MODULES.items():
        source = _package(name)
        if source not in STAGE_ORDER:
            continue
        for module, imported, line, _ in _imports(name, path):
            target = _target(module, imported)
            to = _package(target)
            if to in STAGE_ORDER and STAGE_ORDER.index(to) > STAGE_ORDER.index(source):
                wrong.append(
                    f"{path.relative_to(ROOT)}:{line} ({source}) imports {target} ({to}, a later stage)"
                )
    assert not wrong, f"stages run {' < '.join(STAGE_ORDER)}; imports against it:\n" + "\n".join(wrong)


def test_a_module_named_in_a_string_is_an_import_and_the_worker_names_none() -> None:
    lazy = {module for module, _ in _named_in_strings(MODULES["explorer.runtimes"])}
    assert {"explorer.core.compare", "explorer.onnx_adapter.ort_run", "explorer.runtimes.bench"} <= lazy
    named = [
        f"{path.relative_to(ROOT)}:{line} names {module}"
        for name, path in MODULES.items()
        if _package(name) == "isolation"
        for module, line in _named_in_strings(path)
    ]
    assert not named, "the caller hands the worker what it pre-imports:\n" + "\n".join(named)


def test_the_package_root_is_a_facade_over_core_and_the_onnx_adapter() -> None:
    targets = {_package(_target(m, n)) for m, n, _, _ in _imports("explorer", ROOT / "explorer/__init__.py")}
    assert targets - {None} <= {"core", "onnx_adapter"}


def _circles(module_level_only: bool) -> set[frozenset[str]]:
    """The import circles between modules, over module-level imports only or over every import."""
    graph = nx.DiGraph()
    for name, path in MODULES.items():
        for module, imported, _, top_level in _imports(name, path):
            target = _target(module, imported)
            # importing a package's submodule runs the package first; a package importing
            # its own submodules is how packages are built, not a circle
            related = name.startswith(target + ".") or target.startswith(name + ".")
            if (top_level or not module_level_only) and target in MODULES and target != name and not related:
                graph.add_edge(name, target)
    return {frozenset(c) for c in nx.strongly_connected_components(graph) if len(c) > 1}


def test_no_import_circle_between_modules() -> None:
    circles = _circles(module_level_only=True)
    assert not circles, f"import circles: {[sorted(c) for c in circles]}"


def test_no_new_import_circle_at_run_time() -> None:
    new = _circles(module_level_only=False) - RUN_TIME_CIRCLES
    assert not new, f"new import circles (imports inside functions counted): {[sorted(c) for c in new]}"


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


REGISTRIES = {
    "explorer/runtimes/registry.py",
    "explorer/lower/compilers.py",
    "explorer/targets/registry.py",
}
"""Where a runtime's or a compiler's name may decide what happens: the tables that name them."""


def _backend_names() -> set[str]:
    from explorer.lower.compilers import COMPILER_NAMES
    from explorer.runtimes.registry import RUNTIME_NAMES

    return set(RUNTIME_NAMES) | set(COMPILER_NAMES)


def _name_switches(path: Path, names: set[str]) -> Iterator[tuple[int, str]]:
    """``x == "tvm"``, ``x in ("ort", ...)``, ``x.startswith("iree")``, ``isinstance(x, TvmRuntime)``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    classes = {"OrtRuntime", "TvmRuntime", "IreeRuntime", "TorchEagerRuntime", "OrtGenaiRuntime"}
    classes |= {"TvmCompiler", "IreeCompiler"}

    def named(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in names
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return any(named(e) for e in node.elts)
        return False

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(
            isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn) for op in node.ops
        ):
            if named(node.left) or any(named(c) for c in node.comparators):
                yield node.lineno, ast.unparse(node)
        elif isinstance(node, ast.Call) and _is_name_switch_call(node, names, classes):
            yield node.lineno, ast.unparse(node)


def _is_name_switch_call(node: ast.Call, names: set[str], classes: set[str]) -> bool:
    func, args = node.func, node.args
    if isinstance(func, ast.Attribute) and func.attr in ("startswith", "endswith") and args:
        value = args[0].value if isinstance(args[0], ast.Constant) else None
        return isinstance(value, str) and value.rstrip("-") in names  # "iree", "ort-": a family by prefix
    if isinstance(func, ast.Name) and func.id == "isinstance" and len(args) == 2:
        return any(isinstance(n, ast.Name) and n.id in classes for n in ast.walk(args[1]))
    return False


@pytest.mark.parametrize("top", ["explorer", "widgets"])
def test_no_compiler_or_runtime_name_switch_outside_the_registries(top: str) -> None:
    names = _backend_names()
    switches = []
    for path in sorted((ROOT / top).rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative in REGISTRIES:
            continue
        for number, code in _name_switches(path, names):
            switches.append(f"{relative}:{number}: {code}")
    assert not switches, (
        "what a runtime or compiler does belongs to it or to its registry (explorer/runtimes/registry.py, "
        "explorer/lower/compilers.py), not to a switch on its name:\n" + "\n".join(switches)
    )


def test_the_name_switch_finder_finds_each_kind_of_switch(tmp_path: Path) -> None:
    source = tmp_path / "switches.py"
    source.write_text(
        "a = name == 'tvm'\nb = name in ('ort', 'x')\nc = name.startswith('iree')\n"
        "d = isinstance(r, TvmRuntime)\ne = name == 'onnx'\nf = kind.startswith('ort-quant')\n"
    )
    assert [line for line, _ in _name_switches(source, _backend_names())] == [1, 2, 3, 4]

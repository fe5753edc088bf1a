"""``docs/architecture.md``'s package map is true: every module it lists exists, and every module is listed.

The map is the fenced blocks of the "Packages" section: a folder (``lower/``) or a file
(``relax_build.py``, or several, comma-separated) at the start of a line, indented two spaces
per level. A file also counts as listed when its name is written in its folder's own entry
(the CLI's commands are listed that way).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ENTRY = re.compile(r"^(?P<indent>\s*)(?P<names>[\w.]+(?:/|\.py)(?:, [\w.]+\.py)*)(?:\s|$)")


def _package_map() -> tuple[set[str], dict[str, str]]:
    """The paths the map lists, and each folder's own entry text (its description lines)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Packages", 1)[1].split("\n## ", 1)[0]
    listed: set[str] = set()
    folder_text: dict[str, str] = {}
    stack: list[str] = []
    current_folder: str | None = None
    for block in re.findall(r"```\n(.*?)```", section, re.S):
        for line in block.splitlines():
            match = ENTRY.match(line)
            if match is None:
                if current_folder is not None:
                    folder_text[current_folder] += " " + line.strip()
                continue
            stack = stack[: len(match["indent"]) // 2]
            current_folder = None
            for name in match["names"].split(", "):
                path = "/".join([*stack, name.rstrip("/")])
                listed.add(path)
            if match["names"].endswith("/"):
                stack.append(match["names"].rstrip("/"))
                current_folder = "/".join(stack)
                folder_text[current_folder] = line[match.end() :]
    return listed, folder_text


def test_every_module_the_map_lists_exists() -> None:
    listed, _ = _package_map()
    assert len(listed) > 200
    assert sorted(p for p in listed if not (ROOT / p).exists()) == []


def test_every_module_is_in_the_map() -> None:
    listed, folder_text = _package_map()
    unlisted = []
    for top in ("explorer", "widgets"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.name == "__init__.py" or "__pycache__" in path.parts:
                continue
            relative = path.relative_to(ROOT).as_posix()
            folder = relative.rsplit("/", 1)[0]
            if relative not in listed and not re.search(
                rf"\b{re.escape(path.name)}\b", folder_text.get(folder, "")
            ):
                unlisted.append(relative)
    assert unlisted == [], "add each to docs/architecture.md's package map:\n" + "\n".join(unlisted)

#!/usr/bin/env bash
# Execute every notebook of the course and render each, with its outputs and widget state, to HTML.
#
#   bash scripts/build_course.sh                     every notebooks/*.ipynb
#   bash scripts/build_course.sh 00_tour 05_tvm.ipynb   only these (names, with or without .ipynb, or paths)
#
# Installs what is missing first (.venv with the torch, iree and llm extras, as scripts/bootstrap.sh does:
# 02_exporting needs PyTorch, 08_mlir IREE, decoder LLMs the llm extra). Each
# notebook runs top to bottom in a fresh kernel, from a scratch copy (whatever it writes stays out
# of notebooks/), with the widgets' state stored in the executed notebook, then goes to
# build/course/NAME.html (nbconvert's HTML exporter, with each widget drawn from its stored state
# by widgets/offline_html.py: figures with plotly.js inline, no widget manager or CDN, so a reader
# offline sees every figure); build/course/index.html lists them with their titles.
# COURSE_OUT overrides the folder, CELL_TIMEOUT the seconds a cell may take (600).
# A notebook that fails is still rendered (up to its error, which the page shows); the script goes
# on with the others and exits 1 at the end, naming each notebook that failed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${COURSE_OUT:-$ROOT/build/course}"
bash scripts/bootstrap.sh "torch,iree,llm"
mkdir -p "$OUT"
exec "$ROOT/.venv/bin/python" - "$OUT" "${CELL_TIMEOUT:-600}" "$@" <<'PY'
"""Run and render each notebook; write the index; exit 1 naming the failures."""
import html
import shutil
import sys
import tempfile
import time
from pathlib import Path

import os

import nbformat
from nbclient import NotebookClient
from widgets.offline_html import render_offline_page

# A plotly figure shown as a cell's value is, by default, only plotly's own mimetype, which
# JupyterLab draws and HTML pages drop ("not able to be represented"): give it an HTML form too,
# with plotly.js inline once per page, so the figures show offline. The kernels inherit it.
os.environ.setdefault("PLOTLY_RENDERER", "plotly_mimetype+notebook")

out, timeout, names = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
notebooks_dir = Path("notebooks").resolve()
if names:
    paths = []
    for name in names:
        path = Path(name) if Path(name).is_file() else notebooks_dir / (name if name.endswith(".ipynb") else f"{name}.ipynb")
        if not path.is_file():
            sys.exit(f"build_course: no such notebook: {name}")
        paths.append(path.resolve())
else:
    paths = sorted(notebooks_dir.glob("*.ipynb"))
if not paths:
    sys.exit("build_course: no notebooks in notebooks/")


def title_of(notebook) -> str:
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return ""


def first_error(notebook) -> str:
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if output.get("output_type") == "error":
                return f"cell {index}: {output.get('ename', '')}: {output.get('evalue', '')}"
    return ""


entries, failed = [], []
for number, path in enumerate(paths, 1):
    print(f"[{number}/{len(paths)}] {path.name} ...", flush=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="build-course-") as scratch:
        shutil.copy(path, Path(scratch) / path.name)
        notebook = nbformat.read(Path(scratch) / path.name, as_version=4)
        client = NotebookClient(
            notebook,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": scratch}},
            store_widget_state=True,
        )
        error = ""
        try:
            client.execute()
        except Exception as exc:  # the notebook keeps its outputs up to the failing cell
            error = first_error(notebook) or f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    seconds = time.perf_counter() - start
    body = render_offline_page(notebook, path.stem)
    target = out / f"{path.stem}.html"
    target.write_text(body, encoding="utf-8")
    widgets = "widgets" in notebook.metadata
    status = f"FAILED ({error})" if error else "ok"
    print(f"      {seconds:.0f} s, {target.relative_to(out.parent) if out.parent in target.parents else target}"
          f"{', widget state stored' if widgets else ''}: {status}", flush=True)
    if error:
        failed.append(f"{path.name} ({error})")
    entries.append((path, title_of(notebook) or path.stem, error, seconds))

items = "\n".join(
    f'  <li><a href="{html.escape(p.stem)}.html">{html.escape(title)}</a> '
    f"<code>{html.escape(p.name)}</code> ({s:.0f} s)"
    + (f' <strong class="failed">failed: {html.escape(err)}</strong>' if err else "")
    + "</li>"
    for p, title, err, s in entries
)
(out / "index.html").write_text(
    f"""<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>onnx-graph-explorer: the course</title>
<style>body {{ font-family: sans-serif; max-width: 50em; margin: 2em auto; }} li {{ margin: 0.4em 0; }}
code {{ color: #555; }} .failed {{ color: #b00; }}</style></head>
<body>
<h1>onnx-graph-explorer: the course</h1>
<p>Each notebook executed top to bottom, with its outputs and widget state
({time.strftime('%Y-%m-%d %H:%M %Z')}).</p>
<ul>
{items}
</ul>
</body>
</html>
""",
    encoding="utf-8",
)
print(f"wrote {out / 'index.html'} ({len(entries)} notebooks)")
if failed:
    print("build_course: failed: " + "; ".join(failed), file=sys.stderr)
    sys.exit(1)
PY

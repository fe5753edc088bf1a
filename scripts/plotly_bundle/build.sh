#!/usr/bin/env bash
# Rebuild widgets/static/plotly-widget-partial.js (and its .json) from the plotly.py installed in
# the project's environment: run it after changing plotly's version (pyproject.toml pins it) or
# the trace types in entry.js. Needs node and npm (the npm registry); CI and users never run it.
#   bash scripts/plotly_bundle/build.sh [PYTHON]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PYTHON="${1:-$ROOT/.venv/bin/python}"
BUNDLE="$("$PYTHON" -c 'import pathlib, plotly; print(pathlib.Path(plotly.__file__).parent / "package_data" / "widgetbundle.js")')"
VERSION="$("$PYTHON" -c 'import plotly; print(plotly.__version__)')"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cp "$HERE/package.json" "$HERE/entry.js" "$HERE/build.js" "$WORK/"
(cd "$WORK" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
(cd "$WORK" && node build.js "$BUNDLE" "$VERSION" "$ROOT/widgets/static/plotly-widget-partial.js")

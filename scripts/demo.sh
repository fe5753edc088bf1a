#!/usr/bin/env bash
# Install what is missing, then open the explorer on a built-in sample model:
# JupyterLab on the tour notebook, plus a self-contained HTML report for
# machines without a browser.
#
#   scripts/demo.sh              report + JupyterLab on notebooks/00_tour.ipynb
#   scripts/demo.sh --headless   report only (and the model summary)
#   scripts/demo.sh [--headless] MODEL   another model (.onnx path or zoo:NAME) for the report
#
# The report goes to build/demo/report.html (DEMO_OUT overrides the folder).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
HEADLESS=0
if [[ "${1:-}" == "--headless" ]]; then HEADLESS=1; shift; fi
MODEL="${1:-zoo:resnet18}"
OUT="${DEMO_OUT:-$ROOT/build/demo}"

bash scripts/bootstrap.sh "torch,iree,llm"  # the course needs PyTorch (CPU build, the exporting chapter), IREE (the MLIR chapter) and the llm extra (decoder LLMs)
mkdir -p "$OUT"
.venv/bin/onnx-explorer info "$MODEL"
.venv/bin/onnx-explorer report "$MODEL" --pipeline "fuse_and_eliminate,ort:extended" -o "$OUT/report.html"
if [[ "$HEADLESS" == 1 ]]; then
    echo "headless: open $OUT/report.html in any browser"
    exit 0
fi
args=(--notebook-dir="$ROOT/notebooks")
[[ "$(id -u)" == 0 ]] && args+=(--allow-root)
echo "starting JupyterLab on the tour notebook (Ctrl-C to stop); the report is at $OUT/report.html"
exec .venv/bin/jupyter lab "${args[@]}" "$ROOT/notebooks/00_tour.ipynb"

#!/usr/bin/env bash
# Install what is missing, then open the explorer on a built-in sample model.
# Usage: scripts/demo.sh [MODEL]   (default zoo:resnet18; any .onnx path works)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/bootstrap.sh ""
exec .venv/bin/onnx-explorer info "${1:-zoo:resnet18}"

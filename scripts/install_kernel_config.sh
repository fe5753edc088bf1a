#!/usr/bin/env bash
# Put the project's IPython kernel configuration (scripts/ipython_kernel_config.py) into an
# environment's etc/ipython/, where every kernel of that environment reads it: it loads
# widgets.kernel_warm. Usage: install_kernel_config.sh PREFIX (a venv, or sys.prefix).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="$1"
[[ -d "$PREFIX" ]] || exit 0
mkdir -p "$PREFIX/etc/ipython"
cmp -s "$ROOT/scripts/ipython_kernel_config.py" "$PREFIX/etc/ipython/ipython_kernel_config.py" \
    || cp "$ROOT/scripts/ipython_kernel_config.py" "$PREFIX/etc/ipython/ipython_kernel_config.py"

#!/usr/bin/env bash
# Put the project's Jupyter configuration into an environment (a venv, or sys.prefix), where
# every kernel and server of that environment reads it. Usage: install_kernel_config.sh PREFIX
#
# - etc/ipython/ipython_kernel_config.py (scripts/ipython_kernel_config.py): kernels load
#   widgets.kernel_warm;
# - etc/jupyter/jupyter_server_config.json and etc/jupyter/voila.json get the settings of
#   scripts/jupyter_server_config.json and scripts/voila.json merged in (other keys kept):
#   JupyterLab, Notebook 7 and Voila take kernel messages up to 1 GiB. Tornado's default is
#   10 MiB, and a bigger message (the Explorer's upload of a real model) closed the kernel's
#   connection. (A config.d folder would not do: Jupyter Server reads only extension
#   switches there.)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="$1"
[[ -d "$PREFIX" ]] || exit 0
PYTHON="$(command -v python3 || command -v python)"

mkdir -p "$PREFIX/etc/ipython" "$PREFIX/etc/jupyter"
cmp -s "$ROOT/scripts/ipython_kernel_config.py" "$PREFIX/etc/ipython/ipython_kernel_config.py" \
    || cp "$ROOT/scripts/ipython_kernel_config.py" "$PREFIX/etc/ipython/ipython_kernel_config.py"

merge_json() {  # SETTINGS TARGET: SETTINGS' keys merged into TARGET (created if missing)
    "$PYTHON" - "$1" "$2" <<'PY'
import json, os, sys
from pathlib import Path

ours, target = json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2])
config = json.loads(target.read_text()) if target.is_file() and target.read_text().strip() else {}

def merge(into, new):
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value
    return into

merged = merge(json.loads(json.dumps(config)), ours)
if merged != config:
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(merged, indent=2) + "\n")
    os.replace(tmp, target)
PY
}
merge_json "$ROOT/scripts/jupyter_server_config.json" "$PREFIX/etc/jupyter/jupyter_server_config.json"
merge_json "$ROOT/scripts/voila.json" "$PREFIX/etc/jupyter/voila.json"

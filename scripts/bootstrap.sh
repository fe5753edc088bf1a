#!/usr/bin/env bash
# Install what is missing: a virtual environment in .venv holding the project
# (editable) with the extras named in $1 (e.g. "test,torch"). Idempotent and
# quick when nothing changed: a stamp records what was installed, and a request
# for fewer extras than already installed does nothing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"
EXTRAS="${1:-}"
# PyTorch CPU build: this pin lies on the project machines' disk; a bare
# 'torch' requirement would pull a multi-GB CUDA build from the index.
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"

# The kernels of the environment warm the first GraphView while the user reads
# (widgets/kernel_warm.py); copied on every run, so an existing venv gets it too.
bash "$ROOT/scripts/install_kernel_config.sh" "$VENV"

# The project's own bytecode, on every run (what changed only): where PYTHONDONTWRITEBYTECODE is
# set (these machines, many container images) Python never writes it, and every kernel and worker
# compiled explorer/ and widgets/ again (0.1-0.2 s of each fresh kernel's first graph). A stale
# file is ignored (its source's mtime differs), so a run after an edit costs nothing extra.
compile_project() {
    "$VENV/bin/python" -m compileall -q -j 0 "$ROOT/explorer" "$ROOT/widgets" > /dev/null || true
}
[[ -x "$VENV/bin/python" ]] && compile_project

# The versions: binder/requirements.txt's pins (scripts/lock_binder.sh writes them from a resolved
# environment) constrain every install, so CI, the demo and Binder run the same versions; what the
# lock does not name (the test extra's pytest, playwright, ruff) resolves freely.
LOCK="$ROOT/binder/requirements.txt"
stamp="$VENV/.onnx-explorer-installed"
hash="$(cat "$ROOT/pyproject.toml" "$ROOT/scripts/bootstrap.sh" "$LOCK" | sha256sum | cut -c1-16)"
if [[ -f "$stamp" ]]; then
    read -r old_hash old_extras < "$stamp" || true
    if [[ "$old_hash" == "$hash" ]]; then
        missing=""
        for extra in ${EXTRAS//,/ }; do
            [[ ",${old_extras#extras=}," == *",$extra,"* ]] || missing="$missing $extra"
        done
        [[ -z "$missing" ]] && exit 0
    fi
fi

echo "== installing into $VENV (extras: ${EXTRAS:-none})"
[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
grep -E '^[A-Za-z0-9_.-]+==' "$LOCK" > "$constraints" || true  # the pins, without pip options
if [[ ",$EXTRAS," == *",torch,"* ]]; then
    "$VENV/bin/python" -m pip install --quiet "$TORCH_SPEC" -c "$constraints"
fi
"$VENV/bin/python" -m pip install --quiet -e "$ROOT${EXTRAS:+[$EXTRAS]}" -c "$constraints"
bash "$ROOT/scripts/install_kernel_config.sh" "$VENV"
compile_project
echo "$hash extras=$EXTRAS" > "$stamp"

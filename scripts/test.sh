#!/usr/bin/env bash
# Install what is missing, then run the whole test suite (unit tests,
# doctests of every public function, style, browser tests in headless Chromium).
# Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/bootstrap.sh "test,torch,iree,llm"
# Chromium for tests/browser (Debian's; idempotent, never fatal: see the script).
bash scripts/install_chromium.sh
export MPLBACKEND=Agg PYTHONDONTWRITEBYTECODE=1
exec .venv/bin/python -m pytest tests explorer widgets --doctest-modules "$@"

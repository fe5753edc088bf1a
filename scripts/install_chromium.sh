#!/usr/bin/env bash
# Install Debian's Chromium (and a font) for the browser tests in tests/browser.
# Idempotent: does nothing when /usr/bin/chromium exists. Never use
# 'playwright install' here: it downloads browsers from the internet.
# It never stops the test run: without root/sudo/apt, or if apt-get fails, it
# says so and the browser tests skip; with CI set they fail instead (see
# tests/browser/conftest.py), so a broken install shows in CI.
set -euo pipefail
CHROMIUM=/usr/bin/chromium
PACKAGES=(chromium fonts-dejavu-core)

if [[ -x "$CHROMIUM" ]]; then
    exit 0
fi

give_up() {
    echo "== $1" >&2
    echo "   Browser tests (tests/browser) will be skipped (or fail, if CI is set)." >&2
    echo "   To run them: apt-get install -y ${PACKAGES[*]}" >&2
    exit 0
}

if [[ "$(id -u)" -eq 0 ]]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    give_up "$CHROMIUM is missing, and neither root nor passwordless sudo is available."
fi
command -v apt-get >/dev/null 2>&1 || give_up "$CHROMIUM is missing and there is no apt-get."

echo "== installing ${PACKAGES[*]} with apt-get (for the browser tests)"
$SUDO apt-get update -qq || give_up "apt-get update failed."
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${PACKAGES[@]}" >/dev/null \
    || give_up "apt-get install ${PACKAGES[*]} failed."
[[ -x "$CHROMIUM" ]] || give_up "apt-get finished but $CHROMIUM is still missing."

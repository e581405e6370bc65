"""Process defaults for the Hugging Face libraries, set by every command before ``transformers`` is imported
(``huggingface_hub`` reads them at import time): this project's machines reach no model hub."""

from __future__ import annotations

import os

HUB_DEFAULTS = {"HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}


def offline_hub_defaults() -> None:
    """Set each of :data:`HUB_DEFAULTS` unless the environment already sets it."""
    for name, value in HUB_DEFAULTS.items():
        os.environ.setdefault(name, value)

"""Settings written as text: per-role maps (``"tool=qwen2.5-coder-0.5b,planner=smollm2-135m"``) and JSON objects.

Per-role maps are read by ``ATGRPOConfig`` (``model``, ``role_max_completion_length``, ``role_temperature``),
``mas-eval --model`` and ``baselines.compare --model``; JSON objects by ``env_kwargs`` and ``ray_resources``.
Imports nothing heavy.
"""

from __future__ import annotations

import json
from typing import Any, Callable


def parse_role_map(text: str | None, name: str, cast: Callable[[str], Any]) -> Any:
    """``"tool=a,planner=b"`` -> ``{"tool": cast("a"), "planner": cast("b")}``; text without ``=`` is returned
    as is (one value for every role); ``None`` -> ``None``. A malformed entry raises ``ValueError``."""
    if text is None or "=" not in str(text):
        return text
    mapping: dict[str, Any] = {}
    for entry in str(text).split(","):
        role, sep, value = entry.partition("=")
        role, value = role.strip(), value.strip()
        if not sep or not role or not value:
            raise ValueError(f"{name}: entry {entry.strip()!r} is not role=value (in {text!r})")
        if role in mapping:
            raise ValueError(f"{name}: role {role!r} given twice (in {text!r})")
        try:
            mapping[role] = cast(value)
        except ValueError:
            raise ValueError(f"{name}: {role}={value!r} is not a valid {cast.__name__}") from None
    return mapping


def parse_json_object(value: Any, name: str) -> dict[str, Any]:
    """A dict field that may also come as a JSON string (from the command line); ``None``/"" -> {}."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{name} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a JSON object / dict, got {type(value).__name__}")
    return dict(value)

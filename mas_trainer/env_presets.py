"""Env settings of the CPU preset, shared by training and evaluation (kept free of heavy imports).

Applied when the user's env kwargs do not set them: the small Plan-Path grid with the rich observation is
what a 135M model can learn from on 2 cores (DESIGN: "Learning on this CPU").
"""

from __future__ import annotations

from typing import Any

ENV_DEFAULTS: dict[str, dict[str, Any]] = {
    "plan_path": {"preset": "4x4", "observation_detail": "rich"},
}

"""Env settings of the CPU preset, shared by training and evaluation (kept free of heavy imports).

Applied when the user's env kwargs do not set them: the small Plan-Path grid with the rich observation is
what a 135M model can learn from on 2 cores (DESIGN: "Learning on this CPU"). The parse penalty sits just
below the worst valid answer (a wrong move is -0.11): at the env's default -1, "say any direction word" is
the dominant signal and training reinforces one word everywhere; at -0.1 (no worse than a wrong move) the
policy drifted to 100% unparseable answers (docs/PERFORMANCE.md, "Learning on this CPU").
"""

from __future__ import annotations

from typing import Any

ENV_DEFAULTS: dict[str, dict[str, Any]] = {
    "plan_path": {"preset": "4x4", "observation_detail": "rich", "parse_penalty": -0.12},
}

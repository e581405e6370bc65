"""Build consistent result objects from per-episode outcomes (tests, docs, and any tool that writes results).

``summarize`` computes the ``summary`` block exactly as ``submit`` checks it; ``sample_result`` returns a
complete valid result for a real env (its fingerprint comes from the installed env).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from leaderboard import envinfo


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """95% Wilson score interval for a binomial proportion (stays inside [0, 1], sensible at 0% and 100%)."""
    if n <= 0:
        raise ValueError("wilson_interval needs at least one trial")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # Clamp against rounding so the interval always contains p.
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


def summarize(episodes: Sequence[dict[str, Any]], per_role: dict[str, Any] | None = None, wall_time_s: float = 0.0) -> dict[str, Any]:
    """The ``summary`` block for ``episodes`` (each with success, turns, tokens)."""
    n = len(episodes)
    wins = sum(1 for e in episodes if e["success"])
    lo, hi = wilson_interval(wins, n)
    return {
        "episodes": n,
        "success_rate": wins / n,
        "ci95": [lo, hi],
        "avg_turns": sum(e["turns"] for e in episodes) / n,
        "tokens_per_episode": sum(e["tokens"] for e in episodes) / n,
        "per_role": per_role or {},
        "wall_time_s": float(wall_time_s),
    }


def sample_result(
    env_name: str = "plan_path",
    kwargs: dict[str, Any] | None = None,
    method: str = "mas_at_grpo_shared",
    successes: Sequence[bool] = (True, False, True, True),
    model_id: str = "smollm2-135m",
    params: int = 134515008,
    seed: int = 0,
    label: str | None = None,
    weights_sha256: str = "0" * 64,
    decoding: dict[str, Any] | None = None,
    command: str | None = None,
    date: str = "2026-12-02T15:00:00Z",
) -> dict[str, Any]:
    """A complete result that passes every ``submit`` check for the installed ``env_name``.

    ``decoding`` replaces the default ``{"temperature": 0.0, "samples": 1, "max_new_tokens": 8}``; ``command``
    the provenance command (a ``--budget '...'`` in it is the training budget the page shows).
    """
    kwargs = dict(kwargs if kwargs is not None else {"preset": "4x4"} if env_name == "plan_path" else {})
    workflow = "single" if method.startswith("single_") else "mas"
    roles = envinfo.workflow_roles(env_name, workflow) or ()
    if method == "mas_at_grpo_specialized":
        mode, policies = "specialized", {r: {"id": f"{model_id}-{r}", "weights_sha256": weights_sha256} for r in roles}
    else:
        mode, policies = "shared", {"shared": {"id": model_id, "weights_sha256": weights_sha256}}
    episodes = [
        {"task_index": i, "task_id": f"{env_name}-test-{i}", "success": bool(ok), "turns": 2 if ok else 4,
         "return": 1.5 if ok else -0.5, "tokens": 30 + i}
        for i, ok in enumerate(successes)
    ]
    per_role = {r: {"mean_reward": 0.25, "parse_error_rate": 0.1} for r in roles}
    return {
        "schema_version": 1,
        "env": {
            "name": env_name,
            "version": envinfo.installed_version(env_name),
            "kwargs": kwargs,
            "workflow": workflow,
            "split": "test",
            "eval_set_fingerprint": envinfo.eval_set_fingerprint(env_name, "test", kwargs),
        },
        "method": method,
        "model": {"id": model_id, "params": params, "policy_mode": mode, "policies": policies},
        "decoding": dict(decoding) if decoding is not None else {"temperature": 0.0, "samples": 1, "max_new_tokens": 8},
        "seed": seed,
        "episodes": episodes,
        "summary": summarize(episodes, per_role, wall_time_s=12.5),
        "provenance": {
            "package_version": "0.1.0",
            "date": date,
            "command": command if command is not None else f"mas-eval --env {env_name} --method {method} --seed {seed}",
            "swap_roles": False,
            "run_dir": None,
            "label": label,
        },
    }

"""Consistency checks that a schema cannot express: summaries vs episodes, method vs workflow and policies.

Every function takes a result object that already matches the schema and returns a list of problems.
"""

from __future__ import annotations

from typing import Any, Sequence

from leaderboard.problems import Problem
from mas_trainer.settings.methods import METHOD_TABLE

RATE_TOLERANCE = 1e-9
MEAN_TOLERANCE = 1e-6


def summary_problems(result: dict[str, Any]) -> list[Problem]:
    """``summary`` must describe exactly the listed ``episodes``."""
    episodes = result["episodes"]
    summary = result["summary"]
    n = len(episodes)
    problems: list[Problem] = []
    if summary["episodes"] != n:
        problems.append(Problem("summary.episodes", f"is {summary['episodes']} but the file lists {n} episodes"))
    rate = sum(1 for e in episodes if e["success"]) / n
    if abs(summary["success_rate"] - rate) > RATE_TOLERANCE:
        problems.append(
            Problem("summary.success_rate", f"is {summary['success_rate']!r} but the episodes' success mean is {rate!r}")
        )
    lo, hi = summary["ci95"]
    if lo > hi:
        problems.append(Problem("summary.ci95", f"lower bound {lo!r} is above upper bound {hi!r}"))
    elif not lo - RATE_TOLERANCE <= summary["success_rate"] <= hi + RATE_TOLERANCE:
        problems.append(Problem("summary.ci95", f"[{lo!r}, {hi!r}] does not contain success_rate {summary['success_rate']!r}"))
    for field, key in (("avg_turns", "turns"), ("tokens_per_episode", "tokens")):
        mean = sum(e[key] for e in episodes) / n
        if abs(summary[field] - mean) > MEAN_TOLERANCE * max(1.0, abs(mean)):
            problems.append(Problem(f"summary.{field}", f"is {summary[field]!r} but the episodes' {key} mean is {mean!r}"))
    return problems


def episode_problems(result: dict[str, Any]) -> list[Problem]:
    """Each task may be evaluated once per file."""
    first_seen: dict[int, int] = {}
    problems: list[Problem] = []
    for i, episode in enumerate(result["episodes"]):
        index = episode["task_index"]
        if index in first_seen:
            problems.append(
                Problem(f"episodes[{i}].task_index", f"{index} repeats episodes[{first_seen[index]}]; task_index must be unique")
            )
        else:
            first_seen[index] = i
    return problems


def method_problems(result: dict[str, Any]) -> list[Problem]:
    """Each method runs its workflow (the method table: ``single_*`` single, ``mas_*`` multi-agent)."""
    method = result["method"]
    workflow = result["env"]["workflow"]
    expected = METHOD_TABLE[method].workflow
    if workflow != expected:
        return [Problem("env.workflow", f"is {workflow!r} but method {method!r} needs workflow {expected!r}")]
    return []


def policy_problems(result: dict[str, Any], roles: Sequence[str] | None) -> list[Problem]:
    """Policy mode follows the method; specialized mode has one policy per role (``roles`` when known)."""
    method = result["method"]
    model = result["model"]
    mode = model["policy_mode"]
    names = sorted(model["policies"])
    # A trained method has its policy mode; untrained models may be one shared model or one per role
    # (e.g. a coder model as the tool agent).
    expected_mode = METHOD_TABLE[method].policy_mode or ("specialized" if mode == "specialized" else "shared")
    if mode != expected_mode:
        return [Problem("model.policy_mode", f"is {mode!r} but method {method!r} needs {expected_mode!r}")]
    if mode == "shared":
        if names != ["shared"]:
            return [Problem("model.policies", f"shared mode needs exactly one policy named 'shared', got {names}")]
        return []
    if roles is not None and names != sorted(roles):
        return [
            Problem(
                "model.policies",
                f"specialized mode needs one policy per role {sorted(roles)} of workflow "
                f"{result['env']['workflow']!r}, got {names}",
            )
        ]
    return []


def per_role_problems(result: dict[str, Any], roles: Sequence[str] | None) -> list[Problem]:
    """``summary.per_role`` may only name roles that act in the workflow."""
    if roles is None:
        return []
    return [
        Problem(f"summary.per_role.{name}", f"is not a role of workflow {result['env']['workflow']!r} (roles: {sorted(roles)})")
        for name in sorted(result["summary"]["per_role"])
        if name not in roles
    ]

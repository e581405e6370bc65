"""Helpers shared by the contract tests, the demo and the benchmarks: cheap settings per env and a
scripted-policy episode runner."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from mas_envs.registry import list_envs, make_env

# Small, fast settings per env for tests and demos (every env also works with its defaults).
QUICK_KWARGS: dict[str, dict[str, Any]] = {
    "plan_path": {"preset": "4x4"},
    "sokoban": {},
    "sudoku": {"size": 4},
    "coder_tester": {"dataset": "train"},
    "math_tool": {"dataset": "arith"},
}


def quick_env(name: str, **overrides: Any):
    return make_env(name, **{**QUICK_KWARGS.get(name, {}), **overrides})


def available_envs() -> list[str]:
    return list_envs()


@dataclass
class EpisodeOutcome:
    success: bool
    turns: int
    returns: dict[str, float]
    seconds: float


def play_episode(env, policy: Callable[[Any, str], str], seed: int | None = None,
                 options: dict[str, Any] | None = None) -> EpisodeOutcome:
    """Play one episode; ``policy(env, agent)`` returns the agent's text action."""
    start = time.perf_counter()
    env.reset(seed=seed, options=options)
    returns = {a: 0.0 for a in env.possible_agents}
    success = False
    for agent in env.agent_iter():
        _, reward, terminated, truncated, info = env.last()
        returns[agent] += float(reward)
        if terminated or truncated:
            success = bool(info.get("success", False))
            env.step(None)
            continue
        env.step(policy(env, agent))
    return EpisodeOutcome(success, env.unwrapped.turn, returns, time.perf_counter() - start)


def scripted_policy(env, agent: str) -> str:
    return env.unwrapped.scripted_action(agent)

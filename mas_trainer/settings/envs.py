"""The env spec: the CPU preset of every env, its default answer budgets, and how an env's keyword arguments
are settled, for training (``ATGRPOConfig.env_make_kwargs``), evaluation (``mas-eval``) and the baselines alike.
The envs themselves (name -> constructor) are :mod:`mas_envs.registry`'s. Kept free of heavy imports.

Env keyword arguments, lowest priority first: the CPU preset (:data:`ENV_DEFAULTS`, only the keys the env's
constructor accepts), a trained run's settings (its ``env_kwargs``, ``max_turns``, ``alpha``), the caller's.

Applied when the user's env kwargs do not set them: the small Plan-Path grid with the rich observation is
what a 135M model can learn from on 2 cores (docs/PERFORMANCE.md, "Learning on this CPU"). The parse penalty sits just
below the worst valid answer (a wrong move is -0.11): at the env's default -1, "say any direction word" is
the dominant signal and training reinforces one word everywhere; at -0.1 (no worse than a wrong move) the
policy drifted to 100% unparseable answers (docs/PERFORMANCE.md, "Learning on this CPU").

Sokoban, same lesson: a valid but bad move list can deadlock the room (-5, plus step costs), far worse
than the env's default parse penalty (-1), so training taught the 135M solver to stop answering (parse
errors 59% -> 92% in 10 CPU minutes); with the penalty below a deadlocked turn (-6) they stayed at 59%.
Its rich observation (coordinates, what lies next to the player) cut the untrained solver's parse errors
from 59% to 17%, and to 0% after 10 CPU minutes of training (mean reward per turn -3.6 -> -0.3).
"""

from __future__ import annotations

import json
from typing import Any

from mas_envs import make_env
from mas_envs.registry import env_init_kwargs

ENV_DEFAULTS: dict[str, dict[str, Any]] = {
    "plan_path": {"preset": "4x4", "observation_detail": "rich", "parse_penalty": -0.12},
    # parse penalty below a deadlock (-5) plus a full turn's step costs (-0.9)
    "sokoban": {"observation_detail": "rich", "parse_penalty": -6.0},
}

# Tokens per agent action when the user sets none: room for the env's answer format with the SmolLM2
# tokenizer (measured: a Plan-Path direction is 1 token, ten Sokoban moves as a JSON list 30, a solved
# 4x4 Sudoku as JSON rows 48, a 9x9 one ~250), and in the mas workflow for a tool agent's short program
# that prints such an answer. Too small a budget truncates every answer into a parse error, and then
# nothing can be learned. math_tool: 512, chosen on the GSM8K validation split with Qwen2.5-Coder-0.5B
# (40 problems, greedy): 256 tokens left 71% of the attempts without a gradable final answer (cut
# mid-solution), 512 left 10%, and cost fewer tokens per problem (fewer second attempts).
_SINGLE_TOKENS = {"plan_path": 8, "sokoban": 32, "sudoku": 64, "math_tool": 512, "coder_tester": 384}
_MAS_TOKENS = {"plan_path": 48, "sokoban": 96, "sudoku": 128, "math_tool": 512, "coder_tester": 384}
_SUDOKU_9X9_TOKENS = {"single": 288, "mas": 384}


def default_max_new_tokens(env: str, workflow: str, env_kwargs: dict[str, Any] | None = None) -> int:
    """The answer budget (max new tokens per action) for ``env`` in ``workflow`` (8 / 48 if unknown)."""
    if env == "sudoku" and int((env_kwargs or {}).get("size", 4)) == 9:
        return _SUDOKU_9X9_TOKENS["single" if workflow == "single" else "mas"]
    table = _SINGLE_TOKENS if workflow == "single" else _MAS_TOKENS
    return table.get(env, 8 if workflow == "single" else 48)


# The tool agent's program budget, sized by measurement: the scripted tool program (the env's own solver,
# written as the program a tool agent should write) is at most 348 / 522 / 377 tokens for Plan-Path / Sokoban
# / 4x4 Sudoku in the SmolLM2 tokenizer (309 / 469 / 342 in Qwen2.5's), over 8 tasks each; the budget is
# that x 1.25, rounded up to a multiple of 32 (tests/test_env_presets.py re-measures it). The planner answers
# exactly what the single agent answers, so it gets the single agent's budget: equal budgets for the same answer.
_TOOL_TOKENS = {"plan_path": 448, "sokoban": 672, "sudoku": 480}
PUZZLE_ENVS = tuple(_TOOL_TOKENS)


def default_role_budgets(env: str, workflow: str, env_kwargs: dict[str, Any] | None = None) -> dict[str, int] | None:
    """Per-role answer budgets of the grid puzzles' ``mas`` workflow (``None`` elsewhere: one budget for all)."""
    if workflow != "mas" or env not in _TOOL_TOKENS:
        return None
    if env == "sudoku" and int((env_kwargs or {}).get("size", 4)) == 9:
        return None  # no measured tool program for 9x9: keep the one mas budget
    return {"tool": _TOOL_TOKENS[env], "planner": default_max_new_tokens(env, "single", env_kwargs)}


# ATGRPOConfig takes these as its own fields, not inside env_kwargs; workflow and split are chosen per use.
CONFIG_ENV_FIELDS = ("max_turns", "alpha")
RESERVED_ENV_KWARGS = ("workflow", "split")


def preset_env_kwargs(env: str, *overrides: dict[str, Any]) -> dict[str, Any]:
    """The CPU preset of ``env`` (the keys its constructor accepts), then each of ``overrides`` in turn."""
    accepted = env_init_kwargs(env)
    kwargs = {k: v for k, v in ENV_DEFAULTS.get(env, {}).items() if k in accepted}
    for override in overrides:
        kwargs.update(override)
    return kwargs


def resolve_env_kwargs(env: str, user: dict[str, Any], run_config: dict[str, Any] | None = None) -> dict[str, Any]:
    """CPU preset < the run's env settings (a saved ``ATGRPOConfig`` as JSON, if of this env) < ``user``.

    ``workflow`` and ``split`` are not env settings here (``ValueError``): every caller sets them per use.
    """
    from_run: dict[str, Any] = {}
    if run_config and run_config.get("env") == env:
        run_kwargs = run_config.get("env_kwargs") or {}
        from_run.update(json.loads(run_kwargs or "{}") if isinstance(run_kwargs, str) else run_kwargs)
        from_run.update({name: run_config[name] for name in CONFIG_ENV_FIELDS if run_config.get(name) is not None})
    kwargs = preset_env_kwargs(env, from_run, user)
    for reserved in RESERVED_ENV_KWARGS:
        if reserved in kwargs:
            raise ValueError(f"--env-kwargs must not set {reserved!r}: use --{reserved}")
    return kwargs


def settle_env_kwargs(env: str, user: dict[str, Any], workflow: str = "mas") -> dict[str, Any]:
    """:func:`resolve_env_kwargs` with ``max_turns`` and ``alpha`` made explicit (the env's own defaults unless
    given), so that trained and untrained methods of one comparison record, and play, the same kwargs."""
    settled = resolve_env_kwargs(env, dict(user))
    missing = [name for name in CONFIG_ENV_FIELDS if name not in settled]
    if missing:
        probe = make_env(env, workflow=workflow, **settled)
        for name in missing:
            settled[name] = getattr(probe.unwrapped, name)
        probe.close()
    return settled


def split_config_fields(env_kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(env_kwargs for ATGRPOConfig.env_kwargs, the config fields max_turns / alpha)`` of settled kwargs."""
    env_only = {k: v for k, v in env_kwargs.items() if k not in CONFIG_ENV_FIELDS}
    return env_only, {k: env_kwargs[k] for k in CONFIG_ENV_FIELDS if k in env_kwargs}

"""Env settings of the CPU preset, shared by training and evaluation (kept free of heavy imports).

Applied when the user's env kwargs do not set them: the small Plan-Path grid with the rich observation is
what a 135M model can learn from on 2 cores (DESIGN: "Learning on this CPU"). The parse penalty sits just
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

from typing import Any

ENV_DEFAULTS: dict[str, dict[str, Any]] = {
    "plan_path": {"preset": "4x4", "observation_detail": "rich", "parse_penalty": -0.12},
    # parse penalty below a deadlock (-5) plus a full turn's step costs (-0.9)
    "sokoban": {"observation_detail": "rich", "parse_penalty": -6.0},
}

# Tokens per agent action when the user sets none: room for the env's answer format with the SmolLM2
# tokenizer (measured: a Plan-Path direction is 1 token, ten Sokoban moves as a JSON list 30, a solved
# 4x4 Sudoku as JSON rows 48, a 9x9 one ~250), and in the mas workflow for a tool agent's short program
# that prints such an answer. Too small a budget truncates every answer into a parse error, and then
# nothing can be learned.
_SINGLE_TOKENS = {"plan_path": 8, "sokoban": 32, "sudoku": 64, "math_tool": 256, "coder_tester": 384}
_MAS_TOKENS = {"plan_path": 48, "sokoban": 96, "sudoku": 128, "math_tool": 256, "coder_tester": 384}
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

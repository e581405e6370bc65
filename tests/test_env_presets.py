"""The default answer budget fits every env's answers: a truncated answer is a parse error, so a budget
smaller than the answer format makes an env unlearnable (Sokoban and Sudoku were, at 8 tokens)."""

from __future__ import annotations

import json

import pytest

from mas_envs import make_env
from mas_trainer.settings.envs import ENV_DEFAULTS, default_max_new_tokens

CASES = [
    ("plan_path", {}), ("sokoban", {}), ("sokoban", {"max_moves_per_turn": 10}),
    ("sudoku", {"size": 4}), ("sudoku", {"size": 9, "difficulty": "hard"}),
]


@pytest.fixture(scope="module")
def real_tokenizer():
    from transformers import AutoTokenizer

    from mas_trainer.policies.models import DEFAULT_MODEL, _tokenizer_folder

    return AutoTokenizer.from_pretrained(_tokenizer_folder(DEFAULT_MODEL))


@pytest.mark.parametrize("workflow", ["single", "mas"])
@pytest.mark.parametrize("env_name,kwargs", CASES)
def test_scripted_answers_fit_the_default_budget(real_tokenizer, env_name, kwargs, workflow):
    settings = {**ENV_DEFAULTS.get(env_name, {}), **kwargs}
    budget = default_max_new_tokens(env_name, workflow, settings)
    longest, solved = 0, 0
    for task_index in range(8):
        env = make_env(env_name, workflow=workflow, split="test", **settings)
        env.reset(seed=0, options={"task_index": task_index})
        won = False
        for agent in env.agent_iter():
            *_, terminated, truncated, info = env.last()
            if terminated or truncated:
                won = won or bool(info.get("success"))
                env.step(None)
                continue
            action = env.unwrapped.scripted_action(agent)
            if env_name == "plan_path" and agent != "tool":  # the CPU preset answers one move per turn
                action = {"U": "up", "D": "down", "L": "left", "R": "right"}[json.loads(action)[0]]
            if agent != "tool":  # the tool's scripted program is a full solver, not a short answer
                longest = max(longest, len(real_tokenizer(action, add_special_tokens=False)["input_ids"]))
            env.step(action)
        solved += won
        env.close()
    assert solved == 8  # these answers are the optimal play, so the budget is enough to win
    assert 0 < longest <= budget, f"{env_name} {workflow}: an optimal answer takes {longest} tokens > {budget}"


def test_trainer_and_evaluator_share_the_default():
    from mas_trainer.settings.config import ATGRPOConfig

    sokoban = ATGRPOConfig(output_dir="unused", env="sokoban", workflow="single")
    sudoku9 = ATGRPOConfig(output_dir="unused", env="sudoku", env_kwargs={"size": 9})
    assert sokoban.max_completion_length == default_max_new_tokens("sokoban", "single") == 32
    assert sudoku9.max_completion_length == default_max_new_tokens("sudoku", "mas", {"size": 9}) > 128
    explicit = ATGRPOConfig(output_dir="unused", env="sokoban", max_completion_length=5)
    assert explicit.max_completion_length == 5  # the user's value wins


def test_preset_parse_penalties_sit_below_the_worst_valid_turn():
    """Otherwise "answer nothing parseable" beats "try a move" and training drifts to garbage."""
    from mas_envs.games import sokoban as rules

    moves_per_turn = 10  # SokobanEnv's default max_moves_per_turn
    deadlocked_turn = rules.DEADLOCK_PENALTY + (moves_per_turn - 1) * rules.STEP_COST
    assert ENV_DEFAULTS["sokoban"]["parse_penalty"] < deadlocked_turn
    env = make_env("sokoban", workflow="single", split="test", **ENV_DEFAULTS["sokoban"])
    env.reset(seed=0, options={"task_index": 0})
    env.step("I am not sure.")
    assert env.unwrapped.rewards["solver"] == ENV_DEFAULTS["sokoban"]["parse_penalty"]
    assert env.unwrapped.infos["solver"]["parse_error"]


@pytest.mark.parametrize("env_name", ["plan_path", "sokoban", "sudoku"])
def test_tool_budget_is_the_measured_scripted_program_with_headroom(real_tokenizer, env_name):
    """The tool's budget: the scripted tool program's longest token length (8 tasks) x 1.25, rounded up to 32;
    the planner's budget is the single agent's (the same answer gets the same budget)."""
    from mas_trainer.settings.envs import default_role_budgets

    settings = ENV_DEFAULTS.get(env_name, {})
    budgets = default_role_budgets(env_name, "mas", settings)
    longest = 0
    for task_index in range(8):
        env = make_env(env_name, workflow="mas", split="test", **settings)
        env.reset(seed=0, options={"task_index": task_index})
        program = env.unwrapped.scripted_action("tool")
        longest = max(longest, len(real_tokenizer(program, add_special_tokens=False)["input_ids"]))
    assert budgets["tool"] == -(-int(longest * 1.25) // 32) * 32, (longest, budgets)
    assert budgets["planner"] == default_max_new_tokens(env_name, "single", settings)
    assert default_role_budgets(env_name, "single", settings) is None

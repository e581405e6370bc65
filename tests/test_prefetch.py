"""Tree sampling runs the K candidates' programs as one parallel sandbox batch (real sandbox, real envs).

``step_clones`` asks an env that runs code (``prefetch_candidates``) to run all K programs first; the K
steps that follow must then be sandbox-cache hits and give exactly the outcomes of stepping each
clone on its own.
"""

from __future__ import annotations

import time

import pytest

from mas_envs import make_env
from mas_envs.sandbox import default_sandbox
from mas_trainer.rollout.atgrpo import step_clones


def tool_texts(env, salt: int) -> list[str]:
    """Four tool actions: the scripted (correct) program twice over, one that crashes, and no code at all.

    ``salt`` makes every program new to this process's sandbox cache."""
    good = env.unwrapped.scripted_action("tool")
    assert "```python" in good
    programs = [good.replace("```python\n", f"```python\n# {salt} {j}\n", 1) for j in range(2)]
    programs.append(f"```python\n# {salt}\nraise SystemExit(3)\n```")
    return programs + ["I would rather not write code."]


def outcome(branch, agent: str) -> tuple:
    return branch.rewards[agent], branch.infos[agent].get("parse_error"), branch.infos[agent].get("sandbox_reason")


@pytest.mark.parametrize("name,kwargs", [
    ("plan_path", {"preset": "4x4"}),
    ("plan_path", {"preset": "4x4", "tool_prompt": "code"}),
    ("math_tool", {"dataset": "arith"}),
])
def test_step_clones_grades_candidates_in_one_batch_with_the_same_outcomes(name, kwargs):
    env = make_env(name, workflow="mas", split="test", **kwargs)
    env.reset(seed=0, options={"task_index": 1})
    assert env.agent_selection == "tool"
    sandbox = default_sandbox()

    texts = tool_texts(env, time.time_ns())
    alone = []
    for text in texts:  # each clone on its own: the plain step path
        branch = env.clone()
        branch.step(text)
        alone.append(outcome(branch, "tool"))

    texts = tool_texts(env, time.time_ns())  # new programs: nothing cached
    calls = []
    real = sandbox.run_many
    try:
        sandbox.run_many = lambda jobs, *a, **kw: calls.append(len(jobs)) or real(jobs, *a, **kw)
        misses = sandbox.cache.misses
        (branches,) = step_clones([env], [texts])
        ran = sandbox.cache.misses - misses
    finally:
        sandbox.run_many = real
    assert calls == [3] and ran == 3  # one batch of the three programs, each run once
    assert [outcome(b, "tool") for b in branches] == alone
    assert alone[0] == alone[1] and alone[0][1] is None  # the scripted program is a valid answer
    assert alone[2][2] != "ok" and alone[3][1] is not None
    assert env.agent_selection == "tool"  # the parent env was not stepped


def test_prefetch_is_a_no_op_for_the_other_role_and_for_one_candidate():
    env = make_env("plan_path", workflow="mas", split="test", preset="4x4")
    env.reset(seed=0, options={"task_index": 2})
    env.step(env.unwrapped.scripted_action("tool"))
    assert env.agent_selection == "planner"
    sandbox = default_sandbox()
    misses = sandbox.cache.misses
    env.unwrapped.prefetch_candidates(["answer: up", "answer: down"])
    env.unwrapped.prefetch_candidates(tool_texts(env, time.time_ns()), agent="planner")
    assert sandbox.cache.misses == misses

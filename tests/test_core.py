"""The TextAECEnv base class and branching, on a small real env defined here (a counting game)."""

import pickle

import pytest
from pettingzoo.test import api_test, seed_test
from pettingzoo.utils.wrappers import OrderEnforcingWrapper

from mas_envs import StepResult, TextAECEnv, clone
from mas_envs.core.branching import BranchableOrderEnforcingWrapper


class CountingGame(TextAECEnv):
    """Two roles add numbers to a shared total; the team wins when the total hits the target."""

    env_name = "counting"
    workflows = {"mas": ("adder", "checker"), "single": ("solver",)}
    default_workflow = "mas"

    def _reset_task(self, options):
        self.target = int(options.get("target", self.np_random.integers(3, 9)))
        self.total = 0

    def _act(self, agent, text):
        try:
            n = int(text.strip())
        except ValueError:
            return StepResult(parse_error="not an integer", feedback="invalid")
        self.total += n
        done = self.total == self.target
        return StepResult(team=1.0 if done else 0.0, local=-0.1 * abs(self.target - self.total),
                          done=done, feedback=f"total {self.total}")

    def _prompt(self, agent):
        return f"[{agent}] target {self.target}, total {self.total}\n{self.history_text()}"

    def _get_task_state(self):
        return (self.target, self.total)

    def _set_task_state(self, state):
        self.target, self.total = state

    def _is_success(self):
        return self.total == self.target


def make(**kw):
    return BranchableOrderEnforcingWrapper(CountingGame(**kw))


def test_pettingzoo_api_and_seed_tests_pass():
    api_test(make(max_turns=5), num_cycles=50)
    seed_test(lambda: make(max_turns=5), num_cycles=50)


def test_rewards_mix_team_and_local_and_success_info():
    env = make(alpha=2.0, max_turns=3)
    env.reset(seed=0, options={"target": 3})
    env.step("2")
    assert env.rewards["adder"] == pytest.approx(-0.1)
    assert env.infos["adder"]["team_reward"] == 0.0 and env.infos["adder"]["local_reward"] == pytest.approx(-0.1)
    env.step("1")
    assert env.rewards["checker"] == pytest.approx(2.0)  # alpha * team + local(0)
    assert all(env.terminations.values())
    assert env.infos["adder"]["success"] and env.infos["checker"]["success"]


def test_garbage_is_a_penalty_with_parse_error():
    env = make(parse_penalty=-0.5)
    env.reset(seed=0)
    env.step(b"\xff not a number")
    assert env.rewards["adder"] == -0.5
    assert env.infos["adder"]["parse_error"] == "not an integer"


def test_truncation_after_max_turns():
    env = make(max_turns=2)
    env.reset(seed=0, options={"target": 100})
    for _ in range(4):
        env.step("1")
    assert all(env.truncations.values()) and not any(env.terminations.values())
    assert env.infos["adder"]["success"] is False


def test_clone_is_independent_and_keeps_wrapper():
    env = make(max_turns=5)
    env.reset(seed=1, options={"target": 8})
    env.step("3")
    child = env.clone()
    assert isinstance(child, BranchableOrderEnforcingWrapper)
    child.step("4")
    assert env.unwrapped.total == 3 and child.unwrapped.total == 7
    assert len(env.unwrapped.history) == 1 and len(child.unwrapped.history) == 2
    env.step("1")
    assert child.unwrapped.total == 7 and env.agent_selection == child.agent_selection == "adder"


def test_clone_continues_identically():
    a = make(max_turns=4)
    a.reset(seed=3)
    b = a.clone()
    for action in ["1", "x", "2", "1", "0", "3"]:
        if a.terminations[a.agent_selection] or a.truncations[a.agent_selection]:
            break
        a.step(action)
        b.step(action)
        assert a.observe(a.agent_selection)["prompt"] == b.observe(b.agent_selection)["prompt"]
        assert a.rewards == b.rewards and a.infos == b.infos
    # the RNG is copied, not shared
    assert a.unwrapped.np_random.integers(1 << 30) == b.unwrapped.np_random.integers(1 << 30)


def test_snapshot_restore_round_trip_and_pickles():
    env = make(max_turns=5)
    env.reset(seed=2)
    env.step("1")
    snap = pickle.loads(pickle.dumps(env.snapshot()))
    before = env.observe(env.agent_selection)["prompt"]
    env.step("2")
    env.step("2")
    env.restore(snap)
    assert env.observe(env.agent_selection)["prompt"] == before
    env.restore(snap)  # a snapshot can be restored many times
    assert env.unwrapped.total == 1


def test_clone_through_foreign_wrapper_chain():
    env = OrderEnforcingWrapper(CountingGame())
    env.reset(seed=0)
    twin = clone(env)
    assert type(twin) is OrderEnforcingWrapper and twin.env is not env.env
    twin.step("1")
    assert env.unwrapped.total == 0


def test_bad_constructor_arguments_are_clear():
    with pytest.raises(ValueError, match="unknown workflow"):
        CountingGame(workflow="solo")
    with pytest.raises(ValueError, match="max_turns"):
        CountingGame(max_turns=0)
    with pytest.raises(ValueError, match="render_mode"):
        CountingGame(render_mode="rgb_array")


def test_render_modes():
    env = make(render_mode="ansi")
    env.reset(seed=0)
    assert "counting" in env.render()


def test_move_parser_is_lenient_with_prose_but_strict_with_bad_lists():
    from mas_envs.parsing import parse_move_list

    assert parse_move_list('["U", "r", "down"]') == (["U", "R", "D"], None)
    assert parse_move_list("Answer: left") == (["L"], None)
    assert parse_move_list("I think I would move right now") == (["R"], None)
    moves, error = parse_move_list('["X", "U"]')
    assert moves is None and "other than U/D/L/R" in error
    moves, error = parse_move_list("A = you, G = goal")
    assert moves is None and "no action list" in error


def test_code_block_prefers_the_python_block_over_a_quoted_grid():
    """Seen with Qwen2.5-Coder-0.5B as the tool agent: it quotes the grid in a plain block, then writes its
    program in a ```python block cut by the token budget; the program is what runs."""
    from mas_envs.parsing import extract_code_block

    reply = "The grid:\n```\n...#\n..A.\n```\nHere is the program:\n```python\nimport sys\nprint('[\"U\"]')\n"
    assert extract_code_block(reply) == ("import sys\nprint('[\"U\"]')\n", None)
    assert extract_code_block("```python\nprint(1)\n```\n```\nprint(2)\n```")[0] == "print(1)\n"
    assert extract_code_block("```\nprint(2)\n```")[0] == "print(2)\n"  # an untagged block still counts
    assert extract_code_block("```text\nhello\n```")[0] is None
    assert extract_code_block("```py\n   \n```") == (None, "empty code block")

"""The contract every stronger-mas env keeps (the table under "The contract all envs keep" in README.md),
checked on every registered env and both workflows."""

import pickle
import warnings

import pettingzoo
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pettingzoo.test import api_test, seed_test

from mas_envs import clone, make_env
from mas_envs.core.branching import BranchableOrderEnforcingWrapper
from mas_envs.testing import available_envs, quick_env

ENVS = available_envs()
CASES = [(name, wf) for name in ENVS for wf in ("mas", "single")]


def ids(case):
    return f"{case[0]}-{case[1]}"


@pytest.fixture(autouse=True)
def _quiet_pettingzoo_style_warnings():
    # api_test warns about text spaces and role names; these are by design for LLM envs.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_api_test(case):
    name, workflow = case
    api_test(quick_env(name, workflow=workflow), num_cycles=20)


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_seed_test(case):
    name, workflow = case
    seed_test(lambda: quick_env(name, workflow=workflow), num_cycles=20)


@pytest.mark.parametrize("name", ENVS)
def test_registered_with_pettingzoo(name):
    env = pettingzoo.make("aec", f"mas_envs/{name}-v0")
    env.reset(seed=0)
    assert isinstance(env.observe(env.agent_selection)["prompt"], str)


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_max_cycles_caps_the_turns(case):
    """PettingZoo's registry convention: ``max_cycles`` is accepted and every agent acts at most that often."""
    name, workflow = case
    env = pettingzoo.make("aec", f"mas_envs/{name}-v0", max_cycles=2, workflow=workflow)
    env.reset(seed=0)
    acted = {a: 0 for a in env.possible_agents}
    ran_out = False
    for agent in env.agent_iter(max_iter=100):
        _, _, terminated, truncated, _ = env.last()
        ran_out |= truncated
        if terminated or truncated:
            env.step(None)
            continue
        acted[agent] += 1
        env.step("no answer here")
    assert env.unwrapped.max_turns == 2 and not env.agents  # the episode ended
    # an episode that ran out of turns gave every agent exactly 2 (one that ended early, fewer)
    assert max(acted.values()) == 2 if ran_out else max(acted.values()) <= 2
    with pytest.raises(ValueError, match="max_cycles must be >= 1"):
        make_env(name, max_cycles=0)
    assert make_env(name, max_turns=3, max_cycles=10).unwrapped.max_turns == 3  # a cap, never an extension


def test_unknown_env_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown env 'chess'"):
        make_env("chess")


NASTY = st.one_of(
    st.text(max_size=300),
    st.sampled_from(["", " ", "\x00", "[", "]", "[]", "{}", "```python\n", "```python\n```", "\\boxed{",
                     "[[[[[[[[", '{"a": [1, 2', "😀" * 50, "A" * 200_000, "```python\nwhile True: pass\n```",
                     "```python\nimport os; os.system('echo hi')\n```", "null", "NaN", "-1e309"]),
    st.lists(st.sampled_from(["U", "up", "[", "]", ",", '"R"', "1", "\n", "```", "\\boxed{3}", "💥"]), max_size=40).map("".join),
)


@pytest.mark.parametrize("case", CASES, ids=ids)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=st.lists(NASTY, min_size=1, max_size=4))
def test_fuzzed_actions_never_raise(case, actions):
    name, workflow = case
    env = quick_env(name, workflow=workflow, sandbox_timeout=1.0)
    env.reset(seed=0)
    for text in actions:
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            break
        env.step(text)
        info = env.infos[agent]
        assert isinstance(env.rewards[agent], float)
        if info["parse_error"] is not None:
            assert env.rewards[agent] < 0, "an unparseable action must be penalised"


def _play(env, actions):
    """Step ``actions`` (None = the scripted action) until done; return what was observed."""
    trace = []
    for action in actions:
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            break
        env.step(env.unwrapped.scripted_action(agent) if action is None else action)
        trace.append((agent, env.rewards[agent], dict(env.infos[agent]),
                      env.observe(env.agent_selection)["prompt"]))
    return trace


@pytest.mark.parametrize("name", ENVS)
def test_clone_continues_identically_and_independently(name):
    env = quick_env(name, workflow="single")
    env.reset(seed=5)
    env.step("garbage that parses as nothing")
    twin = env.clone()
    assert isinstance(twin, BranchableOrderEnforcingWrapper)
    assert twin.unwrapped is not env.unwrapped
    before = env.observe(env.agent_selection)["prompt"]
    # Same actions on both: identical traces.
    actions = [None, "nonsense", None, None]
    assert _play(env.clone(), actions) == _play(twin, actions)
    # Stepping the twin never touched the parent...
    assert env.observe(env.agent_selection)["prompt"] == before
    # ...and stepping the parent never touches a clone.
    other = env.clone()
    other_prompt = other.observe(other.agent_selection)["prompt"]
    _play(env, [None])
    assert other.observe(other.agent_selection)["prompt"] == other_prompt


@pytest.mark.parametrize("name", ENVS)
def test_snapshot_round_trip(name):
    env = quick_env(name, workflow="single")
    env.reset(seed=7)
    env.step("not an answer")
    snap = pickle.loads(pickle.dumps(env.snapshot()))
    prompt, infos = env.observe(env.agent_selection)["prompt"], dict(env.infos)
    _play(env, [None, None])
    env.restore(snap)
    assert env.observe(env.agent_selection)["prompt"] == prompt
    assert env.infos == infos


@pytest.mark.parametrize("name", ENVS)
def test_clone_through_wrappers_keeps_them(name):
    env = quick_env(name, workflow="single")
    env.reset(seed=0)
    twin = clone(env)
    assert type(twin) is type(env)
    assert twin.unwrapped is not env.unwrapped


@pytest.mark.parametrize("name", ENVS)
def test_eval_set_fingerprint_is_stable(name):
    a = quick_env(name, split="test").unwrapped.eval_set_fingerprint()
    b = quick_env(name, split="test").unwrapped.eval_set_fingerprint()
    assert isinstance(a, str) and len(a) >= 16 and a == b


@pytest.mark.parametrize("name", ENVS)
def test_render_ansi_and_human(name, capsys):
    env = quick_env(name, workflow="single", render_mode="ansi")
    env.reset(seed=0)
    assert isinstance(env.render(), str) and env.render()
    env = quick_env(name, workflow="single", render_mode="human")
    env.reset(seed=0)
    assert env.render() is None
    assert capsys.readouterr().out

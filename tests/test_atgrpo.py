"""AT-GRPO core: tree sampling on cloned envs, grouping, advantages (mas_trainer/rollout/atgrpo.py).

Real components throughout: real envs (Plan-Path and a small two-role game defined here), the real
SmolLM2 tokenizer, a tiny random transformer behind ``HFBackend``. Where a test needs to know which
candidate is best, it uses ``ScriptedBackend`` below: a real ``GenerationBackend`` whose "policy" is
the env's own solver for one candidate and garbage for the others.
"""

from __future__ import annotations

import math

import pytest

from mas_envs import StepResult, TextAECEnv, make_env
from mas_envs.core.branching import BranchableOrderEnforcingWrapper
from mas_trainer.rollout.atgrpo import (
    assign_advantages,
    check_group_invariants,
    group_samples,
    play_episodes,
    trajectory_rollout,
    tree_rollout,
)
from mas_trainer.policies.generation import HFBackend
from mas_trainer.rollout.prompts import chat_prompt_ids
from mas_trainer.policies.models import tiny_model_and_tokenizer
from mas_trainer.policies.prefix_sharing import PrefixSharedBackend
from mas_trainer.rollout.samples import Completion, Sample

K = 4


# --------------------------------------------------------------------------------------------------
# A small two-role game: "stepper" and "checker" take turns adding 1 or 2 to a counter
# --------------------------------------------------------------------------------------------------


class RelayGame(TextAECEnv):
    """Both roles add 1 or 2 to a shared counter; the team wins on hitting the target exactly.

    Per-step reward: local = -0.1 * distance left (closer is better), team = 1 on reaching the target,
    an overshoot ends the episode with team = -1. ``scripted_action`` plays optimally.
    """

    env_name = "relay"
    workflows = {"mas": ("stepper", "checker"), "single": ("solver",)}
    default_workflow = "mas"

    def _reset_task(self, options):
        self.target = int(options.get("target", self.np_random.integers(4, 9)))
        self.total = 0

    def _act(self, agent, text):
        word = text.strip()
        if word not in ("1", "2"):
            return StepResult(parse_error="answer 1 or 2", feedback="invalid")
        self.total += int(word)
        if self.total > self.target:
            return StepResult(team=-1.0, done=True, feedback=f"overshot: {self.total}")
        done = self.total == self.target
        return StepResult(team=1.0 if done else 0.0, local=-0.1 * (self.target - self.total), done=done,
                          feedback=f"total {self.total}")

    def _prompt(self, agent):
        return f"[{agent}] Reach {self.target} exactly. The total is {self.total}. Add 1 or 2.\n{self.history_text()}"

    def _get_task_state(self):
        return (self.target, self.total)

    def _set_task_state(self, state):
        self.target, self.total = state

    def _is_success(self):
        return self.total == self.target

    def scripted_action(self, agent=None):
        return str(min(2, self.target - self.total))


def relay_envs(targets, max_turns=6):
    envs = []
    for target in targets:
        env = BranchableOrderEnforcingWrapper(RelayGame(max_turns=max_turns))
        env.reset(seed=0, options={"target": target})
        envs.append(env)
    return envs


def plan_path_envs(n, workflow="single", max_turns=3, **kwargs):
    envs = []
    for i in range(n):
        env = make_env("plan_path", preset="4x4", workflow=workflow, max_turns=max_turns, **kwargs)
        env.reset(seed=100 + i, options={"task_index": 100 + i})
        envs.append(env)
    return envs


# --------------------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny():
    model, tokenizer = tiny_model_and_tokenizer(seed=0)
    return model, tokenizer


class RecordingBackend:
    """A real backend plus a log of every prompt it was asked to complete."""

    def __init__(self, inner):
        self.inner = inner
        self.prompts: list[list[int]] = []
        self.calls = 0

    def generate(self, prompts, n, **kwargs):
        self.prompts.extend(list(p) for p in prompts)
        self.calls += 1
        return self.inner.generate(prompts, n, **kwargs)

    def sync_weights(self):
        self.inner.sync_weights()


class ScriptedBackend:
    """Candidate ``j == best_index(step)`` is the env's optimal action; the others are garbage.

    The backend knows the env behind a prompt only through the prompts that the previous step's
    candidates produce: after answering, it steps a clone per candidate and registers the prompt that
    clone shows next. So a prompt that is not the outcome of some candidate of the previous step (a
    frozen or re-stepped state) is a ``KeyError`` -- and each executed state is checked to be the
    outcome of the candidate the rollout says it chose.
    """

    GARBAGE = ("I am not sure.", "", "banana")

    def __init__(self, tokenizer, envs):
        self.tokenizer = tokenizer
        self.state_of_prompt: dict[tuple[int, ...], object] = {}
        self.outcome: dict[tuple[tuple[int, ...], str], tuple[int, ...] | None] = {}
        self.calls = 0
        for env in envs:
            self._register(env)

    def _prompt_key(self, env):
        agent = env.agent_selection
        return tuple(chat_prompt_ids(self.tokenizer, env.observe(agent)["prompt"]))

    def _register(self, env):
        key = self._prompt_key(env)
        self.state_of_prompt[key] = env
        return key

    def sync_weights(self):
        pass  # no weights: the policy is the env's solver

    def best_index(self, call):
        return (call + 1) % K  # moves around so that "always pick index 0" would fail

    def generate(self, prompts, n, *, max_new_tokens, temperature=1.0, top_p=1.0, return_logprobs=False, seed=None):
        best = self.best_index(self.calls)
        self.calls += 1
        out = []
        for prompt in prompts:
            env = self.state_of_prompt[tuple(prompt)]  # KeyError: a state no candidate produced
            texts = [self.GARBAGE[j % len(self.GARBAGE)] for j in range(n)]
            texts[best % n] = env.unwrapped.scripted_action(env.agent_selection)
            completions = []
            for text in texts:
                branch = env.clone()
                branch.step(text)
                done = all(branch.terminations[a] or branch.truncations[a] for a in branch.agents)
                self.outcome[(tuple(prompt), text)] = None if done else self._register(branch)
                ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
                completions.append(Completion(token_ids=ids, text=text))
            out.append(completions)
        return out


# --------------------------------------------------------------------------------------------------
# Tree rollout: structure and grouping
# --------------------------------------------------------------------------------------------------


def test_tree_rollout_groups_are_exact_branching_points(tiny):
    model, tokenizer = tiny
    envs = plan_path_envs(3, max_turns=2)
    initial_prompts = [e.observe(e.agent_selection)["prompt"] for e in envs]
    rollout = tree_rollout(envs, backends={"shared": HFBackend(model, tokenizer)},
                           tokenizers={"shared": tokenizer}, policy_of_role=lambda r: "shared",
                           k=K, max_new_tokens=6, seed=0)
    check_group_invariants(rollout.samples)

    groups = group_samples(rollout.samples)
    executed_steps = sum(len(ep.steps) for ep in rollout.episodes)
    assert len(groups) == executed_steps  # one group per executed step, no merging, no splitting
    assert len(rollout.samples) == K * executed_steps
    for (episode, turn, agent), members in groups.items():
        assert len(members) == K
        assert sorted(s.info["candidate"] for s in members) == list(range(K))
        assert len({tuple(s.prompt_ids) for s in members}) == 1
        assert {s.role for s in members} == {agent} and {s.policy for s in members} == {"shared"}
        assert {s.info["episode"] for s in members} == {episode}
        assert sum(s.info["chosen"] for s in members) == 1
        chosen = next(s for s in members if s.info["chosen"])
        assert chosen.reward == max(s.reward for s in members)
        for s in members:
            assert s.reward == pytest.approx(s.info["team"] + s.info["local"])  # alpha = 1
            assert 0 < len(s.completion_ids) <= 6

    # The input envs were not stepped: every step ran on clones.
    assert [e.observe(e.agent_selection)["prompt"] for e in envs] == initial_prompts
    # Distinct tasks are never in one group.
    task_of_episode = {ep.episode_id: ep.task_id for ep in rollout.episodes}
    assert len(set(task_of_episode.values())) == 3
    for members in groups.values():
        assert len({s.info["task_id"] for s in members}) == 1
    assert rollout.stats["groups"] == executed_steps and rollout.stats["group_size_min"] == K
    assert rollout.stats["tokens_generated"] == sum(len(s.completion_ids) for s in rollout.samples)
    assert rollout.timings["total"] >= rollout.timings["generation"] > 0


def test_invariant_check_catches_task_merging_and_mixed_prompts(tiny):
    model, tokenizer = tiny
    envs = plan_path_envs(4, max_turns=1)
    rollout = tree_rollout(envs, backends={"shared": HFBackend(model, tokenizer)},
                           tokenizers={"shared": tokenizer}, policy_of_role=lambda r: "shared",
                           k=2, max_new_tokens=3, seed=1)
    check_group_invariants(rollout.samples)
    # The paper's code keyed groups by task_index // K: K different tasks end up in one group.
    for s in rollout.samples:
        episode, turn, agent = s.group
        s.group = (episode // 2, turn, agent)
    with pytest.raises(AssertionError, match="prompts differ|episode"):
        check_group_invariants(rollout.samples)


def test_episode_continues_from_the_chosen_clone_and_succeeds(tiny):
    """Scripted candidate at a moving index: it must be chosen, and the episode must reach the goal."""
    _, tokenizer = tiny
    envs = plan_path_envs(3, max_turns=8, max_moves_per_turn=1)  # one move per turn: many turns
    backend = ScriptedBackend(tokenizer, envs)
    rollout = tree_rollout(envs, backends={"shared": backend}, tokenizers={"shared": tokenizer},
                           policy_of_role=lambda r: "shared", k=K, max_new_tokens=8)
    check_group_invariants(rollout.samples)
    assert all(ep.success for ep in rollout.episodes)
    assert rollout.stats["success_rate"] == 1.0
    assert max(len(ep.steps) for ep in rollout.episodes) >= 2
    # every executed step is the scripted (moving-index) candidate
    for members in group_samples(rollout.samples).values():
        chosen = [s for s in members if s.info["chosen"]]
        assert len(chosen) == 1 and chosen[0].info["parse_error"] is None
        assert chosen[0].reward > max(s.reward for s in members if not s.info["chosen"])
    assert len({s.info["candidate"] for s in rollout.samples if s.info["chosen"]}) > 1
    _assert_prompts_follow_chosen_actions(rollout, backend)


def _assert_prompts_follow_chosen_actions(rollout, backend):
    """Each step's prompt is exactly the one the previous step's CHOSEN candidate produced."""
    for episode in rollout.episodes:
        # group_samples keeps first-seen order, which is execution order within an episode
        groups = [m for key, m in group_samples(rollout.samples).items() if key[0] == episode.episode_id]
        assert len(groups) == len(episode.steps)
        for before, after in zip(groups, groups[1:]):
            chosen = next(s for s in before if s.info["chosen"])
            produced = backend.outcome[(tuple(before[0].prompt_ids), chosen.info["text"])]
            assert produced == tuple(after[0].prompt_ids), (
                "the state seen at step t+1 is not the one the chosen action of step t produced")
            assert after[0].prompt_ids != before[0].prompt_ids


def test_state_seen_at_turn_t_plus_1_is_produced_by_the_chosen_action(tiny):
    """Replay the chosen texts on a fresh clone: each prompt must equal the replayed observation.

    A rollout that kept stepping the original env (or read a copy that was never stepped) shows the
    same grid again; the replay also proves the grid really moves when the chosen move moves it.
    """
    _, tokenizer = tiny
    envs = plan_path_envs(2, max_turns=8, max_moves_per_turn=1)
    starts = [e.clone() for e in envs]
    rollout = tree_rollout(envs, backends={"shared": ScriptedBackend(tokenizer, envs)},
                           tokenizers={"shared": tokenizer}, policy_of_role=lambda r: "shared",
                           k=K, max_new_tokens=8)
    for start, episode in zip(starts, rollout.episodes):
        replay = start.clone()
        positions = [replay.unwrapped.walk.pos]
        for step in episode.steps:
            group = [s for s in rollout.samples if s.group == (episode.episode_id, step.turn, step.agent)]
            expected = chat_prompt_ids(tokenizer, replay.observe(replay.agent_selection)["prompt"])
            assert group[0].prompt_ids == list(expected), f"turn {step.turn}: prompt is not the replayed state"
            replay.step(step.text)
            positions.append(replay.unwrapped.walk.pos)
        assert replay.unwrapped.success
        assert len(set(positions)) == len(positions)  # every chosen move changed the state


def test_replay_check_would_catch_a_frozen_state(tiny):
    """Negative control: a rollout whose turn-2 prompt repeats turn 1 (the paper's bug) is caught."""
    _, tokenizer = tiny
    envs = plan_path_envs(1, max_turns=8, max_moves_per_turn=1)
    backend = ScriptedBackend(tokenizer, envs)
    rollout = tree_rollout(envs, backends={"shared": backend},
                           tokenizers={"shared": tokenizer}, policy_of_role=lambda r: "shared",
                           k=K, max_new_tokens=8)
    _assert_prompts_follow_chosen_actions(rollout, backend)
    groups = list(group_samples(rollout.samples).values())
    assert len(groups) >= 2
    for s in groups[1]:
        s.prompt_ids = list(groups[0][0].prompt_ids)  # freeze: turn 2 sees turn 1's state
    with pytest.raises(AssertionError, match="not the one the chosen action"):
        _assert_prompts_follow_chosen_actions(rollout, backend)


def test_two_role_game_scripted_team_wins_and_roles_alternate(tiny):
    _, tokenizer = tiny
    envs = relay_envs([5, 7, 4])
    rollout = tree_rollout(envs, backends={"shared": ScriptedBackend(tokenizer, envs)},
                           tokenizers={"shared": tokenizer}, policy_of_role=lambda r: "shared",
                           k=K, max_new_tokens=4)
    check_group_invariants(rollout.samples)
    for target, episode in zip([5, 7, 4], rollout.episodes):
        assert episode.success
        assert [s.agent for s in episode.steps] == ["stepper", "checker"] * (len(episode.steps) // 2) + \
            ["stepper"] * (len(episode.steps) % 2)
        assert sum(int(s.text) for s in episode.steps) == target
        assert episode.episode_return == pytest.approx(sum(s.reward for s in episode.steps))
    assert set(rollout.stats) >= {"reward_mean/stepper", "reward_mean/checker", "zero_variance_share",
                                  "parse_error_rate", "reward_chosen_mean", "reward_best_mean"}
    assert 0 < rollout.stats["parse_error_rate"] < 1


def test_specialized_policies_get_only_their_roles_prompts():
    model_a, tokenizer = tiny_model_and_tokenizer(seed=0)
    model_b, _ = tiny_model_and_tokenizer(seed=1)
    backends = {"stepper": RecordingBackend(HFBackend(model_a, tokenizer)),
                "checker": RecordingBackend(HFBackend(model_b, tokenizer))}
    envs = relay_envs([8, 6], max_turns=2)
    rollout = tree_rollout(envs, backends=backends, tokenizers={"stepper": tokenizer, "checker": tokenizer},
                           policy_of_role=lambda role: role, k=K, max_new_tokens=3, seed=0)
    check_group_invariants(rollout.samples)
    for s in rollout.samples:
        assert s.policy == s.role
    for role, backend in backends.items():
        assert backend.prompts, f"{role} was never asked"
        # one batched call per policy per step, across both envs
        assert backend.calls == len({(s.info["turn"]) for s in rollout.samples if s.role == role})
        for prompt in backend.prompts:
            assert tokenizer.decode(prompt).count(f"[{role}]") == 1
        own = {tuple(s.prompt_ids) for s in rollout.samples if s.role == role}
        assert {tuple(p) for p in backend.prompts} == own


def test_greedy_evaluation_is_deterministic(tiny):
    model, tokenizer = tiny
    kwargs = dict(backends={"shared": HFBackend(model, tokenizer)}, tokenizers={"shared": tokenizer},
                  policy_of_role=lambda r: "shared", max_new_tokens=4)
    first = play_episodes(plan_path_envs(2, max_turns=2), **kwargs)
    second = play_episodes(plan_path_envs(2, max_turns=2), **kwargs)
    assert [ep.steps for ep in first] == [ep.steps for ep in second]
    assert all(ep.turns == 2 or ep.success for ep in first)


# --------------------------------------------------------------------------------------------------
# Trajectory rollout (baselines)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sampler", [HFBackend, PrefixSharedBackend])
def test_trajectory_rollout_groups_by_task_and_shares_the_return(tiny, sampler):
    model, tokenizer = tiny
    envs = relay_envs([5, 6], max_turns=2)
    backend = RecordingBackend(sampler(model, tokenizer))
    rollout = trajectory_rollout(envs, backends={"shared": backend}, tokenizers={"shared": tokenizer},
                                 policy_of_role=lambda r: "shared", k=3, max_new_tokens=3, seed=0)
    assert len(rollout.episodes) == 2 * 3
    groups = group_samples(rollout.samples)
    assert set(groups) == {0, 1}
    for episode in rollout.episodes:
        own = [s for s in rollout.samples
               if s.group == episode.episode_id and s.info["trajectory"] == episode.trajectory]
        assert len(own) == len(episode.steps)
        assert own and all(s.reward == episode.episode_return for s in own)
        assert episode.episode_return == pytest.approx(sum(s.info["step_reward"] for s in own))
    for episode_id, members in groups.items():
        # the K trajectories of a task start from the same prompt, and only that task is in the group
        first_prompts = {tuple(s.prompt_ids) for s in members if s.info["turn"] == 0 and s.role == "stepper"}
        assert len(first_prompts) == 1
        assert len({s.info["task_id"] for s in members}) == 1
        # ... but they are independent draws from it (identical copies would zero every group's variance)
        first_texts = [s.info["text"] for s in members if s.info["turn"] == 0 and s.role == "stepper"]
        assert len(set(first_texts)) > 1
    # one generate call (n=1) per env step across all live trajectories
    assert backend.calls == max(len(ep.steps) for ep in rollout.episodes)


# --------------------------------------------------------------------------------------------------
# Advantages
# --------------------------------------------------------------------------------------------------


def _samples(groups: dict) -> list[Sample]:
    return [Sample(prompt_ids=[1], completion_ids=[2], reward=r, group=g, role="a", policy="shared")
            for g, rewards in groups.items() for r in rewards]


def test_advantages_group_scaling_by_hand():
    samples = _samples({"g1": [1.0, 3.0], "g2": [0.0, 0.0, 0.0], "g3": [2.0, 4.0, 6.0]})
    stats = assign_advantages(samples, scale_rewards="group", eps=0.0)
    s = math.sqrt(2.0)  # unbiased std of [1, 3]
    assert [x.advantage for x in samples[:2]] == pytest.approx([-1 / s, 1 / s])
    assert [x.advantage for x in samples[2:5]] == [0.0, 0.0, 0.0]  # zero variance -> 0
    assert [x.advantage for x in samples[5:]] == pytest.approx([-1.0, 0.0, 1.0])  # std of [2,4,6] = 2
    assert stats["zero_variance_share"] == pytest.approx(1 / 3)
    assert stats["groups"] == 3
    assert stats["reward_mean"] == pytest.approx(16 / 8)


def test_advantages_batch_and_none_scaling_by_hand():
    rewards = {"g1": [1.0, 3.0], "g2": [5.0, 5.0]}
    all_rewards = [1.0, 3.0, 5.0, 5.0]
    mean = sum(all_rewards) / 4
    batch_std = math.sqrt(sum((r - mean) ** 2 for r in all_rewards) / 3)

    samples = _samples(rewards)
    assign_advantages(samples, scale_rewards="batch", eps=1e-4)
    assert [x.advantage for x in samples] == pytest.approx([-1 / (batch_std + 1e-4), 1 / (batch_std + 1e-4), 0, 0])

    samples = _samples(rewards)
    stats = assign_advantages(samples, scale_rewards="none")
    assert [x.advantage for x in samples] == pytest.approx([-1.0, 1.0, 0.0, 0.0])
    assert stats["advantage_abs_mean"] == pytest.approx(0.5)
    assert stats["reward_std"] == pytest.approx(batch_std)

    samples = _samples(rewards)
    assign_advantages(samples, scale_rewards=False)  # TRL's boolean spelling
    assert [x.advantage for x in samples] == pytest.approx([-1.0, 1.0, 0.0, 0.0])
    with pytest.raises(ValueError):
        assign_advantages(samples, scale_rewards="std")


def test_advantages_eps_and_singleton_group():
    samples = _samples({"solo": [7.0], "pair": [0.0, 1.0]})
    assign_advantages(samples, scale_rewards="group", eps=0.5)
    assert samples[0].advantage == 0.0
    std = math.sqrt(0.5)
    assert [x.advantage for x in samples[1:]] == pytest.approx([-0.5 / (std + 0.5), 0.5 / (std + 0.5)])


def test_advantages_on_a_real_rollout_are_zero_mean_per_group(tiny):
    _, tokenizer = tiny
    envs = relay_envs([6, 7])
    rollout = tree_rollout(envs, backends={"shared": ScriptedBackend(tokenizer, envs)},
                           tokenizers={"shared": tokenizer}, policy_of_role=lambda r: "shared",
                           k=K, max_new_tokens=4)
    stats = assign_advantages(rollout.samples)
    for members in group_samples(rollout.samples).values():
        assert sum(s.advantage for s in members) == pytest.approx(0.0, abs=1e-9)
        best = max(members, key=lambda s: s.reward)
        assert best.advantage > 0
    assert stats["zero_variance_share"] == rollout.stats["zero_variance_share"]


def test_an_episode_that_does_not_end_is_an_error_not_a_hang(tiny):
    _, tokenizer = tiny
    envs = relay_envs([8], max_turns=3)  # scripted play needs 4 agent steps; allow 2
    with pytest.raises(RuntimeError, match="not advancing"):
        tree_rollout(envs, backends={"shared": ScriptedBackend(tokenizer, envs)}, tokenizers={"shared": tokenizer},
                     policy_of_role=lambda r: "shared", k=2, max_new_tokens=2, max_steps=2)


def test_plan_path_mas_planner_sees_the_chosen_tool_candidate(tiny):
    """MAS workflow (tool code runs in the sandbox): the planner reads the CHOSEN tool's code and output."""
    _, tokenizer = tiny
    envs = plan_path_envs(1, workflow="mas", max_turns=8, max_moves_per_turn=1)
    backend = ScriptedBackend(tokenizer, envs)
    rollout = tree_rollout(envs, backends={"shared": backend}, tokenizers={"shared": tokenizer},
                           policy_of_role=lambda r: "shared", k=K, max_new_tokens=8)
    check_group_invariants(rollout.samples)
    (episode,) = rollout.episodes
    assert episode.success and episode.turns >= 2
    assert [s.agent for s in episode.steps] == ["tool", "planner"] * episode.turns
    _assert_prompts_follow_chosen_actions(rollout, backend)
    for (_, turn, agent), members in group_samples(rollout.samples).items():
        if agent == "planner":
            prompt = tokenizer.decode(members[0].prompt_ids)
            assert "import json, sys" in prompt and "gave no runnable code" not in prompt
    assert rollout.stats["reward_mean/tool"] < rollout.stats["reward_chosen_mean"]


def test_trajectory_groups_count_each_trajectory_once():
    """Naive/trajectory GRPO: the baseline is the mean over trajectories, not over their steps."""
    # Trajectory 0 has 3 steps (return 3.0), trajectory 1 has 1 step (return 0.0).
    samples = [Sample(prompt_ids=[1], completion_ids=[2], reward=r, group="task", role="a", policy="shared",
                      info={"trajectory": t}) for t, r in [(0, 3.0), (0, 3.0), (0, 3.0), (1, 0.0)]]
    assign_advantages(samples, scale_rewards="none")
    # Per-sample mean would be 2.25 (advantages 0.75 / -2.25); per-trajectory mean is 1.5.
    assert [s.advantage for s in samples] == pytest.approx([1.5, 1.5, 1.5, -1.5])
    assign_advantages(samples, scale_rewards="group", eps=0.0)
    std = math.sqrt(((3.0 - 1.5) ** 2 + (0.0 - 1.5) ** 2) / 1)  # unbiased std over the two returns
    assert samples[0].advantage == pytest.approx(1.5 / std) and samples[3].advantage == pytest.approx(-1.5 / std)

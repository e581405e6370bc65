"""AT-GRPO: agent- and turn-wise grouped GRPO with tree-structured sampling.

This file reads top to bottom like the algorithm box of the paper:

1. ``tree_rollout``      -- for each acting agent i at turn t of each episode, sample K candidates from
                            ONE prompt, step every candidate on its own clone of the env, score it with
                            agent i's reward, and keep going from the best clone (greedy execution).
                            Group key: ``(episode, turn, agent)``. ``tree_advance`` is the same
                            loop for a given number of rounds on episodes that persist across
                            training steps (turn-level steps, ``turns_per_step``).
2. ``assign_advantages`` -- A = (r - mean_group) / (std + eps), TRL's ``scale_rewards`` meanings.
3. ``check_group_invariants`` -- cheap runtime checks of what makes the groups valid.

``trajectory_rollout`` is the baselines' sampling (single agent + GRPO, MAS + naive GRPO): K whole
episodes per task, one group per task, every sample rewarded with its trajectory's return.

Two bugs of the paper's public code are avoided on purpose (``tests/test_atgrpo.py`` pins both):
* groups are keyed by the exact episode id, never ``task_index // K`` (which merges K tasks);
* the episode continues FROM THE CHOSEN CLONE; the original env is never stepped again.

Nothing here imports torch: generation goes through a ``GenerationBackend``
(:mod:`mas_trainer.policies.generation`), prompts are built by :mod:`mas_trainer.rollout.prompts`.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Mapping, Sequence

from mas_trainer.rollout.prompts import chat_prompt_ids
from mas_trainer.rollout.samples import Completion, Sample

# --------------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------------


@dataclass
class ExecutedStep:
    """One step that was actually executed in an episode (the chosen candidate)."""

    turn: int
    agent: str
    text: str
    reward: float
    parse_error: str | None = None


@dataclass
class EpisodeRecord:
    """What happened in one executed episode."""

    episode_id: int
    task_id: Any
    success: bool = False
    episode_return: float = 0.0  # sum of the executed rewards of all agents
    turns: int = 0  # rounds played (the env's turn counter at the end)
    steps: list[ExecutedStep] = field(default_factory=list)
    trajectory: int = 0  # which of the K trajectories (trajectory_rollout); 0 for tree rollouts


@dataclass
class Rollout:
    """Everything one rollout produced. Tree rollouts: one ``EpisodeRecord`` per finished episode;
    trajectory rollouts: one per trajectory (K per env, told apart by ``trajectory``)."""

    samples: list[Sample]  # every candidate of every branching point
    episodes: list[EpisodeRecord]
    stats: dict[str, float]
    timings: dict[str, float]  # seconds: "generation", "env", "total"
    live: list[Any] = field(default_factory=list)  # LiveEpisode records still running (tree_advance)


# --------------------------------------------------------------------------------------------------
# 1. Tree sampling (AT-GRPO)
# --------------------------------------------------------------------------------------------------


@dataclass
class LiveEpisode:
    """An episode in progress: the env that continues it (the chosen clone after every step) and its record."""

    env: Any
    record: EpisodeRecord
    step_limit: int
    steps_taken: int = 0


def start_episodes(envs: Sequence[Any], episode_ids: list[int] | None = None,
                   max_steps: int | None = None) -> list[LiveEpisode]:
    """Live episodes on reset ``envs`` (numbered ``episode_ids``, default 0..N-1)."""
    episode_ids = _checked_episode_ids(envs, episode_ids)
    live = []
    for eid, env in zip(episode_ids, envs):
        _skip_dead_steps(env)
        live.append(LiveEpisode(env, EpisodeRecord(eid, _task_id(env, eid)), _step_limit(env, max_steps)))
    return live


def tree_rollout(
    envs: Sequence[Any],
    *,
    backends: dict[str, Any],
    tokenizers: dict[str, Any],
    policy_of_role: Callable[[str], str],
    k: int,
    max_new_tokens: int | Mapping[str, int],
    temperature: float | Mapping[str, float] = 1.0,
    top_p: float = 1.0,
    episode_ids: list[int] | None = None,
    seed: int | None = None,
    max_steps: int | None = None,
    on_step: Callable[[int, int], None] | None = None,
    step_branches: Callable[[list[Any], list[list[str]]], list[list[Any]]] | None = None,
) -> Rollout:
    """Play every env to the end with tree sampling; return all K candidates of every branching point.

    ``envs`` are reset envs; they are not modified (each step continues on a clone).
    With ``k=1, temperature=0`` this is plain greedy play, which evaluation uses.
    ``max_steps`` caps the agent steps of one episode (default: ``max_turns`` x number of roles);
    an episode still live at the cap raises ``RuntimeError``. ``on_step(finished, total)``, if given,
    is called before every batched step with the number of finished episodes (for progress bars).
    ``step_branches(envs, texts_per_env)`` returns, for each env, one stepped clone per text; the
    default does it in this process (:func:`step_clones`); the Ray backend steps them on env workers.
    """
    return tree_advance(
        start_episodes(envs, episode_ids, max_steps), backends=backends, tokenizers=tokenizers,
        policy_of_role=policy_of_role, k=k, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
        seed=seed, on_step=on_step, step_branches=step_branches,
    )


def tree_advance(
    episodes: Sequence[LiveEpisode],
    *,
    backends: dict[str, Any],
    tokenizers: dict[str, Any],
    policy_of_role: Callable[[str], str],
    k: int,
    max_new_tokens: int | Mapping[str, int],
    temperature: float | Mapping[str, float] = 1.0,
    top_p: float = 1.0,
    seed: int | None = None,
    rounds: int | None = None,
    on_step: Callable[[int, int], None] | None = None,
    step_branches: Callable[[list[Any], list[list[str]]], list[list[Any]]] | None = None,
) -> Rollout:
    """Advance live episodes with tree sampling, by ``rounds`` batched agent steps (``None``: to the end).

    Each round, every live episode's acting agent gets K candidates from one prompt; each candidate is
    stepped on its own clone and scored; the best clone becomes the episode's env. ``Rollout.episodes``
    holds the episodes that ended in this call, ``Rollout.live`` those still running (to continue in a
    later call: the turn-level training steps of ``turns_per_step``).
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if rounds is not None and rounds < 1:
        raise ValueError(f"rounds must be >= 1 or None, got {rounds}")
    t_start = time.perf_counter()
    timings = {"generation": 0.0, "env": 0.0}
    gen_kwargs = dict(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p)
    episodes = list(episodes)
    step_branches = step_branches or step_clones
    samples: list[Sample] = []
    chosen_rewards: list[float] = []
    best_rewards: list[float] = []
    call_index = 0

    while rounds is None or call_index < rounds:
        for ep in episodes:
            _check_step_limit(ep.env, ep.steps_taken, ep.step_limit, ep.record.episode_id)
        live = [ep for ep in episodes if not _is_done(ep.env)]
        if on_step is not None:
            on_step(len(episodes) - len(live), len(episodes))
        if not live:
            break

        # The acting agent of each live episode reads its own observation.
        requests = _acting_prompts([ep.env for ep in live], policy_of_role, tokenizers)

        # K candidates from the same prompt; one batched call per policy across all envs.
        t0 = time.perf_counter()
        call_seed = None if seed is None else seed + 1000 * call_index
        candidates = _generate_by_policy(requests, backends, k, gen_kwargs, call_seed,
                                         roles=[ep.env.agent_selection for ep in live])
        timings["generation"] += time.perf_counter() - t0
        call_index += 1

        t0 = time.perf_counter()
        # Each candidate acts on its own clone and is scored with the acting agent's reward.
        stepped = step_branches([ep.env for ep in live], [[c.text for c in cs] for cs in candidates])
        for ep, (policy, prompt_ids), completions, clones in zip(live, requests, candidates, stepped):
            env, record = ep.env, ep.record
            agent = env.agent_selection
            turn = _turn_of(env, ep.steps_taken)
            group = (record.episode_id, turn, agent)

            rewards = []
            for j, (completion, branch) in enumerate(zip(completions, clones)):
                reward = float(branch.rewards[agent])
                rewards.append(reward)
                samples.append(Sample(
                    prompt_ids=list(prompt_ids),  # own copy: identical tokens, no shared mutable list
                    completion_ids=list(completion.token_ids),
                    reward=reward,
                    group=group,
                    role=agent,
                    policy=policy,
                    info={**_step_info(branch.infos[agent]), "episode": record.episode_id,
                          "task_id": record.task_id, "turn": turn, "candidate": j,
                          "text": completion.text, "finish_reason": completion.finish_reason},
                ))

            # Greedy execution: the best candidate's clone IS the env from now on (ties -> lowest j).
            best = max(range(len(rewards)), key=lambda j: (rewards[j], -j))
            this_group = samples[-len(completions):]
            for s in this_group:
                s.info["chosen"] = s.info["candidate"] == best
            ep.env = clones[best]
            _skip_dead_steps(ep.env)
            ep.steps_taken += 1
            chosen_rewards.append(rewards[best])
            best_rewards.append(max(rewards))
            record.steps.append(ExecutedStep(turn, agent, completions[best].text, rewards[best],
                                             this_group[best].info["parse_error"]))
            record.episode_return += rewards[best]
        timings["env"] += time.perf_counter() - t0

    finished, still_live = [], []
    for ep in episodes:
        if _is_done(ep.env):
            ep.record.success = _success(ep.env)
            ep.record.turns = _turn_of(ep.env, ep.steps_taken)
            finished.append(ep.record)
        else:
            still_live.append(ep)
    timings["total"] = time.perf_counter() - t_start
    check_group_invariants(samples)  # cheap (list compares); a violation is a bug in this file
    stats = rollout_stats(samples, finished)
    stats["episodes_finished"] = float(len(finished))
    stats["reward_chosen_mean"] = _mean(chosen_rewards)
    stats["reward_best_mean"] = _mean(best_rewards)
    return Rollout(samples, finished, stats, timings, still_live)


def step_clones(envs: Sequence[Any], texts_per_env: Sequence[Sequence[str]]) -> list[list[Any]]:
    """For each env, one fresh clone per text, stepped with that text (envs are not modified).

    An env whose actions run code (``prefetch_candidates``: coder_tester, math_tool, the grid envs'
    tool) first runs all K candidates' programs as one parallel sandbox batch, so the K steps that
    follow read their results from the sandbox cache instead of running one after another.
    """
    branches = []
    for env, texts in zip(envs, texts_per_env):
        prefetch = getattr(env.unwrapped, "prefetch_candidates", None)
        if prefetch is not None and len(texts) > 1:
            prefetch(list(texts))
        row = []
        for text in texts:
            branch = env.clone()
            branch.step(text)
            row.append(branch)
        branches.append(row)
    return branches


def play_episodes(envs: Sequence[Any], *, backends, tokenizers, policy_of_role, max_new_tokens: int,
                  episode_ids: list[int] | None = None) -> list[EpisodeRecord]:
    """Greedy evaluation episodes: one completion per step at temperature 0."""
    rollout = tree_rollout(envs, backends=backends, tokenizers=tokenizers, policy_of_role=policy_of_role,
                           k=1, max_new_tokens=max_new_tokens, temperature=0.0, episode_ids=episode_ids)
    return rollout.episodes


# --------------------------------------------------------------------------------------------------
# Baseline sampling: whole trajectories, grouped by task
# --------------------------------------------------------------------------------------------------


def trajectory_rollout(
    envs: Sequence[Any],
    *,
    backends: dict[str, Any],
    tokenizers: dict[str, Any],
    policy_of_role: Callable[[str], str],
    k: int,
    max_new_tokens: int | Mapping[str, int],
    temperature: float | Mapping[str, float] = 1.0,
    top_p: float = 1.0,
    episode_ids: list[int] | None = None,
    seed: int | None = None,
    max_steps: int | None = None,
) -> Rollout:
    """K independent episodes per env from the same start; group = the episode id (the task).

    Every sample's reward is the return of its trajectory (sum of the executed rewards of all
    agents). In a multi-agent env the group then mixes prompts of different turns and roles: this is
    the "naive GRPO" grouping that AT-GRPO fixes, kept for the baselines.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    t_start = time.perf_counter()
    timings = {"generation": 0.0, "env": 0.0}
    episode_ids = _checked_episode_ids(envs, episode_ids)
    gen_kwargs = dict(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p)

    # Trajectory (e, j) plays on its own clone of env e.
    trajectories, records, traj_samples = [], [], []
    for e, env in enumerate(envs):
        for j in range(k):
            clone = env.clone()
            _skip_dead_steps(clone)
            trajectories.append(clone)
            records.append(EpisodeRecord(episode_ids[e], _task_id(env, episode_ids[e]), trajectory=j))
            traj_samples.append([])
    steps_taken = [0] * len(trajectories)
    step_limits = [_step_limit(env, max_steps) for env in trajectories]
    call_index = 0

    while True:
        for i, env in enumerate(trajectories):
            _check_step_limit(env, steps_taken[i], step_limits[i], records[i].episode_id)
        live = [i for i, env in enumerate(trajectories) if not _is_done(env)]
        if not live:
            break
        requests = _acting_prompts([trajectories[i] for i in live], policy_of_role, tokenizers)

        t0 = time.perf_counter()
        call_seed = None if seed is None else seed + 1000 * call_index
        outputs = _generate_by_policy(requests, backends, 1, gen_kwargs, call_seed,
                                      roles=[trajectories[i].agent_selection for i in live])
        timings["generation"] += time.perf_counter() - t0
        call_index += 1

        t0 = time.perf_counter()
        for i, (policy, prompt_ids), (completion,) in zip(live, requests, outputs):
            env = trajectories[i]
            agent = env.agent_selection
            turn = _turn_of(env, steps_taken[i])
            env.step(completion.text)
            reward = float(env.rewards[agent])
            traj_samples[i].append(Sample(
                prompt_ids=prompt_ids,
                completion_ids=list(completion.token_ids),
                reward=0.0,  # set to the trajectory's return below
                group=records[i].episode_id,
                role=agent,
                policy=policy,
                info={**_step_info(env.infos[agent]), "step_reward": reward, "episode": records[i].episode_id,
                      "task_id": records[i].task_id, "trajectory": records[i].trajectory, "turn": turn,
                      "text": completion.text, "finish_reason": completion.finish_reason},
            ))
            records[i].steps.append(ExecutedStep(turn, agent, completion.text, reward,
                                                 env.infos[agent].get("parse_error")))
            records[i].episode_return += reward
            _skip_dead_steps(env)
            steps_taken[i] += 1
        timings["env"] += time.perf_counter() - t0

    samples = []
    for i, env in enumerate(trajectories):
        records[i].success = _success(env)
        records[i].turns = _turn_of(env, steps_taken[i])
        for s in traj_samples[i]:
            s.reward = records[i].episode_return
        samples.extend(traj_samples[i])
    timings["total"] = time.perf_counter() - t_start
    return Rollout(samples, records, rollout_stats(samples, records), timings)


# --------------------------------------------------------------------------------------------------
# 2. Advantages
# --------------------------------------------------------------------------------------------------


def group_samples(samples: Sequence[Sample]) -> dict[Hashable, list[Sample]]:
    """Samples by group key, in first-seen order."""
    groups: dict[Hashable, list[Sample]] = {}
    for s in samples:
        groups.setdefault(s.group, []).append(s)
    return groups


def assign_advantages(
    samples: list[Sample], scale_rewards: str | bool = "group", eps: float = 1e-4
) -> dict[str, float]:
    """Set ``sample.advantage`` = (r - group mean) / (std + eps); return summary stats.

    ``scale_rewards`` as in TRL: ``"group"`` divides by the group's std, ``"batch"`` by the std of all
    rewards, ``"none"`` does not divide (``True``/``False`` mean "group"/"none"). Stds are unbiased
    (n-1), as ``torch.std``. A zero-variance group (incl. a group of one) gets advantage 0: it carries
    no signal about which completion was better.
    """
    if scale_rewards is True:
        scale_rewards = "group"
    elif scale_rewards is False:
        scale_rewards = "none"
    if scale_rewards not in ("group", "batch", "none"):
        raise ValueError(f"scale_rewards must be 'group', 'batch' or 'none', got {scale_rewards!r}")
    if not samples:
        return {"groups": 0.0, "zero_variance_share": 0.0, "reward_mean": 0.0, "reward_std": 0.0,
                "advantage_abs_mean": 0.0}

    groups = group_samples(samples)
    batch_std = _std([r for members in groups.values() for r in _unit_rewards(members)])
    zero_variance = 0
    for members in groups.values():
        rewards = _unit_rewards(members)
        mean = sum(rewards) / len(rewards)
        if max(rewards) - min(rewards) <= 1e-12:
            zero_variance += 1
            for s in members:
                s.advantage = 0.0
            continue
        scale = {"group": _std(rewards) + eps, "batch": batch_std + eps, "none": 1.0}[scale_rewards]
        for s in members:
            s.advantage = (s.reward - mean) / scale

    return {
        "groups": float(len(groups)),
        "zero_variance_share": zero_variance / len(groups),
        "reward_mean": _mean([s.reward for s in samples]),
        "reward_std": batch_std,
        "advantage_abs_mean": _mean([abs(s.advantage) for s in samples]),
    }


def _unit_rewards(members: Sequence[Sample]) -> list[float]:
    """The rewards a group's baseline and std are taken over: one per trajectory.

    A tree group's members are K candidates, each its own unit. A trajectory-level group holds every
    step of K whole episodes, all carrying their trajectory's return: counted per sample, a trajectory
    of 8 steps would weigh 8x one of 1 step in the mean, so each trajectory is counted once.
    """
    per_trajectory: dict[Any, float] = {}
    for i, s in enumerate(members):
        per_trajectory.setdefault(s.info.get("trajectory", ("sample", i)), s.reward)
    return list(per_trajectory.values())


# --------------------------------------------------------------------------------------------------
# 3. Invariants
# --------------------------------------------------------------------------------------------------


def check_group_invariants(samples: Sequence[Sample]) -> None:
    """Raise ``AssertionError`` unless the samples form valid AT-GRPO groups.

    * the key is ``(episode, turn, agent)`` and matches the sample's own episode, turn and role;
    * all members share token-identical prompts, one role, one policy and one task;
    * one group holds exactly one branching point (candidate indices 0..K-1 without repeats).
    Meant for tree rollouts; trajectory-rollout groups mix prompts by design.
    """
    for key, members in group_samples(samples).items():
        assert isinstance(key, tuple) and len(key) == 3, (
            f"group key {key!r} is not (episode, turn, agent)")
        episode, turn, agent = key
        first = members[0]
        for s in members:
            assert s.prompt_ids == first.prompt_ids, (
                f"group {key!r}: prompts differ between members (candidate {first.info.get('candidate')} vs "
                f"{s.info.get('candidate')}); groups must share one prompt")
            assert s.role == agent, f"group {key!r} holds a sample of role {s.role!r}"
            assert s.policy == first.policy, f"group {key!r} mixes policies {first.policy!r} and {s.policy!r}"
            if "episode" in s.info:
                assert s.info["episode"] == episode, (
                    f"group {key!r} holds a sample of episode {s.info['episode']!r}: different episodes merged")
            if "task_id" in s.info:
                assert s.info["task_id"] == first.info.get("task_id"), (
                    f"group {key!r} mixes tasks {first.info.get('task_id')!r} and {s.info['task_id']!r}")
            if "turn" in s.info:
                assert s.info["turn"] == turn, f"group {key!r} holds a sample of turn {s.info['turn']!r}"
        candidates = [s.info.get("candidate") for s in members if "candidate" in s.info]
        assert len(candidates) == len(set(candidates)), (
            f"group {key!r} repeats candidate indices {sorted(candidates)}: two branching points merged")


# --------------------------------------------------------------------------------------------------
# Stats
# --------------------------------------------------------------------------------------------------


def rollout_stats(samples: Sequence[Sample], episodes: Sequence[EpisodeRecord]) -> dict[str, float]:
    """Numbers worth logging after a rollout (no advantages needed)."""
    groups = group_samples(samples)
    sizes = [len(m) for m in groups.values()]
    zero_var = sum(1 for m in groups.values() if max(s.reward for s in m) - min(s.reward for s in m) <= 1e-12)
    stats = {
        "groups": float(len(groups)),
        "group_size_mean": _mean(sizes),
        "group_size_min": float(min(sizes)) if sizes else 0.0,
        "zero_variance_share": zero_var / len(groups) if groups else 0.0,
        "reward_candidate_mean": _mean([s.reward for s in samples]),
        "success_rate": _mean([float(ep.success) for ep in episodes]),
        "return_mean": _mean([ep.episode_return for ep in episodes]),
        "turns_mean": _mean([ep.turns for ep in episodes]),
        "parse_error_rate": _mean([float(s.info.get("parse_error") is not None) for s in samples]),
        "tokens_generated": float(sum(len(s.completion_ids) for s in samples)),
        "samples": float(len(samples)),
    }
    by_role: dict[str, list[float]] = defaultdict(list)
    for s in samples:
        by_role[s.role].append(s.reward)
    for role, rewards in sorted(by_role.items()):
        stats[f"reward_mean/{role}"] = _mean(rewards)
    # Per role: the share of its groups whose rewards differ (the groups an update learns from).
    signal_by_role: dict[str, list[float]] = defaultdict(list)
    for members in groups.values():
        spread = max(s.reward for s in members) - min(s.reward for s in members)
        signal_by_role[members[0].role].append(float(spread > 1e-12))
    for role, flags in sorted(signal_by_role.items()):
        stats[f"nonzero_variance_share/{role}"] = _mean(flags)
    return stats


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def _std(values: Sequence[float]) -> float:
    """Unbiased standard deviation (like ``torch.std``); 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
# --------------------------------------------------------------------------------------------------
# Helpers (kept below the algorithm so that it reads first). Envs are reset PettingZoo AEC envs.
# --------------------------------------------------------------------------------------------------


def _is_done(env) -> bool:
    """An episode is over once every agent is terminated or truncated (or none is left)."""
    if not env.agents:
        return True
    return all(env.terminations[a] or env.truncations[a] for a in env.agents)


def _skip_dead_steps(env) -> None:
    """PettingZoo: an agent that is done must be stepped with ``None`` before others act."""
    while not _is_done(env):
        agent = env.agent_selection
        if not (env.terminations[agent] or env.truncations[agent]):
            return
        env.step(None)


def _turn_of(env, steps_taken: int) -> int:
    """The env's round counter (all roles act once per round); the step count for foreign envs."""
    return int(getattr(env.unwrapped, "turn", steps_taken))


def _step_limit(env, max_steps: int | None) -> int:
    """Most agent steps an episode may take: every role once per turn for ``max_turns`` turns.

    A live episode past this limit means the env is not advancing (e.g. a rollout that steps a
    copy but keeps reading the original): an error, not a silent hang.
    """
    if max_steps is not None:
        return int(max_steps)
    base = env.unwrapped
    max_turns = getattr(base, "max_turns", None)
    if max_turns is None:
        return 10_000
    return int(max_turns) * max(1, len(getattr(base, "possible_agents", ()) or ()))


def _check_step_limit(env, steps_taken: int, limit: int, episode_id: Any) -> None:
    if steps_taken >= limit and not _is_done(env):
        raise RuntimeError(
            f"episode {episode_id!r} is still live after {steps_taken} agent steps (limit {limit}): "
            "the env is not advancing"
        )


def _task_id(env, episode_id: int) -> Any:
    base = env.unwrapped
    for name in ("task_id", "task_index"):
        value = getattr(base, name, None)
        if value is not None:
            return value
    return episode_id


def _success(env) -> bool:
    if any(bool(info.get("success")) for info in env.infos.values()):
        return True
    return bool(getattr(env.unwrapped, "success", False))


def _checked_episode_ids(envs: Sequence[Any], episode_ids: list[int] | None) -> list[int]:
    episode_ids = list(range(len(envs))) if episode_ids is None else list(episode_ids)
    if len(episode_ids) != len(envs) or len(set(episode_ids)) != len(episode_ids):
        raise ValueError("episode_ids must be unique, one per env")
    return episode_ids


def _acting_prompts(envs: Sequence[Any], policy_of_role: Callable[[str], str],
                    tokenizers: dict[str, Any]) -> list[tuple[str, list[int]]]:
    """``(policy, prompt ids)`` of the acting agent of each env, from its own observation."""
    requests = []
    for env in envs:
        agent = env.agent_selection
        policy = policy_of_role(agent)
        requests.append((policy, _prompt_ids(tokenizers, policy, env.observe(agent)["prompt"])))
    return requests


def _prompt_ids(tokenizers: dict[str, Any], policy: str, prompt_text: str) -> list[int]:
    return list(chat_prompt_ids(tokenizers[policy], prompt_text))


def _generate_by_policy(
    requests: list[tuple[str, list[int]]],
    backends: dict[str, Any],
    n: int,
    gen_kwargs: dict[str, Any],
    seed: int | None,
    roles: Sequence[str] | None = None,
) -> list[list[Completion]]:
    """Generate ``n`` completions for every ``(policy, prompt_ids)`` request.

    One batched ``generate`` call per policy (and per sampling setting, where ``max_new_tokens`` or
    ``temperature`` in ``gen_kwargs`` are per-role mappings and ``roles`` names each request's role):
    each backend sees only its own roles' prompts. Results come back in the order of ``requests``.
    """
    def per_role(name: str, role: str | None) -> Any:
        value = gen_kwargs[name]
        return value[role] if isinstance(value, Mapping) else value

    by_call: dict[tuple[str, Any, Any], list[int]] = defaultdict(list)
    for index, (policy, _) in enumerate(requests):
        role = roles[index] if roles is not None else None
        by_call[(policy, per_role("max_new_tokens", role), per_role("temperature", role))].append(index)
    results: list[list[Completion] | None] = [None] * len(requests)
    for call_index, ((policy, budget, temperature), indices) in enumerate(sorted(by_call.items())):
        if policy not in backends:
            raise KeyError(f"no generation backend for policy {policy!r}; have {sorted(backends)}")
        prompts = [requests[i][1] for i in indices]
        call_seed = None if seed is None else seed + call_index
        kwargs = {**gen_kwargs, "max_new_tokens": budget, "temperature": temperature}
        outputs = backends[policy].generate(prompts, n, seed=call_seed, **kwargs)
        if len(outputs) != len(prompts) or any(len(o) != n for o in outputs):
            raise RuntimeError(f"backend for {policy!r} returned the wrong number of completions")
        for i, completions in zip(indices, outputs):
            results[i] = completions
    return results  # type: ignore[return-value]


def _step_info(info: dict[str, Any]) -> dict[str, Any]:
    """The parts of the acting agent's info worth keeping on a sample."""
    keep = {k: v for k, v in info.items() if isinstance(v, (bool, int, float, str, type(None)))}
    keep["team"] = float(info.get("team_reward", 0.0))
    keep["local"] = float(info.get("local_reward", 0.0))
    keep["parse_error"] = info.get("parse_error")
    return keep



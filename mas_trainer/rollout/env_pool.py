"""The envs a training run plays: created once, reset with seeds that never repeat across steps."""

from __future__ import annotations

from typing import Any, Iterable

from mas_envs import make_env


class EnvPool:
    """``size`` envs of one kind, reset per training step with seeds that never repeat across steps.

    Step ``s`` resets env ``i`` with seed ``base_seed + s * size + i``; that seed is also the
    episode id, so group keys stay unique over a whole run.
    """

    def __init__(self, env_name: str, make_kwargs: dict[str, Any], size: int, base_seed: int = 0):
        self.env_name = env_name
        self.make_kwargs = dict(make_kwargs)
        self.size = int(size)
        self.base_seed = int(base_seed)
        self.envs = [make_env(env_name, **self.make_kwargs) for _ in range(self.size)]
        self.roles: list[str] = list(self.envs[0].possible_agents)

    def seeds_for_step(self, step: int) -> list[int]:
        return [self.base_seed + step * self.size + i for i in range(self.size)]

    def reset_for_step(self, step: int) -> tuple[list[Any], list[int]]:
        """The envs, freshly reset for training step ``step``, and their episode ids."""
        seeds = self.seeds_for_step(step)
        for env, seed in zip(self.envs, seeds):
            env.reset(seed=seed)
        return self.envs, seeds

    def new_episode(self, episode_id: int) -> Any:
        """A fresh env reset with seed ``episode_id`` (turn-level steps start episodes one by one)."""
        env = make_env(self.env_name, **self.make_kwargs)
        env.reset(seed=int(episode_id))
        return env

    def reset_tasks(self, task_indices: Iterable[int]) -> list[Any]:
        """Fresh envs on fixed tasks (``options={"task_index": i}``), e.g. held-out evaluation tasks."""
        envs = []
        for index in task_indices:
            env = make_env(self.env_name, **self.make_kwargs)
            env.reset(seed=int(index), options={"task_index": int(index)})
            envs.append(env)
        return envs

"""The resource pools of a run, local backend: envs, generation, optimisation, and the router between.

One training step moves data through four kinds of objects::

    EnvPool --envs--> RolloutWorkers (one per policy) --samples--> Router --> UpdateWorkers (one per policy)

* :class:`EnvPool` creates the envs once and resets them with reproducible seeds for each step (or,
  with turn-level steps, starts single episodes as slots free up).
* :class:`RolloutWorker` owns a policy's generation backend (prefix-shared sampling or ``transformers``
  ``generate``, both on the very model being trained, so weight sync is a no-op; or an in-process vLLM
  engine, whose ``sync_weights`` copies the update worker's weights into it).
* :class:`UpdateWorker` owns a policy's model, optimizer and TRL trainer and applies one update.
* :class:`Router` sends each sample to the update worker of ``sample.policy``.

Everything here runs in one process. A Ray backend would give each worker its own actor (and the
rollout worker e.g. a vLLM engine whose ``sync_weights`` pulls the update worker's weights) without
touching the algorithm in :mod:`mas_trainer.atgrpo` or the step loop in :mod:`mas_trainer.trainer`.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Iterable

from mas_trainer.samples import Sample


class EnvPool:
    """``size`` envs of one kind, reset per training step with seeds that never repeat across steps.

    Step ``s`` resets env ``i`` with seed ``base_seed + s * size + i``; that seed is also the
    episode id, so group keys stay unique over a whole run.
    """

    def __init__(self, env_name: str, make_kwargs: dict[str, Any], size: int, base_seed: int = 0):
        from mas_envs import make_env

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
        from mas_envs import make_env

        env = make_env(self.env_name, **self.make_kwargs)
        env.reset(seed=int(episode_id))
        return env

    def reset_tasks(self, task_indices: Iterable[int]) -> list[Any]:
        """Fresh envs on fixed tasks (``options={"task_index": i}``), e.g. held-out evaluation tasks."""
        from mas_envs import make_env

        envs = []
        for index in task_indices:
            env = make_env(self.env_name, **self.make_kwargs)
            env.reset(seed=int(index), options={"task_index": int(index)})
            envs.append(env)
        return envs


def make_backend(model: Any, tokenizer: Any, kind: str = "auto", engine_options: dict[str, Any] | None = None) -> Any:
    """A generation backend on ``model``: ``"prefix_shared"``, ``"hf"``, ``"auto"`` (the first if present)
    or ``"vllm"`` (an in-process vLLM engine built with ``engine_options``, see :mod:`mas_trainer.vllm_backend`)."""
    from mas_trainer.generation import HFBackend

    if kind == "vllm":
        from mas_trainer.vllm_backend import VLLMBackend

        return VLLMBackend(model, tokenizer, **(engine_options or {}))
    if kind in ("auto", "prefix_shared"):
        try:
            from mas_trainer.prefix_sharing import PrefixSharedBackend
        except ImportError:
            if kind == "prefix_shared":
                raise
        else:
            return PrefixSharedBackend(model, tokenizer)
    return HFBackend(model, tokenizer)


class RolloutWorker:
    """Generation for one policy: owns its backend; the rollout code calls ``backend.generate``."""

    def __init__(self, policy: str, model: Any, tokenizer: Any, backend: str = "auto",
                 engine_options: dict[str, Any] | None = None):
        self.policy = policy
        self.tokenizer = tokenizer
        self.backend = make_backend(model, tokenizer, backend, engine_options)

    def sync_weights(self) -> None:
        """Make generation use the latest weights of the update worker (no-op when they share a model)."""
        self.backend.sync_weights()


class UpdateWorker:
    """Optimisation for one policy: owns the model, its optimizer/scheduler and its TRL trainer."""

    def __init__(self, policy: str, trainer: Any):
        self.policy = policy
        self.trainer = trainer  # an ATGRPOTrainer; holds .model, .optimizer, .lr_scheduler

    @property
    def model(self) -> Any:
        return self.trainer.model

    def update(self, samples: list[Sample], extra_logs: dict[str, float] | None = None) -> dict[str, float]:
        """One optimizer step on ``samples`` (this policy's share of the step's rollout)."""
        start = time.perf_counter()
        metrics = self.trainer.train_on_samples(samples, extra_logs=extra_logs)
        metrics["update_seconds"] = time.perf_counter() - start
        return metrics

    def start_update(self, samples: list[Sample], extra_logs: dict[str, float] | None = None):
        """Begin :meth:`update`; returns a no-argument callable giving its metrics. In-process the update
        runs right here; remote workers (Ray) return at once, so several policies update concurrently."""
        metrics = self.update(samples, extra_logs)
        return lambda: metrics

    def save_state(self, folder) -> None:
        """Write this policy's weights, optimizer, scheduler and trainer state to ``folder``."""
        from mas_trainer.checkpoint import save_policy_state

        save_policy_state(self.trainer, folder)

    def load_state(self, folder) -> None:
        """Restore what :meth:`save_state` wrote."""
        from mas_trainer.checkpoint import load_policy_state

        load_policy_state(self.trainer, folder)

    def end_training(self) -> None:
        """Tell TRL's callbacks (TensorBoard etc.) that the run is over."""
        trainer = self.trainer
        trainer.control = trainer.callback_handler.on_train_end(trainer.args, trainer.state, trainer.control)


def update_all(update_workers: dict[str, "UpdateWorker"], routed: dict[str, list[Sample]],
               extra_logs: dict[str, float] | None = None) -> dict[str, dict[str, float]]:
    """One update per policy on its routed samples; every update is started before any is awaited."""
    started = {policy: worker.start_update(routed[policy], extra_logs) for policy, worker in update_workers.items()}
    return {policy: result() for policy, result in started.items()}


class Router:
    """Sends every sample to the update worker of the policy that produced it."""

    def __init__(self, policies: Iterable[str]):
        self.policies = list(policies)

    def route(self, samples: Iterable[Sample]) -> dict[str, list[Sample]]:
        routed: dict[str, list[Sample]] = defaultdict(list)
        for sample in samples:
            if sample.policy not in self.policies:
                raise KeyError(f"sample of role {sample.role!r} names unknown policy {sample.policy!r}")
            routed[sample.policy].append(sample)
        return {policy: routed.get(policy, []) for policy in self.policies}

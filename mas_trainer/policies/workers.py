"""A policy's two workers: generation (:class:`RolloutWorker`) and optimisation (:class:`UpdateWorker`).

One training step moves data through four kinds of objects::

    EnvPool --envs--> RolloutWorkers (one per policy) --samples--> Router --> UpdateWorkers (one per policy)

* :class:`~mas_trainer.rollout.env_pool.EnvPool` creates the envs once and resets them with reproducible
  seeds for each step (or, with turn-level steps, starts single episodes as slots free up).
* :class:`RolloutWorker` owns a policy's generation backend (prefix-shared sampling or ``transformers``
  ``generate``, both on the very model being trained, so weight sync is a no-op; or an in-process vLLM
  engine, whose ``sync_weights`` copies the update worker's weights into it).
* :class:`UpdateWorker` owns a policy's model, optimizer and TRL trainer and applies one update.
* :class:`~mas_trainer.rollout.routing.Router` sends each sample to the update worker of ``sample.policy``.

These workers run in the trainer's process (:mod:`mas_trainer.backends.local`) or inside Ray actors
(:mod:`mas_trainer.backends.ray`, whose driver-side stand-ins offer the same methods); neither the
algorithm in :mod:`mas_trainer.rollout.atgrpo` nor the step loop in :mod:`mas_trainer.run.trainer`
changes between the two.
"""

from __future__ import annotations

import time
from typing import Any

from mas_trainer.policies.generation import HFBackend
from mas_trainer.policies.prefix_sharing import PrefixSharedBackend
from mas_trainer.policies.vllm_engine import VLLMBackend
from mas_trainer.rollout.samples import Sample
from mas_trainer.update.state import load_policy_state, save_policy_state


def make_backend(model: Any, tokenizer: Any, kind: str = "auto", engine_options: dict[str, Any] | None = None) -> Any:
    """A generation backend on ``model``: ``"prefix_shared"``, ``"hf"``, ``"auto"`` (the first if present)
    or ``"vllm"`` (an in-process vLLM engine built with ``engine_options``, see :mod:`mas_trainer.policies.vllm_engine`)."""
    if kind == "vllm":
        return VLLMBackend(model, tokenizer, **(engine_options or {}))
    if kind in ("auto", "prefix_shared"):
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
        save_policy_state(self.trainer, folder)

    def load_state(self, folder) -> None:
        """Restore what :meth:`save_state` wrote."""
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



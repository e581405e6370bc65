"""A policy's update actor: owns its model, optimizer and ``ATGRPOTrainer`` (the TRL side of the Ray backend)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from mas_trainer.backends.ray.policy_workers import actor_model
from mas_trainer.policies.workers import UpdateWorker
from mas_trainer.rollout.samples import Sample
from mas_trainer.update.trainer import ATGRPOTrainer


class UpdateActor:
    """Owns one policy's model, optimizer and ``ATGRPOTrainer``; applies that policy's updates."""

    def __init__(self, policy: str, config: Any, logging_dir: str, given: tuple[Any, Any] | None = None):
        model, tokenizer = actor_model(config.model_for(policy), config.use_cpu, given, config.dtype_for(policy))
        trainer = ATGRPOTrainer(model=model, args=config, processing_class=tokenizer, policy_name=policy,
                                logging_dir=logging_dir)
        self.worker = UpdateWorker(policy, trainer)

    def update(self, samples: list[Sample], extra_logs: dict[str, float] | None) -> dict[str, float]:
        started = time.time()
        metrics = self.worker.update(samples, extra_logs)
        # Wall-clock bounds, so the driver (and tests) can see that policies updated concurrently.
        metrics.update(update_started_at=started, update_finished_at=time.time(), update_pid=float(os.getpid()))
        return metrics

    def weights(self) -> dict[str, Any]:
        """The model's state dict on CPU, for the rollout actor of this policy."""
        return {name: tensor.detach().to("cpu") for name, tensor in self.worker.model.state_dict().items()}

    def save_state(self, folder: str) -> None:
        self.worker.save_state(Path(folder))

    def load_state(self, folder: str) -> None:
        self.worker.load_state(Path(folder))

    def end_training(self) -> None:
        self.worker.end_training()

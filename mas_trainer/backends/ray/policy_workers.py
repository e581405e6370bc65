"""A policy's two Ray actors (generation, updates) and the driver-side workers that stand for them.

Inside each actor runs the in-process worker of :mod:`mas_trainer.policies.workers` (a ``RolloutWorker`` or an
``UpdateWorker`` around an ``ATGRPOTrainer``), so sampling and the update are the very same code
as with the local backend. The driver holds :class:`RayRolloutWorker` / :class:`RayUpdateWorker`,
which offer the local workers' methods and forward them to the actors.

Weight sync (design choice): after its update, a policy's update actor hands its state dict to the
object store (``weights()``, CPU tensors) and that policy's rollout actor loads it
(``load_weights(ref)``); the driver only passes the reference along, so the tensors never travel
through it. Each policy pair syncs on its own, and a sync is only awaited when its rollout actor is
next asked to generate, so the pairs of a specialized run sync concurrently.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from mas_trainer.policies.models import load_model_and_tokenizer
from mas_trainer.policies.workers import RolloutWorker
from mas_trainer.rollout.samples import Sample
from mas_trainer.settings.run_layout import latest_checkpoint


class WorkerDiedError(RuntimeError):
    """A policy actor died; its state since the last checkpoint is gone and the run must stop."""


# ---------------------------------------------------------------------------------------------- actors


def actor_model(model_name: str, use_cpu: bool, given: tuple[Any, Any] | None,
                dtype: str = "float32") -> tuple[Any, Any]:
    """The given ``(model, tokenizer)`` (tests), else ``model_name`` loaded in ``dtype`` onto this actor's device."""
    device = "cuda" if torch.cuda.is_available() and not use_cpu else "cpu"
    if given is None:
        return load_model_and_tokenizer(model_name, dtype=dtype, device=device)
    model, tokenizer = given
    return model.to(device), tokenizer


class RolloutActor:
    """One policy's generation backend on its own copy of the policy's weights.

    Takes plain settings, not the run's config: unpickling an ``ATGRPOConfig`` would import TRL,
    which generation does not need (and which costs seconds of start-up per actor). For the same
    reason :class:`~mas_trainer.backends.ray.update_actor.UpdateActor` lives in its own module: this one
    never imports TRL."""

    def __init__(self, policy: str, model_name: str, backend: str, use_cpu: bool,
                 given: tuple[Any, Any] | None = None, dtype: str = "float32"):
        model, tokenizer = actor_model(model_name, use_cpu, given, dtype)
        model.eval()
        self.worker = RolloutWorker(policy, model, tokenizer, backend)

    def generate(self, prompts: list[list[int]], n: int, kwargs: dict[str, Any]):
        return self.worker.backend.generate(prompts, n, **kwargs)

    def load_weights(self, state: dict[str, Any]) -> None:
        model = self.worker.backend.model
        model.load_state_dict({name: tensor.to(model.device) for name, tensor in state.items()})
        self.worker.sync_weights()


# ----------------------------------------------------------------------------- driver-side workers


class RayUpdateWorker:
    """Driver-side stand-in for a policy's :class:`UpdateActor` (the ``UpdateWorker`` interface)."""

    def __init__(self, policy: str, actor: Any, run_dir: Path, pools: Any):
        self.policy = policy
        self.actor = actor
        self.run_dir = Path(run_dir)
        self.pools = pools  # keeps the placement groups alive while this worker is in use

    @property
    def trainer(self) -> Any:
        raise AttributeError(
            f"policy {self.policy!r} is trained inside a Ray actor (backend='ray'); its ATGRPOTrainer is not "
            "in this process. Use the checkpoints (mas_trainer.run.checkpoints.load_policies) to get its weights."
        )

    model = trainer

    def start_update(self, samples: list[Sample], extra_logs: dict[str, float] | None = None):
        ref = self.actor.update.remote(samples, extra_logs)
        return lambda: self._get(ref, "update")

    def update(self, samples: list[Sample], extra_logs: dict[str, float] | None = None) -> dict[str, float]:
        return self.start_update(samples, extra_logs)()

    def save_state(self, folder: Path) -> None:
        self._get(self.actor.save_state.remote(str(folder)), "save its checkpoint")

    def load_state(self, folder: Path) -> None:
        self._get(self.actor.load_state.remote(str(folder)), "load a checkpoint")

    def end_training(self) -> None:
        self._get(self.actor.end_training.remote(), "finish training")

    def weights_ref(self) -> Any:
        return self.actor.weights.remote()

    def _get(self, ref: Any, doing: str) -> Any:
        return get_or_explain(ref, f"update worker of policy {self.policy!r}", doing, self.run_dir)


class RemoteGeneration:
    """The generation-backend interface (``generate`` / ``sync_weights``) of a :class:`RolloutActor`."""

    def __init__(self, policy: str, actor: Any, update_worker: RayUpdateWorker):
        self.policy = policy
        self.actor = actor
        self.update_worker = update_worker
        self._pending_sync: Any = None

    def generate(self, prompts: list[list[int]], n: int, **kwargs: Any):
        self._finish_sync()
        return self._get(self.actor.generate.remote(prompts, n, kwargs), "generate")

    def sync_weights(self) -> None:
        """Start moving the update actor's weights into the rollout actor (awaited before the next generate)."""
        self._finish_sync()
        self._pending_sync = self.actor.load_weights.remote(self.update_worker.weights_ref())

    def _finish_sync(self) -> None:
        if self._pending_sync is not None:
            ref, self._pending_sync = self._pending_sync, None
            self._get(ref, "load the updated weights")

    def _get(self, ref: Any, doing: str) -> Any:
        return get_or_explain(ref, f"rollout worker of policy {self.policy!r}", doing, self.update_worker.run_dir)


class RayRolloutWorker:
    """Driver-side stand-in for a policy's :class:`RolloutActor` (the ``RolloutWorker`` interface).

    The tokenizer stays in the driver: the rollout code builds prompts here and sends token ids.
    """

    def __init__(self, policy: str, actor: Any, tokenizer: Any, update_worker: RayUpdateWorker):
        self.policy = policy
        self.tokenizer = tokenizer
        self.backend = RemoteGeneration(policy, actor, update_worker)

    def sync_weights(self) -> None:
        self.backend.sync_weights()


def get_or_explain(ref: Any, who: str, doing: str, run_dir: Path) -> Any:
    """``ray.get(ref)``; a dead actor becomes a :class:`WorkerDiedError` that says how to resume."""
    import ray
    from ray.exceptions import OutOfMemoryError, RayActorError

    try:
        return ray.get(ref)
    except (RayActorError, OutOfMemoryError) as err:  # Ray's memory monitor kills workers on a full node
        latest = latest_checkpoint(run_dir)
        where = f"the latest checkpoint is {latest}" if latest else f"there is no checkpoint in {run_dir} yet"
        cause = (str(err).strip().splitlines() or [""])[0][:300]
        raise WorkerDiedError(
            f"the Ray {who} died while trying to {doing} ({type(err).__name__}: {cause}). The policy's training "
            f"state since the last checkpoint is lost, so the run stops; {where}. Continue with "
            f"`mas-train --resume --output {run_dir} ...` (or MASTrainer(config).train(resume=True))."
        ) from err

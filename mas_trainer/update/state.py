"""One policy's training state on disk: weights (+ tokenizer), optimizer, LR scheduler, TRL trainer state.

The per-policy part of a checkpoint (the run-level part, folder layout and atomic writes are
:mod:`mas_trainer.run.checkpoints`). Restoring copies into the live objects, so the optimizer and the
rollout backend keep pointing at the same tensors.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM
from transformers.trainer_callback import TrainerState


def save_policy_state(trainer: Any, folder: str | os.PathLike) -> None:
    """One policy's part of a checkpoint: ``model/`` (weights + tokenizer), optimizer, scheduler, trainer state."""
    folder = Path(folder)
    trainer.model.save_pretrained(folder / "model")
    trainer.processing_class.save_pretrained(folder / "model")
    save_optimization_state(trainer, folder)


def save_optimization_state(trainer: Any, folder: str | os.PathLike) -> None:
    """Optimizer, scheduler and trainer state of one policy (every policy mode)."""
    folder = Path(folder)
    torch.save(trainer.optimizer.state_dict(), folder / "optimizer.pt")
    torch.save(trainer.lr_scheduler.state_dict(), folder / "scheduler.pt")
    trainer.state.save_to_json(str(folder / "trainer_state.json"))


def load_policy_state(trainer: Any, folder: str | os.PathLike) -> None:
    """Restore what :func:`save_policy_state` wrote into a live trainer."""
    folder = Path(folder)
    saved = AutoModelForCausalLM.from_pretrained(folder / "model", dtype=trainer.model.dtype)
    # Copy into the live model: the optimizer and the rollout backend keep pointing at its tensors.
    trainer.model.load_state_dict(saved.state_dict())
    del saved
    load_optimization_state(trainer, folder)


def load_optimization_state(trainer: Any, folder: str | os.PathLike) -> None:
    """Restore what :func:`save_optimization_state` wrote."""
    folder = Path(folder)
    device = trainer.model.device
    trainer.optimizer.load_state_dict(torch.load(folder / "optimizer.pt", map_location=device, weights_only=False))
    trainer.lr_scheduler.load_state_dict(torch.load(folder / "scheduler.pt", weights_only=False))
    trainer.state = TrainerState.load_from_json(str(folder / "trainer_state.json"))

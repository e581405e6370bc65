"""The local backend: every policy's workers in the trainer's process (``backend="local"``, the default).

``shared`` / ``specialized``: one model, one :class:`~mas_trainer.update.trainer.ATGRPOTrainer` and one
rollout backend per policy. ``lora``: one base model for every policy, one adapter each
(:func:`mas_trainer.policies.lora.build_lora_workers`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from mas_trainer.policies.lora import build_lora_workers
from mas_trainer.policies.models import load_model_and_tokenizer
from mas_trainer.policies.vllm_engine import engine_options_from_config
from mas_trainer.policies.workers import RolloutWorker, UpdateWorker
from mas_trainer.update.trainer import ATGRPOTrainer


def start_local_workers(config: Any, policies: list[str], run_dir: Path,
                        models: dict[str, tuple[Any, Any]] | None = None):
    """``(rollout_workers, update_workers, peft_model)`` of ``policies`` (``peft_model``: lora mode only).

    ``models`` may give ready ``(model, tokenizer)`` pairs per policy (tests use tiny models); in ``lora``
    mode one pair under ``"base"``. Otherwise each policy loads ``config.model_for(policy)``.
    """
    device = "cuda" if torch.cuda.is_available() and not config.use_cpu else "cpu"
    run_dir = Path(run_dir)
    if config.policy_mode == "lora":
        if models is not None and "base" not in models:
            raise ValueError("policy_mode='lora' takes one (model, tokenizer) pair as models['base']")
        base = (models["base"] if models is not None
                else load_model_and_tokenizer(config.model_for(policies[0]), dtype=config.dtype_for(policies[0]),
                                              device=device))
        update_workers, rollout_workers, peft_model = build_lora_workers(config, policies, base, run_dir)
        return rollout_workers, update_workers, peft_model
    rollout_workers: dict[str, RolloutWorker] = {}
    update_workers: dict[str, UpdateWorker] = {}
    for policy in policies:
        if models is not None:
            model, tokenizer = models[policy]
        else:
            model, tokenizer = load_model_and_tokenizer(config.model_for(policy), dtype=config.dtype_for(policy),
                                                        device=device)
        trainer = ATGRPOTrainer(model=model, args=config, processing_class=tokenizer, policy_name=policy,
                                logging_dir=run_dir / "tensorboard" / policy)
        update_workers[policy] = UpdateWorker(policy, trainer)
        rollout_workers[policy] = RolloutWorker(policy, trainer.model, tokenizer, config.rollout_backend,
                                                engine_options=engine_options_from_config(config))
    return rollout_workers, update_workers, None

"""Checkpoints of a run: one folder per saved step, written atomically, one sub-folder per policy.

Layout (``RUN`` is the run's ``output_dir``)::

    RUN/checkpoints/step-000010/
        run_state.json                   global step, policies, role -> policy map, config
        rng.pt                           python / numpy / torch RNG states
        policies/<policy>/model/         save_pretrained folder (weights + tokenizer): loadable on its own
        policies/<policy>/optimizer.pt   optimizer state
        policies/<policy>/scheduler.pt   LR scheduler state
        policies/<policy>/trainer_state.json   TRL/transformers TrainerState (global step, log history)

In ``lora`` mode ``policies/<policy>/adapter/`` (the adapter in peft's format) replaces ``model/``, and
the frozen base is written once per run to ``RUN/base_model/`` (see :mod:`mas_trainer.policies.lora`).
One policy's part is written by :mod:`mas_trainer.update.state`; the folder names are
:mod:`mas_trainer.settings.run_layout`.

A checkpoint is first written to ``RUN/checkpoints/.tmp-step-...`` and moved into place with
``os.replace``: a run killed while saving leaves the previous checkpoint intact and no half folder
under a ``step-*`` name. Only the newest ``save_total_limit`` checkpoints are kept.

``load_policies(RUN)`` gives evaluation code the trained ``(model, tokenizer)`` per policy and the
role -> policy map, without building a trainer.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from mas_trainer.policies import lora
from mas_trainer.settings.run_layout import checkpoint_dir, latest_checkpoint, list_checkpoints
from mas_trainer.update.state import load_optimization_state, save_optimization_state


def save_checkpoint(run: Any) -> Path:
    """Save every policy of ``run`` (a :class:`~mas_trainer.run.trainer.MASTrainer`) at its current global step;
    returns the checkpoint folder."""
    final = checkpoint_dir(run.run_dir, run.global_step)
    if getattr(run, "peft_model", None) is not None:  # lora: the frozen base, once per run
        lora.save_base_once(run.peft_model, run.trainer_of(run.policies[0]).processing_class, run.run_dir)
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    (tmp / "policies").mkdir(parents=True)
    for policy in run.policies:
        folder = tmp / "policies" / policy
        if getattr(run, "peft_model", None) is not None:
            lora.save_adapter(run.peft_model, policy, folder / lora.ADAPTER_DIR)
            save_optimization_state(run.trainer_of(policy), folder)
        else:
            # The update worker writes its own policy (with the Ray backend it lives in another process).
            run.update_workers[policy].save_state(folder)
    torch.save(_rng_state(), tmp / "rng.pt")
    state = {
        "global_step": run.global_step,
        "episodes_started": int(getattr(run, "episodes_started", 0)),  # turn-level steps: next episode id
        "policies": list(run.policies),
        "roles": list(run.roles),
        "policy_of_role": {role: run.policy_of_role(role) for role in run.roles},
        "config": json.loads(run.config.to_json_string()),
    }
    # run_state.json is the "complete" marker: written last, inside the temp folder.
    (tmp / "run_state.json").write_text(json.dumps(state, indent=2, default=str))
    if final.exists():  # the same step saved again (e.g. after a resume): replace it
        shutil.rmtree(final)
    os.replace(tmp, final)
    _prune(run.run_dir, run.config.save_total_limit)
    return final


def load_checkpoint(run: Any, path: str | os.PathLike) -> None:
    """Restore weights, optimizer, scheduler, trainer state, RNG and step of ``run`` from ``path``."""
    path = Path(path)
    state = json.loads((path / "run_state.json").read_text())
    if sorted(state["policies"]) != sorted(run.policies):
        raise ValueError(
            f"checkpoint {path} holds policies {state['policies']}, this run has {run.policies} "
            "(was it saved with another policy_mode?)"
        )
    if getattr(run, "peft_model", None) is not None:
        lora.check_base(run.peft_model, run.run_dir)
    for policy in run.policies:
        folder = path / "policies" / policy
        if getattr(run, "peft_model", None) is not None:
            lora.load_adapter_into(run.peft_model, policy, folder / lora.ADAPTER_DIR)
            load_optimization_state(run.trainer_of(policy), folder)
        else:
            run.update_workers[policy].load_state(folder)
    for worker in run.rollout_workers.values():
        worker.sync_weights()  # a no-op in-process; a separate rollout copy (Ray) pulls the loaded weights
    _set_rng_state(torch.load(path / "rng.pt", weights_only=False))
    run.global_step = int(state["global_step"])
    # Turn-level steps: episodes in progress at save time are not stored; new ones start after them.
    run.episodes_started = int(state.get("episodes_started", 0))


def load_policies(run_dir: str | os.PathLike, step: int | None = None, device: str = "cpu"):
    """``({policy: (model, tokenizer)}, {role: policy})`` of a run's latest (or ``step``) checkpoint."""
    path = checkpoint_dir(run_dir, step) if step is not None else latest_checkpoint(run_dir)
    if path is None or not (path / "run_state.json").is_file():
        raise FileNotFoundError(f"no checkpoint in {run_dir}" + (f" for step {step}" if step is not None else ""))
    state = json.loads((path / "run_state.json").read_text())
    if (state.get("config") or {}).get("policy_mode") == "lora":
        return lora.load_merged_policies(run_dir, path, state["policies"], device), dict(state["policy_of_role"])
    policies = {}
    for policy in state["policies"]:
        folder = path / "policies" / policy / "model"
        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizer.padding_side = "left"
        policies[policy] = (AutoModelForCausalLM.from_pretrained(folder).to(device), tokenizer)
    return policies, dict(state["policy_of_role"])


def _prune(run_dir: Path, keep: int | None) -> None:
    if not keep or keep < 1:
        return
    for old in list_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def _rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.random.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.random.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.random.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.random.set_rng_state_all(state["cuda"])

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
the frozen base is written once per run to ``RUN/base_model/`` (see :mod:`mas_trainer.lora`).

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
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from mas_trainer.trainer import MASTrainer

CHECKPOINTS = "checkpoints"
PREFIX = "step-"


def checkpoint_dir(run_dir: str | os.PathLike, step: int) -> Path:
    return Path(run_dir) / CHECKPOINTS / f"{PREFIX}{step:06d}"


def list_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and p.name.startswith(PREFIX) and (p / "run_state.json").is_file()]
    return sorted(found, key=lambda p: int(p.name[len(PREFIX):]))


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def save_checkpoint(run: "MASTrainer") -> Path:
    """Save every policy of ``run`` at its current global step; returns the checkpoint folder."""
    final = checkpoint_dir(run.run_dir, run.global_step)
    if getattr(run, "peft_model", None) is not None:  # lora: the frozen base, once per run
        from mas_trainer import lora

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


def load_checkpoint(run: "MASTrainer", path: str | os.PathLike) -> None:
    """Restore weights, optimizer, scheduler, trainer state, RNG and step of ``run`` from ``path``."""
    path = Path(path)
    state = json.loads((path / "run_state.json").read_text())
    if sorted(state["policies"]) != sorted(run.policies):
        raise ValueError(
            f"checkpoint {path} holds policies {state['policies']}, this run has {run.policies} "
            "(was it saved with another policy_mode?)"
        )
    if getattr(run, "peft_model", None) is not None:
        from mas_trainer import lora

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
    from transformers import AutoModelForCausalLM

    folder = Path(folder)
    saved = AutoModelForCausalLM.from_pretrained(folder / "model", dtype=trainer.model.dtype)
    # Copy into the live model: the optimizer and the rollout backend keep pointing at its tensors.
    trainer.model.load_state_dict(saved.state_dict())
    del saved
    load_optimization_state(trainer, folder)


def load_optimization_state(trainer: Any, folder: str | os.PathLike) -> None:
    """Restore what :func:`save_optimization_state` wrote."""
    from transformers.trainer_callback import TrainerState

    folder = Path(folder)
    device = trainer.model.device
    trainer.optimizer.load_state_dict(torch.load(folder / "optimizer.pt", map_location=device, weights_only=False))
    trainer.lr_scheduler.load_state_dict(torch.load(folder / "scheduler.pt", weights_only=False))
    trainer.state = TrainerState.load_from_json(str(folder / "trainer_state.json"))


def load_policies(run_dir: str | os.PathLike, step: int | None = None, device: str = "cpu"):
    """``({policy: (model, tokenizer)}, {role: policy})`` of a run's latest (or ``step``) checkpoint."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = checkpoint_dir(run_dir, step) if step is not None else latest_checkpoint(run_dir)
    if path is None or not (path / "run_state.json").is_file():
        raise FileNotFoundError(f"no checkpoint in {run_dir}" + (f" for step {step}" if step is not None else ""))
    state = json.loads((path / "run_state.json").read_text())
    if (state.get("config") or {}).get("policy_mode") == "lora":
        from mas_trainer.lora import load_merged_policies

        return load_merged_policies(run_dir, path, state["policies"], device), dict(state["policy_of_role"])
    policies = {}
    for policy in state["policies"]:
        folder = path / "policies" / policy / "model"
        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizer.padding_side = "left"
        policies[policy] = (AutoModelForCausalLM.from_pretrained(folder).to(device), tokenizer)
    return policies, dict(state["policy_of_role"])


def truncate_metrics(metrics_path: Path, last_step: int) -> None:
    """Drop metric lines of steps after ``last_step`` (they are redone after a resume); atomic rewrite."""
    if not metrics_path.is_file():
        return
    kept = []
    for line in metrics_path.read_text(encoding="utf-8").splitlines():
        try:
            if int(json.loads(line)["step"]) <= last_step:
                kept.append(line)
        except (ValueError, KeyError, TypeError):
            continue  # a line cut by a kill mid-write
    tmp = metrics_path.with_name(metrics_path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    os.replace(tmp, metrics_path)


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

"""The AT-GRPO trainer: TRL's GRPO loss on env-scored, tree-sampled samples, for one or many policies.

Two layers:

* :class:`ATGRPOTrainer` subclasses :class:`trl.GRPOTrainer` for ONE policy. Its
  ``_generate_and_score_completions`` does not sample or score anything: it turns the samples routed
  to this policy (already scored by the env and given group-relative advantages) into exactly the
  tensors TRL's loss reads (``prompt_ids``, ``prompt_mask``, ``completion_ids``, ``completion_mask``,
  ``advantages``, ``num_items_in_batch`` [+ ``old_per_token_logps`` / ``ref_per_token_logps``]). So
  TRL's ``compute_loss`` (loss types, clipping, KL, entropy bonus, metrics), its optimizer and scheduler
  creation, its ``log`` and its callbacks (TensorBoard etc.) are reused as they are.

* :class:`MASTrainer` drives the run. Decision: we drive the step loop ourselves instead of calling
  TRL's ``train()``, because ``train()`` drives one model while a step here is one rollout shared by
  all policies (in ``specialized`` mode one model and one optimizer per role), followed by one
  on-policy update of EVERY policy on its own samples. Per step:

  1. the env pool resets ``envs_per_step`` envs (fresh seeds);
  2. one rollout (tree sampling, or whole trajectories for the baseline) through the rollout workers
     of all policies; advantages per group (:func:`mas_trainer.atgrpo.assign_advantages`);
  3. the router sends each sample to the update worker of its policy;
  4. each update worker: micro-batches -> TRL ``compute_loss`` -> backward (accumulated) -> grad clip ->
     optimizer + scheduler step -> TRL logging/callbacks;
  5. metrics line to ``metrics.jsonl``; a checkpoint every ``save_steps``.

  The update is strictly on-policy (``num_iterations=1``: the samples were drawn by the current
  weights), so TRL's importance ratio is 1 and ``old_per_token_logps`` is only computed when
  ``num_iterations > 1``.

One TRL method is replaced for speed: ``_get_per_token_logps_and_entropies`` (on devices without
Triton, i.e. CPU) scores only completion positions and encodes each group's shared prompt once
(:func:`completion_logits`); the loss built on it is TRL's. Multi-GPU with several trainers in one
process is untested; ``bf16`` applies through ``accelerator.autocast``.
"""

from __future__ import annotations

import copy
import json
import math
import os
import time
import warnings
from collections import deque
from pathlib import Path
from typing import Any

import torch
from trl import GRPOTrainer
from trl.trainer.utils import pad

from mas_trainer.config import ATGRPOConfig
from mas_trainer.samples import Sample
from mas_trainer.vllm_backend import engine_options_from_config
from mas_trainer.workers import EnvPool, RolloutWorker, Router, UpdateWorker, update_all


def env_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    """The reward TRL is told about: the environment's reward, reported, never computed here.

    TRL requires at least one reward function at init. In AT-GRPO every completion is scored by the
    environment it acted in (``alpha * team + local``) during the rollout, so this function only
    echoes a precomputed ``env_reward`` column if one is given, and ``None`` (unscored) otherwise.
    :class:`ATGRPOTrainer` never calls it.
    """
    values = kwargs.get("env_reward")
    return list(values) if values is not None else [None] * len(completions)


class ATGRPOTrainer(GRPOTrainer):
    """TRL's GRPO trainer for one policy, fed with env-scored samples instead of generating itself.

    Use :meth:`train_on_samples` for one optimizer step (what :class:`MASTrainer` does), or queue
    samples with :meth:`queue_samples` before TRL asks ``_generate_and_score_completions`` for a batch.
    """

    def __init__(
        self,
        model: Any,
        args: ATGRPOConfig,
        processing_class: Any,
        policy_name: str = "shared",
        logging_dir: str | os.PathLike | None = None,
        callbacks: list[Any] | None = None,
    ):
        from datasets import Dataset
        from transformers import PrinterCallback, ProgressCallback

        # A dataset still drives TRL's own loop; its rows carry no task (the env pool owns the tasks).
        placeholder = Dataset.from_dict({"prompt": [""] * int(args.generation_batch_size)})
        # With beta > 0 TRL would load the KL reference from the path in the model's config, which is the
        # wrong model for one built in memory (the tiny test model's config points at a tokenizer folder)
        # and would be a checkpoint, not the start model, for a loaded checkpoint. So TRL is built with
        # beta=0 (on a copy of the arguments) and the reference comes from :meth:`_kl_reference`.
        beta = float(args.beta)
        reference = None
        if beta != 0.0:
            reference = self._kl_reference(model)
            args = copy.copy(args)
            args.beta = 0.0
        super().__init__(
            model=model,
            reward_funcs=[env_reward],
            args=args,
            train_dataset=placeholder,
            processing_class=processing_class,
            callbacks=callbacks,
        )
        self.args.beta = self.beta = beta
        if reference is not None:
            self.ref_model = self.accelerator.prepare_model(reference, evaluation_mode=True)  # to the device
        self.policy_name = policy_name
        self._queued: list[Sample] | None = None
        self.last_samples: list[Sample] = []
        self._began = False
        # MASTrainer shows one progress bar for all policies.
        self.remove_callback(ProgressCallback)
        self.remove_callback(PrinterCallback)
        if logging_dir is not None:
            for callback in self.callback_handler.callbacks:
                if hasattr(callback, "tb_writer"):  # TensorBoardCallback: one folder per policy
                    callback.logging_dir = str(logging_dir)
        self.create_optimizer_and_scheduler(num_training_steps=int(args.max_steps))
        self.state.max_steps = int(args.max_steps)
        self.state.logging_steps = args.logging_steps
        self.state.save_steps = args.save_steps

    # ------------------------------------------------------------------ TRL hook
    def queue_samples(self, samples: list[Sample]) -> None:
        """Hand the next batch of samples to :meth:`_generate_and_score_completions`."""
        self._queued = list(samples)

    def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
        if self._queued is None:
            raise RuntimeError(
                "ATGRPOTrainer does not generate: the env scores completions during the rollout. "
                "Queue this policy's samples with queue_samples() first (MASTrainer does this)."
            )
        samples, self._queued = self._queued, None
        return self.samples_to_batch(samples)

    def samples_to_batch(self, samples: list[Sample], num_items_in_batch: float | None = None) -> dict[str, Any]:
        """The tensors TRL's ``_compute_loss`` reads, for ``samples`` (prompts left-, completions right-padded)."""
        if not samples:
            raise ValueError("samples_to_batch needs at least one sample")
        device = self.accelerator.device
        pad_id = self.pad_token_id
        prompts = [torch.tensor(s.prompt_ids, dtype=torch.long) for s in samples]
        completions = [torch.tensor(s.completion_ids or [pad_id], dtype=torch.long) for s in samples]
        prompt_ids = pad(prompts, padding_value=pad_id, padding_side="left").to(device)
        prompt_mask = pad([torch.ones_like(p) for p in prompts], padding_value=0, padding_side="left").to(device)
        completion_ids = pad(completions, padding_value=pad_id, padding_side="right").to(device)
        completion_mask = pad(
            [torch.full_like(c, 1 if s.completion_ids else 0) for c, s in zip(completions, samples)],
            padding_value=0,
            padding_side="right",
        ).to(device)
        advantages = torch.tensor([s.advantage for s in samples], dtype=torch.float32, device=device)
        if num_items_in_batch is None:
            num_items_in_batch = float(completion_mask.sum().item())
        batch = {
            "prompt_ids": prompt_ids,
            "prompt_mask": prompt_mask,
            "completion_ids": completion_ids,
            "completion_mask": completion_mask,
            "advantages": advantages,
            "num_items_in_batch": torch.tensor(num_items_in_batch, dtype=torch.float32, device=device),
        }
        needs_old = self.num_iterations > 1
        if needs_old or self.beta != 0.0:
            input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
            attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
            keep = completion_ids.size(1)
            with torch.no_grad():
                if needs_old:
                    batch["old_per_token_logps"], _, _ = self._get_per_token_logps_and_entropies(
                        self.model, input_ids, attention_mask, keep, batch_size=len(samples)
                    )
                if self.beta != 0.0:
                    batch["ref_per_token_logps"] = self.reference_logps(input_ids, attention_mask, keep, len(samples))
        return batch

    def _kl_reference(self, model: Any) -> Any:
        """The KL reference model (beta > 0): a frozen copy of ``model`` as handed in. Called before TRL and
        accelerate wrap the model's forward: a wrapper is a closure over the original model, so a deep copy
        of a wrapped model would still run the policy. ``None``: :meth:`reference_logps` needs no model."""
        return frozen_copy(model)

    def reference_logps(self, input_ids, attention_mask, logits_to_keep: int, batch_size: int):
        """Per-token log-probs of the completions under the KL reference (a frozen copy of the start model)."""
        if self.ref_model is None:
            raise ValueError("beta > 0 needs a reference model, which was not created (ATGRPOTrainer.__init__)")
        logps, _, _ = self._get_per_token_logps_and_entropies(
            self.ref_model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size
        )
        return logps

    # Encode the prompt text common to all groups of a micro-batch once (False: per-group sharing only).
    share_common_prefix = True

    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **multimodal,
    ):
        """Log-probs (and entropies) of the completion tokens, scoring only the completion positions.

        TRL 1.16's fused LM head scores EVERY position (prompt included) on devices without Triton,
        i.e. on CPU; with ~300-token prompts and a few-token completion that is nearly all of the update
        time. Here only completion positions are scored, a prompt shared by several rows (all K
        members of a group) is run through the model once, and so is the text common to all prompts
        (see :func:`mas_trainer.scoring.completion_logits`). Triton
        devices, MoE aux losses and multimodal inputs keep TRL's path.
        """
        from trl.kernels.chunked_logprob import _use_triton
        from trl.trainer.utils import selective_log_softmax_and_entropy

        if compute_aux_loss or any(v is not None for v in multimodal.values()) or _use_triton(input_ids.device):
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **multimodal,
            )
        batch_size = batch_size or input_ids.size(0)
        all_logps, all_entropies = [], []
        for start in range(0, input_ids.size(0), batch_size):
            ids = input_ids[start : start + batch_size]
            mask = attention_mask[start : start + batch_size]
            with self.accelerator.autocast():
                logits = completion_logits(model, ids, mask, logits_to_keep, self.share_common_prefix)
            logps, entropies = selective_log_softmax_and_entropy(
                logits, ids[:, -logits_to_keep:], temperature=self.temperature
            )
            all_logps.append(logps)
            all_entropies.append(entropies)
        entropies = torch.cat(all_entropies, dim=0) if compute_entropy else None
        return torch.cat(all_logps, dim=0), entropies, None

    @property
    def pad_token_id(self) -> int:
        tok = self.processing_class
        return int(tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)

    # ------------------------------------------------------------------ one optimizer step
    def train_on_samples(self, samples: list[Sample], extra_logs: dict[str, float] | None = None) -> dict[str, float]:
        """One optimizer step of this policy on ``samples`` (gradient accumulation over micro-batches).

        With ``skip_zero_variance_groups`` the samples of groups whose rewards are all equal are left
        out (zero advantage, no signal). Returns loss, grad norm, sample and token counts.
        """
        if not self._began:
            self.control = self.callback_handler.on_train_begin(self.args, self.state, self.control)
            self._began = True
        self.last_samples = list(samples)  # what the router sent here (inspected by tests and debugging)
        kept = drop_zero_variance_groups(samples) if self.args.skip_zero_variance_groups else list(samples)
        metrics: dict[str, float] = {"samples": float(len(samples)), "samples_updated": float(len(kept))}
        self.model.train()
        if kept:
            metrics.update(self._optimize(kept))
        else:
            metrics.update(loss=0.0, grad_norm=0.0, update_tokens=0.0)
        with warnings.catch_warnings():  # stepping the schedule without an optimizer step is intended here
            warnings.simplefilter("ignore", UserWarning)
            self.lr_scheduler.step()
        metrics["learning_rate"] = float(self.lr_scheduler.get_last_lr()[0])
        self.state.global_step += 1
        self.control = self.callback_handler.on_step_end(self.args, self.state, self.control)
        if _is_due(self.state.global_step, self.args.logging_steps):
            logs = {"loss": metrics["loss"], "grad_norm": metrics["grad_norm"], "learning_rate": metrics["learning_rate"]}
            logs.update(extra_logs or {})
            self.log(logs)
        return metrics

    def _optimize(self, samples: list[Sample]) -> dict[str, float]:
        # Similar prompt lengths in one micro-batch: less padding (a group's prompts are identical).
        samples = sorted(samples, key=lambda s: (len(s.prompt_ids), len(s.completion_ids)))
        size = int(self.args.per_device_train_batch_size)
        chunks = [samples[i : i + size] for i in range(0, len(samples), size)]
        total_completion_tokens = float(sum(max(len(s.completion_ids), 1) for s in samples))
        # TRL divides the loss by current_gradient_accumulation_steps (sequence-mean losses) or, for the
        # token-sum losses (dapo, cispo, vespo), by num_items_in_batch * accumulation / steps_per_generation.
        # These two settings make both equal the loss over the whole batch, however it is chunked.
        self.current_gradient_accumulation_steps = len(chunks)
        num_items = total_completion_tokens * self.args.steps_per_generation / len(chunks)
        self._metrics["train"]["reward"].append(_mean([s.reward for s in samples]))
        self._metrics["train"]["advantage_abs_mean"].append(_mean([abs(s.advantage) for s in samples]))

        total_loss = 0.0
        grad_norm = 0.0
        update_tokens = 0
        kl_seen = len(self._metrics["train"]["kl"])  # TRL appends one KL mean per micro-batch when beta > 0
        for _ in range(self.num_iterations):
            for chunk in chunks:
                batch = self.samples_to_batch(chunk, num_items_in_batch=num_items)
                update_tokens += int(batch["prompt_mask"].sum() + batch["completion_mask"].sum())
                with self.accelerator.autocast():
                    loss = self.compute_loss(self.model, batch)
                self.accelerator.backward(loss)
                total_loss += float(loss.detach())
            if self.args.max_grad_norm and self.args.max_grad_norm > 0:
                grad_norm = float(self.accelerator.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm))
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        metrics = {"loss": total_loss / self.num_iterations, "grad_norm": grad_norm, "update_tokens": float(update_tokens)}
        if self.beta != 0.0:
            metrics["kl"] = _mean(self._metrics["train"]["kl"][kl_seen:])
        return metrics


def frozen_copy(model: Any) -> Any:
    """A copy of ``model`` for reference log-probs: same weights and device, eval mode, no gradients."""
    reference = copy.deepcopy(model)
    reference.eval()
    reference.requires_grad_(False)
    return reference


def completion_logits(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, n: int, share_common_prefix: bool = True
) -> torch.Tensor:
    """Logits predicting the last ``n`` tokens of each row, ``(B, n, vocab)``; differentiable.

    Each distinct prompt is encoded once, and the prefix common to all of them once too; see
    :func:`mas_trainer.scoring.completion_logits`.
    """
    from mas_trainer import scoring

    return scoring.completion_logits(model, input_ids, attention_mask, n, share_common_prefix=share_common_prefix)


def drop_zero_variance_groups(samples: list[Sample]) -> list[Sample]:
    """The samples of groups whose rewards differ (the others have zero advantage everywhere)."""
    rewards: dict[Any, list[float]] = {}
    for s in samples:
        rewards.setdefault(s.group, []).append(s.reward)
    informative = {g for g, r in rewards.items() if max(r) - min(r) > 1e-12}
    return [s for s in samples if s.group in informative]


class MASTrainer:
    """An AT-GRPO run over all policies: env pool, rollout/update workers, router, step loop, checkpoints.

    Programmatic use::

        config = ATGRPOConfig(output_dir="runs/pp", env="plan_path", policy_mode="specialized", max_steps=50)
        run = MASTrainer(config)          # loads config.model once per policy
        run.train()                       # or run.train(resume=True); or run.train_step() step by step
        run.evaluate(num_tasks=50)        # greedy success on held-out tasks

    ``models`` may give ready ``(model, tokenizer)`` pairs per policy name (tests use tiny models); in
    ``lora`` mode one pair under ``"base"`` (the base model every adapter shares).
    """

    def __init__(self, config: ATGRPOConfig, models: dict[str, tuple[Any, Any]] | None = None):
        from mas_trainer.models import load_model_and_tokenizer

        self.config = config
        self.run_dir = Path(config.output_dir)
        self.env_pool = EnvPool(
            config.env, config.env_make_kwargs("train"), config.envs_per_step, config.effective_rollout_seed
        )
        self.roles = list(self.env_pool.roles)
        config.check_roles(self.roles)
        if config.policy_mode == "specialized":
            if len(self.roles) < 2:
                raise ValueError(
                    f"policy_mode='specialized' needs several roles, but {config.env} ({config.workflow}) has "
                    f"only {self.roles}"
                )
            self.policies = list(self.roles)
        elif config.policy_mode == "lora" and len(self.roles) > 1:
            self.policies = list(self.roles)  # one adapter per role
        else:
            self.policies = ["shared"]
        self.rollout_workers: dict[str, RolloutWorker] = {}
        self.update_workers: dict[str, UpdateWorker] = {}
        self.step_branches = None  # None: branches are stepped in this process (atgrpo.step_clones)
        if config.backend == "ray":  # per-policy Ray actors take the place of the in-process workers below
            from mas_trainer.ray_backend import start_ray_workers

            self.rollout_workers, self.update_workers, self.step_branches = start_ray_workers(
                config, self.policies, self.run_dir, models
            )
        device = "cuda" if torch.cuda.is_available() and not config.use_cpu else "cpu"
        self.peft_model = None  # lora mode: the PeftModel holding the base and every adapter
        if config.policy_mode == "lora":
            from mas_trainer.lora import build_lora_workers

            if models is not None and "base" not in models:
                raise ValueError("policy_mode='lora' takes one (model, tokenizer) pair as models['base']")
            base = (models["base"] if models is not None
                    else load_model_and_tokenizer(config.model_for(self.policies[0]), device=device))
            self.update_workers, self.rollout_workers, self.peft_model = build_lora_workers(
                config, self.policies, base, self.run_dir
            )
        # lora builds its workers above; the Ray backend's actors replace the in-process workers
        own_model_policies = [] if config.policy_mode == "lora" or config.backend != "local" else self.policies
        for policy in own_model_policies:
            if models is not None:
                model, tokenizer = models[policy]
            else:
                model, tokenizer = load_model_and_tokenizer(config.model_for(policy), device=device)
            trainer = ATGRPOTrainer(
                model=model,
                args=config,
                processing_class=tokenizer,
                policy_name=policy,
                logging_dir=self.run_dir / "tensorboard" / policy,
            )
            self.update_workers[policy] = UpdateWorker(policy, trainer)
            self.rollout_workers[policy] = RolloutWorker(policy, trainer.model, tokenizer, config.rollout_backend,
                                                         engine_options=engine_options_from_config(config))
        self.router = Router(self.policies)
        self.global_step = 0
        # Turn-level steps (turns_per_step): episodes in progress, how many were started, recent outcomes.
        self.live_episodes: list[Any] = []
        self.episodes_started = 0
        self.recent_outcomes: deque[float] = deque(maxlen=max(16, 2 * int(config.envs_per_step)))

    # ------------------------------------------------------------------ structure
    def policy_of_role(self, role: str) -> str:
        return role if self.policies == self.roles else "shared"

    def trainer_of(self, policy: str) -> ATGRPOTrainer:
        return self.update_workers[policy].trainer

    def model_of(self, policy: str) -> Any:
        return self.update_workers[policy].model

    @property
    def metrics_path(self) -> Path:
        return self.run_dir / "metrics.jsonl"

    # ------------------------------------------------------------------ one step
    def rollout(self, step: int):
        """The rollout of training step ``step`` (0-based), with advantages set on its samples."""
        from mas_trainer.atgrpo import assign_advantages, trajectory_rollout, tree_rollout

        cfg = self.config
        budgets, temperatures = cfg.sampling_of_roles(self.roles)
        sampling = dict(
            backends={p: w.backend for p, w in self.rollout_workers.items()},
            tokenizers={p: w.tokenizer for p, w in self.rollout_workers.items()},
            policy_of_role=self.policy_of_role,
            k=int(cfg.num_generations),
            # Per-role budgets and temperatures (role_max_completion_length / role_temperature), else the common ones.
            max_new_tokens=budgets,
            temperature=temperatures,
            top_p=float(cfg.top_p),
            return_logprobs=False,
            seed=cfg.effective_rollout_seed * 1_000_003 + step,
        )
        tree = dict(sampling, step_branches=self.step_branches)  # where branches are stepped (Ray: env actors)
        if cfg.turns_per_step is not None:
            rollout = self._advance_live_episodes(tree)
        elif cfg.grouping == "at_grpo":
            envs, episode_ids = self.env_pool.reset_for_step(step)
            rollout = tree_rollout(envs, episode_ids=episode_ids, **tree)
        else:
            envs, episode_ids = self.env_pool.reset_for_step(step)
            rollout = trajectory_rollout(envs, episode_ids=episode_ids, **sampling)
        rollout.stats.update(assign_advantages(rollout.samples, scale_rewards=cfg.scale_rewards))
        return rollout

    def _advance_live_episodes(self, sampling: dict[str, Any]):
        """Turn-level step: top the live episodes up to ``envs_per_step``, advance them ``turns_per_step`` turns.

        Episode ids count up from ``rollout_seed`` over the whole run (saved in checkpoints), so group
        keys never repeat. Success is reported over the last finished episodes (a step may finish none).
        """
        from mas_trainer.atgrpo import start_episodes, tree_advance

        cfg = self.config
        missing = int(cfg.envs_per_step) - len(self.live_episodes)
        if missing > 0:
            ids = [cfg.effective_rollout_seed + self.episodes_started + i for i in range(missing)]
            self.episodes_started += missing
            self.live_episodes += start_episodes([self.env_pool.new_episode(i) for i in ids], ids)
        # A turn is one action of every role: stepping whole turns puts every role's groups in every
        # update (one round per step would alternate tool-only and planner-only updates in `mas`).
        rounds = int(cfg.turns_per_step) * len(self.roles)
        rollout = tree_advance(self.live_episodes, rounds=rounds, **sampling)
        self.live_episodes = rollout.live
        self.recent_outcomes.extend(float(ep.success) for ep in rollout.episodes)
        rollout.stats["success_rate"] = _mean(list(self.recent_outcomes))
        return rollout

    def train_step(self) -> dict[str, Any]:
        """Rollout + one update of every policy; returns the metrics record of the step."""
        start = time.perf_counter()
        rollout = self.rollout(self.global_step)
        routed = self.router.route(rollout.samples)
        rollout_logs = {
            "env/success_rate": rollout.stats["success_rate"],
            "env/reward_candidate_mean": rollout.stats["reward_candidate_mean"],
            "env/zero_variance_share": rollout.stats["zero_variance_share"],
        }
        update_start = time.perf_counter()
        per_policy = update_all(self.update_workers, routed, extra_logs=rollout_logs)
        update_seconds = time.perf_counter() - update_start
        for worker in self.rollout_workers.values():
            worker.sync_weights()
        self.global_step += 1
        return self._record(rollout, per_policy, update_seconds, time.perf_counter() - start)

    def _record(self, rollout, per_policy: dict[str, dict[str, float]], update_seconds: float, step_seconds: float):
        stats, timings = rollout.stats, rollout.timings
        gen_seconds = timings.get("generation", 0.0)
        update_tokens = sum(m.get("update_tokens", 0.0) for m in per_policy.values())
        record: dict[str, Any] = {
            "step": self.global_step,
            "reward_mean": stats.get("reward_candidate_mean", 0.0),
            "reward_chosen_mean": stats.get("reward_chosen_mean", stats.get("return_mean", 0.0)),
            "return_mean": stats.get("return_mean", 0.0),
            "success_rate": stats.get("success_rate", 0.0),
            "episodes_finished": int(stats.get("episodes_finished", len(rollout.episodes))),
            "zero_variance_share": stats.get("zero_variance_share", 0.0),
            "parse_error_rate": stats.get("parse_error_rate", 0.0),
            "samples": int(stats.get("samples", len(rollout.samples))),
            "groups": int(stats.get("groups", 0)),
            "time_generation": gen_seconds,
            "time_env": timings.get("env", 0.0),
            "time_update": update_seconds,
            "time_step": step_seconds,
            "rollout_tokens_per_s": stats.get("tokens_generated", 0.0) / gen_seconds if gen_seconds > 0 else 0.0,
            "update_tokens_per_s": update_tokens / update_seconds if update_seconds > 0 else 0.0,
        }
        for key, value in stats.items():
            if key.startswith(("reward_mean/", "nonzero_variance_share/")):
                record[key] = value
        for policy, m in per_policy.items():
            for key in ("loss", "grad_norm", "samples", "samples_updated", "learning_rate"):
                record[f"{key}/{policy}"] = m.get(key, 0.0)
            if "kl" in m:  # beta > 0: how far the policy has moved from its reference
                record[f"kl/{policy}"] = m["kl"]
        return record

    # ------------------------------------------------------------------ the loop
    def train(self, resume: bool = False, progress: bool = True) -> list[dict[str, Any]]:
        """Run until ``max_steps``; with ``resume`` continue from the latest checkpoint of the run dir."""
        from tqdm.auto import tqdm

        from mas_trainer import checkpoint
        from mas_trainer.plotting import plot_learning_curve

        self.run_dir.mkdir(parents=True, exist_ok=True)
        if resume:
            latest = checkpoint.latest_checkpoint(self.run_dir)
            if latest is not None:
                checkpoint.load_checkpoint(self, latest)
                for worker in self.rollout_workers.values():  # e.g. a vLLM engine holds its own copy
                    worker.sync_weights()
        checkpoint.truncate_metrics(self.metrics_path, self.global_step)
        records: list[dict[str, Any]] = []
        max_steps = int(self.config.max_steps)
        bar = tqdm(total=max_steps, initial=self.global_step, disable=not progress, desc="AT-GRPO", unit="step")
        try:
            while self.global_step < max_steps:
                record = self.train_step()
                records.append(record)
                _append_jsonl(self.metrics_path, record)
                bar.update(1)
                bar.set_postfix(reward=f"{record['reward_mean']:.2f}", success=f"{record['success_rate']:.2f}",
                                zero_var=f"{record['zero_variance_share']:.2f}", step_s=f"{record['time_step']:.1f}")
                if _is_due(self.global_step, self.config.save_steps) or self.global_step == max_steps:
                    checkpoint.save_checkpoint(self)
        finally:
            bar.close()
        for worker in self.update_workers.values():
            worker.end_training()
        plot_learning_curve(self.metrics_path, self.run_dir / "learning_curve.png")
        return records

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, num_tasks: int = 50, split: str = "test") -> dict[str, float]:
        """Greedy play (one completion per step, temperature 0) on tasks ``0..num_tasks-1`` of ``split``."""
        from mas_trainer.atgrpo import play_episodes

        pool = EnvPool(self.config.env, self.config.env_make_kwargs(split), 1, 0)
        envs = pool.reset_tasks(range(num_tasks))
        episodes = play_episodes(
            envs,
            backends={p: w.backend for p, w in self.rollout_workers.items()},
            tokenizers={p: w.tokenizer for p, w in self.rollout_workers.items()},
            policy_of_role=self.policy_of_role,
            max_new_tokens=int(self.config.max_completion_length),
        )
        steps = [s for ep in episodes for s in ep.steps]
        return {
            "success_rate": _mean([float(ep.success) for ep in episodes]),
            "return_mean": _mean([ep.episode_return for ep in episodes]),
            "valid_action_rate": _mean([float(s.parse_error is None) for s in steps]),
            "episodes": float(len(episodes)),
        }


def _is_due(step: int, every: float | int | None) -> bool:
    return bool(every) and every >= 1 and step % int(every) == 0


def _append_jsonl(path: Path, record: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, default=_json_default) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


def _mean(values: list[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0

"""One policy's update: TRL's GRPO loss and optimizer step on env-scored, tree-sampled samples.

:class:`ATGRPOTrainer` subclasses :class:`trl.GRPOTrainer` for ONE policy. Its
``_generate_and_score_completions`` does not sample or score anything: it turns the samples routed
to this policy (already scored by the env and given group-relative advantages by
:mod:`mas_trainer.rollout.atgrpo`) into exactly the tensors TRL's loss reads (``prompt_ids``,
``prompt_mask``, ``completion_ids``, ``completion_mask``, ``advantages``, ``num_items_in_batch``
[+ ``old_per_token_logps`` / ``ref_per_token_logps``]). So TRL's ``compute_loss`` (loss types,
clipping, KL, entropy bonus, metrics), its optimizer and scheduler creation, its ``log`` and its
callbacks (TensorBoard etc.) are reused as they are. :meth:`ATGRPOTrainer.train_on_samples` is one
optimizer step: micro-batches -> TRL ``compute_loss`` -> backward (accumulated) -> grad clip ->
optimizer + scheduler step -> TRL logging/callbacks.

The update is strictly on-policy by default (``num_iterations=1``: the samples were drawn by the
current weights), so TRL's importance ratio is 1; with ``num_iterations > 1`` the log-probs of the
weights before the first pass are computed here (``old_per_token_logps``) from the batch itself.

One TRL method is replaced for speed: ``_get_per_token_logps_and_entropies`` (on devices without
Triton, i.e. CPU) scores only completion positions and encodes each group's shared prompt once
(:func:`mas_trainer.update.scoring.completion_logits`); the loss built on it is TRL's. Multi-GPU with
several trainers in one process is untested; ``bf16`` applies through ``accelerator.autocast``.
"""

from __future__ import annotations

import copy
import os
import warnings
from typing import Any

import torch
from datasets import Dataset
from transformers import PrinterCallback, ProgressCallback
from trl import GRPOTrainer
from trl.kernels.chunked_logprob import _use_triton
from trl.trainer.utils import pad, selective_log_softmax_and_entropy

from mas_trainer.rollout.samples import Sample
from mas_trainer.settings.config import ATGRPOConfig
from mas_trainer.update import scoring


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
        if args.model_init_kwargs is not None:
            # The model arrives loaded in its dtype (the backends read config.dtype_for); TRL would only warn
            # that it ignores model_init_kwargs for a model object.
            args = copy.copy(args)
            args.model_init_kwargs = None
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
        (see :func:`mas_trainer.update.scoring.completion_logits`). Triton
        devices, MoE aux losses and multimodal inputs keep TRL's path.
        """
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
        if is_due(self.state.global_step, self.args.logging_steps):
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
    :func:`mas_trainer.update.scoring.completion_logits`.
    """
    return scoring.completion_logits(model, input_ids, attention_mask, n, share_common_prefix=share_common_prefix)


def drop_zero_variance_groups(samples: list[Sample]) -> list[Sample]:
    """The samples of groups whose rewards differ (the others have zero advantage everywhere)."""
    rewards: dict[Any, list[float]] = {}
    for s in samples:
        rewards.setdefault(s.group, []).append(s.reward)
    informative = {g for g, r in rewards.items() if max(r) - min(r) > 1e-12}
    return [s for s in samples if s.group in informative]


def is_due(step: int, every: float | int | None) -> bool:
    """Whether an every-``every``-steps action (logging, saving) is due at ``step``; 0/None: never."""
    return bool(every) and every >= 1 and step % int(every) == 0


def _mean(values: list[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0

"""The ``lora`` policy mode: one frozen base model, one LoRA adapter per policy (the paper code's layout).

One base model is loaded once and wrapped in a :class:`peft.PeftModel` that holds one adapter per
policy, named after the policy. Policies are the roles when the workflow has several (``tool``,
``planner`` ...); a single-role workflow gets one adapter named ``shared`` (what a single policy is
called in every other mode, so evaluation and the leaderboard treat it like any shared run).

Who runs what:

* :class:`LoraPolicyTrainer` is the :class:`~mas_trainer.update.trainer.ATGRPOTrainer` of one adapter. It
  activates its adapter before building its optimizer (so the optimizer holds that adapter's
  parameters only; the base and the other adapters are frozen) and before every update.
* :class:`AdapterBackend` wraps a rollout backend and activates the policy's adapter before every
  ``generate``.
* TRL and the generation backends get the *inner* model (``peft_model.get_base_model()``): the base
  architecture with LoRA layers injected in place, whose ``forward`` runs base + active adapter. The
  prefix-shared sampler finds its modules there (``model.model.layers`` ...), and ``forward`` keeps
  the base class's signature, which :func:`~mas_trainer.update.trainer.completion_logits` inspects; the
  ``PeftModel`` wrapper is kept for adapter switching and saving.
* With ``beta > 0`` the KL reference is the base with every adapter switched off (no second model).

Checkpoints (see :mod:`mas_trainer.run.checkpoints`): ``policies/<policy>/adapter/`` holds each adapter
in peft's format (``adapter_config.json`` + ``adapter_model.safetensors``); the frozen base is written
once per run to ``RUN/base_model/`` (weights, tokenizer and a fingerprint checked on resume).
Evaluation merges each adapter into its own copy of the base (:func:`load_merged_policies`).

``peft`` is imported inside the functions that use it, so runs in the other policy modes never load it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import torch

from mas_trainer.policies.models import weights_fingerprint
from mas_trainer.policies.workers import RolloutWorker, UpdateWorker
from mas_trainer.update.trainer import ATGRPOTrainer

BASE_DIR = "base_model"
ADAPTER_DIR = "adapter"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
FINGERPRINT_FILE = "fingerprint.txt"


# ---------------------------------------------------------------------- building the adapters
def lora_config(config: Any) -> Any:
    """A fresh :class:`peft.LoraConfig` from the run's ``lora_*`` fields (peft mutates it, so one per adapter)."""
    from peft import LoraConfig

    targets = config.lora_target_modules
    return LoraConfig(
        r=int(config.lora_r),
        lora_alpha=float(config.lora_alpha),
        lora_dropout=float(config.lora_dropout),
        # "all-linear": every linear layer but the output head, whatever the architecture calls them.
        target_modules=list(targets) if targets else "all-linear",
        bias="none",
        task_type="CAUSAL_LM",
    )


def attach_adapters(base_model: Any, policies: list[str], config: Any) -> Any:
    """Wrap ``base_model`` in a ``PeftModel`` with one fresh adapter per policy (named after it).

    The base weights are frozen by peft. LoRA's B matrices start at zero, so every adapter starts
    as the base model itself; the random A matrices are drawn from ``config.seed``.
    """
    from peft import get_peft_model

    if not policies:
        raise ValueError("attach_adapters needs at least one policy name")
    with torch.random.fork_rng(devices=[]):  # reproducible A matrices; the caller's RNG is left alone
        torch.manual_seed(int(getattr(config, "seed", 0)))
        peft_model = get_peft_model(base_model, lora_config(config), adapter_name=policies[0])
        for name in policies[1:]:
            peft_model.add_adapter(name, lora_config(config))
    return peft_model


def adapter_parameters(peft_model: Any, adapter: str) -> dict[str, torch.nn.Parameter]:
    """The parameters of one adapter, by name (``...lora_A.<adapter>.weight`` ...)."""
    marker = f".{adapter}."
    return {n: p for n, p in peft_model.named_parameters() if "lora_" in n and marker in n}


def activate(peft_model: Any, adapter: str) -> None:
    """Make ``adapter`` the one applied by every LoRA layer and the only trainable one."""
    if peft_model.active_adapter != adapter:
        peft_model.set_adapter(adapter)


# ---------------------------------------------------------------------- generation and update
class AdapterBackend:
    """A generation backend that samples with one policy's adapter: activates it before each call."""

    def __init__(self, inner: Any, peft_model: Any, adapter: str):
        self.inner = inner
        self.peft_model = peft_model
        self.adapter = adapter

    def generate(self, prompts: list[list[int]], n: int, **kwargs: Any):
        activate(self.peft_model, self.adapter)
        return self.inner.generate(prompts, n, **kwargs)

    def sync_weights(self) -> None:
        self.inner.sync_weights()


class LoraPolicyTrainer(ATGRPOTrainer):
    """The TRL trainer of one adapter: its optimizer holds that adapter's parameters only.

    Every update (and every batch TRL asks for, which may compute log-probs with the model) first
    activates the adapter, so the loss runs base + this adapter and gradients reach only it.
    """

    def __init__(self, peft_model: Any, adapter: str, args: Any, processing_class: Any, **kwargs: Any):
        self.peft_model = peft_model
        self.adapter = adapter
        # Trainer builds its optimizer over the parameters that require grad: this adapter's only.
        activate(peft_model, adapter)
        if args.gradient_checkpointing:
            # Reentrant checkpointing (gradient_checkpointing_kwargs use_reentrant=True) needs block inputs
            # that require grad, which frozen embeddings do not give. TRL adds this hook only for a
            # PeftModel, and it is handed the inner model here. (Non-reentrant, the default, trains without.)
            peft_model.enable_input_require_grads()
        super().__init__(model=peft_model.get_base_model(), args=args,
                         processing_class=processing_class, policy_name=adapter, **kwargs)
        owned = {id(p) for group in self.optimizer.param_groups for p in group["params"]}
        expected = {id(p) for p in adapter_parameters(peft_model, adapter).values()}
        if owned != expected:
            raise RuntimeError(
                f"the optimizer of adapter {adapter!r} holds {len(owned)} tensors, expected exactly the "
                f"adapter's {len(expected)}; another adapter or the base would be trained"
            )

    def train_on_samples(self, samples, extra_logs=None):
        activate(self.peft_model, self.adapter)
        return super().train_on_samples(samples, extra_logs=extra_logs)

    def _generate_and_score_completions(self, inputs):
        activate(self.peft_model, self.adapter)
        return super()._generate_and_score_completions(inputs)

    def _kl_reference(self, model: Any) -> None:
        # No second model: the reference is the base itself, scored with every adapter switched off (every
        # adapter starts as the base); see reference_logps.
        return None

    def reference_logps(self, input_ids, attention_mask, logits_to_keep: int, batch_size: int):
        """The KL reference is the frozen base: the same model with every adapter switched off."""
        with self.peft_model.disable_adapter():
            logps, _, _ = self._get_per_token_logps_and_entropies(
                self.model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size
            )
        activate(self.peft_model, self.adapter)
        return logps


def build_lora_workers(
    config: Any, policies: list[str], base: tuple[Any, Any], run_dir: Path
) -> tuple[dict[str, UpdateWorker], dict[str, RolloutWorker], Any]:
    """Update and rollout workers of every policy over ONE base model; also returns the ``PeftModel``."""
    base_model, tokenizer = base
    peft_model = attach_adapters(base_model, policies, config)
    update_workers, rollout_workers = {}, {}
    for policy in policies:
        trainer = LoraPolicyTrainer(
            peft_model, policy, args=config, processing_class=tokenizer,
            logging_dir=run_dir / "tensorboard" / policy,
        )
        update_workers[policy] = UpdateWorker(policy, trainer)
        worker = RolloutWorker(policy, trainer.model, tokenizer, config.rollout_backend)
        worker.backend = AdapterBackend(worker.backend, peft_model, policy)
        rollout_workers[policy] = worker
    return update_workers, rollout_workers, peft_model


# ---------------------------------------------------------------------- checkpoints
def base_state_dict(peft_model: Any) -> dict[str, torch.Tensor]:
    """The frozen base weights under the base architecture's own names (adapters left out)."""
    state = {}
    for name, tensor in peft_model.get_base_model().state_dict().items():
        if "lora_" in name:
            continue
        state[name.replace(".base_layer.", ".")] = tensor
    return state


def base_fingerprint(peft_model: Any) -> str:
    """sha256 of the base weights; computed once per model (the base is frozen)."""
    class _StateOnly:  # weights_fingerprint reads .state_dict() only
        def state_dict(self):
            return base_state_dict(peft_model)

    cached = getattr(peft_model, "_frozen_base_fingerprint", None)
    if cached is None:
        cached = weights_fingerprint(_StateOnly())
        peft_model._frozen_base_fingerprint = cached
    return cached


def save_base_once(peft_model: Any, tokenizer: Any, run_dir: Path) -> Path:
    """Write the frozen base to ``RUN/base_model`` unless it is there already (atomic: temp folder + rename)."""
    final = Path(run_dir) / BASE_DIR
    if (final / FINGERPRINT_FILE).is_file():
        check_base(peft_model, run_dir)  # a new run in an old run's folder must not mix bases
        return final
    tmp = final.parent / f".tmp-{BASE_DIR}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    base = peft_model.get_base_model()
    base.save_pretrained(tmp, state_dict=base_state_dict(peft_model))
    tokenizer.save_pretrained(tmp)
    (tmp / FINGERPRINT_FILE).write_text(base_fingerprint(peft_model) + "\n")  # last: the "complete" marker
    if final.exists():  # a half folder from an older crash has no fingerprint
        shutil.rmtree(final)
    os.replace(tmp, final)
    return final


def check_base(peft_model: Any, run_dir: Path) -> None:
    """Refuse to resume adapters on a different base model than the one they were trained on."""
    saved = Path(run_dir) / BASE_DIR / FINGERPRINT_FILE
    if not saved.is_file():
        raise FileNotFoundError(f"lora run {run_dir} has no {BASE_DIR}/{FINGERPRINT_FILE}: its base model is unknown")
    if saved.read_text().strip() != base_fingerprint(peft_model):
        raise ValueError(
            f"the base model loaded for this run differs from the one its adapters were trained on "
            f"({saved.parent}); resume with the same --model"
        )


def save_adapter(peft_model: Any, adapter: str, folder: Path) -> None:
    """One adapter in peft's format (``PeftModel.from_pretrained(base, folder)`` loads it)."""
    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    weights = get_peft_model_state_dict(peft_model, adapter_name=adapter)
    save_file({k: v.detach().contiguous().cpu() for k, v in weights.items()}, str(folder / ADAPTER_WEIGHTS))
    peft_model.peft_config[adapter].save_pretrained(str(folder))


def load_adapter_into(peft_model: Any, adapter: str, folder: Path) -> None:
    """Copy saved adapter weights into the live adapter (in place: optimizers keep their tensors)."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    weights = load_file(str(folder / ADAPTER_WEIGHTS))
    live = len(adapter_parameters(peft_model, adapter))
    result = set_peft_model_state_dict(peft_model, weights, adapter_name=adapter)
    missing = [k for k in result.missing_keys if f".{adapter}." in k]
    if missing or len(weights) != live:
        raise ValueError(
            f"adapter {adapter!r} in {folder} does not match this run's adapter "
            f"({len(weights)} saved tensors, {live} live, missing {missing[:3]}); same lora_* settings?"
        )


def load_merged_policies(run_dir: Path, checkpoint: Path, policies: list[str], device: str = "cpu"):
    """``{policy: (model, tokenizer)}``: each adapter merged into its own copy of the run's base.

    Plain models come back, so evaluation code needs nothing LoRA-specific; the cost is one base copy
    per policy in memory (as in ``specialized`` mode).
    """
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base_dir = Path(run_dir) / BASE_DIR
    if not (base_dir / FINGERPRINT_FILE).is_file():
        raise FileNotFoundError(f"lora checkpoint {checkpoint} needs the run's base model in {base_dir}")
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    tokenizer.padding_side = "left"
    models = {}
    for policy in policies:
        base = AutoModelForCausalLM.from_pretrained(base_dir)
        adapter_dir = Path(checkpoint) / "policies" / policy / ADAPTER_DIR
        merged = PeftModel.from_pretrained(base, str(adapter_dir), adapter_name=policy).merge_and_unload()
        models[policy] = (merged.to(device).eval(), tokenizer)
    return models


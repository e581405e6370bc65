"""The AT-GRPO run: one step loop over every policy (:class:`MASTrainer`), used by ``mas-train``,
``baselines.compare``, the main job and both backends.

Decision: we drive the step loop ourselves instead of calling TRL's ``train()``, because ``train()``
drives one model while a step here is one rollout shared by all policies (in ``specialized`` mode one
model and one optimizer per role), followed by one on-policy update of EVERY policy on its own
samples. Per step:

1. the env pool resets ``envs_per_step`` envs (fresh seeds; :mod:`mas_trainer.rollout.env_pool`);
2. one rollout (tree sampling, or whole trajectories for the baseline) through the rollout workers
   of all policies; advantages per group (:func:`mas_trainer.rollout.atgrpo.assign_advantages`);
3. the router sends each sample to the update worker of its policy (:mod:`mas_trainer.rollout.routing`);
4. each update worker runs one optimizer step of TRL's loss (:mod:`mas_trainer.update.trainer`);
5. metrics line to ``metrics.jsonl``; a checkpoint every ``save_steps`` (:mod:`mas_trainer.run.checkpoints`).

The workers come from :mod:`mas_trainer.backends.local` (this process) or :mod:`mas_trainer.backends.ray`.
"""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from tqdm.auto import tqdm

from mas_trainer.backends.local import start_local_workers
from mas_trainer.backends.ray.launch import start_ray_workers
from mas_trainer.policies.workers import update_all
from mas_trainer.rollout.atgrpo import assign_advantages, start_episodes, trajectory_rollout, tree_advance, tree_rollout
from mas_trainer.rollout.env_pool import EnvPool
from mas_trainer.rollout.routing import Router
from mas_trainer.run import checkpoints
from mas_trainer.run.metrics import append_jsonl, plot_learning_curve, truncate_metrics
from mas_trainer.settings.config import ATGRPOConfig
from mas_trainer.settings.run_layout import LEARNING_CURVE, METRICS, latest_checkpoint
from mas_trainer.update.trainer import ATGRPOTrainer, is_due


class MASTrainer:
    """An AT-GRPO run over all policies: env pool, rollout/update workers, router, step loop, checkpoints.

    Programmatic use::

        config = ATGRPOConfig(output_dir="runs/pp", env="plan_path", policy_mode="specialized", max_steps=50)
        run = MASTrainer(config)          # loads config.model once per policy
        run.train()                       # or run.train(resume=True); or run.train_step() step by step

    Evaluate the trained run with :func:`mas_trainer.run.evaluate.evaluate` (``mas-eval --model RUN``).

    ``models`` may give ready ``(model, tokenizer)`` pairs per policy name (tests use tiny models); in
    ``lora`` mode one pair under ``"base"`` (the base model every adapter shares).
    """

    def __init__(self, config: ATGRPOConfig, models: dict[str, tuple[Any, Any]] | None = None):
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
        # The workers of every policy: in this process, or Ray actors behind driver-side stand-ins.
        self.step_branches = None  # None: branches are stepped in this process (atgrpo.step_clones)
        self.peft_model = None  # lora mode: the PeftModel holding the base and every adapter
        if config.backend == "ray":
            self.rollout_workers, self.update_workers, self.step_branches = start_ray_workers(
                config, self.policies, self.run_dir, models
            )
        else:
            self.rollout_workers, self.update_workers, self.peft_model = start_local_workers(
                config, self.policies, self.run_dir, models
            )
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
        return self.run_dir / METRICS

    # ------------------------------------------------------------------ one step
    def rollout(self, step: int):
        """The rollout of training step ``step`` (0-based), with advantages set on its samples."""
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
    def train(
        self,
        resume: bool = False,
        progress: bool = True,
        stop_when: Callable[[], bool] | None = None,
        on_step: Callable[[dict[str, Any]], None] | None = None,
    ) -> list[dict[str, Any]]:
        """Run until ``max_steps``; with ``resume`` continue from the latest checkpoint of the run dir.

        ``stop_when()`` is asked before every step and ends the run early when true (a time budget,
        :meth:`baselines.methods.Budget.stop_condition`); ``on_step(record)`` sees every step's metrics
        record. Every step is appended to ``metrics.jsonl``; a checkpoint is saved every ``save_steps``
        and at the end (also when ``stop_when`` ended the run); the learning curve is drawn last.
        """
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if resume:
            latest = latest_checkpoint(self.run_dir)
            if latest is not None:
                checkpoints.load_checkpoint(self, latest)
                for worker in self.rollout_workers.values():  # e.g. a vLLM engine holds its own copy
                    worker.sync_weights()
        truncate_metrics(self.metrics_path, self.global_step)
        records: list[dict[str, Any]] = []
        max_steps = int(self.config.max_steps)
        saved_at = None
        bar = tqdm(total=max_steps, initial=self.global_step, disable=not progress, desc="AT-GRPO", unit="step")
        try:
            while self.global_step < max_steps and not (stop_when is not None and stop_when()):
                record = self.train_step()
                records.append(record)
                append_jsonl(self.metrics_path, record)
                bar.update(1)
                bar.set_postfix(reward=f"{record['reward_mean']:.2f}", success=f"{record['success_rate']:.2f}",
                                zero_var=f"{record['zero_variance_share']:.2f}", step_s=f"{record['time_step']:.1f}")
                if on_step is not None:
                    on_step(record)
                if is_due(self.global_step, self.config.save_steps) or self.global_step == max_steps:
                    checkpoints.save_checkpoint(self)
                    saved_at = self.global_step
            if records and saved_at != self.global_step:  # stopped early: keep the final state too
                checkpoints.save_checkpoint(self)
        finally:
            bar.close()
        for worker in self.update_workers.values():
            worker.end_training()
        plot_learning_curve(self.metrics_path, self.run_dir / LEARNING_CURVE)
        return records


def _mean(values: list[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0

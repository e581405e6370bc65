"""The methods the paper compares, one runnable definition each.

==========================  ========  ==========================================================
name                        workflow  training
==========================  ========  ==========================================================
``single_prompt``           single    none (the base model, prompted)
``single_grpo``             single    GRPO with trajectory-level groups (K episodes per task)
``single_at_grpo``          single    tree sampling + turn-level groups with one agent (not in the
                                      paper: isolates tree sampling from the two-agent workflow)
``mas_prompt``              mas       none
``mas_naive_grpo``          mas       GRPO grouped by the initial prompt (= trajectory grouping in
                                      the mas workflow: one group mixes turns and roles; the
                                      "algorithmic mismatch" AT-GRPO fixes)
``mas_at_grpo_shared``      mas       AT-GRPO, one policy for all roles
``mas_at_grpo_specialized`` mas       AT-GRPO, one policy per role
==========================  ========  ==========================================================

``Method.run(env, ...)`` trains if the method needs it (in-process, through the trainer's Python API
:class:`mas_trainer.trainer.MASTrainer`, for a number of steps and/or minutes), then evaluates with
:func:`mas_trainer.evaluate.evaluate` (the code behind ``mas-eval``) and writes a results file.

Every method of one comparison is evaluated on identical envs: the env keyword arguments are settled
once (:func:`settle_env_kwargs`: the trainer's CPU preset, the caller's kwargs, and explicit
``max_turns`` and ``alpha``) and used for training and evaluation alike.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# ATGRPOConfig takes these as its own fields, not inside env_kwargs.
CONFIG_ENV_FIELDS = ("max_turns", "alpha")

# How one training step is sized for a CPU, per grouping (a caller's train_args override these).
# Turn-level groups let a tree-sampled step be ONE turn of 8 live episodes, so the policy is updated
# after every turn; trajectory groups need whole episodes, so their step plays K full episodes of 2
# tasks, about the same number of prompts per update as 8 tree-sampled turns.
#
# The loss settings every grouping shares, so the comparison differs only in grouping (measured in
# docs/PERFORMANCE.md, "Learning on this CPU"). Advantages are scaled by the batch's reward std, not each
# group's: with the group std, a 0.01 reward gap (a wrong word vs. no word) becomes as large an advantage as
# a right vs. a wrong move, and a small model learns "answer with one fixed word". A KL penalty to the
# untrained model (TRL's beta) keeps it from settling on one constant answer: without it a 30-CPU-minute run
# answered "right" in every state (0%); with beta=0.04, 30% after 25 CPU minutes.
SHARED_LOSS_SETTINGS: dict[str, Any] = {"scale_rewards": "batch", "beta": 0.04}
STEP_PRESETS: dict[str, dict[str, Any]] = {
    "at_grpo": {"turns_per_step": 1, "envs_per_step": 8, **SHARED_LOSS_SETTINGS},
    "trajectory": {"envs_per_step": 2, **SHARED_LOSS_SETTINGS},
}


@dataclass(frozen=True)
class Training:
    """How a method trains: ``mas-train --grouping G --policy P``."""

    grouping: str  # "at_grpo" | "trajectory"
    policy: str  # "shared" | "specialized"


@dataclass(frozen=True)
class Budget:
    """Training budget per run: ``steps``, ``minutes``, or both (whichever ends first).

    ``clock="wall"`` counts wall-clock minutes; ``clock="cpu"`` counts the CPU time of the training
    process and its sandbox children, which gives every method the same compute on a shared, noisy
    machine (on a quiet machine with one torch thread the two agree). With only ``minutes`` the
    learning-rate schedule is laid out for ``max_steps`` steps.
    """

    steps: int | None = None
    minutes: float | None = None
    max_steps: int = 1000
    clock: str = "wall"

    def __post_init__(self) -> None:
        if self.steps is None and self.minutes is None:
            raise ValueError("a training budget needs steps or minutes")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if self.minutes is not None and not self.minutes > 0:
            raise ValueError(f"minutes must be > 0, got {self.minutes}")
        if self.clock not in ("wall", "cpu"):
            raise ValueError(f"clock must be 'wall' or 'cpu', got {self.clock!r}")

    @property
    def step_cap(self) -> int:
        return int(self.steps if self.steps is not None else self.max_steps)

    def describe(self) -> str:
        parts = ([f"{self.steps} steps"] if self.steps is not None else []) + (
            [f"{self.minutes:g} {'CPU ' if self.clock == 'cpu' else ''}min"] if self.minutes is not None else [])
        return " / ".join(parts)

    def seconds_used(self) -> float:
        """The clock this budget is counted on, in seconds (compare two readings)."""
        if self.clock == "wall":
            return time.monotonic()
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system


@dataclass
class MethodOutcome:
    """What one ``Method.run`` produced."""

    method: str
    env: str
    results_path: Path
    results: dict[str, Any]
    run_dir: Path | None = None
    train_steps: int = 0
    train_seconds: float = 0.0
    eval_seconds: float = 0.0

    @property
    def success_rate(self) -> float:
        return float(self.results["summary"]["success_rate"])


@dataclass(frozen=True)
class Method:
    """One comparison method: its name (the results-file ``method``), table label, workflow, training."""

    name: str
    label: str
    workflow: str
    training: Training | None = None

    @property
    def trained(self) -> bool:
        return self.training is not None

    # ------------------------------------------------------------------ training
    def train(
        self,
        env: str,
        *,
        model: str,
        env_kwargs: dict[str, Any],
        budget: Budget,
        run_dir: Path,
        seed: int = 0,
        train_args: dict[str, Any] | None = None,
        progress: bool = True,
    ) -> tuple[Path, int, float]:
        """Train with the trainer's Python API; return ``(run_dir, steps done, seconds)``.

        ``env_kwargs`` are the settled env kwargs (``max_turns``/``alpha`` become config fields);
        ``train_args`` are further :class:`~mas_trainer.config.ATGRPOConfig` fields (K, lr ...).
        """
        if self.training is None:
            raise ValueError(f"method {self.name} does not train")
        from mas_trainer.config import ATGRPOConfig
        from mas_trainer.trainer import MASTrainer

        env_only = {k: v for k, v in env_kwargs.items() if k not in CONFIG_ENV_FIELDS}
        fields: dict[str, Any] = {k: env_kwargs[k] for k in CONFIG_ENV_FIELDS if k in env_kwargs}
        fields.update(
            output_dir=str(run_dir), env=env, workflow=self.workflow, model=model,
            policy_mode=self.training.policy, grouping=self.training.grouping, env_kwargs=env_only,
            max_steps=budget.step_cap, save_steps=min(10, budget.step_cap), seed=seed, report_to="none",
        )
        fields.update(STEP_PRESETS[self.training.grouping])
        fields.update(train_args or {})
        config = ATGRPOConfig(**fields)
        start = time.perf_counter()
        run = MASTrainer(config)
        try:
            if budget.minutes is None:
                run.train(progress=progress)
            else:
                _train_until(run, budget, progress)
            steps = run.global_step
        finally:
            del run
            gc.collect()
        return Path(run_dir), steps, time.perf_counter() - start

    # ------------------------------------------------------------------ the whole method
    def run(
        self,
        env: str,
        *,
        model: str,
        out_dir: str | Path,
        budget: Budget | None = None,
        episodes: int = 50,
        seed: int = 0,
        env_kwargs: dict[str, Any] | None = None,
        train_args: dict[str, Any] | None = None,
        max_new_tokens: int | None = None,
        progress: bool = True,
    ) -> MethodOutcome:
        """Train (if needed) and evaluate on ``env``; results go to ``out_dir/<env>/<name>/results.json``."""
        from mas_trainer.evaluate import EvalRequest, evaluate, write_results

        folder = Path(out_dir) / env / self.name
        settled = settle_env_kwargs(env, env_kwargs or {}, self.workflow)
        run_dir, steps, train_seconds = None, 0, 0.0
        if self.trained:
            if budget is None:
                raise ValueError(f"method {self.name} trains: give a budget (steps or minutes)")
            run_dir, steps, train_seconds = self.train(
                env, model=model, env_kwargs=settled, budget=budget, run_dir=folder / "run", seed=seed,
                train_args=train_args, progress=progress,
            )
        request = EvalRequest(
            env=env, model=str(run_dir) if run_dir is not None else model, workflow=self.workflow,
            episodes=episodes, seed=seed, env_kwargs=settled, method=self.name, max_new_tokens=max_new_tokens,
            command=f"baselines {self.name} --env {env} --model {model} --episodes {episodes} --seed {seed} "
                    f"--env-kwargs '{json.dumps(settled, sort_keys=True)}'"
                    + (f" --budget '{budget.describe()}'" if self.trained and budget else ""),
        )
        start = time.perf_counter()
        results = evaluate(request, progress=progress)
        eval_seconds = time.perf_counter() - start
        path = write_results(results, folder / "results.json")
        return MethodOutcome(self.name, env, path, results, run_dir, steps, train_seconds, eval_seconds)


def settle_env_kwargs(env: str, env_kwargs: dict[str, Any], workflow: str = "mas") -> dict[str, Any]:
    """The env kwargs every method of a comparison uses: CPU preset < caller, plus explicit ``max_turns``/``alpha``.

    ``max_turns`` and ``alpha`` are fixed explicitly (the env's own defaults unless given) because the
    trainer would otherwise impose its own defaults on the trained methods only, and every results file
    of a comparison should record the same kwargs.
    """
    from mas_envs import make_env
    from mas_trainer.evaluate import resolve_env_kwargs

    settled = resolve_env_kwargs(env, dict(env_kwargs), None)
    missing = [name for name in CONFIG_ENV_FIELDS if name not in settled]
    if missing:
        probe = make_env(env, workflow=workflow, **settled)
        for name in missing:
            settled[name] = getattr(probe.unwrapped, name)
        probe.close()
    return settled


def _train_until(run: Any, budget: Budget, progress: bool) -> None:
    """The trainer's step loop with a deadline on the budget's clock; the final state is checkpointed."""
    from mas_trainer import checkpoint
    from mas_trainer.plotting import plot_learning_curve

    deadline = budget.seconds_used() + 60.0 * float(budget.minutes or 0)
    run.run_dir.mkdir(parents=True, exist_ok=True)
    with open(run.metrics_path, "a", encoding="utf-8") as metrics:
        while run.global_step < budget.step_cap and budget.seconds_used() < deadline:
            record = run.train_step()
            metrics.write(json.dumps(record, default=str) + "\n")
            metrics.flush()
            if progress:
                left = max(0.0, deadline - budget.seconds_used())
                print(f"  step {record['step']}: reward {record['reward_mean']:.3f} success "
                      f"{record['success_rate']:.2f} parse errors {record['parse_error_rate']:.2f} "
                      f"zero-variance groups {record['zero_variance_share']:.2f} "
                      f"({record['time_step']:.1f} s; {left / 60:.1f} {budget.clock} min left)",
                      file=sys.stderr, flush=True)
            if run.config.save_steps and run.global_step % int(run.config.save_steps) == 0:
                checkpoint.save_checkpoint(run)  # nothing lost if the budgeted run is killed
    checkpoint.save_checkpoint(run)
    plot_learning_curve(run.metrics_path, run.run_dir / "learning_curve.png")


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("single_prompt", "Single agent", "single"),
        Method("single_grpo", "Single agent + GRPO", "single", Training("trajectory", "shared")),
        Method("single_at_grpo", "Single agent + tree-sampled GRPO", "single", Training("at_grpo", "shared")),
        Method("mas_prompt", "MAS (prompt only)", "mas"),
        Method("mas_naive_grpo", "MAS + GRPO (naive grouping)", "mas", Training("trajectory", "shared")),
        Method("mas_at_grpo_shared", "MAS + AT-GRPO (shared policy)", "mas", Training("at_grpo", "shared")),
        Method("mas_at_grpo_specialized", "MAS + AT-GRPO (per-role policies)", "mas",
               Training("at_grpo", "specialized")),
    )
}


def get_method(name: str) -> Method:
    if name not in METHODS:
        raise KeyError(f"unknown method {name!r}; choose from {', '.join(METHODS)}")
    return METHODS[name]


__all__ = ["Budget", "Method", "MethodOutcome", "Training", "METHODS", "STEP_PRESETS", "get_method",
           "settle_env_kwargs"]

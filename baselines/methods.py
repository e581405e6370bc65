"""The methods the paper compares, one runnable definition each (the table: :mod:`mas_trainer.settings.methods`).

``Method.run(env, ...)`` trains if the method needs it (in-process, through the trainer's Python API
:class:`mas_trainer.run.trainer.MASTrainer` and its one step loop, for a number of steps and/or minutes),
then evaluates with :func:`mas_trainer.run.evaluate.evaluate` (the code behind ``mas-eval``) and writes a
results file.

Every method of one comparison is evaluated on identical envs: the env keyword arguments are settled
once (:func:`mas_trainer.settings.envs.settle_env_kwargs`: the trainer's CPU preset, the caller's kwargs,
and explicit ``max_turns`` and ``alpha``) and used for training and evaluation alike.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from mas_trainer.run.evaluate import EvalRequest, evaluate, write_results
from mas_trainer.run.trainer import MASTrainer
from mas_trainer.settings.config import ATGRPOConfig
from mas_trainer.settings.envs import settle_env_kwargs, split_config_fields
from mas_trainer.settings.methods import METHOD_TABLE, MethodSpec

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

    def stop_condition(self) -> Callable[[], bool] | None:
        """For :meth:`MASTrainer.train`'s ``stop_when``: true once ``minutes`` have passed on this budget's
        clock, counted from now (``None`` without ``minutes``: the step count alone ends the run)."""
        if self.minutes is None:
            return None
        deadline = self.seconds_used() + 60.0 * float(self.minutes)
        return lambda: self.seconds_used() >= deadline

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
    """One comparison method: a row of :data:`mas_trainer.settings.methods.METHOD_TABLE`, made runnable."""

    spec: MethodSpec

    @property
    def name(self) -> str:  # the results-file ``method``
        return self.spec.name

    @property
    def label(self) -> str:
        return self.spec.label

    @property
    def workflow(self) -> str:
        return self.spec.workflow

    @property
    def training(self) -> Training | None:
        return Training(self.spec.grouping, self.spec.policy_mode) if self.spec.trained else None

    @property
    def trained(self) -> bool:
        return self.spec.trained

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
        ``train_args`` are further :class:`~mas_trainer.settings.config.ATGRPOConfig` fields (K, lr ...).
        """
        if self.training is None:
            raise ValueError(f"method {self.name} does not train")
        env_only, fields = split_config_fields(env_kwargs)
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
            stop_when = budget.stop_condition()
            if stop_when is None:
                run.train(progress=progress)
            else:  # one line per step (a bar cannot show a clock budget)
                run.train(progress=False, stop_when=stop_when,
                          on_step=_step_printer(budget) if progress else None)
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


def _step_printer(budget: Budget) -> Callable[[dict[str, Any]], None]:
    """``on_step`` for a budgeted run: one progress line per step, with the budget left."""
    started = budget.seconds_used()

    def show(record: dict[str, Any]) -> None:
        left = max(0.0, 60.0 * float(budget.minutes or 0) - (budget.seconds_used() - started))
        print(f"  step {record['step']}: reward {record['reward_mean']:.3f} success "
              f"{record['success_rate']:.2f} parse errors {record['parse_error_rate']:.2f} "
              f"zero-variance groups {record['zero_variance_share']:.2f} "
              f"({record['time_step']:.1f} s; {left / 60:.1f} {budget.clock} min left)",
              file=sys.stderr, flush=True)

    return show


METHODS: dict[str, Method] = {name: Method(spec) for name, spec in METHOD_TABLE.items()}


def get_method(name: str) -> Method:
    if name not in METHODS:
        raise KeyError(f"unknown method {name!r}; choose from {', '.join(METHODS)}")
    return METHODS[name]


__all__ = ["Budget", "Method", "MethodOutcome", "Training", "METHODS", "STEP_PRESETS", "get_method"]

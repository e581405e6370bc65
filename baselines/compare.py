"""Compare the paper's methods on a set of envs: train what needs training, evaluate, print the table.

    python -m baselines.compare --envs plan_path --methods single_prompt,mas_prompt,mas_at_grpo_shared \\
        --steps 200 --episodes 50 --out-dir results/compare

For every (env, method) pair it runs :meth:`baselines.methods.Method.run` (training within the budget:
``--steps`` and/or ``--minutes`` per training run), writes ``OUT/<env>/<method>/results.json`` (the
``mas-eval`` format) and finally prints the comparison in the paper's layout (methods x envs, greedy
success %) and writes it to ``OUT/comparison.md`` (and ``OUT/comparison.json``). ``--skip-existing``
reuses results files from an earlier, interrupted comparison.

CPU-sized reproduction (what runs on a 2-core machine)
------------------------------------------------------
Default model ``smollm2-135m`` (SmolLM2-135M-Instruct), the trainer's CPU preset (Plan-Path 4x4 with the
rich observation; ``--env-kwargs`` picks e.g. Sokoban/Sudoku presets), 8 envs x K=8 branches per step,
lr 1e-5, temperature 1.0, new tokens sized to the env's answer (Plan-Path 8 single / 48 mas, Sokoban 32 /
96, Sudoku 64 / 128), greedy evaluation on 50 held-out tasks.
An early feasibility probe (one policy, one-word answers, Plan-Path 4x4) did ~250 tree-sampled steps
in 20 minutes and went from 0% to 60% greedy success; mas-workflow steps are slower (the tool agent
writes up to 48 tokens of code). Measured here (2026-12-03, README "Results"): all seven methods on
Plan-Path with ``--minutes 15 --clock cpu --episodes 20`` took 96 minutes as two processes side by side
(one thread each); a MAS evaluation of 20 tasks alone takes ~14 minutes, and MAS + naive GRPO's first
step ~50 CPU minutes (budgets are checked between steps)::

    python -m baselines.compare --envs plan_path --minutes 15 --clock cpu --episodes 20

Sokoban and Sudoku (2026-12-04): six methods (all but naive grouping) with ``--minutes 5 --episodes 10``
took 37 and ~60 minutes, one process per env side by side; their prompts are longer, so pass
``--train-args '{"per_device_train_batch_size": 4}'`` (at 16, trajectory-level GRPO on Sudoku held
12.9 GB and was killed by the OOM killer)::

    python -m baselines.compare --envs sokoban --minutes 5 --clock cpu --episodes 10 \
        --methods single_prompt,single_grpo,single_at_grpo,mas_prompt,mas_at_grpo_shared,mas_at_grpo_specialized \
        --train-args '{"per_device_train_batch_size": 4}'

GPU-sized configuration matching the paper (not runnable here)
--------------------------------------------------------------
Models Qwen3-1.7B and Qwen3-8B (any Hugging Face id works as ``--model``); the paper's grids:
Plan-Path 10x10 (``{"preset": "10x10"}``), Sokoban 6x6 with one box, Sudoku 4x4; the paper-style bare
observation (``"observation_detail": "bare"`` where the env offers it). Settings as we read them in the
paper and its public configs: K = 8 samples per group, about 5 turns per episode, batch of 32 tasks per
step, lr 1e-5 (AdamW), PPO clip 0.2, no KL, 200 training steps, sampling temperature 1.0, greedy
evaluation, long completions (thinking off, up to ~2k tokens)::

    python -m baselines.compare --model Qwen/Qwen3-1.7B --envs plan_path,sokoban,sudoku --steps 200 \\
        --env-kwargs '{"plan_path": {"preset": "10x10", "observation_detail": "bare", "max_turns": 5},
                       "sokoban": {"max_turns": 5}, "sudoku": {"max_turns": 5}}' \\
        --train-args '{"num_generations": 8, "envs_per_step": 32, "learning_rate": 1e-5,
                       "max_completion_length": 2048}' --max-new-tokens 2048 --episodes 200

Paper numbers for orientation (Qwen3-1.7B, success %): Plan-Path single agent 5 -> MAS + AT-GRPO 96-97;
Sokoban 0 -> 10-11.5; Sudoku 7 -> 99.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from baselines.methods import METHODS, Budget, MethodOutcome
from mas_envs import list_envs
from mas_trainer.run.evaluate import EvalError, model_per_role, write_results
from mas_trainer.settings.role_maps import parse_json_object

PROG = "python -m baselines.compare"
ENV_TITLES = {"plan_path": "Plan-Path", "sokoban": "Sokoban", "sudoku": "Sudoku", "coder_tester": "Coding",
              "math_tool": "Math"}


class UsageError(Exception):
    """One-line message, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Train and evaluate the paper's methods; print the comparison table.")
    p.add_argument("--envs", default="plan_path", help="comma-separated env names (default: plan_path)")
    p.add_argument("--methods", default="all", help=f"comma-separated, or 'all': {', '.join(METHODS)}")
    p.add_argument("--model", default="smollm2-135m",
                   help="base model of every method (default: smollm2-135m), or one per role of the mas workflow, "
                        "'tool=qwen2.5-coder-0.5b,planner=smollm2-135m' (methods with a policy per role only)")
    p.add_argument("--steps", type=int, default=None, help="training steps per trained method")
    p.add_argument("--minutes", type=float, default=None, help="training minutes per trained method")
    p.add_argument("--clock", default="wall", choices=["wall", "cpu"],
                   help="what --minutes counts: wall-clock, or CPU time of the training process (fair on a "
                        "shared machine)")
    p.add_argument("--episodes", type=int, default=50, help="evaluation tasks per (env, method) (default: 50)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--env-kwargs", default=None,
                   help='JSON: {"env": {kwargs}} per env, or one {kwargs} object for every env')
    p.add_argument("--train-args", default=None, help="JSON object of extra ATGRPOConfig fields for training")
    p.add_argument("--max-new-tokens", type=int, default=None, help="evaluation tokens per action")
    p.add_argument("--out-dir", default="results/compare", help="output folder (default: results/compare)")
    p.add_argument("--skip-existing", action="store_true", help="reuse OUT/<env>/<method>/results.json if present")
    p.add_argument("--no-progress", action="store_true", help="no training progress bars")
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    args.env_list = [e.strip() for e in args.envs.split(",") if e.strip()]
    unknown = [e for e in args.env_list if e not in list_envs()]
    if not args.env_list or unknown:
        raise UsageError(f"unknown env(s) {unknown or args.envs!r}; available: {', '.join(list_envs())}")
    names = list(METHODS) if args.methods.strip() == "all" else [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [m for m in names if m not in METHODS]
    if not names or bad:
        raise UsageError(f"unknown method(s) {bad or args.methods!r}; choose from {', '.join(METHODS)} or 'all'")
    args.method_list = names
    if args.episodes < 1:
        raise UsageError(f"--episodes must be >= 1, got {args.episodes}")
    _check_models_per_role(args.model, names)
    needs_training = any(METHODS[m].trained for m in names)
    args.budget = None
    if needs_training:
        try:
            args.budget = Budget(steps=args.steps, minutes=args.minutes, clock=args.clock)
        except ValueError as err:
            raise UsageError(f"trained methods need --steps and/or --minutes ({err})") from None
    args.env_kwargs_by_env = _per_env_kwargs(_json_object(args.env_kwargs, "--env-kwargs"), args.env_list)
    args.train_args_dict = _json_object(args.train_args, "--train-args")
    return args


def _check_models_per_role(model: str, names: list[str]) -> None:
    """A ``role=model,...`` spec (parsed as ``mas-eval --model`` parses it) needs methods with a policy per role:
    the mas workflow, prompted or ``specialized``; a shared policy or a single agent takes one model."""
    try:
        per_role = model_per_role(model)
    except EvalError as err:
        raise UsageError(str(err)) from None
    if per_role is None:
        return
    per_role_layouts = (None, "specialized")
    one_model = [m for m in names if METHODS[m].workflow != "mas" or METHODS[m].spec.policy_mode not in per_role_layouts]
    if one_model:
        raise UsageError(f"--model {model!r} gives one model per role, but {', '.join(one_model)} "
                         "train(s) one policy for every role (or play a single agent): compare those with one --model")


def _json_object(text: str | None, flag: str) -> dict[str, Any]:
    try:
        return parse_json_object(text, flag)
    except ValueError as err:
        raise UsageError(str(err)) from None


def _per_env_kwargs(value: dict[str, Any], envs: list[str]) -> dict[str, dict[str, Any]]:
    """``{"env": {...}}`` keyed by env names, or one kwargs object applied to every env."""
    if value and all(k in envs or k in ENV_TITLES for k in value) and all(isinstance(v, dict) for v in value.values()):
        return {env: dict(value.get(env, {})) for env in envs}
    return {env: dict(value) for env in envs}


# --------------------------------------------------------------------------------------------------
# The table


def comparison_table(cells: dict[tuple[str, str], dict[str, Any] | None], methods: list[str], envs: list[str]) -> str:
    """Markdown table in the paper's layout: one row per method, one column per env, success %.

    ``cells[(method, env)]`` is a results object (or None for a failed / missing run).
    """
    header = "| Method | " + " | ".join(ENV_TITLES.get(e, e) for e in envs) + " |"
    lines = [header, "|" + "---|" * (len(envs) + 1)]
    for name in methods:
        row = [METHODS[name].label]
        for env in envs:
            result = cells.get((name, env))
            if result is None:
                row.append("—")
            else:
                s = result["summary"]
                lo, hi = s["ci95"]
                row.append(f"{100 * s['success_rate']:.1f} [{100 * lo:.0f}–{100 * hi:.0f}]")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _table_notes(cells: dict[tuple[str, str], dict[str, Any] | None], args: argparse.Namespace) -> str:
    any_result = next((r for r in cells.values() if r is not None), None)
    decoding = any_result["decoding"] if any_result else {}
    lines = [
        f"Greedy success % on {args.episodes} held-out test tasks per env (95% Wilson interval in brackets).",
        f"Base model: {args.model}. Training budget per trained method: "
        f"{args.budget.describe() if args.budget else 'none (prompt-only methods)'}. Seed {args.seed}.",
    ]
    if decoding:
        lines.append(f"Decoding: temperature {decoding.get('temperature')}, samples {decoding.get('samples')}.")
    for env in args.env_list:
        r = next((cells[(m, env)] for m in args.method_list if cells.get((m, env))), None)
        if r is not None:
            lines.append(f"{ENV_TITLES.get(env, env)}: kwargs {json.dumps(r['env']['kwargs'], sort_keys=True)}, "
                         f"eval set {r['env']['eval_set_fingerprint'][:12]}.")
    return "\n".join(f"- {line}" for line in lines)


# --------------------------------------------------------------------------------------------------
# The driver


def estimate_remaining(durations: dict[bool, list[float]], to_run: list[bool]) -> float:
    """Seconds left: each remaining job at the mean duration of jobs of its kind (trained or eval-only)
    run so far, or of any job while none of its kind has run. Reused results take no time and do not count."""
    every = durations[True] + durations[False]
    if not every:
        return 0.0
    overall = sum(every) / len(every)
    mean = {kind: (sum(d) / len(d) if d else overall) for kind, d in durations.items()}
    return sum(mean[kind] for kind in to_run)


def run_comparison(args: argparse.Namespace, out=sys.stdout) -> dict[tuple[str, str], dict[str, Any] | None]:
    """Run every (env, method) pair in order with a progress display; return the results by pair."""
    out_dir = Path(args.out_dir)
    jobs = [(env, name) for env in args.env_list for name in args.method_list]
    cells: dict[tuple[str, str], dict[str, Any] | None] = {}
    start = time.monotonic()
    durations: dict[bool, list[float]] = {True: [], False: []}  # seconds per job run, by "trained"
    for i, (env, name) in enumerate(jobs, 1):
        method = METHODS[name]
        existing = out_dir / env / name / "results.json"
        prefix = f"[{i}/{len(jobs)}] {env} · {method.label}"
        if args.skip_existing and existing.is_file():
            cells[(name, env)] = json.loads(existing.read_text())
            print(f"{prefix}: reused {existing}", file=out, flush=True)
            continue
        what = f"train {args.budget.describe()} + eval" if method.trained else "eval"
        print(f"{prefix}: {what} {args.episodes} episodes ...", file=out, flush=True)
        job_start = time.monotonic()
        try:
            outcome: MethodOutcome = method.run(
                env, model=args.model, out_dir=out_dir, budget=args.budget, episodes=args.episodes,
                seed=args.seed, env_kwargs=args.env_kwargs_by_env[env], train_args=args.train_args_dict,
                max_new_tokens=args.max_new_tokens, progress=not args.no_progress,
            )
        except (EvalError, ValueError, RuntimeError, OSError) as err:
            cells[(name, env)] = None
            text = str(err).strip()
            print(f"{prefix}: FAILED: {text.splitlines()[0] if text else repr(err)}", file=out, flush=True)
            continue
        cells[(name, env)] = outcome.results
        s = outcome.results["summary"]
        lo, hi = s["ci95"]
        elapsed = time.monotonic() - start
        job_seconds = time.monotonic() - job_start
        durations[method.trained].append(job_seconds)
        remaining = estimate_remaining(durations, [METHODS[n].trained for _, n in jobs[i:]])
        trained = f"trained {outcome.train_steps} steps in {outcome.train_seconds:.0f} s, " if method.trained else ""
        print(f"{prefix}: {100 * s['success_rate']:.1f}% [{100 * lo:.0f}–{100 * hi:.0f}] "
              f"({trained}eval {outcome.eval_seconds:.0f} s; job {job_seconds:.0f} s, "
              f"total {elapsed / 60:.1f} min, ~{remaining / 60:.1f} min left)", file=out, flush=True)
    return cells


def write_outputs(cells, args: argparse.Namespace) -> tuple[Path, Path, str]:
    """Write ``comparison.md`` and ``comparison.json``; return their paths and the table."""
    out_dir = Path(args.out_dir)
    table = comparison_table(cells, args.method_list, args.env_list)
    md_path = out_dir / "comparison.md"
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = md_path.with_suffix(".md.tmp")
    tmp.write_text(f"# Method comparison\n\n{table}\n\n{_table_notes(cells, args)}\n", encoding="utf-8")
    os.replace(tmp, md_path)
    index = {
        "model": args.model, "episodes": args.episodes, "seed": args.seed,
        "budget": args.budget.describe() if args.budget else None,
        "cells": [{"method": m, "env": e,
                   "results": str(out_dir / e / m / "results.json") if cells.get((m, e)) else None,
                   "success_rate": cells[(m, e)]["summary"]["success_rate"] if cells.get((m, e)) else None}
                  for e in args.env_list for m in args.method_list],
    }
    json_path = write_results(index, out_dir / "comparison.json")
    return md_path, json_path, table


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(list(sys.argv[1:] if argv is None else argv))
    except UsageError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    cells = run_comparison(args)
    md_path, _, table = write_outputs(cells, args)
    print()
    print(table)
    print(f"\ntable: {md_path}")
    return 0 if all(v is not None for v in cells.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

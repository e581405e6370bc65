"""Does training help, at a fixed wall-clock budget? AT-GRPO vs trajectory-level GRPO on Plan-Path.

For each method, a fresh copy of the model trains for ``--budget-minutes`` of wall-clock time; greedy
success on held-out test tasks (``split="test"``, tasks ``0..N-1``) is measured before (once: both
methods start from the same weights) and after. Also reported: rollout and update throughput and
where the time of a step goes (generation / env / update).

    .venv/bin/python bench/bench_learning.py                       # 20 minutes per method
    .venv/bin/python bench/bench_learning.py --budget-minutes 3 --eval-tasks 50

Metrics of each training run go to ``OUTPUT/<method>/metrics.jsonl`` (+ learning_curve.png).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

METHODS = {"at_grpo": "AT-GRPO (tree, per-turn groups)", "trajectory": "GRPO (trajectory groups)"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget-minutes", type=float, default=20.0, help="training wall-clock per method")
    p.add_argument("--eval-tasks", type=int, default=50, help="held-out test tasks for greedy evaluation")
    p.add_argument("--methods", default="at_grpo,trajectory", help="comma-separated: at_grpo, trajectory")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--preset", default="4x4", help="Plan-Path preset")
    p.add_argument("--workflow", default="single", help="single (one solver) or mas (tool + planner)")
    p.add_argument("--envs", type=int, default=8, help="envs per step")
    p.add_argument("--k", type=int, default=8, help="branches per group (num_generations)")
    p.add_argument("--max-new-tokens", type=int, default=4)
    p.add_argument("--max-turns", type=int, default=None, help="default: the env's (2 x grid size)")
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default="runs/bench_learning")
    return p.parse_args(argv)


def make_run(args, method: str):
    from mas_trainer.config import ATGRPOConfig
    from mas_trainer.trainer import MASTrainer

    config = ATGRPOConfig(
        output_dir=str(Path(args.output) / method),
        model=args.model,
        env="plan_path",
        env_kwargs={"preset": args.preset, "observation_detail": "rich"},
        workflow=args.workflow,
        grouping=method,
        envs_per_step=args.envs,
        num_generations=args.k,
        max_completion_length=args.max_new_tokens,
        max_turns=args.max_turns,
        learning_rate=args.lr,
        # a long nominal run so the LR schedule is ~constant within the budget
        max_steps=100_000,
        lr_scheduler_type="constant",
        save_steps=0,
        seed=args.seed,
    )
    return MASTrainer(config)


def train_for(run, seconds: float) -> list[dict]:
    from mas_trainer.trainer import _append_jsonl

    run.run_dir.mkdir(parents=True, exist_ok=True)
    if run.metrics_path.exists():
        run.metrics_path.unlink()
    records, start = [], time.perf_counter()
    while time.perf_counter() - start < seconds:
        record = run.train_step()
        records.append(record)
        _append_jsonl(run.metrics_path, record)
        print(f"  step {record['step']:4d}  reward {record['reward_mean']:+.2f}  success {record['success_rate']:.2f}  "
              f"zero-var {record['zero_variance_share']:.2f}  {record['time_step']:.1f}s", flush=True)
    return records


def summarize(records: list[dict]) -> dict[str, float]:
    gen = sum(r["time_generation"] for r in records)
    env = sum(r["time_env"] for r in records)
    upd = sum(r["time_update"] for r in records)
    total = sum(r["time_step"] for r in records) or 1.0
    gen_tokens = sum(r["rollout_tokens_per_s"] * r["time_generation"] for r in records)
    upd_tokens = sum(r["update_tokens_per_s"] * r["time_update"] for r in records)
    return {
        "steps": len(records),
        "step_s": total / max(len(records), 1),
        "rollout_tok_s": gen_tokens / gen if gen else 0.0,
        "update_tok_s": upd_tokens / upd if upd else 0.0,
        "gen_share": gen / total,
        "env_share": env / total,
        "update_share": upd / total,
        "train_success_last10": sum(r["success_rate"] for r in records[-10:]) / max(len(records[-10:]), 1),
    }


def main(argv=None) -> int:
    from mas_trainer.plotting import plot_learning_curve

    args = parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        print(f"bench_learning: unknown method(s) {unknown}; choose from {list(METHODS)}", file=sys.stderr)
        return 2
    print(f"Plan-Path {args.preset} ({args.workflow}), model {args.model}, {args.envs} envs x K={args.k}, "
          f"{args.max_new_tokens} new tokens, lr {args.lr}, {args.budget_minutes} min per method, "
          f"{args.eval_tasks} held-out tasks", flush=True)

    rows, before = [], None
    for method in methods:
        print(f"\n== {METHODS[method]}", flush=True)
        run = make_run(args, method)
        if before is None:  # both methods start from the same weights
            t0 = time.perf_counter()
            before = run.evaluate(num_tasks=args.eval_tasks)
            print(f"  before: {before}  ({time.perf_counter() - t0:.0f}s)", flush=True)
        records = train_for(run, args.budget_minutes * 60)
        after = run.evaluate(num_tasks=args.eval_tasks)
        print(f"  after:  {after}", flush=True)
        plot_learning_curve(run.metrics_path, run.run_dir / "learning_curve.png")
        rows.append({"method": method, "before": before, "after": after, **summarize(records)})
        del run

    header = (f"{'method':<12} {'steps':>5} {'s/step':>6} {'success before':>14} {'after':>6} {'valid before':>12} "
              f"{'after':>6} {'rollout tok/s':>13} {'update tok/s':>12} {'gen/env/update %':>17}")
    print("\n" + header + "\n" + "-" * len(header))
    for r in rows:
        split = f"{100 * r['gen_share']:.0f}/{100 * r['env_share']:.0f}/{100 * r['update_share']:.0f}"
        print(f"{r['method']:<12} {r['steps']:>5} {r['step_s']:>6.1f} {r['before']['success_rate']:>14.2f} "
              f"{r['after']['success_rate']:>6.2f} {r['before']['valid_action_rate']:>12.2f} "
              f"{r['after']['valid_action_rate']:>6.2f} {r['rollout_tok_s']:>13.0f} {r['update_tok_s']:>12.0f} "
              f"{split:>17}")
    out = Path(args.output) / "bench_learning.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=2))
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

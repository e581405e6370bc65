"""Does training help at a fixed budget? Tree-sampled AT-GRPO vs trajectory-level GRPO vs no training.

Runs three methods of :mod:`baselines.methods` on Plan-Path (the trainer's CPU preset: 4x4 grid, rich
observation, one solver agent) with the default model, through the same code as
``python -m baselines.compare``:

* ``single_prompt``  -- the untrained model (the "before" of both trained rows);
* ``single_at_grpo`` -- tree sampling, (episode, turn, agent) groups, one update per turn of 8 live episodes;
* ``single_grpo``    -- K whole trajectories per task, one group per task (the paper's GRPO baseline);

each trained method gets the same budget (``--minutes`` on ``--clock``: ``cpu`` counts the CPU time of
the training process, which keeps the comparison fair on a shared machine). All are evaluated greedily on
the same held-out test tasks. Then it reads each run's ``metrics.jsonl`` and prints where the time of a
step went (generation / env / update) and the rollout and update throughput.

    .venv/bin/python bench/bench_learning.py                                  # 20 CPU minutes per method
    .venv/bin/python bench/bench_learning.py --minutes 3 --episodes 20        # a quick look
    .venv/bin/python bench/bench_learning.py --skip-existing --out-dir DIR    # re-print from a finished run

Throughput columns: "rollout tok/s" counts generated completion tokens per second of generation;
"update tok/s" counts prompt + completion tokens of the samples updated per second of update (a
group's shared prompt is encoded once, so this is a per-sample rate, not the model's FLOP rate).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

METHODS = ["single_prompt", "single_at_grpo", "single_grpo"]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=20.0, help="training budget per trained method")
    p.add_argument("--clock", default="cpu", choices=["wall", "cpu"], help="what --minutes counts (default cpu)")
    p.add_argument("--episodes", type=int, default=50, help="held-out test tasks for greedy evaluation")
    p.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated subset of {METHODS}")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--train-args", default=None, help="JSON object of extra ATGRPOConfig fields")
    p.add_argument("--env-kwargs", default=None, help="JSON object of extra Plan-Path make_env arguments")
    p.add_argument("--out-dir", default="runs/bench_learning")
    p.add_argument("--skip-existing", action="store_true", help="reuse finished results in --out-dir")
    return p.parse_args(argv)


def step_profile(metrics_path: Path) -> dict[str, float]:
    """Time split and throughput of a training run, from its metrics.jsonl."""
    records = [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]
    if not records:
        return {}
    total = sum(r["time_step"] for r in records) or 1.0
    gen, env, upd = (sum(r[k] for r in records) for k in ("time_generation", "time_env", "time_update"))
    gen_tokens = sum(r["rollout_tokens_per_s"] * r["time_generation"] for r in records)
    upd_tokens = sum(r["update_tokens_per_s"] * r["time_update"] for r in records)
    return {
        "steps": len(records),
        "samples": sum(r["samples"] for r in records),
        "s_per_step": total / len(records),
        "rollout_tok_s": gen_tokens / gen if gen else 0.0,
        "update_tok_s": upd_tokens / upd if upd else 0.0,
        "gen_pct": 100 * gen / total,
        "env_pct": 100 * env / total,
        "update_pct": 100 * upd / total,
        "parse_errors_first": records[0]["parse_error_rate"],
        "parse_errors_last": records[-1]["parse_error_rate"],
    }


def main(argv=None) -> int:
    from baselines import compare

    args = parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not methods or any(m not in METHODS for m in methods):
        print(f"bench_learning: --methods must be a subset of {METHODS}", file=sys.stderr)
        return 2
    compare_argv = ["--envs", "plan_path", "--methods", ",".join(methods), "--model", args.model,
                    "--minutes", str(args.minutes), "--clock", args.clock, "--episodes", str(args.episodes),
                    "--out-dir", args.out_dir] + (["--skip-existing"] if args.skip_existing else []) + (
                    ["--train-args", args.train_args] if args.train_args else []) + (
                    ["--env-kwargs", args.env_kwargs] if args.env_kwargs else [])
    cargs = compare.parse_args(compare_argv)
    cells = compare.run_comparison(cargs)
    compare.write_outputs(cells, cargs)

    print(f"\nPlan-Path (CPU preset), {args.model}, {args.minutes:g} {args.clock} min per trained method, "
          f"greedy success on {args.episodes} held-out tasks\n")
    header = ("| method | success % [95% CI] | valid actions % | steps | samples | s/step | gen/env/update % "
              "| rollout tok/s | update tok/s | parse errors first→last step |")
    print(header)
    print("|---" * 10 + "|")
    for name in methods:
        result = cells.get((name, "plan_path"))
        if result is None:
            print(f"| {name} | failed | | | | | | | | |")
            continue
        s = result["summary"]
        lo, hi = s["ci95"]
        valid = _valid_action_pct(result)
        metrics = Path(args.out_dir) / "plan_path" / name / "run" / "metrics.jsonl"
        prof = step_profile(metrics) if metrics.is_file() else {}
        if prof:
            train = (f"{prof['steps']} | {prof['samples']} | {prof['s_per_step']:.1f} | "
                     f"{prof['gen_pct']:.0f}/{prof['env_pct']:.0f}/{prof['update_pct']:.0f} | "
                     f"{prof['rollout_tok_s']:.1f} | {prof['update_tok_s']:.0f} | "
                     f"{100 * prof['parse_errors_first']:.0f}% → {100 * prof['parse_errors_last']:.0f}%")
        else:
            train = "— | — | — | — | — | — | —"
        print(f"| {name} | {100 * s['success_rate']:.1f} [{100 * lo:.0f}–{100 * hi:.0f}] | {valid} | {train} |")
    return 0


def _valid_action_pct(result: dict) -> str:
    """Share of executed actions that parsed (no parse error), over every role of the evaluation."""
    rates = [role["parse_error_rate"] for role in result["summary"].get("per_role", {}).values()]
    return f"{100 * (1 - sum(rates) / len(rates)):.0f}" if rates else "—"


if __name__ == "__main__":
    sys.exit(main())

"""Peak memory and update time of the three policy modes, side by side, on the same fixed samples.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_lora.py [--model smollm2-135m] [--steps 3]

Every mode builds the ``MASTrainer`` of Plan-Path's ``mas`` workflow (roles tool and planner) and
updates every policy on one fixed batch of samples (real env prompts, fixed completions, spread
rewards; identical in every mode). Memory: a fresh subprocess per mode (build + one update), so
``ru_maxrss`` is that mode's own peak. Time: one more subprocess holds all modes and interleaves
their ``--steps`` updates (mode A, B, C, A, B, C ...), so a change in machine load hits every mode
alike; the first step of each is a warm-up, left out of the mean. Compare the columns as ratios.

* ``shared``: one model, one optimizer, all samples in one update.
* ``specialized``: one full model and optimizer per role.
* ``lora``: one frozen base, one LoRA adapter and optimizer per role (``--lora_r``, default 16).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

MODES = ("shared", "specialized", "lora")
COMPLETIONS = {"planner": ["up", "down", "left", "right"],
               "tool": ["print('up')", "print('down')", "x = 1", "print(2)"]}


def fixed_samples(tokenizer, policy_of_role, envs: int, k: int):
    """``envs`` x K samples per role: real Plan-Path prompts, fixed completions, rewards 0..K-1 per group."""
    from mas_envs import make_env
    from mas_trainer.rollout.atgrpo import assign_advantages
    from mas_trainer.rollout.prompts import chat_prompt_ids
    from mas_trainer.rollout.samples import Sample

    env = make_env("plan_path", preset="4x4", observation_detail="rich", workflow="mas")
    samples = []
    for episode in range(envs):
        env.reset(seed=1000 + episode)
        for role, texts in COMPLETIONS.items():
            prompt = chat_prompt_ids(tokenizer, env.observe(role)["prompt"])
            for i in range(k):
                completion = tokenizer(texts[i % len(texts)], add_special_tokens=False)["input_ids"]
                samples.append(Sample(prompt_ids=prompt, completion_ids=completion + [tokenizer.eos_token_id],
                                      reward=float(i), group=(episode, 0, role), role=role,
                                      policy=policy_of_role(role)))
    assign_advantages(samples)
    return samples


def build(mode: str, args):
    """The run of ``mode`` and its samples, routed to its policies."""
    from mas_trainer.settings.config import ATGRPOConfig
    from mas_trainer.run.trainer import MASTrainer

    config = ATGRPOConfig(
        output_dir=tempfile.mkdtemp(prefix=f"bench-lora-{mode}-"), env="plan_path", workflow="mas",
        model=args.model, policy_mode=mode, num_generations=args.k, per_device_train_batch_size=args.k * args.envs,
        learning_rate=1e-5, lora_r=args.lora_r, lora_alpha=2 * args.lora_r, report_to="none",
    )
    run = MASTrainer(config)
    tokenizer = run.rollout_workers[run.policies[0]].tokenizer
    return run, run.router.route(fixed_samples(tokenizer, run.policy_of_role, args.envs, args.k))


def update_all(run, routed) -> float:
    """One update of every policy; seconds taken."""
    begin = time.perf_counter()
    for policy in run.policies:
        run.update_workers[policy].update(routed[policy])
    return time.perf_counter() - begin


def measure_memory(mode: str, args) -> dict:
    """One mode alone in this process: build and one update, then the peak RSS."""
    run, routed = build(mode, args)
    update_all(run, routed)
    trained = {id(p): p.numel() for policy in run.policies
               for g in run.trainer_of(policy).optimizer.param_groups for p in g["params"]}
    return {
        "mode": mode,
        "policies": len(run.policies),
        "trained_parameters": sum(trained.values()),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "samples_per_step": sum(len(v) for v in routed.values()),
    }


def measure_times(modes: list[str], args) -> dict:
    """All modes in this process, their update steps interleaved (so load changes hit every mode alike)."""
    runs = {mode: build(mode, args) for mode in modes}
    seconds = {mode: [] for mode in modes}
    for _ in range(args.steps):
        for mode in modes:
            seconds[mode].append(update_all(*runs[mode]))
    return {mode: sum(s[1:] or s) / len(s[1:] or s) for mode, s in seconds.items()}  # first step: warm-up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--steps", type=int, default=3, help="update steps per mode (the first is a warm-up)")
    parser.add_argument("--envs", type=int, default=2, help="episodes (distinct prompts per role)")
    parser.add_argument("--k", type=int, default=4, help="samples per group")
    parser.add_argument("--lora_r", type=int, default=16)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--worker", choices=[*MODES, "times"], help=argparse.SUPPRESS)  # internal
    args = parser.parse_args()
    modes = args.modes.split(",")

    if args.worker:
        result = measure_times(modes, args) if args.worker == "times" else measure_memory(args.worker, args)
        print(json.dumps(result), flush=True)
        return

    def worker(kind: str):
        argv = [sys.executable, __file__, "--worker", kind, "--modes", args.modes, "--model", args.model,
                "--steps", str(args.steps), "--envs", str(args.envs), "--k", str(args.k), "--lora_r", str(args.lora_r)]
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0:
            raise SystemExit(f"{kind} failed:\n{proc.stderr[-3000:]}")
        print(f"measured {kind}", file=sys.stderr, flush=True)
        return json.loads(proc.stdout.strip().splitlines()[-1])

    rows = [worker(mode) for mode in modes]  # a fresh process per mode: its own peak memory
    times = worker("times")
    for row in rows:
        row["update_s_per_step"] = times[row["mode"]]
    ref = next((r for r in rows if r["mode"] == "specialized"), rows[0])
    print(f"model {args.model}, {rows[0]['samples_per_step']} samples/step, {args.steps} steps (first = warm-up)")
    print(f"{'mode':<12}{'policies':>9}{'trained params':>16}{'peak RSS MiB':>14}{'x spec':>8}"
          f"{'update s/step':>15}{'x spec':>8}")
    for r in rows:
        print(f"{r['mode']:<12}{r['policies']:>9}{r['trained_parameters']:>16,}{r['peak_rss_mib']:>14.0f}"
              f"{r['peak_rss_mib'] / ref['peak_rss_mib']:>8.2f}{r['update_s_per_step']:>15.2f}"
              f"{r['update_s_per_step'] / ref['update_s_per_step']:>8.2f}")


if __name__ == "__main__":
    main()

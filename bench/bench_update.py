"""Update-step throughput and memory, side by side: TRL's scoring vs prompt sharing vs common prefix.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_update.py [--groups 8] [--k 8] [--reps 2] \
        [--threads 1] [--workflow single] [--variants trl16,group16,common16,...]

Workload: one optimizer step (forward + backward + AdamW step, ``ATGRPOTrainer.train_on_samples``)
of the default model on an AT-GRPO batch: ``--groups`` real Plan-Path 4x4 prompts ("rich"
observation, one per env seed) x ``--k`` samples each, completions of 3-8 tokens, non-zero
advantages. Every variant runs in a FRESH child process (a warm-up step on one group, then one timed
step on the whole batch) so its peak resident memory (``ru_maxrss``) is its own; ``--reps`` rounds
interleave the variants and the table shows medians.

Variants (scoring of the log-probs inside TRL's loss; ``16`` / ``64`` = micro-batch size):

- ``trl*``: ``GRPOTrainer._get_per_token_logps_and_entropies`` (TRL's own path, every position);
- ``group*``: each distinct prompt encoded once per micro-batch (``share_common_prefix=False``);
- ``common*``: + the prefix common to all prompts of the micro-batch encoded once (default);
- ``*_bf16``: under ``torch.autocast("cpu", bfloat16)``;
- ``*_2pol``: two policies (specialized mode: one model + optimizer per role), each updated on
  half of the groups, for the memory of holding two.

"sample tok/s" counts every sample's unpadded prompt + completion tokens (the work a plain forward
does); "completion tok/s" counts the tokens that carry the loss.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

DESCRIPTIONS = {
    "trl16": "TRL scoring (every position), micro-batch 16",
    "group16": "per-group prompt sharing, micro-batch 16",
    "common16": "+ common prefix once, micro-batch 16",
    "group64": "per-group prompt sharing, micro-batch 64",
    "common64": "+ common prefix once, micro-batch 64",
    "common64_bf16": "common64 under bf16 autocast",
    "common16_2pol": "common16, two policies (half the groups each)",
}
DEFAULT_VARIANTS = ["trl16", "group16", "common16", "group64", "common64", "common16_2pol"]


def build_samples(tokenizer, groups: int, k: int, workflow: str, seed: int = 0):
    """``groups`` x ``k`` samples: real Plan-Path prompts, random 3-8-token completions, random advantages."""
    import torch

    from mas_envs import make_env
    from mas_trainer.rollout.prompts import chat_prompt_ids
    from mas_trainer.rollout.samples import Sample

    env = make_env("plan_path", preset="4x4", observation_detail="rich", workflow=workflow)
    gen = torch.Generator().manual_seed(seed)
    samples = []
    for group in range(groups):
        env.reset(seed=1000 + group)
        agent = env.agent_selection
        prompt = chat_prompt_ids(tokenizer, env.observe(agent)["prompt"])
        for _ in range(k):
            length = int(torch.randint(3, 9, (1,), generator=gen))
            completion = torch.randint(100, 20000, (length,), generator=gen).tolist()
            advantage = float(torch.randn((), generator=gen))
            samples.append(Sample(prompt, completion, advantage, (group, 0, agent), agent, "shared", advantage=advantage))
    return samples


def make_trainer(model, tokenizer, variant: str, output_dir: str):
    from trl import GRPOTrainer

    from mas_trainer.settings.config import ATGRPOConfig
    from mas_trainer.update.trainer import ATGRPOTrainer

    micro = 64 if "64" in variant else 16
    config = ATGRPOConfig(
        output_dir=output_dir, model="smollm2-135m", per_device_train_batch_size=micro,
        skip_zero_variance_groups=False, max_steps=10, save_steps=1000, report_to=[],
    )
    trainer = ATGRPOTrainer(model, config, tokenizer)
    if variant.startswith("trl"):
        trainer._get_per_token_logps_and_entropies = functools.partial(
            GRPOTrainer._get_per_token_logps_and_entropies, trainer
        )
    trainer.share_common_prefix = variant.startswith("common")
    return trainer


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def run_child(variant: str, args) -> dict:
    """One variant in this (fresh) process: warm-up step, one timed step, peak memory."""
    import contextlib
    import copy

    import torch

    from mas_trainer.policies.models import load_model_and_tokenizer

    torch.set_num_threads(args.threads)
    model, tokenizer = load_model_and_tokenizer(args.model)
    samples = build_samples(tokenizer, args.groups, args.k, args.workflow)
    policies = 2 if variant.endswith("_2pol") else 1
    models = [model] + [copy.deepcopy(model) for _ in range(policies - 1)]
    with tempfile.TemporaryDirectory() as tmp:
        trainers = [make_trainer(m, tokenizer, variant, f"{tmp}/{i}") for i, m in enumerate(models)]
        # Each policy updates on its own groups (specialized mode routes samples by role).
        shares = [samples[i * len(samples) // policies : (i + 1) * len(samples) // policies] for i in range(policies)]
        autocast = (
            functools.partial(torch.autocast, "cpu", dtype=torch.bfloat16)
            if variant.endswith("_bf16") else contextlib.nullcontext
        )
        for trainer, share in zip(trainers, shares):  # warm-up: first-call allocations, lazy imports
            with autocast():
                trainer.train_on_samples(share[: args.k])
        setup_rss = max_rss_mb()
        start = time.perf_counter()
        for trainer, share in zip(trainers, shares):
            with autocast():
                metrics = trainer.train_on_samples(share)
        seconds = time.perf_counter() - start
    return {
        "variant": variant,
        "seconds": seconds,
        "samples": len(samples),
        "sample_tokens": sum(len(s.prompt_ids) + len(s.completion_ids) for s in samples),
        "completion_tokens": sum(len(s.completion_ids) for s in samples),
        "loss": metrics["loss"],
        "setup_rss_mb": setup_rss,
        "peak_rss_mb": max_rss_mb(),
    }


def prompt_stats(args) -> str:
    from mas_trainer.policies.models import load_model_and_tokenizer
    from mas_trainer.update.scoring import common_prefix_length

    _, tokenizer = load_model_and_tokenizer(args.model)
    prompts = {tuple(s.prompt_ids) for s in build_samples(tokenizer, args.groups, args.k, args.workflow)}
    lengths = sorted(len(p) for p in prompts)
    common = common_prefix_length([list(p) for p in prompts])
    return f"{len(prompts)} distinct prompts of {lengths[0]}-{lengths[-1]} tokens, common prefix {common} tokens"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--workflow", default="single", choices=["single", "mas"])
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS), help=f"any of {list(DESCRIPTIONS)}")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(run_child(args.child, args)), flush=True)
        return
    variants = args.variants.split(",")
    unknown = set(variants) - set(DESCRIPTIONS)
    if unknown:
        parser.error(f"unknown variants {sorted(unknown)}; known: {list(DESCRIPTIONS)}")

    load_before = os.getloadavg()
    print(f"workload: {args.groups} groups x K={args.k}, workflow {args.workflow}: {prompt_stats(args)}", flush=True)
    child_args = [f"--{key}={getattr(args, key)}" for key in ("model", "groups", "k", "workflow", "threads")]
    results: dict[str, list[dict]] = {v: [] for v in variants}
    for rep in range(args.reps):  # interleaved: every variant once per round, each in a fresh process
        for v in variants:
            out = subprocess.run(
                [sys.executable, __file__, f"--child={v}", *child_args], capture_output=True, text=True, cwd=ROOT
            )
            line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
            if line is None:
                sys.exit(f"variant {v} failed:\n{out.stderr[-3000:]}")
            results[v].append(json.loads(line[len("RESULT ") :]))
            print(f"  round {rep + 1}: {v} {results[v][-1]['seconds']:.1f} s", flush=True)

    header = (f"| {'variant':<14} | {'what':<46} | {'s (median)':>10} | {'samples/s':>9} | {'sample tok/s':>12} |"
              f" {'compl. tok/s':>12} | {'vs trl16':>8} | {'RSS setup MB':>12} | {'peak RSS MB':>11} |")
    print()
    print(header)
    print("|" + "|".join("-" * len(c) for c in header.split("|")[1:-1]) + "|")
    base = statistics.median(r["seconds"] for r in results["trl16"]) if "trl16" in results else None
    for v in variants:
        rows = results[v]
        seconds = statistics.median(r["seconds"] for r in rows)
        first = rows[0]
        ratio = f"{base / seconds:.2f}x" if base else "n/a"
        print(f"| {v:<14} | {DESCRIPTIONS[v]:<46} | {seconds:>10.1f} | {first['samples'] / seconds:>9.2f} |"
              f" {first['sample_tokens'] / seconds:>12.0f} | {first['completion_tokens'] / seconds:>12.1f} |"
              f" {ratio:>8} | {max(r['setup_rss_mb'] for r in rows):>12.0f} | {max(r['peak_rss_mb'] for r in rows):>11.0f} |")
    print("\nper-round seconds: " + "; ".join(f"{v} " + "/".join(f"{r['seconds']:.1f}" for r in results[v]) for v in variants))
    print(f"load average before: {' '.join(f'{x:.2f}' for x in load_before)};"
          f" after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; reps {args.reps}; threads {args.threads}")


if __name__ == "__main__":
    main()

"""Rollout turn throughput with the common-prefix cache of PrefixSharedBackend, side by side.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_prompt_cache.py [--envs 8] [--k 8] [--new-tokens 8] \
        [--reps 3] [--threads 1] [--workflow single]

Workload: one training turn: ``--envs`` real Plan-Path 4x4 prompts ("rich" observation, new env
seeds every round) x ``--k`` branches x ``--new-tokens`` new tokens, temperature 1, log-probs on.
Variants (every one once per round, same prompts within a round; medians):

- ``cascade``: PrefixSharedBackend without the common prefix (``reuse_prefix=False``): one
  prefill per distinct prompt, shared-KV decoding (the backend before this change);
- ``prefix_cold``: common prefix encoded once per call, nothing kept from an earlier call
  (``sync_weights()`` before the call: the first turn after an optimizer step);
- ``prefix_warm``: the common prefix is already kept from the previous call (later turns of the
  same step, weights unchanged).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import torch  # noqa: E402

from mas_envs import make_env  # noqa: E402
from mas_trainer.rollout.prompts import chat_prompt_ids  # noqa: E402
from mas_trainer.policies.models import load_model_and_tokenizer  # noqa: E402
from mas_trainer.policies.prefix_sharing import PrefixSharedBackend  # noqa: E402
from mas_trainer.update.scoring import common_prefix_length  # noqa: E402

DESCRIPTIONS = {
    "cascade": "1 prefill per prompt, shared KV (before)",
    "prefix_cold": "+ common prefix once per call (cache cold)",
    "prefix_warm": "+ common prefix kept from the previous call",
}


def plan_path_prompts(tokenizer, envs: int, first_seed: int, workflow: str) -> list[list[int]]:
    env = make_env("plan_path", preset="4x4", observation_detail="rich", workflow=workflow)
    prompts = []
    for seed in range(first_seed, first_seed + envs):
        env.reset(seed=seed)
        prompts.append(chat_prompt_ids(tokenizer, env.observe(env.agent_selection)["prompt"]))
    return prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=8)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--workflow", default="single", choices=["single", "mas"])
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    model, tokenizer = load_model_and_tokenizer(args.model)
    model.eval()
    backends = {
        "cascade": PrefixSharedBackend(model, tokenizer, reuse_prefix=False),
        "prefix_cold": PrefixSharedBackend(model, tokenizer),
        "prefix_warm": PrefixSharedBackend(model, tokenizer),
    }
    sample = plan_path_prompts(tokenizer, args.envs, 0, args.workflow)
    print(f"workload: {args.envs} Plan-Path prompts ({min(map(len, sample))}-{max(map(len, sample))} tokens,"
          f" common prefix {common_prefix_length(sample)}) x K={args.k} x {args.new_tokens} new;"
          f" torch threads {torch.get_num_threads()}", flush=True)
    generate = dict(max_new_tokens=args.new_tokens, temperature=1.0, return_logprobs=True)
    backends["prefix_warm"].generate(sample, 1, max_new_tokens=1)  # fills the kept prefix

    times: dict[str, list[float]] = {v: [] for v in backends}
    tokens: dict[str, list[int]] = {v: [] for v in backends}
    for rep in range(args.reps):
        prompts = plan_path_prompts(tokenizer, args.envs, 100 * (rep + 1), args.workflow)  # new tasks each round
        for name, backend in backends.items():
            if name == "prefix_cold":
                backend.sync_weights()  # as after an optimizer step
            start = time.perf_counter()
            out = backend.generate(prompts, args.k, seed=rep, **generate)
            times[name].append(time.perf_counter() - start)
            tokens[name].append(sum(len(c.token_ids) for group in out for c in group))
        print(f"  round {rep + 1}: " + ", ".join(f"{v} {times[v][-1]:.2f}s" for v in backends), flush=True)

    header = f"| {'variant':<12} | {'what':<44} | {'s (median)':>10} | {'gen tok/s':>9} | {'vs cascade':>10} |"
    print()
    print(header)
    print("|" + "|".join("-" * len(c) for c in header.split("|")[1:-1]) + "|")
    base = statistics.median(times["cascade"])
    for name in backends:
        seconds = statistics.median(times[name])
        rate = statistics.median(tokens[name]) / seconds
        print(f"| {name:<12} | {DESCRIPTIONS[name]:<44} | {seconds:>10.2f} | {rate:>9.1f} | {base / seconds:>9.2f}x |")
    print("\nper-round seconds: " + "; ".join(f"{v} " + "/".join(f"{t:.2f}" for t in times[v]) for v in backends))
    print(f"load average before: {' '.join(f'{x:.2f}' for x in load_before)};"
          f" after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; reps {args.reps}; cores {os.cpu_count()}")


if __name__ == "__main__":
    main()

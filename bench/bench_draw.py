"""The sampler's draw, side by side: one decode step's token choice and log-probs over a real vocabulary size.

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_draw.py [--rows 64] [--vocab 151936] [--reps 15]

Three ways to turn a (rows x vocab) block of logits into one sampled token per row plus its log-prob under
``softmax(logits / T)``, all on the same logits in one process:

- ``multinomial``: ``log_softmax(logits / T)``, ``exp``, ``torch.multinomial`` (what the sampler did first);
- ``full_cdf``: ``log_softmax``, ``exp``, one float64 running sum over the whole vocabulary and a search
  (the sampler's previous draw);
- ``two_level`` (today's ``prefix_sharing._sample``): ``exp((logits - max) / T)`` in the logits' own buffer,
  then a block found from the blocks' masses and the token from the running sum inside that block.

Rows = envs x K of a tree-sampling call (64 = 8 prompts x K=8); vocab 151,936 is Qwen2.5's. The table shows
the median time per call and the ratio to ``multinomial``; the last column checks that the log-probs of the
drawn tokens agree with ``log_softmax`` (max absolute difference).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from mas_trainer.policies.prefix_sharing import _sample  # noqa: E402


def multinomial(logits, temperature, generator):
    log_probs = (logits / temperature).log_softmax(-1)
    chosen = torch.multinomial(log_probs.exp(), 1, generator=generator)[:, 0]
    return chosen, log_probs.gather(1, chosen[:, None])[:, 0]


def full_cdf(logits, temperature, generator):
    log_probs = (logits / temperature).log_softmax(-1)
    cdf = log_probs.exp().cumsum(-1, dtype=torch.float64)
    u = torch.rand(cdf.size(0), 1, generator=generator, dtype=torch.float64) * cdf[:, -1:]
    chosen = torch.searchsorted(cdf, u, right=True)[:, 0].clamp_(max=cdf.size(1) - 1)
    return chosen, log_probs.gather(1, chosen[:, None])[:, 0]


def two_level(logits, temperature, generator):
    return _sample(logits, temperature, 1.0, True, generator)  # overwrites its input: given a copy (below)


VARIANTS = {"multinomial": multinomial, "full_cdf": full_cdf, "two_level": two_level}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=151936)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--temperature", type=float, default=1.0)
    args = parser.parse_args()
    logits = torch.randn(args.rows, args.vocab, generator=torch.Generator().manual_seed(0)) * 4
    reference = (logits / args.temperature).log_softmax(-1)
    times = {name: [] for name in VARIANTS}
    error = {}
    for rep in range(args.reps + 1):  # interleaved rounds; round 0 warms up
        for name, fn in VARIANTS.items():
            generator = torch.Generator().manual_seed(rep)
            given = logits.clone() if name == "two_level" else logits  # in the sampler, the step's own buffer
            began = time.perf_counter()
            chosen, logprobs = fn(given, args.temperature, generator)
            elapsed = time.perf_counter() - began
            if rep:
                times[name].append(elapsed)
            error[name] = max(error.get(name, 0.0),
                              float((logprobs - reference.gather(1, chosen[:, None])[:, 0]).abs().max()))
    print(f"workload: {args.rows} rows x {args.vocab} vocab, T={args.temperature}, {args.reps} rounds, "
          f"{torch.get_num_threads()} thread(s)")
    base = statistics.median(times["multinomial"])
    print("\n| variant | ms per call (median) | vs multinomial | max abs log-prob error |")
    print("|---|---:|---:|---:|")
    for name in VARIANTS:
        ms = statistics.median(times[name]) * 1e3
        print(f"| {name} | {ms:.1f} | {base * 1e3 / ms:.2f}x | {error[name]:.1e} |")


if __name__ == "__main__":
    main()

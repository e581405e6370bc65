"""Measure model preparation and sampling speed.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_generation.py [--model smollm2-135m] [--fresh]

Prints: GGUF conversion time (``--fresh`` converts into a throwaway cache), cached load time,
tiny-model build time, and sampling throughput of HFBackend for P prompts x n samples x T tokens
(default 8 x 8 x 32, temperature 1, with log-probs, as a rollout would ask).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from mas_trainer.policies.generation import HFBackend  # noqa: E402
from mas_trainer.rollout.prompts import chat_prompt_ids
from mas_trainer.policies.models import load_model_and_tokenizer, resolve_model, tiny_model_and_tokenizer  # noqa: E402

PAIRS = [(2, 3), (17, 25), (8, 9), (40, 2), (13, 13), (7, 35), (61, 4), (5, 88)]
QUESTIONS = [f"What is {a}+{b}? Answer with the number only." for a, b in PAIRS]


def _timed(label: str, fn):
    start = time.perf_counter()
    result = fn()
    print(f"{label}: {time.perf_counter() - start:.2f} s", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--fresh", action="store_true", help="time the GGUF conversion in a throwaway cache")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()

    import transformers  # noqa: F401  (imports are slow here; keep them out of the load timing)
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM  # noqa: F401

    if args.fresh:
        os.environ["STRONGER_MAS_CACHE"] = tempfile.mkdtemp(prefix="bench-cache-")
        _timed("GGUF conversion (first use)", lambda: resolve_model(args.model))
    else:
        _timed("resolve (converts only if not cached)", lambda: resolve_model(args.model))
    model, tokenizer = _timed("cached load", lambda: load_model_and_tokenizer(args.model))
    _timed("tiny model build", lambda: tiny_model_and_tokenizer(seed=0))

    backend = HFBackend(model, tokenizer)
    prompts = [chat_prompt_ids(tokenizer, q) for q in (QUESTIONS * args.prompts)[: args.prompts]]
    greedy = backend.generate(prompts[:1], 1, max_new_tokens=24, temperature=0)[0][0]
    print(f"greedy answer to {QUESTIONS[0]!r}: {greedy.text!r}")

    start = time.perf_counter()
    out = backend.generate(prompts, args.n, max_new_tokens=args.tokens, temperature=1.0, return_logprobs=True, seed=0)
    seconds = time.perf_counter() - start
    tokens = sum(len(c.token_ids) for group in out for c in group)
    print(
        f"sampling {args.prompts} prompts x n={args.n} x {args.tokens} tokens: {tokens} tokens in "
        f"{seconds:.1f} s = {tokens / seconds:.0f} tok/s ({args.prompts * args.n} sequences in one batch)"
    )


if __name__ == "__main__":
    main()

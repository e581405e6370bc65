"""Tree-sampling throughput, side by side: plain ``generate``, HFBackend, PrefixSharedBackend.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_sampling.py [--model smollm2-135m] [--envs 8] [--k 8] \
        [--new-tokens 32] [--reps 3] [--threads 1] [--warmup] [--prompts grid|plan_path|coder_tester] \
        [--variants hf_plain,hf_backend,...]

Workload: ``--envs`` distinct chat prompts, ``--k`` branches each, ``--new-tokens`` new tokens,
temperature 1, top-p 1 (backends also return log-probs, as a rollout asks). Prompts (``--prompts``):

- ``grid`` (default): synthetic grid-game observations of ~150 tokens (SmolLM2 tokenizer);
- ``plan_path`` / ``coder_tester``: the real prompt of the acting role at the first turn (Plan-Path
  4x4 ``tool`` / coder_tester ``coder``) of the first ``--envs`` tasks of the validation split, mas
  workflow, with the env's CPU preset (``mas_trainer.settings.envs``), i.e. what the trainer samples from.

``--reps`` interleaved rounds (every variant once per round, after an optional warm-up round); the
table shows medians. Generated tokens = completion tokens returned (cut after EOS).

"% ceil" = 2 x forward parameters x generated tokens/s over a matmul rate measured in the same run:
a decode-shaped fp32 matmul ((envs*K) x hidden @ hidden x intermediate, the loaded model's MLP
shape) and a large square fp32 one. Forward parameters = all parameters except an untied input
embedding table (a lookup, no FLOPs); a tied one is counted once, as the LM head.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import torch  # noqa: E402

from mas_trainer.policies.generation import HFBackend  # noqa: E402
from mas_trainer.rollout.prompts import chat_prompt_ids  # noqa: E402
from mas_trainer.policies.models import load_model_and_tokenizer  # noqa: E402
from mas_trainer.policies.prefix_sharing import PrefixSharedBackend  # noqa: E402

ALL_VARIANTS = [
    "hf_plain", "hf_backend", "none", "expand", "cascade", "cascade_1thread", "cascade_2threads", "cascade_bf16"
]
DEFAULT_VARIANTS = ["hf_plain", "hf_backend", "none", "expand", "cascade", "cascade_bf16"]
DESCRIPTIONS = {
    "hf_plain": "transformers generate(num_return_sequences=K)",
    "hf_backend": "HFBackend (generate, K copies, logprobs)",
    "none": "PrefixShared, K prefills (own decode loop only)",
    "expand": "PrefixShared, 1 prefill, KV copied K times",
    "cascade": "PrefixShared, 1 prefill, shared KV (default)",
    "cascade_1thread": "cascade with torch.set_num_threads(1)",
    "cascade_2threads": "cascade with torch.set_num_threads(2)",
    "cascade_bf16": "cascade, bf16 weights",
}


def grid_prompt(index: int) -> str:
    """A ~150-token observation of a grid game (different per env)."""
    size = 6
    rows = []
    for r in range(size):
        rows.append(" ".join("#" if (r * 7 + c * 3 + index) % 5 == 0 else "." for c in range(size)))
    agent, goal = (index % size, (index * 2) % size), ((index + 3) % size, (index + 4) % size)
    return (
        "You move an agent on a grid to reach the goal. Walls are '#', free cells are '.'.\n"
        + "\n".join(rows)
        + f"\nYou are at row {agent[0]}, column {agent[1]}. The goal is at row {goal[0]}, column {goal[1]}."
        " Think about which neighbouring cells are free, explain your reasoning in one or two sentences,"
        " then answer with one word: up, down, left or right."
    )


PROMPT_SOURCES = ("grid", "plan_path", "coder_tester")


def env_prompts(env_name: str, count: int) -> list[str]:
    """The acting role's first-turn prompt of the first ``count`` validation tasks of ``env_name`` (mas workflow)."""
    from mas_envs import make_env
    from mas_trainer.settings.envs import preset_env_kwargs

    env = make_env(env_name, workflow="mas", split="validation", **preset_env_kwargs(env_name))
    prompts = []
    for index in range(count):
        env.reset(options={"task_index": index})
        prompts.append(env.observe(env.agent_selection)["prompt"])
    env.close()
    return prompts


def prompt_texts(source: str, count: int) -> list[str]:
    if source == "grid":
        return [grid_prompt(i) for i in range(count)]
    if source in PROMPT_SOURCES:
        return env_prompts(source, count)
    raise ValueError(f"unknown prompt source {source!r}; choose one of {PROMPT_SOURCES}")


def forward_params(model) -> int:
    """Parameters the forward multiplies with: all but an untied input embedding (tied: counted once)."""
    total = sum(p.numel() for p in model.parameters())  # shared tensors are listed once
    embed, head = model.get_input_embeddings(), model.get_output_embeddings()
    if embed is not None and (head is None or head.weight is not embed.weight):
        total -= embed.weight.numel()
    return total


def matmul_rate(m: int, k: int, n: int, dtype=torch.float32, seconds: float = 1.0) -> float:
    """Sustained FLOP/s of an (m x k) @ (k x n) matmul."""
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    a @ b
    count, start = 0, time.perf_counter()
    while count == 0 or time.perf_counter() - start < seconds:  # at least one timed product
        a @ b
        count += 1
    return 2 * m * k * n * count / (time.perf_counter() - start)


def completion_length(row: list[int], eos: list[int]) -> int:
    stop = next((i for i, t in enumerate(row) if t in eos), None)
    return len(row) if stop is None else stop + 1


def make_runner(name, model, bf16_model, tokenizer, prompts, k, new_tokens):
    """A zero-argument function that samples the workload once and returns generated tokens."""
    eos = HFBackend(model, tokenizer).eos_token_ids
    if name == "hf_plain":
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, p in enumerate(prompts):
            ids[row, width - len(p) :] = torch.tensor(p)
            mask[row, width - len(p) :] = 1

        def run():
            with torch.no_grad():
                out = model.generate(
                    input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                    num_return_sequences=k, max_new_tokens=new_tokens, pad_token_id=tokenizer.pad_token_id,
                )
            return sum(completion_length(r, eos) for r in out[:, width:].tolist())

        return run
    if name == "hf_backend":
        backend = HFBackend(model, tokenizer)
    else:
        mode = name.split("_")[0]
        backend = PrefixSharedBackend(bf16_model if name.endswith("bf16") else model, tokenizer, prefix_mode=mode)

    def run():
        threads = torch.get_num_threads()
        if name.endswith("thread") or name.endswith("threads"):
            torch.set_num_threads(int(name.split("_")[1][0]))
        try:
            out = backend.generate(prompts, k, max_new_tokens=new_tokens, temperature=1.0, return_logprobs=True)
        finally:
            torch.set_num_threads(threads)
        return sum(len(c.token_ids) for group in out for c in group)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--prompts", default="grid", choices=PROMPT_SOURCES,
                        help="grid: synthetic; plan_path / coder_tester: the acting role's real validation prompts")
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS), help=f"any of {ALL_VARIANTS}")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads for all variants")
    parser.add_argument("--warmup", action="store_true", help="run every variant once before timing")
    args = parser.parse_args()
    variants = args.variants.split(",")
    unknown = set(variants) - set(ALL_VARIANTS)
    if unknown:
        parser.error(f"unknown variants {sorted(unknown)}; known: {ALL_VARIANTS}")

    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    start = time.perf_counter()
    model, tokenizer = load_model_and_tokenizer(args.model)
    model.eval()
    print(f"model {args.model} loaded in {time.perf_counter() - start:.1f} s; torch threads {torch.get_num_threads()}")
    bf16_model = copy.deepcopy(model).to(torch.bfloat16) if "cascade_bf16" in variants else None
    params = forward_params(model)
    prompts = [chat_prompt_ids(tokenizer, text) for text in prompt_texts(args.prompts, args.envs)]
    lengths = [len(p) for p in prompts]
    common = next((i for i in range(min(lengths)) if len({p[i] for p in prompts}) > 1), min(lengths))
    print(f"workload: {args.envs} {args.prompts} prompts ({min(lengths)}-{max(lengths)} tokens, common prefix {common})"
          f" x K={args.k} x {args.new_tokens} new; prompt lengths {lengths}")
    # Decode-shaped ceiling: one step's rows (envs x K) through the model's own MLP up-projection shape.
    rows, hidden = args.envs * args.k, model.config.hidden_size
    inter = getattr(model.config, "intermediate_size", None) or 4 * hidden
    decode_shape = (rows, hidden, inter)

    runners = {v: make_runner(v, model, bf16_model, tokenizer, prompts, args.k, args.new_tokens) for v in variants}
    times: dict[str, list[float]] = {v: [] for v in variants}
    tokens: dict[str, list[int]] = {v: [] for v in variants}
    for v in variants if args.warmup else []:  # first-call allocations, lazy imports
        t0 = time.perf_counter()
        runners[v]()
        print(f"  warm-up {v}: {time.perf_counter() - t0:.1f} s", flush=True)
    decode_rate = matmul_rate(*decode_shape)
    square_rate = matmul_rate(2048, 2048, 2048)
    for rep in range(args.reps):  # interleaved: every variant once per round
        for v in variants:
            t0 = time.perf_counter()
            tokens[v].append(runners[v]())
            times[v].append(time.perf_counter() - t0)
        print(f"  round {rep + 1}: " + ", ".join(f"{v} {times[v][-1]:.1f}s" for v in variants), flush=True)
    decode_rate = (decode_rate + matmul_rate(*decode_shape)) / 2  # before and after, against drift
    square_rate = (square_rate + matmul_rate(2048, 2048, 2048)) / 2
    bf16_rate = matmul_rate(2048, 2048, 2048, torch.bfloat16)

    print()
    print(f"matmul fp32 {'x'.join(map(str, decode_shape))}: {decode_rate / 1e9:.0f} GFLOP/s; fp32 2048^3: {square_rate / 1e9:.0f} GFLOP/s;"
          f" bf16 2048^3: {bf16_rate / 1e9:.1f} GFLOP/s")
    print(f"forward params {params / 1e6:.1f} M; FLOP per generated token 2 x params = {2 * params / 1e9:.2f} GFLOP")
    header = f"| {'variant':<16} | {'what':<48} | {'s (median)':>10} | {'gen tok/s':>9} | {'vs HF plain':>11} |" \
             f" {'% ceil decode-mm':>16} | {'% ceil square-mm':>16} |"
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    base = None
    for v in variants:
        seconds = statistics.median(times[v])
        rate = statistics.median(tokens[v]) / seconds
        base = rate if v == "hf_plain" else base
        flops = 2 * params * rate
        ratio = f"{rate / base:.2f}x" if base else "n/a"
        print(f"| {v:<16} | {DESCRIPTIONS[v]:<48} | {seconds:>10.2f} | {rate:>9.1f} | {ratio:>11} |"
              f" {100 * flops / decode_rate:>15.1f}% | {100 * flops / square_rate:>15.1f}% |")
    print(f"\nload average before: {' '.join(f'{x:.2f}' for x in load_before)};"
          f" after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; reps {args.reps}; cores {os.cpu_count()}")


if __name__ == "__main__":
    main()

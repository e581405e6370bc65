"""Can a model act as a grid env's tool agent? Sample its programs and grade each one.

Before an AT-GRPO run it is worth knowing whether the tool role can learn at all: if no sampled
program prints a valid answer, every tool group has zero variance and the tool gets no gradient.
This script samples K programs per task from the trainer's own generation backend, steps a clone of
the env with each, and prints how many programs crashed, ran without an answer, printed a valid
answer, and solved the task (with the most common failure reasons).

It runs on the validation (or train) split only: it is a tool for choosing prompts and budgets.

    OMP_NUM_THREADS=1 python scripts/probe_tool_programs.py --env plan_path --model qwen2.5-coder-0.5b \\
        --tool-prompt function --tasks 8 --samples 8 --temperature 1.0
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time

import torch

from mas_envs import make_env
from mas_trainer.policies.models import load_model_and_tokenizer
from mas_trainer.policies.prefix_sharing import PrefixSharedBackend
from mas_trainer.rollout.prompts import chat_prompt_ids
from mas_envs.envs.puzzle_env import TOOL_CREDIT
from mas_trainer.settings.envs import PUZZLE_ENVS, default_role_budgets, preset_env_kwargs

# A tool program "solves" when its printed answer reaches the goal: it earned the first three credit parts.
SOLVES_CREDIT = TOOL_CREDIT["ran"] + TOOL_CREDIT["valid"] + TOOL_CREDIT["solves"]


def outcome_of(info: dict) -> str:
    """One word for a graded tool step."""
    if not info.get("parse_error"):
        return "solved" if info.get("tool_credit", 0) >= SOLVES_CREDIT else "valid"
    return "ran, no answer" if "tool_credit" in info else "crashed / no code"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="plan_path", choices=PUZZLE_ENVS, help="a grid env with a tool agent")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="model preset or folder")
    parser.add_argument("--tool-prompt", default="full", help="the env's tool_prompt (full, code, function)")
    parser.add_argument("--split", default="validation", choices=["validation", "train"])
    parser.add_argument("--tasks", type=int, default=8, help="tasks 0..N-1 of the split")
    parser.add_argument("--samples", type=int, default=8, help="programs per task (K)")
    parser.add_argument("--temperature", type=float, default=1.0, help="0 = greedy (then K is 1)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default: the env's tool budget")
    parser.add_argument("--env-kwargs", default="{}", help="JSON object of extra make_env arguments")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=1, help="print this many programs in full")
    args = parser.parse_args(argv)
    try:
        extra = json.loads(args.env_kwargs)
        if not isinstance(extra, dict):
            raise ValueError("not an object")
    except ValueError as err:
        parser.error(f"--env-kwargs must be a JSON object: {err}")
    kwargs = {**preset_env_kwargs(args.env), "max_turns": 1, **extra,
              "workflow": "mas", "split": args.split, "tool_prompt": args.tool_prompt}
    env = make_env(args.env, **kwargs)
    budgets = default_role_budgets(args.env, "mas", kwargs)
    max_new = args.max_new_tokens or (budgets or {}).get("tool")
    if max_new is None:
        parser.error(f"{args.env} with these settings has no measured tool budget: pass --max-new-tokens")
    k = 1 if args.temperature == 0 else args.samples

    model, tokenizer = load_model_and_tokenizer(args.model)[:2]
    backend = PrefixSharedBackend(model, tokenizer)
    counts: collections.Counter[str] = collections.Counter()
    reasons: collections.Counter[str] = collections.Counter()
    tokens, shown, began = 0, 0, time.perf_counter()
    for task in range(args.tasks):
        env.reset(seed=args.seed, options={"task_index": task})
        prompt = chat_prompt_ids(tokenizer, env.observe("tool")["prompt"])
        completions = backend.generate([prompt], k, max_new_tokens=max_new, temperature=args.temperature,
                                       seed=args.seed + task)[0]
        for completion in completions:
            branch = env.clone()
            branch.step(completion.text)
            info = branch.infos["tool"]
            counts[outcome_of(info)] += 1
            if info.get("parse_error"):
                reasons[str(info["parse_error"]).split(":")[0][:60]] += 1
            tokens += len(completion.token_ids)
            if shown < args.show:
                print(f"--- task {task}: {outcome_of(info)} ({info.get('parse_error') or 'ok'})\n{completion.text}\n")
                shown += 1
        print(f"task {task}: {dict(counts)}", file=sys.stderr, flush=True)

    total = sum(counts.values())
    print(f"{args.env} tool_prompt={args.tool_prompt} model={args.model} split={args.split} "
          f"tasks={args.tasks} K={k} T={args.temperature} budget={max_new}: {total} programs, "
          f"{tokens} tokens, {time.perf_counter() - began:.0f} s")
    print("| outcome | programs |\n|---|---:|")
    for name in ("solved", "valid", "ran, no answer", "crashed / no code"):
        print(f"| {name} | {counts[name]} ({100 * counts[name] / max(1, total):.1f}%) |")
    print("most common failures:", "; ".join(f"{r} x{n}" for r, n in reasons.most_common(5)))
    return 0


if __name__ == "__main__":
    torch.set_num_threads(1)
    raise SystemExit(main())

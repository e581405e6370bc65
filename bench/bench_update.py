"""Update-step throughput and memory, side by side: TRL's scoring vs prompt sharing vs common prefix.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_update.py [--model smollm2-135m] [--groups 8] [--k 8] \
        [--reps 2] [--threads 1] [--workflow single] [--prompts seeds|plan_path|coder_tester] \
        [--warmup-samples N] [--max-rss-gb G] [--variants trl16,group16,common16,...]

Workload: one optimizer step (forward + backward + AdamW step, ``ATGRPOTrainer.train_on_samples``)
of ``--model`` on an AT-GRPO batch: ``--groups`` prompts x ``--k`` samples each, completions of 3-8
tokens, non-zero advantages. Prompts (``--prompts``): ``seeds`` (default) = Plan-Path 4x4 ("rich"
observation) of env seeds 1000, 1001, ... in ``--workflow``; ``plan_path`` / ``coder_tester`` = the
acting role's real first-turn prompts of the first ``--groups`` validation tasks, mas workflow (the
prompts ``bench_sampling.py --prompts`` uses). Every variant runs in a FRESH child process (a warm-up
step on ``--warmup-samples`` samples, default one group, then one timed step on the whole batch) so
its peak resident memory (``ru_maxrss``) is its own; ``--reps`` rounds interleave the variants and
the table shows medians. ``--max-rss-gb`` kills a child whose resident memory passes the limit (its
row then says so).

Variants (scoring of the log-probs inside TRL's loss; the number is the micro-batch size, any
positive integer, e.g. ``trl4``):

- ``trl<N>``: ``GRPOTrainer._get_per_token_logps_and_entropies`` (TRL's own path, every position);
- ``group<N>``: each distinct prompt encoded once per micro-batch (``share_common_prefix=False``);
- ``common<N>``: + the prefix common to all prompts of the micro-batch encoded once (default);
- ``*_lora``: ``policy_mode="lora"``: the project's adapters (``mas_trainer.policies.lora``:
  ``attach_adapters`` + ``LoraPolicyTrainer``, default ``lora_*`` settings), base frozen;
- ``*_bf16``: under ``torch.autocast("cpu", bfloat16)``;
- ``*_2pol``: two policies (specialized mode: one model + optimizer per role), each updated on
  half of the groups, for the memory of holding two.

"sample tok/s" counts every sample's unpadded prompt + completion tokens (the work a plain forward
does); "completion tok/s" counts the tokens that carry the loss.

"% train ceil": 6 x forward parameters x sample tok/s over a large square fp32 matmul (2048^3)
measured in the same child (before and after the timed step, averaged). Forward parameters = what
the forward multiplies with: every parameter except an untied input embedding (a lookup; a tied one
counts once, as the LM head), LoRA adapters included. Since sample tokens count each shared prompt
once per sample, this is an *effective* rate: prompt sharing can take it past 100%. "% ceil run"
counts the positions the variant really runs instead (padded, per micro-batch: TRL every row in full;
group: each distinct prompt + every completion; common: the common prefix once + each remainder +
every completion; the LM head on completion positions only, in both paths) at 6 x params per
position for full fine-tuning, 4 x for LoRA (no weight gradients for the frozen base): the share of
the matmul rate the step actually achieves.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_sampling (prompts, matmul rate, param count)
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
VARIANT = re.compile(r"^(trl|group|common)([1-9][0-9]*)((?:_lora|_bf16|_2pol)*)$")
PROMPT_SOURCES = ("seeds", "plan_path", "coder_tester")


def describe(variant: str) -> str:
    """The table's "what" of a variant name (``ValueError`` if it is not one)."""
    if variant in DESCRIPTIONS:
        return DESCRIPTIONS[variant]
    match = VARIANT.match(variant)
    if not match:
        raise ValueError(f"unknown variant {variant!r}: (trl|group|common)<micro-batch>[_bf16|_2pol|_lora]")
    scoring, micro, extras = match.groups()
    what = {"trl": "TRL scoring (every position)", "group": "per-group prompt sharing",
            "common": "+ common prefix once"}[scoring] + f", micro-batch {micro}"
    names = {"bf16": ", bf16 autocast", "2pol": ", two policies", "lora": ", LoRA"}
    return what + "".join(names[e] for e in extras.split("_") if e)


def micro_batch(variant: str) -> int:
    return int(VARIANT.match(variant).group(2))


def prompt_texts(source: str, groups: int, workflow: str) -> list[tuple[str, str]]:
    """``groups`` (agent, prompt text) pairs from ``source`` (see ``--prompts``)."""
    if source == "seeds":
        from mas_envs import make_env

        env = make_env("plan_path", preset="4x4", observation_detail="rich", workflow=workflow)
        pairs = []
        for group in range(groups):
            env.reset(seed=1000 + group)
            pairs.append((env.agent_selection, env.observe(env.agent_selection)["prompt"]))
        return pairs
    from bench_sampling import env_prompts  # the acting role's real validation prompts, mas workflow
    from mas_envs import make_env

    agent = make_env(source, workflow="mas").possible_agents[0]
    return [(agent, text) for text in env_prompts(source, groups)]


def build_samples(tokenizer, groups: int, k: int, workflow: str, seed: int = 0, prompts: str = "seeds"):
    """``groups`` x ``k`` samples: real env prompts, random 3-8-token completions, random advantages."""
    import torch

    from mas_trainer.rollout.prompts import chat_prompt_ids
    from mas_trainer.rollout.samples import Sample

    gen = torch.Generator().manual_seed(seed)
    samples = []
    for group, (agent, text) in enumerate(prompt_texts(prompts, groups, workflow)):
        prompt = chat_prompt_ids(tokenizer, text)
        for _ in range(k):
            length = int(torch.randint(3, 9, (1,), generator=gen))
            completion = torch.randint(100, 20000, (length,), generator=gen).tolist()
            advantage = float(torch.randn((), generator=gen))
            samples.append(Sample(prompt, completion, advantage, (group, 0, agent), agent, "shared", advantage=advantage))
    return samples


def make_trainer(model, tokenizer, variant: str, output_dir: str, model_name: str = "smollm2-135m"):
    """The trainer of ``variant``; for ``*_lora`` it wraps ``model`` in the project's adapters (one, "shared")."""
    from trl import GRPOTrainer

    from mas_trainer.settings.config import ATGRPOConfig
    from mas_trainer.update.trainer import ATGRPOTrainer

    lora = "_lora" in variant
    config = ATGRPOConfig(
        output_dir=output_dir, model=model_name, per_device_train_batch_size=micro_batch(variant),
        skip_zero_variance_groups=False, max_steps=10, save_steps=1000, report_to=[],
        policy_mode="lora" if lora else "shared",
    )
    if lora:
        from mas_trainer.policies.lora import LoraPolicyTrainer, attach_adapters

        peft_model = attach_adapters(model, ["shared"], config)
        trainer = LoraPolicyTrainer(peft_model, "shared", args=config, processing_class=tokenizer)
    else:
        trainer = ATGRPOTrainer(model, config, tokenizer)
    if variant.startswith("trl"):
        trainer._get_per_token_logps_and_entropies = functools.partial(
            GRPOTrainer._get_per_token_logps_and_entropies, trainer
        )
    trainer.share_common_prefix = variant.startswith("common")
    return trainer


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def positions_run(samples, variant: str) -> tuple[int, int]:
    """(positions through the decoder blocks, positions through the LM head) of one step, padding included.

    The LM head runs on completion positions only in both paths (ours: ``completion_logits``; TRL 1.16:
    its fused LM head skips positions whose label is -100, i.e. the prompt).

    Mirrors ``ATGRPOTrainer._optimize`` (sorted by lengths, chunks of the micro-batch) and the layout of
    ``mas_trainer.update.scoring.completion_logits`` / TRL's full rows.
    """
    from mas_trainer.update.scoring import MIN_COMMON_PREFIX, common_prefix_length

    ordered = sorted(samples, key=lambda s: (len(s.prompt_ids), len(s.completion_ids)))
    size = micro_batch(variant)
    total = head = 0
    for start in range(0, len(ordered), size):
        chunk = ordered[start : start + size]
        width = max(len(s.prompt_ids) for s in chunk)
        completions = len(chunk) * max(max(len(s.completion_ids), 1) for s in chunk)
        head += completions
        distinct = [list(p) for p in {tuple(s.prompt_ids) for s in chunk}]
        common = min(common_prefix_length(distinct), min(len(p) for p in distinct) - 1)
        if variant.startswith("trl"):
            total += len(chunk) * width + completions
        elif variant.startswith("common") and len(distinct) > 1 and common >= MIN_COMMON_PREFIX:
            total += common + len(distinct) * (width - common) + completions
        else:
            total += len(distinct) * width + completions
    return total, head


def warmup_share(share: list, count: int) -> list:
    """``count`` samples spread over ``share`` (so they span groups: the common-prefix path warms up too)."""
    count = max(1, min(count, len(share)))
    step = len(share) / count
    return [share[int(i * step)] for i in range(count)]


def run_child(variant: str, args) -> dict:
    """One variant in this (fresh) process: warm-up step, one timed step, peak memory."""
    import contextlib
    import copy

    import torch

    from mas_trainer.policies.models import load_model_and_tokenizer

    from bench_sampling import forward_params, matmul_rate

    torch.set_num_threads(args.threads)
    model, tokenizer = load_model_and_tokenizer(args.model)
    samples = build_samples(tokenizer, args.groups, args.k, args.workflow, prompts=args.prompts)
    policies = 2 if "_2pol" in variant else 1
    models = [model] + [copy.deepcopy(model) for _ in range(policies - 1)]
    with tempfile.TemporaryDirectory() as tmp:
        trainers = [make_trainer(m, tokenizer, variant, f"{tmp}/{i}", args.model) for i, m in enumerate(models)]
        params = forward_params(trainers[0].model)  # LoRA: the inner model, base + adapters
        head_params = trainers[0].model.get_output_embeddings().weight.numel()
        # Each policy updates on its own groups (specialized mode routes samples by role).
        shares = [samples[i * len(samples) // policies : (i + 1) * len(samples) // policies] for i in range(policies)]
        autocast = (
            functools.partial(torch.autocast, "cpu", dtype=torch.bfloat16)
            if "_bf16" in variant else contextlib.nullcontext
        )
        warmup = args.warmup_samples or args.k
        for trainer, share in zip(trainers, shares):  # warm-up: first-call allocations, lazy imports
            with autocast():
                trainer.train_on_samples(share[: args.k] if warmup == args.k else warmup_share(share, warmup))
        setup_rss = max_rss_mb()
        rate_before = matmul_rate(2048, 2048, 2048)
        start = time.perf_counter()
        for trainer, share in zip(trainers, shares):
            with autocast():
                metrics = trainer.train_on_samples(share)
        seconds = time.perf_counter() - start
        square_rate = (rate_before + matmul_rate(2048, 2048, 2048)) / 2
    return {
        "variant": variant,
        "seconds": seconds,
        "samples": len(samples),
        "sample_tokens": sum(len(s.prompt_ids) + len(s.completion_ids) for s in samples),
        "completion_tokens": sum(len(s.completion_ids) for s in samples),
        "positions_run": [sum(x) for x in zip(*(positions_run(share, variant) for share in shares))],
        "forward_params": params,
        "head_params": head_params,
        "square_rate": square_rate,
        "lora": "_lora" in variant,
        "loss": metrics["loss"],
        "setup_rss_mb": setup_rss,
        "peak_rss_mb": max_rss_mb(),
    }


def prompt_stats(args) -> str:
    from mas_trainer.policies.models import load_model_and_tokenizer
    from mas_trainer.update.scoring import common_prefix_length

    _, tokenizer = load_model_and_tokenizer(args.model)
    samples = build_samples(tokenizer, args.groups, args.k, args.workflow, prompts=args.prompts)
    prompts = {tuple(s.prompt_ids) for s in samples}
    lengths = sorted(len(p) for p in prompts)
    common = common_prefix_length([list(p) for p in prompts])
    return (f"{args.prompts} prompts: {len(prompts)} distinct prompts of {lengths[0]}-{lengths[-1]} tokens,"
            f" common prefix {common} tokens; {sum(len(s.completion_ids) for s in samples)} completion tokens")


def run_variant(variant: str, child_args: list[str], max_rss_gb: float | None) -> dict:
    """One child process; killed if its resident memory passes ``max_rss_gb`` (then ``{"killed_mb": ...}``)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, __file__, f"--child={variant}", *child_args],
                                stdout=out, stderr=err, text=True, cwd=ROOT)
        while proc.poll() is None:
            try:
                with open(f"/proc/{proc.pid}/status") as status:
                    rss = next((int(x.split()[1]) / 1024 for x in status if x.startswith("VmRSS:")), 0.0)
            except OSError:
                rss = 0.0
            if max_rss_gb and rss > max_rss_gb * 1024:
                proc.kill()
                proc.wait()
                return {"variant": variant, "killed_mb": rss}
            time.sleep(0.5)
        out.seek(0)
        err.seek(0)
        line = next((x for x in out.read().splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            sys.exit(f"variant {variant} failed:\n{err.read()[-3000:]}")
        return json.loads(line[len("RESULT ") :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--workflow", default="single", choices=["single", "mas"])
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--prompts", default="seeds", choices=PROMPT_SOURCES,
                        help="seeds: Plan-Path env seeds in --workflow; plan_path / coder_tester: real validation prompts")
    parser.add_argument("--warmup-samples", type=int, default=0, help="samples of the warm-up step (default: --k)")
    parser.add_argument("--max-rss-gb", type=float, default=None, help="kill a child past this resident memory")
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                        help=f"any of {list(DESCRIPTIONS)}, or (trl|group|common)<N>[_lora|_bf16|_2pol]")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(run_child(args.child, args)), flush=True)
        return
    variants = args.variants.split(",")
    unknown = sorted(v for v in variants if v not in DESCRIPTIONS and not VARIANT.match(v))
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {list(DESCRIPTIONS)} or (trl|group|common)<N>[_lora|_bf16|_2pol]")

    load_before = os.getloadavg()
    print(f"workload: {args.groups} groups x K={args.k}, workflow {args.workflow}: {prompt_stats(args)}", flush=True)
    child_args = [f"--{key.replace('_', '-')}={getattr(args, key)}"
                  for key in ("model", "groups", "k", "workflow", "threads", "prompts", "warmup_samples")]
    results: dict[str, list[dict]] = {v: [] for v in variants}
    for rep in range(args.reps):  # interleaved: every variant once per round, each in a fresh process
        for v in variants:
            results[v].append(run_variant(v, child_args, args.max_rss_gb))
            got = results[v][-1]
            done = f"{got['seconds']:.1f} s" if "seconds" in got else f"killed at {got['killed_mb']:.0f} MB RSS"
            print(f"  round {rep + 1}: {v} {done}", flush=True)

    header = (f"| {'variant':<17} | {'what':<52} | {'s (median)':>10} | {'samples/s':>9} | {'sample tok/s':>12} |"
              f" {'compl. tok/s':>12} | {'vs TRL':>7} | {'% train ceil':>12} | {'% ceil run':>10} |"
              f" {'RSS setup MB':>12} | {'peak RSS MB':>11} |")
    print()
    print(header)
    print("|" + "|".join("-" * len(c) for c in header.split("|")[1:-1]) + "|")

    def median_seconds(v: str) -> float | None:
        done = [r["seconds"] for r in results[v] if "seconds" in r]
        return statistics.median(done) if len(done) == len(results[v]) else None

    # "vs TRL": against the first trl* row of the same mode (LoRA against LoRA, full against full).
    bases = {}
    for v in variants:
        if v.startswith("trl") and median_seconds(v):
            bases.setdefault("_lora" in v, median_seconds(v))
    for v in variants:
        rows, seconds = results[v], median_seconds(v)
        if seconds is None:
            killed = max(r.get("killed_mb", 0) for r in rows)
            print(f"| {v:<17} | {describe(v):<52} | killed: resident memory {killed:.0f} MB passed --max-rss-gb {args.max_rss_gb} |")
            continue
        first = rows[0]
        base = bases.get("_lora" in v)
        ratio = f"{base / seconds:.2f}x" if base else "n/a"
        rate = statistics.median(r["square_rate"] for r in rows)
        effective = 6 * first["forward_params"] * first["sample_tokens"] / seconds / rate
        body, head = first["positions_run"]
        flops_run = (first["forward_params"] - first["head_params"]) * body + first["head_params"] * head
        run = (4 if first["lora"] else 6) * flops_run / seconds / rate
        print(f"| {v:<17} | {describe(v):<52} | {seconds:>10.1f} | {first['samples'] / seconds:>9.2f} |"
              f" {first['sample_tokens'] / seconds:>12.0f} | {first['completion_tokens'] / seconds:>12.1f} |"
              f" {ratio:>7} | {100 * effective:>11.1f}% | {100 * run:>9.1f}% |"
              f" {max(r['setup_rss_mb'] for r in rows):>12.0f} | {max(r['peak_rss_mb'] for r in rows):>11.0f} |")
    done = [r for v in variants for r in results[v] if "seconds" in r]
    if done:
        first = done[0]
        print(f"\nforward params {first['forward_params'] / 1e6:.1f} M; fp32 2048^3 matmul "
              + ", ".join(f"{r['variant']} {r['square_rate'] / 1e9:.0f}" for r in done) + " GFLOP/s;"
              + " positions run (blocks/head) " + ", ".join(
                  f"{v} {'/'.join(map(str, results[v][0]['positions_run']))}" for v in variants
                  if "positions_run" in results[v][0])
              + f" (sample tokens {first['sample_tokens']})")
    print("per-round seconds: " + "; ".join(
        f"{v} " + "/".join(f"{r['seconds']:.1f}" if "seconds" in r else "killed" for r in results[v]) for v in variants))
    print(f"load average before: {' '.join(f'{x:.2f}' for x in load_before)};"
          f" after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; reps {args.reps}; threads {args.threads}")


if __name__ == "__main__":
    main()

"""GPU bench: a random Qwen3-1.7B-shaped model, prefix-shared sampling vs HF ``generate``, update tok/s.

    python bench/bench_gpu.py --json $OUT/gpu.json          # on a lent GPU (< 5 min, no network)
    python bench/bench_gpu.py --tiny --json /tmp/gpu.json    # tiny config, CPU (automatic without CUDA)

Needs only torch, transformers (peft for the LoRA rows) and three project modules that import nothing
else (``mas_trainer.policies.prefix_sharing`` -> ``generation``, ``samples``, ``scoring``; ``mas_trainer/__init__``
is a docstring, so no TRL). No tokenizer, weights or data are read: the model is built from the config
below with random weights, and prompts are random token ids of the measured per-role prompt shapes.

Rows, in this order (``--budget-s`` skips the remaining rows once the run would pass it, and says so):

1. ``ceiling``: a timed large matmul (bf16 8192^3 on a GPU, fp32 1024^3 on CPU), the FLOP/s that
   "% ceil" divides by.
2. ``sampling``, per prompt shape (``plan_path/tool`` ...: 8 prompts of the measured lengths, K=8
   branches each, 64 rows): ``hf_generate`` (``generate(num_return_sequences=K)``, sampling T=1,
   top-k/top-p off), ``ps_none`` (PrefixSharedBackend, K prefills, own decode loop) and ``ps_cascade``
   (PrefixSharedBackend default: one prefill per prompt, shared prompt KV, common prefix once; log-probs
   returned, as a rollout asks). EOS is disabled, so every method samples exactly rows x new tokens.
   The backend's kept common prefix is dropped before every call (as after an optimizer step).
   "% ceil" = 2 x params x tok/s / ceiling (attention FLOPs not counted).
3. ``update``, per shape: one forward + backward + AdamW step on one group (the shape's first prompt,
   K=8 random completions of the new-token length, random advantages, loss -adv x log-prob), full
   fine-tuning and LoRA (peft, r=16, alpha=32, every linear layer but the head: the trainer's defaults);
   ``plain`` = every row run in full, ``shared`` = ``mas_trainer.update.scoring.completion_logits`` (the prompt
   encoded once per group, what the trainer uses). tok/s counts prompt + completion tokens of every row
   (the work a plain pass does). "% ceil" = 6 (full) or 4 (LoRA: no weight grads) x params x tok/s / ceiling.
   Full fine-tuning keeps weights and AdamW state in the model dtype (pure bf16 on the GPU; the trainer's
   amp setup with fp32 master weights is not measured here); peft keeps the LoRA adapters in fp32.

Also a greedy check: prefix-shared and ``generate`` greedy tokens on the first shape (must be identical in
fp32; in bf16 the kernels differ, so the count of identical rows is reported, not asserted).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

START = time.perf_counter()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import torch  # noqa: E402

# Qwen3-1.7B, numbers from its config.json on the Hugging Face hub (Qwen/Qwen3-1.7B):
QWEN3_1_7B = dict(
    hidden_size=2048,
    intermediate_size=6144,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    vocab_size=151936,
    max_position_embeddings=40960,
    rope_theta=1000000.0,
    tie_word_embeddings=True,
    rms_norm_eps=1e-6,
)
# Same family, tiny: the CPU test's model. A wider init than 0.02 makes the random model's next-token
# distribution peaked, so greedy ties are unlikely and the greedy check is meaningful.
TINY = dict(
    QWEN3_1_7B,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    vocab_size=2048,
    initializer_range=0.2,
)

# Per-role first-turn prompt shapes: token count of each of 8 tasks (env seeds 0-7) and the token prefix
# common to all 8. Measured (see measure_prompt_shapes; tests/test_bench_gpu.py re-measures and checks
# 10%) with the Qwen2.5-Coder-0.5B tokenizer cached by mas_trainer.policies.models (the same byte-level BPE and
# <|im_start|>/<|im_end|> tokens as Qwen3's), in Qwen3's chat layout for one user message
# ("<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n", no default system prompt), env
# settings of the trainer (plan_path: mas workflow, ENV_DEFAULTS 4x4 rich; coder_tester: mas workflow,
# train split); the second role's prompt is taken after the first role answered "no answer".
PROMPT_SHAPES = {
    "plan_path/tool": {"lengths": [288, 291, 291, 285, 290, 284, 286, 286], "common": 140},
    "plan_path/planner": {"lengths": [281, 284, 284, 278, 283, 277, 279, 279], "common": 137},
    "coder_tester/coder": {"lengths": [97, 113, 97, 76, 80, 65, 104, 78], "common": 28},
    "coder_tester/tester": {"lengths": [154, 192, 154, 133, 137, 122, 183, 135], "common": 29},
}
QWEN3_CHAT = "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"
LORA = dict(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear")
PAD_ID = 0
NO_EOS = [-1]  # an id no sampler can pick: every completion runs to max_new_tokens


# ------------------------------------------------------------------------------------------ setup
def model_classes() -> tuple[str, type, type]:
    """(family, config class, model class): Qwen3 if this transformers has it, else Qwen2 (same shapes)."""
    try:
        from transformers import Qwen3Config, Qwen3ForCausalLM

        return "qwen3", Qwen3Config, Qwen3ForCausalLM
    except ImportError:
        from transformers import Qwen2Config, Qwen2ForCausalLM

        return "qwen2", Qwen2Config, Qwen2ForCausalLM


def build_model(dims: dict, device: str, dtype: torch.dtype, seed: int = 0):
    """A randomly initialised causal LM of ``dims`` on ``device`` in ``dtype``; EOS/BOS unset."""
    family, config_cls, model_cls = model_classes()
    dims = dict(dims)
    if family == "qwen2":
        dims.pop("head_dim")  # Qwen2 derives it: hidden_size / num_attention_heads (= 128 and 16 here)
    config = config_cls(**dims, bos_token_id=None, eos_token_id=None, pad_token_id=PAD_ID, use_cache=True)
    torch.manual_seed(seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = model_cls(config)
    finally:
        torch.set_default_dtype(previous)
    model = model.to(device)
    for param in model.parameters():  # parameters only: buffers such as rotary inv_freq stay float32
        param.data = param.data.to(dtype)
    model.generation_config.eos_token_id = None
    model.generation_config.bos_token_id = None
    model.generation_config.pad_token_id = PAD_ID
    model.eval()
    return family, model


class IdTokenizer:
    """The little a backend asks of a tokenizer: pad/EOS ids and ``decode`` (ids as text)."""

    pad_token_id = PAD_ID
    eos_token_id = None

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return " ".join(map(str, ids))


def synth_prompts(shape: dict, vocab: int, seed: int) -> list[list[int]]:
    """Random token ids of the shape: one common prefix, then a distinct remainder per prompt."""
    gen = torch.Generator().manual_seed(seed)
    common = torch.randint(1, vocab, (shape["common"],), generator=gen).tolist()
    prompts = []
    for i, length in enumerate(shape["lengths"]):
        rest = torch.randint(1, vocab, (length - shape["common"],), generator=gen).tolist()
        rest[0] = 1 + (common[-1] + 1 + i) % (vocab - 1)  # prompts differ right after the common prefix
        prompts.append(common + rest)
    return prompts


def left_pad(prompts: list[list[int]], device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), PAD_ID, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, p in enumerate(prompts):
        ids[row, width - len(p) :] = torch.tensor(p)
        mask[row, width - len(p) :] = 1
    return ids.to(device), mask.to(device)


# ------------------------------------------------------------------------------------------ samplers
def hf_generate(model, prompts: list[list[int]], k: int, new_tokens: int, greedy: bool = False) -> list[list[int]]:
    """``generate(num_return_sequences=k)``: new token ids, rows prompt-major (k rows per prompt)."""
    from transformers import GenerationConfig

    ids, mask = left_pad(prompts, model.device)
    config = GenerationConfig(  # every knob explicit: unset ones are filled from model defaults
        max_new_tokens=new_tokens,
        do_sample=not greedy,
        temperature=1.0,
        top_p=1.0,
        top_k=None if greedy else 0,
        num_beams=1,
        num_return_sequences=k,
        eos_token_id=None,
        bos_token_id=None,
        pad_token_id=PAD_ID,
        use_cache=True,
    )
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    return out[:, ids.shape[1] :].tolist()


def prefix_backend(model, mode: str):
    from mas_trainer.policies.prefix_sharing import PrefixSharedBackend

    return PrefixSharedBackend(model, IdTokenizer(), eos_token_ids=NO_EOS, prefix_mode=mode)


def ps_generate(backend, prompts, k: int, new_tokens: int, greedy: bool = False) -> list[list[int]]:
    backend.sync_weights()  # no kept common prefix from an earlier call: every call pays for its own
    out = backend.generate(
        prompts, k, max_new_tokens=new_tokens, temperature=0.0 if greedy else 1.0, return_logprobs=not greedy
    )
    return [c.token_ids for group in out for c in group]


def greedy_check(model, prompts, new_tokens: int) -> dict:
    """Greedy tokens of prefix-shared (cascade) vs ``generate``, one branch per prompt."""
    hf = hf_generate(model, prompts, 1, new_tokens, greedy=True)
    ps = ps_generate(prefix_backend(model, "cascade"), prompts, 1, new_tokens, greedy=True)
    equal_rows = sum(a == b for a, b in zip(hf, ps))
    # tokens equal before each row's first difference
    same = [next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), len(a)) for a, b in zip(hf, ps)]
    return {
        "rows": len(prompts), "rows_equal": equal_rows, "new_tokens": new_tokens,
        "tokens_equal_before_first_difference": sum(same), "tokens": sum(len(a) for a in hf),
        "hf": hf, "prefix_shared": ps,
    }


# ------------------------------------------------------------------------------------------ timing
def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def matmul_ceiling(device: str, dtype: torch.dtype, size: int, seconds: float) -> float:
    """Sustained FLOP/s of a (size x size) @ (size x size) matmul."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    a @ b
    sync(device)
    count, start = 0, time.perf_counter()
    while count == 0 or time.perf_counter() - start < seconds:
        for _ in range(10 if device == "cuda" else 1):
            a @ b
            count += 1
        sync(device)
    return 2 * size**3 * count / (time.perf_counter() - start)


class Budget:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def elapsed(self) -> float:
        return time.perf_counter() - START

    def allows(self, estimate: float) -> bool:
        return self.elapsed() + estimate <= self.seconds


def timed(fn, device: str, reps: int, budget: Budget) -> tuple[list[float], object]:
    """Warm-up call, then up to ``reps`` timed calls (at least one; fewer once the budget is reached)."""
    fn()
    times, result = [], None
    for _ in range(reps):
        sync(device)
        t0 = time.perf_counter()
        result = fn()
        sync(device)
        times.append(time.perf_counter() - t0)
        if not budget.allows(times[-1]):
            break
    return times, result


def peak_gib(device: str) -> float | None:
    return torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None


def reset_peak(device: str) -> None:
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


# ------------------------------------------------------------------------------------------ update
def update_step(model, optimizer, ids: torch.Tensor, n: int, advantages: torch.Tensor, method: str) -> float:
    """One forward + backward + AdamW step on rows ``[prompt | n completion tokens]``; returns the loss."""
    from mas_trainer.update.scoring import completion_logits

    mask = torch.ones_like(ids)
    if method == "shared":
        logits = completion_logits(model, ids, mask, n, share_common_prefix=True)
    else:
        logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=n + 1, use_cache=False).logits[:, :-1]
    logp = logits.float().log_softmax(-1).gather(-1, ids[:, -n:, None])[..., 0]
    loss = -(advantages[:, None] * logp).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss.detach())


# ------------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="tiny config of the same family (default without CUDA)")
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=None, help="default 64 (GPU), 16 (tiny)")
    parser.add_argument("--reps", type=int, default=3, help="timed runs per row after one warm-up")
    parser.add_argument("--shapes", default=",".join(PROMPT_SHAPES), help=f"any of {list(PROMPT_SHAPES)}")
    parser.add_argument("--budget-s", type=float, default=270.0, help="skip the remaining rows past this")
    parser.add_argument("--json", help="also write the results as JSON here")
    parser.add_argument("--no-update", action="store_true", help="sampling rows only")
    parser.add_argument("--measure-prompts", action="store_true",
                        help="re-measure PROMPT_SHAPES with the local tokenizer and envs, print, exit")
    args = parser.parse_args(argv)
    if args.measure_prompts:
        print(json.dumps(measure_prompt_shapes(), indent=1))
        return {}
    shapes = args.shapes.split(",")
    unknown = set(shapes) - set(PROMPT_SHAPES)
    if unknown:
        parser.error(f"unknown shapes {sorted(unknown)}; known: {list(PROMPT_SHAPES)}")

    device = "cuda" if torch.cuda.is_available() else "cpu"
    tiny = args.tiny or device == "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    new_tokens = args.new_tokens or (16 if tiny else 64)
    budget = Budget(args.budget_s)
    import transformers

    t0 = time.perf_counter()
    family, model = build_model(TINY if tiny else QWEN3_1_7B, device, dtype)
    build_s = time.perf_counter() - t0
    params = sum(p.numel() for p in model.parameters())  # tied embedding counted once (= lm_head)
    vocab = model.config.vocab_size
    device_name = torch.cuda.get_device_name() if device == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    print(f"{family.capitalize()}ForCausalLM ({'tiny' if tiny else 'Qwen3-1.7B'} config, random init), "
          f"{params / 1e6:.1f} M params, {str(dtype).replace('torch.', '')} on {device_name}, built in {build_s:.1f} s;"
          f" torch {torch.__version__}, transformers {transformers.__version__}")
    print(f"K={args.k}, {new_tokens} new tokens (EOS disabled), {args.reps} timed runs per row after a warm-up,"
          f" budget {args.budget_s:.0f} s", flush=True)

    rows: list[dict] = []
    skipped: list[str] = []

    def add(row: dict) -> None:
        rows.append(row)
        tok = row.get("tok_per_s")
        print(f"  {row['section']:<8} {row['shape']:<20} {row['method']:<14} "
              + (f"{tok:>10.1f} tok/s" if tok else "") + f"  {row.get('note', '')}", flush=True)

    def skip(section: str, shape: str, method: str) -> None:
        skipped.append(f"{section} {shape} {method}")
        rows.append({"section": section, "shape": shape, "method": method, "skipped": True,
                     "note": f"skipped: budget {args.budget_s:.0f} s reached"})

    # 1. FLOP ceiling
    size, seconds = (8192, 1.0) if device == "cuda" else (1024, 0.5)
    ceiling = matmul_ceiling(device, dtype, size, seconds)
    add({"section": "ceiling", "shape": f"{size}^3", "method": "matmul", "flops": ceiling,
         "note": f"{str(dtype).replace('torch.', '')} {size}^3 matmul: {ceiling / 1e12:.2f} TFLOP/s"})

    # 2. greedy check (correctness), then sampling
    prompts_of = {name: synth_prompts(PROMPT_SHAPES[name], vocab, seed=i) for i, name in enumerate(shapes)}
    check = greedy_check(model, prompts_of[shapes[0]], new_tokens)
    print(f"greedy check on {shapes[0]}: {check['rows_equal']}/{check['rows']} rows identical "
          f"(prefix-shared vs generate, {new_tokens} tokens each)", flush=True)

    estimate = 0.0
    backends = {mode: prefix_backend(model, mode) for mode in ("none", "cascade")}
    for name in shapes:
        prompts = prompts_of[name]
        base = None
        for method in ("hf_generate", "ps_none", "ps_cascade"):
            if not budget.allows(estimate):
                skip("sampling", name, method)
                continue
            if method == "hf_generate":
                fn = lambda: hf_generate(model, prompts, args.k, new_tokens)  # noqa: E731
            else:
                backend = backends[method.split("_")[1]]
                fn = lambda backend=backend: ps_generate(backend, prompts, args.k, new_tokens)  # noqa: E731
            reset_peak(device)
            t_row = time.perf_counter()
            times, out = timed(fn, device, args.reps, budget)
            estimate = time.perf_counter() - t_row
            generated = sum(len(r) for r in out)
            expected = len(prompts) * args.k * new_tokens
            if generated != expected:
                raise RuntimeError(f"{method} on {name}: {generated} tokens, expected {expected} (EOS not disabled?)")
            rate = generated / statistics.median(times)
            base = rate if method == "hf_generate" else base
            add({"section": "sampling", "shape": name, "method": method, "tok_per_s": rate,
                 "ratio": rate / base if base else None, "pct_ceiling": 100 * 2 * params * rate / ceiling,
                 "peak_gib": peak_gib(device), "seconds": times, "tokens": generated,
                 "note": f"{len(prompts)} prompts x K={args.k}, {min(PROMPT_SHAPES[name]['lengths'])}-"
                         f"{max(PROMPT_SHAPES[name]['lengths'])} prompt tokens"})
    del backends

    # 3. update: full fine-tuning, then LoRA (peft) on the same model
    if not args.no_update:
        try:
            import peft
        except ImportError:
            peft = None
        modes = ["full", "lora"]
        gen = torch.Generator().manual_seed(1)
        groups = {}
        for name in shapes:
            prompt = prompts_of[name][0]
            completions = torch.randint(1, vocab, (args.k, new_tokens), generator=gen)
            ids = torch.cat([torch.tensor(prompt).expand(args.k, -1), completions], 1).to(device)
            adv = torch.randn(args.k, generator=gen)
            groups[name] = (ids, ((adv - adv.mean()) / (adv.std() + 1e-6)).to(device))
        for mode in modes:
            if mode == "lora" and peft is None:
                for name in shapes:
                    for method in ("plain", "shared"):
                        rows.append({"section": "update", "shape": name, "method": f"lora_{method}",
                                     "skipped": True, "note": "skipped: peft not installed"})
                        skipped.append(f"update {name} lora_{method} (no peft)")
                continue
            if not budget.allows(estimate):
                for name in shapes:
                    for method in ("plain", "shared"):
                        skip("update", name, f"{mode}_{method}")
                continue
            if mode == "lora":
                wrapped = peft.get_peft_model(model, peft.LoraConfig(task_type="CAUSAL_LM", **LORA))
                target = wrapped.get_base_model()  # base class forward + adapters (what the trainer runs)
            else:
                target = model
            target.train()
            trainable = [p for p in target.parameters() if p.requires_grad]
            optimizer = torch.optim.AdamW(trainable, lr=1e-5)
            flop_factor = 6 if mode == "full" else 4
            for name in shapes:
                ids, adv = groups[name]
                base = None
                for method in ("plain", "shared"):
                    if not budget.allows(estimate):
                        skip("update", name, f"{mode}_{method}")
                        continue
                    losses = []
                    fn = lambda: losses.append(update_step(target, optimizer, ids, new_tokens, adv, method))  # noqa: E731
                    reset_peak(device)
                    t_row = time.perf_counter()
                    times, _ = timed(fn, device, args.reps, budget)
                    estimate = time.perf_counter() - t_row
                    tokens = ids.numel()
                    rate = tokens / statistics.median(times)
                    base = rate if method == "plain" else base
                    add({"section": "update", "shape": name, "method": f"{mode}_{method}", "tok_per_s": rate,
                         "ratio": rate / base if base else None,
                         "pct_ceiling": 100 * flop_factor * params * rate / ceiling,
                         "peak_gib": peak_gib(device), "seconds": times, "tokens": tokens,
                         "completion_tok_per_s": args.k * new_tokens / statistics.median(times),
                         "loss": losses[-1], "trainable_params": sum(p.numel() for p in trainable),
                         "note": f"1 group: K={args.k} x ({ids.shape[1] - new_tokens} prompt + {new_tokens}) tokens"})
            del optimizer, trainable
            for p in model.parameters():
                p.grad = None
            target.eval()

    elapsed = time.perf_counter() - START
    print()
    print_table(rows)
    print(f"\ngreedy check ({shapes[0]}): {check['rows_equal']}/{check['rows']} rows identical,"
          f" {check['tokens_equal_before_first_difference']}/{check['tokens']} tokens before a first difference")
    if skipped:
        print(f"SKIPPED ({len(skipped)} rows, budget {args.budget_s:.0f} s): " + "; ".join(skipped))
    print(f"total {elapsed:.1f} s (model build {build_s:.1f} s)")
    result = {
        "device": device_name, "family": family, "tiny": tiny, "dtype": str(dtype).replace("torch.", ""),
        "params": params, "config": TINY if tiny else QWEN3_1_7B, "k": args.k, "new_tokens": new_tokens,
        "reps": args.reps, "budget_s": args.budget_s, "elapsed_s": elapsed, "build_s": build_s,
        "torch": torch.__version__, "transformers": transformers.__version__, "ceiling_flops": ceiling,
        "greedy_check": {k: v for k, v in check.items() if k not in ("hf", "prefix_shared")},
        "rows": rows, "skipped": skipped,
    }
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1))
        print(f"wrote {args.json}")
    return result


def print_table(rows: list[dict]) -> None:
    def fmt(value, spec, suffix=""):
        width = int(spec.split(".")[0] or 0)
        return f"{'-':>{width}}" if value is None else f"{value:{spec}}{suffix}"

    header = (f"| {'section':<8} | {'shape':<19} | {'method':<12} | {'new/update tok/s':>16} | {'vs base':>7} |"
              f" {'% ceil':>6} | {'peak GPU GiB':>12} | note")
    print(header)
    print("|" + "|".join("-" * len(c) for c in header.split("|")[1:]) + "|")
    for r in rows:
        print(f"| {r['section']:<8} | {r['shape']:<19} | {r['method']:<12} | {fmt(r.get('tok_per_s'), '16.1f')} |"
              f" {fmt(r.get('ratio'), '6.2f', 'x'):>7} | {fmt(r.get('pct_ceiling'), '5.1f', '%'):>6} |"
              f" {fmt(r.get('peak_gib'), '12.2f'):>12} | {r.get('note', '')}")
    print("base: hf_generate (sampling), the same mode's plain update (update); peak GPU memory includes weights")


# ------------------------------------------------------------------------------------------ measuring
def measure_prompt_shapes(seeds: int = 8) -> dict:
    """Re-measure PROMPT_SHAPES (needs mas_envs, its deps and the cached Qwen2.5-Coder tokenizer; CPU only)."""
    from transformers import AutoTokenizer

    from mas_envs import make_env
    from mas_trainer.settings.envs import ENV_DEFAULTS
    from mas_trainer.policies.models import _tokenizer_folder
    from mas_trainer.update.scoring import common_prefix_length

    tokenizer = AutoTokenizer.from_pretrained(_tokenizer_folder("qwen2.5-coder-0.5b"))
    envs = {
        "plan_path": dict(ENV_DEFAULTS["plan_path"], workflow="mas"),
        "coder_tester": dict(workflow="mas"),
    }
    found: dict[str, list[list[int]]] = {}
    for env_name, kwargs in envs.items():
        env = make_env(env_name, **kwargs)
        for seed in range(seeds):
            env.reset(seed=seed)
            for _ in range(2):  # first turn: both roles, in order
                agent = env.agent_selection
                text = QWEN3_CHAT.format(prompt=env.observe(agent)["prompt"])
                found.setdefault(f"{env_name}/{agent}", []).append(
                    list(tokenizer(text, add_special_tokens=False)["input_ids"])
                )
                env.step("no answer")
    return {name: {"lengths": [len(p) for p in ps], "common": common_prefix_length(ps)} for name, ps in found.items()}


if __name__ == "__main__":
    main()

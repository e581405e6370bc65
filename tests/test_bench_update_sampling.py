"""bench/bench_update.py and bench/bench_sampling.py helpers: variant names, positions counted, warm-up spread, params."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load(name: str):
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(f"{name}_under_test", BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


@pytest.fixture(scope="module")
def update():
    return load("bench_update")


def sample(prompt, completion):
    return SimpleNamespace(prompt_ids=list(prompt), completion_ids=list(completion))


def test_variant_names(update):
    assert update.describe("trl16") == update.DESCRIPTIONS["trl16"]  # the old names keep their text
    assert update.describe("trl4_lora") == "TRL scoring (every position), micro-batch 4, LoRA"
    assert update.micro_batch("common64_bf16") == 64 and update.micro_batch("trl1_lora") == 1
    for bad in ("trl", "trl0", "common16_fp8", "foo16"):
        with pytest.raises(ValueError):
            update.describe(bad)


def test_positions_run_follows_each_layout(update):
    shared = list(range(100, 130))  # 30 common tokens
    a, b = shared + [1, 2, 3, 4], shared + [5, 6]  # prompts of 34 and 32 tokens
    samples = [sample(a, [7] * 3), sample(a, [7] * 5), sample(b, [8] * 2), sample(b, [8] * 4)]
    head = 4 * 5  # 4 rows x the longest completion (right padding)
    assert update.positions_run(samples, "trl16") == (4 * 34 + head, head)
    assert update.positions_run(samples, "group16") == (2 * 34 + head, head)
    assert update.positions_run(samples, "common16") == (30 + 2 * (34 - 30) + head, head)
    # micro-batch 2: sorted by prompt length, each chunk holds one prompt -> no common-prefix pass
    per_chunk = (2 * 32 + 2 * 4) + (2 * 34 + 2 * 5)
    assert update.positions_run(samples, "trl2") == (per_chunk, 2 * 4 + 2 * 5)
    assert update.positions_run(samples, "common2") == (32 + 2 * 4 + 34 + 2 * 5, 2 * 4 + 2 * 5)


def test_warmup_share_spans_groups(update):
    share = [f"g{g}s{i}" for g in range(2) for i in range(8)]
    assert update.warmup_share(share, 2) == ["g0s0", "g1s0"]
    assert len(update.warmup_share(share, 100)) == 16 and update.warmup_share(share, 0) == ["g0s0"]


def test_forward_params_skips_an_untied_input_embedding():
    import torch

    sampling = load("bench_sampling")

    class Toy(torch.nn.Module):
        def __init__(self, tied: bool):
            super().__init__()
            self.embed, self.body, self.head = torch.nn.Embedding(10, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 10)
            if tied:
                self.head.weight = self.embed.weight

        def get_input_embeddings(self):
            return self.embed

        def get_output_embeddings(self):
            return self.head

    assert sampling.forward_params(Toy(tied=False)) == 20 + 40 + 10  # body + head (weight, bias)
    assert sampling.forward_params(Toy(tied=True)) == 40 + 20 + 10  # the shared table counted once
    assert sampling.PROMPT_SOURCES == ("grid", "plan_path", "coder_tester")
    assert len(sampling.prompt_texts("grid", 3)) == 3

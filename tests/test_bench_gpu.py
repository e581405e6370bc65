"""bench/bench_gpu.py on CPU (tiny config): the table, the budget guard, greedy equality, the prompt shapes."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "bench_gpu.py"
# What the GPU machine lacks (no TRL, no vLLM) and what the script must not need (the envs and their deps).
BLOCKED = ["trl", "vllm", "mas_envs", "pettingzoo", "gymnasium"]


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_gpu_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_script(*args: str, tmp_path: Path) -> tuple[dict, str]:
    """Run the script in a fresh CPU-only process with BLOCKED modules unimportable; (JSON, stdout)."""
    out = tmp_path / "gpu.json"
    code = (
        "import runpy, sys\n"
        + "".join(f"sys.modules[{name!r}] = None\n" for name in BLOCKED)
        + f"sys.argv = [{str(SCRIPT)!r}, *{list(args) + ['--json', str(out)]!r}]\n"
        + f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
    )
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout


def test_tiny_run_prints_every_row_with_positive_numbers(tmp_path):
    bench = load_bench()
    result, stdout = run_script("--tiny", "--reps", "1", tmp_path=tmp_path)
    assert result["tiny"] and result["family"] in ("qwen3", "qwen2") and result["skipped"] == []
    assert result["k"] == 8 and result["new_tokens"] == 16 and result["ceiling_flops"] > 0

    expected = {("ceiling", "matmul")}
    for shape in bench.PROMPT_SHAPES:
        expected |= {("sampling", shape, m) for m in ("hf_generate", "ps_none", "ps_cascade")}
        expected |= {("update", shape, f"{mode}_{m}") for mode in ("full", "lora") for m in ("plain", "shared")}
    got = set()
    for row in result["rows"]:
        assert not row.get("skipped"), row
        if row["section"] == "ceiling":
            got.add(("ceiling", row["method"]))
            assert row["flops"] > 0
            continue
        got.add((row["section"], row["shape"], row["method"]))
        assert row["tok_per_s"] > 0 and row["ratio"] > 0 and row["pct_ceiling"] > 0, row
        assert row["peak_gib"] is None  # CPU: no GPU memory
        assert all(s > 0 for s in row["seconds"])
        if row["section"] == "sampling":  # EOS disabled: every row samples exactly the budget
            assert row["tokens"] == len(bench.PROMPT_SHAPES[row["shape"]]["lengths"]) * 8 * 16
        else:
            assert row["completion_tok_per_s"] > 0 and row["trainable_params"] > 0
    assert got == expected

    lora = {r["trainable_params"] for r in result["rows"] if r["method"].startswith("lora")}
    full = {r["trainable_params"] for r in result["rows"] if r["method"].startswith("full")}
    assert len(lora) == len(full) == 1 and lora.pop() < full.pop() == result["params"]

    # the printed table: a line per row, and the greedy check
    table = [line for line in stdout.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + len(expected)  # header + rows
    for section, *rest in expected:
        assert any(line.split("|")[1].strip() == section and line.split("|")[3].strip() == rest[-1] for line in table)
    check = result["greedy_check"]
    assert check["rows_equal"] == check["rows"] == 8, check
    assert "8/8 rows identical" in stdout


def test_budget_guard_skips_rows_and_says_so(tmp_path):
    result, stdout = run_script("--tiny", "--reps", "1", "--budget-s", "0", "--shapes", "coder_tester/coder",
                                tmp_path=tmp_path)
    skipped = [r for r in result["rows"] if r.get("skipped")]
    assert len(skipped) == 3 + 4 and len(result["skipped"]) == 7  # every sampling and update row
    assert all("budget" in r["note"] for r in skipped)
    assert "SKIPPED (7 rows" in stdout and "skipped: budget" in stdout


def test_prefix_shared_equals_generate_under_greedy():
    import torch

    bench = load_bench()
    family, model = bench.build_model(bench.TINY, "cpu", torch.float32)
    assert family == "qwen3"  # this venv's transformers has Qwen3
    for seed, name in enumerate(bench.PROMPT_SHAPES):
        prompts = bench.synth_prompts(bench.PROMPT_SHAPES[name], model.config.vocab_size, seed=seed)
        check = bench.greedy_check(model, prompts, 24)
        assert check["hf"] == check["prefix_shared"], name
        assert all(len(row) == 24 for row in check["hf"])
        assert len({tuple(row) for row in check["hf"]}) > 1  # not a degenerate model: prompts differ in output

    # K greedy branches are all the greedy row; sampled branches differ from each other
    prompts = bench.synth_prompts(bench.PROMPT_SHAPES["coder_tester/coder"], model.config.vocab_size, seed=0)[:2]
    hf = bench.hf_generate(model, prompts, 1, 8, greedy=True)
    ps = bench.ps_generate(bench.prefix_backend(model, "cascade"), prompts, 4, 8, greedy=True)
    assert ps == [hf[0]] * 4 + [hf[1]] * 4
    sampled = bench.ps_generate(bench.prefix_backend(model, "cascade"), prompts, 4, 8)
    assert len({tuple(r) for r in sampled}) > 1


def test_synthesized_prompts_have_the_measured_shape():
    from mas_trainer.update.scoring import common_prefix_length

    bench = load_bench()
    for name, shape in bench.PROMPT_SHAPES.items():
        prompts = bench.synth_prompts(shape, 2048, seed=0)
        assert [len(p) for p in prompts] == shape["lengths"]
        assert common_prefix_length(prompts) == shape["common"]
        assert all(0 < t < 2048 for p in prompts for t in p)


def test_hard_coded_prompt_shapes_match_a_fresh_measurement():
    bench = load_bench()
    try:
        measured = bench.measure_prompt_shapes()
    except FileNotFoundError as err:  # the Qwen2.5-Coder tokenizer is not cached and its packages are missing
        pytest.skip(str(err))
    assert set(measured) == set(bench.PROMPT_SHAPES)
    for name, shape in bench.PROMPT_SHAPES.items():
        now = measured[name]
        assert len(now["lengths"]) == len(shape["lengths"]), name
        for old, new in zip(shape["lengths"], now["lengths"]):
            assert abs(new - old) <= 0.1 * old, (name, shape, now)
        assert abs(now["common"] - shape["common"]) <= 0.1 * shape["common"], (name, shape, now)

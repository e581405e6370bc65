"""The vLLM generation backend against a real in-process vLLM engine (run with `make test-vllm`).

The engine tests need vLLM (the separate .venv-vllm, see docs/VLLM.md); in the main venv they are
skipped and only the "vLLM missing" error paths run. They use the default model (SmolLM2-135M):
see MODEL below for why not the tiny one.
"""

from __future__ import annotations

import copy
import os

import pytest

from mas_trainer.policies.generation import HFBackend
from mas_trainer.rollout.prompts import chat_prompt_ids
from mas_trainer.settings.optional import vllm_available

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# vLLM's CPU attention does not take the tiny model's head size (16); SmolLM2-135M (64) loads.
MODEL = "smollm2-135m"
QUESTIONS = [
    "What is 2 + 3? Answer with the number only.",
    "Name one colour of the rainbow. Answer with one word.",
    "Write the word 'cat' backwards.",
]

needs_vllm = pytest.mark.skipif(
    not vllm_available(), reason="vllm is not installed in this Python (make setup-vllm; make test-vllm runs these)"
)


@pytest.fixture(scope="module")
def hf_model_and_tokenizer(one_torch_thread):
    from mas_trainer.policies.models import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(MODEL)
    model.eval()
    return model, tokenizer


@pytest.fixture(scope="module")
def prompts(hf_model_and_tokenizer):
    _, tokenizer = hf_model_and_tokenizer
    return [chat_prompt_ids(tokenizer, q) for q in QUESTIONS]


@pytest.fixture(scope="module")
def backend(hf_model_and_tokenizer):
    from mas_trainer.policies.vllm_engine import VLLMBackend

    model, tokenizer = hf_model_and_tokenizer
    engine = VLLMBackend(model, tokenizer, max_model_len=512, enforce_eager=True, kv_cache_gib=1)
    yield engine
    engine.close()


def _hf_sampled_logprobs(model, prompt: list[int], completion: list[int], temperature: float) -> list[float]:
    """log_softmax(logits / T) of each completion token, recomputed by one forward pass."""
    import torch

    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
    logprobs = torch.log_softmax(logits / temperature, dim=-1)
    return logprobs.gather(1, torch.tensor(completion)[:, None]).squeeze(1).tolist()


# ---------------------------------------------------------------------- with a real engine
@pytest.mark.vllm
@needs_vllm
def test_greedy_matches_hf_backend_token_for_token(backend, hf_model_and_tokenizer, prompts):
    model, tokenizer = hf_model_and_tokenizer
    ours = backend.generate(prompts, 1, max_new_tokens=24, temperature=0, return_logprobs=True)
    reference = HFBackend(model, tokenizer).generate(prompts, 1, max_new_tokens=24, temperature=0,
                                                     return_logprobs=True)
    for got, want in zip(ours, reference):
        assert got[0].token_ids == want[0].token_ids
        assert got[0].text == want[0].text
        assert got[0].finish_reason == want[0].finish_reason
        # Greedy log-probs are log_softmax(logits) in both (fp32 kernels differ slightly).
        assert got[0].logprobs == pytest.approx(want[0].logprobs, abs=2e-3)


@pytest.mark.vllm
@needs_vllm
def test_n_branches_with_eos_cut_finish_reason_and_logprobs(backend, hf_model_and_tokenizer, prompts):
    model, tokenizer = hf_model_and_tokenizer
    eos = set(backend.eos_token_ids)
    out = backend.generate(prompts, 6, max_new_tokens=20, temperature=0.8, return_logprobs=True, seed=1)
    assert [len(group) for group in out] == [6] * len(prompts)
    finish = set()
    for prompt, group in zip(prompts, out):
        for c in group:
            finish.add(c.finish_reason)
            assert 1 <= len(c.token_ids) <= 20
            assert not eos & set(c.token_ids[:-1]), "EOS may only be the last token"
            if c.finish_reason == "stop":
                assert c.token_ids[-1] in eos
            else:
                assert c.finish_reason == "length" and len(c.token_ids) == 20
            assert c.text == tokenizer.decode(c.token_ids, skip_special_tokens=True)
            # processed_logprobs with top_p=1: exactly log_softmax(logits / T) of the sampled token.
            assert c.logprobs == pytest.approx(_hf_sampled_logprobs(model, prompt, c.token_ids, 0.8), abs=2e-3)
    assert finish == {"stop", "length"}, "these short-answer prompts end both ways within 20 tokens"
    assert len({tuple(c.token_ids) for c in out[0]}) > 1, "K samples of one prompt should not all be equal"


@pytest.mark.vllm
@needs_vllm
def test_seeded_sampling_reproduces(backend, prompts):
    def sample(seed):
        out = backend.generate(prompts, 4, max_new_tokens=12, temperature=1.0, seed=seed)
        return [[c.token_ids for c in group] for group in out]

    first = sample(7)
    assert sample(7) == first
    assert sample(8) != first


@pytest.mark.vllm
@needs_vllm
def test_sync_weights_brings_updated_weights_into_the_engine(backend, hf_model_and_tokenizer, prompts):
    """A second engine (one per policy, as in specialized mode) on a copy of the model that we change."""
    import torch

    from mas_trainer.policies.vllm_engine import VLLMBackend

    base, tokenizer = hf_model_and_tokenizer
    model = copy.deepcopy(base)
    rng_before = torch.random.get_rng_state()
    other = VLLMBackend(model, tokenizer, max_model_len=512, enforce_eager=True, kv_cache_gib=1)
    assert torch.equal(torch.random.get_rng_state(), rng_before), "building an engine leaves the global RNG alone"
    try:
        def greedy(b):
            return [g[0].token_ids for g in b.generate(prompts, 1, max_new_tokens=16, temperature=0)]

        before = greedy(other)
        assert before == greedy(backend)
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():  # a large change of every MLP output projection
            for layer in model.model.layers:
                weight = layer.mlp.down_proj.weight
                weight.add_(torch.randn(weight.shape, generator=generator) * weight.std() * 2)
        updated = [g[0].token_ids for g in HFBackend(model, tokenizer).generate(prompts, 1, max_new_tokens=16,
                                                                                 temperature=0)]
        assert updated != before, "the perturbation should change greedy output"
        assert greedy(other) == before, "without sync the engine keeps the old weights"
        other.sync_weights()
        assert greedy(other) == updated  # same prompts: a stale prefix cache would show here
        assert greedy(backend) == before, "the first engine (another policy) is untouched"
    finally:
        other.close()


@pytest.mark.vllm
@needs_vllm
def test_bad_arguments_are_rejected(backend, prompts, hf_model_and_tokenizer):
    from mas_trainer.policies.vllm_engine import VLLMBackend

    bad = [
        dict(n=0, max_new_tokens=4),
        dict(n=2, max_new_tokens=0),
        dict(n=2, max_new_tokens=4, temperature=-1.0),
        dict(n=2, max_new_tokens=4, top_p=0.0),
        dict(n=2, max_new_tokens=4, top_p=1.5),
        dict(n=1, max_new_tokens=500),  # prompt + 500 > max_model_len 512
    ]
    for kwargs in bad:
        n = kwargs.pop("n")
        with pytest.raises(ValueError):
            backend.generate(prompts, n, **kwargs)
    with pytest.raises(ValueError, match="at least one token"):
        backend.generate([[]], 1, max_new_tokens=4)
    assert backend.generate([], 2, max_new_tokens=4) == []
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        VLLMBackend(*hf_model_and_tokenizer, gpu_memory_utilization=0)


@pytest.mark.vllm
@needs_vllm
def test_make_backend_selects_vllm(backend):
    from mas_trainer.policies.vllm_engine import VLLMBackend
    from mas_trainer.policies.workers import make_backend

    with pytest.raises(ValueError, match="kv_cache_gib"):  # the options reach the backend
        make_backend(backend.model, backend.tokenizer, "vllm", {"kv_cache_gib": 0})
    assert isinstance(backend, VLLMBackend)


# ---------------------------------------------------------------------- without vLLM
@pytest.mark.skipif(vllm_available(), reason="checks the error shown when vllm is missing")
def test_choosing_vllm_without_it_names_the_install_command():
    from mas_trainer.policies.models import tiny_model_and_tokenizer
    from mas_trainer.policies.workers import make_backend

    model, tokenizer = tiny_model_and_tokenizer()
    with pytest.raises(ImportError, match="make setup-vllm"):
        make_backend(model, tokenizer, "vllm")


@pytest.mark.skipif(vllm_available(), reason="checks the error shown when vllm is missing")
def test_mas_eval_backend_vllm_without_it_is_a_usage_error(capsys):
    from mas_trainer.run.eval_cli import main

    assert main(["--env", "plan_path", "--model", "tiny", "--episodes", "1", "--backend", "vllm"]) == 2
    assert "make setup-vllm" in capsys.readouterr().err


def test_config_rollout_backend_vllm():
    pytest.importorskip("trl")
    from mas_trainer.settings.config import ATGRPOConfig

    if vllm_available():
        assert ATGRPOConfig(output_dir="unused", rollout_backend="vllm").rollout_backend == "vllm"
    else:  # refused at once, with the install command, rather than when the trainer builds its backends
        with pytest.raises(ValueError, match="make setup-vllm"):
            ATGRPOConfig(output_dir="unused", rollout_backend="vllm")
    with pytest.raises(ValueError, match="prefix_shared, hf or vllm"):
        ATGRPOConfig(output_dir="unused", rollout_backend="bogus")


def test_mas_eval_backend_option():
    from mas_trainer.run.eval_cli import UsageError, parse_request

    assert parse_request(["--env", "plan_path"])[0].backend == "auto"
    assert parse_request(["--env", "plan_path", "--backend", "prefix_shared"])[0].backend == "prefix_shared"
    with pytest.raises(UsageError, match="--backend"):
        parse_request(["--env", "plan_path", "--backend", "bogus"])


@pytest.mark.vllm
@needs_vllm
def test_trainer_step_with_vllm_rollouts_syncs_the_engine(tmp_path, one_torch_thread):
    """mas-train's loop with rollout_backend='vllm': after the update the engine samples the new weights."""
    import math

    from mas_trainer.settings.config import ATGRPOConfig
    from mas_trainer.run.trainer import MASTrainer
    from mas_trainer.policies.vllm_engine import VLLMBackend

    config = ATGRPOConfig(output_dir=str(tmp_path / "run"), env="plan_path", workflow="single", envs_per_step=2,
                          num_generations=4, max_turns=1, max_steps=1, max_completion_length=4, rollout_seed=0,
                          learning_rate=1e-3, rollout_backend="vllm", vllm_max_model_length=1024)
    run = MASTrainer(config)
    backend = run.rollout_workers["shared"].backend
    assert isinstance(backend, VLLMBackend) and backend.max_model_len == 1024  # vllm_max_model_length reached it
    assert backend.model is run.model_of("shared")  # the engine mirrors the model being trained
    record = run.train_step()
    assert record["samples"] == 8 and math.isfinite(record["loss/shared"])
    model, tokenizer = run.model_of("shared"), backend.tokenizer
    prompt = [chat_prompt_ids(tokenizer, QUESTIONS[0])]
    want = HFBackend(model, tokenizer).generate(prompt, 1, max_new_tokens=12, temperature=0)[0][0].token_ids
    assert backend.generate(prompt, 1, max_new_tokens=12, temperature=0)[0][0].token_ids == want

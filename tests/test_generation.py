"""HFBackend sampling and chat prompts, on the tiny random model with the real tokenizer."""

from __future__ import annotations

import copy
import sys
import time

import pytest
import torch

from mas_trainer.policies.generation import GenerationBackend, HFBackend
from mas_trainer.rollout.prompts import chat_prompt_ids
from mas_trainer.policies.models import tiny_model_and_tokenizer


@pytest.fixture(scope="module")
def tiny():
    return tiny_model_and_tokenizer(seed=0)


@pytest.fixture(scope="module")
def prompts(tiny):
    _, tokenizer = tiny
    texts = ["What is 2+3?", "Move the box left, then up. Which move comes first?", "hi"]
    return [chat_prompt_ids(tokenizer, text) for text in texts]


def _plain_greedy(model, prompt, max_new_tokens):
    """Greedy tokens from an unpadded single-prompt generate call, cut after the first EOS."""
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=max_new_tokens, do_sample=False)
    return out[0, len(prompt) :].tolist()


def test_chat_prompt_ids_apply_the_chat_template(tiny):
    _, tokenizer = tiny
    ids = chat_prompt_ids(tokenizer, "What is 2+3?", system="You add numbers.")
    text = tokenizer.decode(ids)
    assert text.startswith("<|im_start|>system\nYou add numbers.<|im_end|>")
    assert "<|im_start|>user\nWhat is 2+3?<|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")
    default_system = tokenizer.decode(chat_prompt_ids(tokenizer, "hi"))
    assert "<|im_start|>user\nhi<|im_end|>" in default_system


def test_chat_prompt_ids_fall_back_to_plain_text_without_template(tiny):
    _, tokenizer = tiny
    plain = copy.deepcopy(tokenizer)
    plain.chat_template = None
    ids = chat_prompt_ids(plain, "What is 2+3?")
    assert plain.decode(ids) == "What is 2+3?\n"


def test_backend_follows_the_protocol(tiny):
    assert isinstance(HFBackend(*tiny), GenerationBackend)


def test_completion_structure_and_counts(tiny, prompts):
    model, tokenizer = tiny
    out = HFBackend(model, tokenizer).generate(prompts, 4, max_new_tokens=5, seed=0, return_logprobs=True)
    assert len(out) == len(prompts) and all(len(group) == 4 for group in out)
    for group in out:
        for completion in group:
            assert 1 <= len(completion.token_ids) <= 5
            assert len(completion.logprobs) == len(completion.token_ids)
            assert completion.text == tokenizer.decode(completion.token_ids, skip_special_tokens=True)
            if completion.finish_reason == "length":
                assert len(completion.token_ids) == 5
            else:
                assert completion.token_ids[-1] == tokenizer.eos_token_id
    assert out[0][0].logprobs is not None
    no_logprobs = HFBackend(model, tokenizer).generate(prompts[:1], 1, max_new_tokens=3, seed=0)
    assert no_logprobs[0][0].logprobs is None


def test_greedy_equals_plain_generate_despite_left_padding(tiny, prompts):
    model, tokenizer = tiny
    out = HFBackend(model, tokenizer).generate(prompts, 1, max_new_tokens=8, temperature=0)
    for prompt, (completion,) in zip(prompts, out):
        assert completion.token_ids == _plain_greedy(model, prompt, 8)[: len(completion.token_ids)]
        assert len(set(completion.token_ids)) > 1  # a peaked, non-degenerate random model


def test_greedy_copies_are_identical(tiny, prompts):
    out = HFBackend(*tiny).generate(prompts[:1], 5, max_new_tokens=8, temperature=0)
    assert len({tuple(c.token_ids) for c in out[0]}) == 1


def test_eos_ends_the_completion_inclusive(tiny, prompts):
    model, tokenizer = tiny
    first = HFBackend(model, tokenizer).generate(prompts[:1], 1, max_new_tokens=8, seed=5)[0][0]
    assert first.finish_reason == "length"
    # Declare the token sampled at position 3 an EOS (if it did not occur before): the same seeded
    # run must now stop right after it.
    position = next(i for i, t in enumerate(first.token_ids) if first.token_ids.index(t) == i and i >= 2)
    stop_token = first.token_ids[position]
    backend = HFBackend(model, tokenizer, eos_token_ids=[stop_token])
    stopped = backend.generate(prompts[:1], 1, max_new_tokens=8, seed=5, return_logprobs=True)[0][0]
    assert stopped.token_ids == first.token_ids[: position + 1]
    assert stopped.finish_reason == "stop"
    assert len(stopped.logprobs) == position + 1


def test_logprobs_match_a_recomputed_forward_pass(tiny, prompts):
    model, tokenizer = tiny
    temperature = 0.7
    out = HFBackend(model, tokenizer).generate(
        prompts[:2], 2, max_new_tokens=5, temperature=temperature, top_p=0.9, return_logprobs=True, seed=11
    )
    for prompt, group in zip(prompts, out):
        for completion in group:
            ids = torch.tensor([prompt + completion.token_ids])
            with torch.no_grad():
                logits = model(ids).logits[0, len(prompt) - 1 : -1]
            expected = torch.log_softmax(logits / temperature, dim=-1)
            expected = expected.gather(1, torch.tensor(completion.token_ids)[:, None]).squeeze(1)
            torch.testing.assert_close(torch.tensor(completion.logprobs), expected, atol=2e-4, rtol=1e-4)


def test_sampling_is_not_restricted_to_the_top_k(tiny, prompts):
    # generate() would silently apply top_k=50 unless the backend disables it; the random tiny
    # model spreads its mass over the whole vocabulary, so unrestricted samples fall outside it.
    model, tokenizer = tiny
    (group,) = HFBackend(model, tokenizer).generate(prompts[:1], 32, max_new_tokens=1, seed=3)
    with torch.no_grad():
        logits = model(torch.tensor([prompts[0]])).logits[0, -1]
    ranks = [int((logits > logits[c.token_ids[0]]).sum()) for c in group]
    assert max(ranks) >= 50


def test_seeded_sampling_is_reproducible_and_keeps_the_global_rng(tiny, prompts):
    backend = HFBackend(*tiny)
    torch.manual_seed(7)
    expected_next = torch.rand(1)
    torch.manual_seed(7)
    a = backend.generate(prompts[:2], 3, max_new_tokens=4, seed=42)
    assert torch.rand(1) == expected_next
    b = backend.generate(prompts[:2], 3, max_new_tokens=4, seed=42)
    c = backend.generate(prompts[:2], 3, max_new_tokens=4, seed=43)
    ids = lambda out: [[c.token_ids for c in group] for group in out]  # noqa: E731
    assert ids(a) == ids(b)
    assert ids(a) != ids(c)
    assert len({tuple(t) for t in ids(a)[0]}) > 1  # the n samples of one prompt differ


def test_batch_splitting_keeps_greedy_results(tiny, prompts):
    model, tokenizer = tiny
    whole = HFBackend(model, tokenizer).generate(prompts, 2, max_new_tokens=5, temperature=0)
    split = HFBackend(model, tokenizer, max_batch_size=2).generate(prompts, 2, max_new_tokens=5, temperature=0)
    assert [[c.token_ids for c in g] for g in whole] == [[c.token_ids for c in g] for g in split]


def test_training_mode_is_restored(tiny, prompts):
    model, tokenizer = tiny
    model.train()
    try:
        HFBackend(model, tokenizer).generate(prompts[:1], 1, max_new_tokens=2)
        assert model.training
    finally:
        model.eval()
    HFBackend(model, tokenizer).generate(prompts[:1], 1, max_new_tokens=2)
    assert not model.training


@pytest.mark.slow
def test_real_default_model_answers_a_sum():
    from mas_trainer.policies.models import DEFAULT_MODEL, load_model_and_tokenizer

    start = time.perf_counter()
    model, tokenizer = load_model_and_tokenizer(DEFAULT_MODEL)
    load_s = time.perf_counter() - start
    prompt = chat_prompt_ids(tokenizer, "What is 2+3?")
    (completion,) = HFBackend(model, tokenizer).generate([prompt], 1, max_new_tokens=24, temperature=0)[0]
    print(f"\nload {load_s:.1f} s; answer: {completion.text!r}", file=sys.stderr)
    assert completion.text.strip()
    assert completion.token_ids == _plain_greedy(model, prompt, 24)[: len(completion.token_ids)]

"""PrefixSharedBackend: same results as plain ``generate`` / HFBackend, correct log-probs and sampling.

Runs on the tiny random Llama with the real SmolLM2 tokenizer; the slow test uses the real default
model.
"""

from __future__ import annotations

import pytest
import torch

from mas_trainer.policies.generation import GenerationBackend, HFBackend
from mas_trainer.rollout.prompts import chat_prompt_ids
from mas_trainer.policies.models import tiny_model_and_tokenizer
from mas_trainer.policies.prefix_sharing import PREFIX_MODES, PrefixSharedBackend, supports_fast_path


@pytest.fixture(scope="module")
def tiny():
    return tiny_model_and_tokenizer(seed=0)


@pytest.fixture(scope="module")
def prompts(tiny):
    """Prompts of different lengths (so left padding matters), one of them repeated."""
    _, tokenizer = tiny
    texts = ["What is 2+3?", "Move the box left, then up. Which move comes first?", "hi", "What is 2+3?"]
    return [chat_prompt_ids(tokenizer, text) for text in texts]


def _plain_greedy(model, prompt, max_new_tokens, eos_ids):
    """Greedy tokens of an unpadded one-prompt ``generate`` call, cut after the first EOS."""
    with torch.no_grad():
        out = model.generate(
            torch.tensor([prompt]), max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=eos_ids
        )
    ids = out[0, len(prompt) :].tolist()
    stop = next((i for i, t in enumerate(ids) if t in eos_ids), None)
    return ids if stop is None else ids[: stop + 1]


def _recomputed_logprobs(model, prompt, completion, temperature):
    """log_softmax(logits / T) of each completion token, from one plain forward pass."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0].float()
    scaled = torch.log_softmax(logits / temperature, -1)
    rows = scaled[len(prompt) - 1 : len(prompt) - 1 + len(completion)]
    return rows.gather(1, torch.tensor(completion)[:, None])[:, 0]


def test_follows_the_protocol_and_uses_the_fast_path(tiny):
    backend = PrefixSharedBackend(*tiny)
    assert isinstance(backend, GenerationBackend)
    assert backend.fast and supports_fast_path(tiny[0])
    with pytest.raises(ValueError):
        PrefixSharedBackend(*tiny, prefix_mode="bogus")


@pytest.mark.parametrize("mode", PREFIX_MODES)
def test_greedy_matches_plain_generate(tiny, prompts, mode):
    model, tokenizer = tiny
    backend = PrefixSharedBackend(model, tokenizer, prefix_mode=mode)
    out = backend.generate(prompts, 3, max_new_tokens=12, temperature=0)
    assert len(out) == len(prompts) and all(len(group) == 3 for group in out)
    for prompt, group in zip(prompts, out):
        expected = _plain_greedy(model, prompt, 12, backend.eos_token_ids)
        assert all(c.token_ids == expected for c in group)
        assert group[0].text == tokenizer.decode(expected, skip_special_tokens=True)


def test_greedy_matches_hf_backend_including_eos_cut(tiny, prompts):
    model, tokenizer = tiny
    # Take a token that greedy decoding emits mid-way as the EOS, so completions must stop there.
    first = _plain_greedy(model, prompts[1], 12, [tokenizer.eos_token_id])
    fake_eos = [first[4]]
    ours = PrefixSharedBackend(model, tokenizer, eos_token_ids=fake_eos, max_batch_size=4)
    theirs = HFBackend(model, tokenizer, eos_token_ids=fake_eos)
    kwargs = dict(max_new_tokens=12, temperature=0, return_logprobs=True)
    got, want = ours.generate(prompts, 2, **kwargs), theirs.generate(prompts, 2, **kwargs)
    stopped = got[1][0]
    assert stopped.token_ids[-1] == fake_eos[0] and stopped.finish_reason == "stop"
    assert fake_eos[0] not in stopped.token_ids[:-1]
    for group_got, group_want in zip(got, want):
        for a, b in zip(group_got, group_want):
            assert (a.token_ids, a.text, a.finish_reason) == (b.token_ids, b.text, b.finish_reason)
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


@pytest.mark.parametrize("mode", PREFIX_MODES)
def test_sampled_logprobs_match_a_recomputed_forward_pass(tiny, prompts, mode):
    model, tokenizer = tiny
    backend = PrefixSharedBackend(model, tokenizer, prefix_mode=mode)
    out = backend.generate(prompts[:2], 3, max_new_tokens=8, temperature=0.7, return_logprobs=True, seed=3)
    for prompt, group in zip(prompts, out):
        for completion in group:
            assert len(completion.logprobs) == len(completion.token_ids) > 0
            expected = _recomputed_logprobs(model, prompt, completion.token_ids, 0.7)
            assert torch.tensor(completion.logprobs) == pytest.approx(expected, abs=1e-4)


def test_seeded_sampling_is_reproducible_and_leaves_the_global_rng_alone(tiny, prompts):
    backend = PrefixSharedBackend(*tiny)
    state = torch.random.get_rng_state()
    first = backend.generate(prompts, 4, max_new_tokens=8, seed=7)
    assert torch.equal(torch.random.get_rng_state(), state)
    again = backend.generate(prompts, 4, max_new_tokens=8, seed=7)
    other = backend.generate(prompts, 4, max_new_tokens=8, seed=8)
    ids = lambda out: [[c.token_ids for c in group] for group in out]  # noqa: E731
    assert ids(first) == ids(again)
    assert ids(first) != ids(other)
    # Branches of one prompt differ from each other (they are not K copies of one sample).
    assert len({tuple(c.token_ids) for c in first[1]}) > 1
    # A repeated prompt shares the prefill, not the draws: its samples are its own.
    assert ids(first)[0] != ids(first)[3] and first[0][0] is not first[3][0]


@pytest.mark.parametrize("mode", PREFIX_MODES)
def test_repeated_prompts_get_independent_samples(tiny, prompts, mode):
    """K trajectories of one task start from one prompt: sampling must not hand them one shared draw."""
    backend = PrefixSharedBackend(*tiny, prefix_mode=mode)
    same = [prompts[1]] * 8
    sampled = backend.generate(same, 1, max_new_tokens=6, temperature=1.0, seed=3)
    assert len(sampled) == 8 and all(len(c) == 1 for c in sampled)
    assert len({tuple(c[0].token_ids) for c in sampled}) > 1
    # Mixed multiplicities: each prompt still gets n completions, in request order.
    mixed = backend.generate([prompts[0], prompts[2], prompts[0]], 2, max_new_tokens=4, temperature=1.0, seed=3)
    assert [len(c) for c in mixed] == [2, 2, 2]
    assert [tuple(c.token_ids) for c in mixed[0]] != [tuple(c.token_ids) for c in mixed[2]]
    # Greedy: one decode serves every copy, and the copies are separate objects.
    greedy = backend.generate(same, 1, max_new_tokens=6, temperature=0.0)
    assert len({tuple(c[0].token_ids) for c in greedy}) == 1 and greedy[0][0] is not greedy[1][0]


def test_first_token_distribution_matches_the_model(tiny, prompts):
    """1,000 one-token branches of one prompt follow softmax(logits / T).

    Compared over buckets (each token with probability >= 1%, plus "all others"): total variation
    must stay below 0.06 (sampling noise at n = 1,000 gives about 0.03).
    """
    model, tokenizer = tiny
    n, temperature = 1000, 0.3  # T = 0.3 makes the random model's distribution peaked enough to test
    out = PrefixSharedBackend(model, tokenizer, max_batch_size=n).generate(
        [prompts[0]], n, max_new_tokens=1, temperature=temperature, seed=0
    )
    counts = torch.bincount(torch.tensor([c.token_ids[0] for c in out[0]]), minlength=model.config.vocab_size)
    with torch.no_grad():
        probs = torch.softmax(model(torch.tensor([prompts[0]])).logits[0, -1] / temperature, -1)
    frequent = probs >= 0.01
    assert frequent.sum() >= 5
    expected = torch.cat([probs[frequent], probs[~frequent].sum()[None]])
    observed = torch.cat([counts[frequent], counts[~frequent].sum()[None]]).float() / n
    total_variation = 0.5 * (observed - expected).abs().sum().item()
    assert total_variation < 0.06, total_variation


def test_tiny_top_p_is_greedy(tiny, prompts):
    backend = PrefixSharedBackend(*tiny)
    greedy = backend.generate(prompts[:2], 1, max_new_tokens=6, temperature=0)
    nucleus = backend.generate(prompts[:2], 3, max_new_tokens=6, temperature=1.0, top_p=1e-6, seed=1)
    for g, group in zip(greedy, nucleus):
        assert all(c.token_ids == g[0].token_ids for c in group)


def test_restores_training_mode_and_rejects_bad_arguments(tiny, prompts):
    model, tokenizer = tiny
    backend = PrefixSharedBackend(model, tokenizer)
    model.train()
    try:
        backend.generate(prompts[:1], 2, max_new_tokens=2)
        assert model.training
    finally:
        model.eval()
    for bad in [dict(n=0, max_new_tokens=2), dict(n=2, max_new_tokens=0)]:
        with pytest.raises(ValueError):
            backend.generate(prompts[:1], **bad)
    with pytest.raises(ValueError):
        backend.generate([[]], 2, max_new_tokens=2)


def test_unsupported_architecture_falls_back_to_hf_backend(tiny, prompts):
    from transformers import GPT2Config, GPT2LMHeadModel

    _, tokenizer = tiny
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=256, n_embd=32, n_layer=1, n_head=2)
    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(config).eval()
    backend = PrefixSharedBackend(gpt2, tokenizer, eos_token_ids=[tokenizer.eos_token_id])
    assert not backend.fast
    got = backend.generate(prompts[:2], 2, max_new_tokens=4, temperature=0)
    want = HFBackend(gpt2, tokenizer, eos_token_ids=[tokenizer.eos_token_id]).generate(
        prompts[:2], 2, max_new_tokens=4, temperature=0
    )
    assert [[c.token_ids for c in g] for g in got] == [[c.token_ids for c in g] for g in want]


@pytest.mark.slow
def test_real_default_model_greedy_and_logprobs():
    from mas_trainer.policies.models import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer("smollm2-135m")
    model.eval()
    prompts = [
        chat_prompt_ids(tokenizer, "What is 17+25? Answer with the number only."),
        chat_prompt_ids(tokenizer, "You are on a grid at row 2, column 3; the goal is at row 0, column 3. "
                        "Which way do you move: up, down, left or right?"),
    ]
    backend = PrefixSharedBackend(model, tokenizer)
    greedy = backend.generate(prompts, 2, max_new_tokens=16, temperature=0)
    for prompt, group in zip(prompts, greedy):
        expected = _plain_greedy(model, prompt, 16, backend.eos_token_ids)
        assert all(c.token_ids == expected for c in group)
    sampled = backend.generate(prompts, 3, max_new_tokens=12, temperature=1.0, return_logprobs=True, seed=0)
    for prompt, group in zip(prompts, sampled):
        for completion in group:
            expected = _recomputed_logprobs(model, prompt, completion.token_ids, 1.0)
            assert torch.tensor(completion.logprobs) == pytest.approx(expected, abs=1e-3)


def test_inverse_cdf_draw_follows_the_probabilities_and_never_draws_a_zero():
    """The sampler's draw: frequencies match the row's probabilities (rows need not sum to 1, as after
    top-p), zero-probability tokens are never drawn, and a seed fixes the draw."""
    from mas_trainer.policies.prefix_sharing import _draw

    rows = torch.tensor([[0.0, 0.1, 0.0, 0.2, 0.7, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.3]]).repeat(20000, 1)
    chosen = _draw(rows, torch.Generator().manual_seed(0))
    first, second = chosen[0::2], chosen[1::2]
    freq = torch.bincount(first, minlength=6).float() / len(first)
    assert torch.allclose(freq, torch.tensor([0.0, 0.1, 0.0, 0.2, 0.7, 0.0]), atol=0.01), freq
    assert freq[[0, 2, 5]].sum() == 0 and (second == 5).all()
    again = _draw(rows, torch.Generator().manual_seed(0))
    assert torch.equal(chosen, again)


def test_two_level_draw_over_many_blocks_and_the_sampled_log_probs():
    """On a vocabulary of several draw blocks plus a partial tail, the draw follows the probabilities
    (mass in the first, a middle and the tail block; empty blocks and zeros never drawn), and the
    sampler's log-probs equal ``log_softmax(logits / T)`` of the drawn tokens."""
    from mas_trainer.policies.prefix_sharing import DRAW_BLOCK, _draw, _sample

    vocab = 3 * DRAW_BLOCK + 37
    hot = {3: 0.25, DRAW_BLOCK + 5: 0.05, 2 * DRAW_BLOCK - 1: 0.3, 3 * DRAW_BLOCK + 36: 0.4}  # block 2 is empty
    row = torch.zeros(vocab)
    for index, p in hot.items():
        row[index] = p
    chosen = _draw(row.repeat(40000, 1), torch.Generator().manual_seed(1))
    assert set(chosen.tolist()) == set(hot)
    for index, p in hot.items():
        assert (chosen == index).float().mean().item() == pytest.approx(p, abs=0.01)

    logits = torch.randn(64, vocab, generator=torch.Generator().manual_seed(2)) * 4
    expected = (logits / 0.7).log_softmax(-1)
    tokens, logprobs = _sample(logits.clone(), 0.7, 1.0, True, torch.Generator().manual_seed(3))
    assert torch.allclose(logprobs, expected.gather(1, tokens[:, None])[:, 0], atol=1e-4)
    nucleus, nucleus_logprobs = _sample(logits.clone(), 0.7, 0.5, True, torch.Generator().manual_seed(3))
    assert torch.allclose(nucleus_logprobs, expected.gather(1, nucleus[:, None])[:, 0], atol=1e-4)  # before top-p

"""PrefixSharedBackend's common-prefix cache: same output as without it, across calls, never stale."""

from __future__ import annotations

import pytest
import torch

from mas_trainer.rollout.prompts import chat_prompt_ids
from mas_trainer.policies.models import tiny_model_and_tokenizer
from mas_trainer.policies.prefix_sharing import PrefixSharedBackend

INSTRUCTIONS = (
    "You move an agent on a grid to reach the goal. Walls are '#', free cells are '.'. "
    "Answer with one word: up, down, left or right.\n"
)


@pytest.fixture()
def tiny(one_torch_thread):
    return tiny_model_and_tokenizer(seed=3)


def _prompts(tokenizer, tasks):
    """Chat prompts that share the header and instructions and differ in the task text (and length)."""
    return [chat_prompt_ids(tokenizer, INSTRUCTIONS + task) for task in tasks]


CALL_1 = ["Agent at row 1, column 2.", "Agent at row 3, column 0; the goal is two rows down.", "Row 0."]
CALL_2 = ["Agent at row 2, column 2; walls to the left.", "Row 3, column 3."]


def _greedy(backend, prompts):
    out = backend.generate(prompts, 2, max_new_tokens=6, temperature=0.0, return_logprobs=True)
    return [[(c.token_ids, c.logprobs, c.finish_reason) for c in group] for group in out]


def _assert_same(ours, reference):
    for group, ref_group in zip(ours, reference, strict=True):
        for (ids, logprobs, reason), (ref_ids, ref_logprobs, ref_reason) in zip(group, ref_group, strict=True):
            assert ids == ref_ids and reason == ref_reason
            assert torch.allclose(torch.tensor(logprobs), torch.tensor(ref_logprobs), atol=1e-4)


def _prefill_widths(backend, monkeypatch):
    """Record the token width of every prefill pass the backend runs."""
    widths = []
    original = backend._prefill

    def recording(input_ids, valid, past=None):
        widths.append(input_ids.shape[1])
        return original(input_ids, valid, past)

    monkeypatch.setattr(backend, "_prefill", recording)
    return widths


def test_two_calls_equal_the_uncached_backend_and_reuse_the_prefix(tiny, monkeypatch):
    model, tokenizer = tiny
    cached, plain = PrefixSharedBackend(model, tokenizer), PrefixSharedBackend(model, tokenizer, reuse_prefix=False)
    first, second = _prompts(tokenizer, CALL_1), _prompts(tokenizer, CALL_2)
    widths = _prefill_widths(cached, monkeypatch)

    _assert_same(_greedy(cached, first), _greedy(plain, first))
    kept = len(cached._shared_prefix.tokens)
    assert kept >= 40 and first[0][:kept] == first[1][:kept] == first[2][:kept]
    assert widths[0] == kept and widths[1] == max(map(len, first)) - kept  # prefix once, then remainders

    widths.clear()
    _assert_same(_greedy(cached, second), _greedy(plain, second))
    # Same header and instructions: the kept prefix is reused whole, only the remainders are encoded.
    assert len(cached._shared_prefix.tokens) == kept
    assert widths == [max(map(len, second)) - kept]


def test_a_longer_common_prefix_extends_the_kept_one(tiny, monkeypatch):
    model, tokenizer = tiny
    cached, plain = PrefixSharedBackend(model, tokenizer), PrefixSharedBackend(model, tokenizer, reuse_prefix=False)
    _greedy(cached, _prompts(tokenizer, CALL_1))
    kept = len(cached._shared_prefix.tokens)
    widths = _prefill_widths(cached, monkeypatch)
    longer = _prompts(tokenizer, ["Agent at row 1, column 2.", "Agent at row 1, column 3."])
    _assert_same(_greedy(cached, longer), _greedy(plain, longer))
    now = len(cached._shared_prefix.tokens)
    assert now > kept and widths[0] == now - kept  # only the new shared tokens are encoded


def test_sampled_logprobs_with_the_kept_prefix_match_a_fresh_forward(tiny):
    model, tokenizer = tiny
    backend = PrefixSharedBackend(model, tokenizer)
    backend.generate(_prompts(tokenizer, CALL_1), 1, max_new_tokens=2, temperature=0.0)  # fills the cache
    prompts = _prompts(tokenizer, CALL_2)
    out = backend.generate(prompts, 3, max_new_tokens=5, temperature=0.8, return_logprobs=True, seed=7)
    for prompt, group in zip(prompts, out):
        for c in group:
            with torch.no_grad():
                logits = model(torch.tensor([prompt + c.token_ids])).logits[0, len(prompt) - 1 : -1]
            expected = (logits / 0.8).log_softmax(-1).gather(1, torch.tensor(c.token_ids)[:, None])[:, 0]
            assert torch.allclose(torch.tensor(c.logprobs), expected, atol=1e-4)


@pytest.mark.parametrize("call_sync", [True, False])
def test_a_weight_change_never_serves_a_stale_prefix(tiny, call_sync):
    """After an optimizer step the output equals a fresh backend's, with or without sync_weights()."""
    model, tokenizer = tiny
    backend = PrefixSharedBackend(model, tokenizer)
    prompts = _prompts(tokenizer, CALL_1)
    before = _greedy(backend, prompts)
    assert backend._shared_prefix is not None

    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)  # moves every parameter it reaches
    model.train()
    logits = model(torch.tensor([prompts[0]])).logits
    logits[0, -1].log_softmax(-1)[before[0][0][0][0]].backward()  # push the greedy first token down
    optimizer.step()
    model.eval()
    if call_sync:
        backend.sync_weights()
        assert backend._shared_prefix is None

    after = _greedy(backend, prompts)
    _assert_same(after, _greedy(PrefixSharedBackend(model, tokenizer, reuse_prefix=False), prompts))
    assert [g[0][1] for g in after] != [g[0][1] for g in before]  # the step really changed the output


def test_load_state_dict_invalidates_the_kept_prefix(tiny):
    model, tokenizer = tiny
    backend = PrefixSharedBackend(model, tokenizer)
    prompts = _prompts(tokenizer, CALL_2)
    before = _greedy(backend, prompts)
    other, _ = tiny_model_and_tokenizer(seed=4)
    model.load_state_dict(other.state_dict())
    _assert_same(_greedy(backend, prompts), _greedy(PrefixSharedBackend(other, tokenizer, reuse_prefix=False), prompts))
    assert _greedy(backend, prompts) != before

"""Update-side scoring: encoding the common prompt prefix once gives the plain forward's logits and gradients."""

from __future__ import annotations

import pytest
import torch

from mas_trainer.policies.models import tiny_model_and_tokenizer
from mas_trainer.update.scoring import common_prefix_length, completion_logits


@pytest.fixture(scope="module")
def model(one_torch_thread):
    return tiny_model_and_tokenizer(seed=1)[0]


def _batch(rows: list[tuple[torch.Tensor, torch.Tensor]], n: int, pad: int = 2):
    """[left-padded prompt | right-padded completion] rows and their attention mask."""
    width = max(len(p) for p, _ in rows)
    ids = torch.full((len(rows), width + n), pad)
    mask = torch.zeros_like(ids)
    for i, (p, c) in enumerate(rows):
        ids[i, width - len(p) : width], mask[i, width - len(p) : width] = p, 1
        ids[i, width : width + len(c)], mask[i, width : width + len(c)] = c, 1
    return ids, mask, width


def _grouped_rows(gen: torch.Generator, common: int):
    """Three prompts (different lengths) sharing ``common`` leading tokens; completions of 1-4 tokens."""
    head = torch.randint(100, 2000, (common,), generator=gen)
    prompts = [torch.cat([head, torch.randint(100, 2000, (k,), generator=gen)]) for k in (9, 4, 14)]
    plan = [(0, 4), (0, 2), (1, 4), (0, 1), (1, 3), (2, 2), (2, 4), (1, 1)]
    return [(prompts[p], torch.randint(100, 2000, (n,), generator=gen)) for p, n in plan]


def _plain_full_forward(model, ids, mask, n):
    """TRL-style: every position of every row, then the logits that predict the completion."""
    out = model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0)).logits
    return out[:, -n - 1 : -1]


def _logits_and_grads(model, fn, ids, mask, n):
    model.zero_grad()
    logits = fn()
    valid = mask[:, -n:].bool()
    logprobs = logits.log_softmax(-1).gather(-1, ids[:, -n:].unsqueeze(-1)).squeeze(-1)
    # Weight positions differently so a gradient routed to the wrong row or position would show.
    weights = torch.linspace(0.5, 1.5, logprobs.numel()).view_as(logprobs)
    (logprobs * weights)[valid].sum().backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    return logits.detach(), grads


def test_common_prefix_length():
    assert common_prefix_length([[1, 2, 3], [1, 2, 4, 5], [1, 2]]) == 2
    assert common_prefix_length([[1, 2], [1, 2]]) == 2
    assert common_prefix_length([[3], [1, 2]]) == 0
    assert common_prefix_length([]) == 0


@pytest.mark.parametrize("share", [True, False])
def test_logits_and_gradients_equal_the_plain_forward(model, share):
    gen = torch.Generator().manual_seed(0)
    n = 4
    ids, mask, _ = _batch(_grouped_rows(gen, common=20), n)
    valid = mask[:, -n:].bool()
    full, full_grads = _logits_and_grads(model, lambda: _plain_full_forward(model, ids, mask, n), ids, mask, n)
    ours, our_grads = _logits_and_grads(
        model, lambda: completion_logits(model, ids, mask, n, share_common_prefix=share), ids, mask, n
    )
    assert ours.shape == full.shape
    assert torch.allclose(ours[valid], full[valid], atol=1e-4)
    for name, grad in full_grads.items():
        assert torch.allclose(our_grads[name], grad, atol=1e-4, rtol=1e-3), name


def test_common_prefix_pass_is_taken_and_skipped_when_it_does_not_pay(model, monkeypatch):
    """The common-prefix pass runs only for >1 distinct prompt sharing >= min_common_prefix tokens."""
    from mas_trainer.update import scoring

    calls = []
    original = scoring._encode_after_common_prefix
    monkeypatch.setattr(scoring, "_encode_after_common_prefix", lambda *a: calls.append(a[3]) or original(*a))
    gen = torch.Generator().manual_seed(1)
    n = 4
    rows = _grouped_rows(gen, common=20)
    ids, mask, _ = _batch(rows, n)
    with torch.no_grad():
        reference = _plain_full_forward(model, ids, mask, n)
        ours = completion_logits(model, ids, mask, n)
        assert calls == [20] and torch.allclose(ours[mask[:, -n:].bool()], reference[mask[:, -n:].bool()], atol=1e-4)
        completion_logits(model, ids, mask, n, min_common_prefix=21)  # too short a prefix
        one_prompt = [r for r in rows if r[0] is rows[0][0]]
        completion_logits(model, *_batch(one_prompt, n)[:2], n)  # one distinct prompt
    assert calls == [20]


def test_a_prompt_that_is_a_prefix_of_another_keeps_one_token_of_its_own(model):
    gen = torch.Generator().manual_seed(2)
    short = torch.randint(100, 2000, (24,), generator=gen)
    longer = torch.cat([short, torch.randint(100, 2000, (6,), generator=gen)])
    rows = [(short, torch.randint(100, 2000, (2,), generator=gen)), (longer, torch.randint(100, 2000, (3,), generator=gen))]
    n = 3
    ids, mask, _ = _batch(rows, n)
    valid = mask[:, -n:].bool()
    with torch.no_grad():
        assert torch.allclose(
            completion_logits(model, ids, mask, n)[valid], _plain_full_forward(model, ids, mask, n)[valid], atol=1e-4
        )

"""Completion logits for the update, encoding shared prompt text once (exact, differentiable).

An AT-GRPO micro-batch holds groups of K samples with one prompt per group, and the prompts of
different groups begin with the same text (chat header and task instructions; on Plan-Path 4x4
about 160 of ~280 tokens). TRL runs every row in full. :func:`completion_logits` instead

1. encodes the longest common token prefix of all distinct prompts ONCE (one row),
2. encodes each distinct prompt's remainder on top of that cache (one row per distinct prompt),
3. runs only the completion tokens of each sample on top of its prompt's cache.

Gradients flow through all three passes (the caches are indexed, not copied out of the graph),
so logits and parameter gradients equal a plain full forward pass up to float rounding.

Layout: remainders are left padded, which leaves padding "holes" between the common prefix and
each remainder. The attention mask hides them and position ids count only real tokens
(``cumsum(mask) - 1``), so every token sees the positions and keys of its unpadded sequence.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

# Below this many shared tokens an extra (one-row) pass costs more than it saves.
MIN_COMMON_PREFIX = 16


def common_prefix_length(sequences: list[list[int]]) -> int:
    """Length of the longest token prefix shared by all ``sequences``."""
    if not sequences:
        return 0
    shortest = min(sequences, key=len)
    for i, token in enumerate(shortest):
        if any(seq[i] != token for seq in sequences):
            return i
    return len(shortest)


def completion_logits(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    n: int,
    *,
    share_common_prefix: bool = True,
    min_common_prefix: int = MIN_COMMON_PREFIX,
) -> torch.Tensor:
    """Logits predicting the last ``n`` tokens of each row, shape ``(B, n, vocab)``; differentiable.

    Rows are ``[left-padded prompt | right-padded completion]``. Each distinct prompt is encoded
    once; with ``share_common_prefix`` (and at least two distinct prompts sharing
    ``min_common_prefix`` tokens) their common prefix is encoded once as well. Only the completion
    tokens are then run per row. ``share_common_prefix=False`` is the per-group sharing alone.
    """
    prompt_len = input_ids.size(1) - n
    prompt_ids, prompt_mask = input_ids[:, :prompt_len], attention_mask[:, :prompt_len]
    unique, inverse = torch.unique(torch.cat([prompt_ids, prompt_mask], dim=1), dim=0, return_inverse=True)
    u_ids, u_mask = unique[:, :prompt_len], unique[:, prompt_len:]

    common = 0
    if share_common_prefix and len(unique) > 1:
        tokens = [row[keep.bool()].tolist() for row, keep in zip(u_ids, u_mask)]
        # Every prompt keeps at least one token of its own: its last position predicts the completion.
        common = min(common_prefix_length(tokens), min(len(t) for t in tokens) - 1)
    if common >= max(min_common_prefix, 1):
        first, cache, key_mask = _encode_after_common_prefix(model, u_ids, u_mask, common)
    else:
        first, cache, key_mask = _encode_prompts(model, u_ids, u_mask)
    first = first[inverse]  # predicts completion token 0, (B, 1, V)
    if n == 1:
        return first
    cache.reorder_cache(inverse)  # index_select: one cache row per sample, still differentiable
    prompt_tokens = u_mask.sum(-1, keepdim=True)[inverse]
    positions = prompt_tokens + torch.arange(n - 1, device=input_ids.device).unsqueeze(0)
    rest = _forward(
        model,
        input_ids=input_ids[:, prompt_len:-1],  # tokens 0..n-2 predict tokens 1..n-1
        attention_mask=torch.cat([key_mask[inverse], attention_mask[:, prompt_len:-1]], dim=1),
        position_ids=positions,
        cache=cache,
    ).logits
    return torch.cat([first, rest], dim=1)


def _encode_prompts(model: Any, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, Any, torch.Tensor]:
    """One pass over the left-padded prompts: last-position logits, KV cache, the cache's key mask."""
    out = _forward(model, input_ids=ids, attention_mask=mask, position_ids=_positions(mask), logits_to_keep=1)
    return out.logits, _cache_of(out), mask


def _encode_after_common_prefix(
    model: Any, ids: torch.Tensor, mask: torch.Tensor, common: int
) -> tuple[torch.Tensor, Any, torch.Tensor]:
    """Encode ``common`` shared leading tokens once, then each prompt's remainder on top of them."""
    rows = ids.size(0)
    starts = (mask.size(1) - mask.sum(-1)).tolist()  # first real column of each left-padded row
    prefix = ids[:1, starts[0] : starts[0] + common]
    shared = _forward(model, input_ids=prefix, attention_mask=torch.ones_like(prefix), logits_to_keep=1)
    cache = _cache_of(shared)
    cache.reorder_cache(torch.zeros(rows, dtype=torch.long, device=ids.device))  # one row per prompt

    # Remainders, left padded to one width (the holes after the prefix are masked out).
    lengths = [mask.size(1) - start - common for start in starts]
    width = max(lengths)
    rest_ids = ids.new_zeros((rows, width))
    rest_mask = mask.new_zeros((rows, width))
    for row, (start, length) in enumerate(zip(starts, lengths)):
        rest_ids[row, width - length :] = ids[row, start + common :]
        rest_mask[row, width - length :] = 1
    key_mask = torch.cat([mask.new_ones((rows, common)), rest_mask], dim=1)
    out = _forward(
        model,
        input_ids=rest_ids,
        attention_mask=key_mask,
        position_ids=common + _positions(rest_mask),
        cache=cache,
        logits_to_keep=1,
    )
    return out.logits, _cache_of(out), key_mask


def _positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids that count real tokens only (padding gets 0: it is masked anyway)."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


def _forward(model: Any, cache: Any = None, **kwargs: Any) -> Any:
    if cache is not None:
        kwargs[_cache_argument(model)] = cache
    return model(use_cache=True, **kwargs)


def _cache_argument(model: Any) -> str:
    # transformers >= 5.2x names the argument `cache`; older versions `past_key_values`
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _cache_of(output: Any) -> Any:
    return output.cache if getattr(output, "cache", None) is not None else output.past_key_values

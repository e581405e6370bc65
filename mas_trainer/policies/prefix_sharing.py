"""Tree sampling with a shared prompt prefix: K branches from one prompt, prefilled once.

AT-GRPO asks for ``n`` (= K) completions of the SAME prompt, for many envs at once. Plain
``generate(num_return_sequences=K)`` prefills K identical copies of every prompt; with ~150-token
prompts and 32 new tokens that prefill is most of the work. :class:`PrefixSharedBackend`:

1. prefills each DISTINCT prompt once (all prompts batched, left padded);
2. keeps that prompt's keys/values ONCE and lets its K branches attend to it together
   ("cascade" attention: the K x heads queries of one prompt form one matrix product against the
   shared prefix, the branch's own new tokens are attended separately, and one softmax spans both);
3. decodes in its own loop with a preallocated branch cache (no per-step ``torch.cat`` of the
   whole cache, no ``generate`` logits-processor machinery), sampling with temperature/top-p;
4. encodes the token prefix common to all prompts of a call once, and keeps its keys/values
   across calls while the weights are unchanged (chat header and task instructions are the same
   for every env and turn), so prefill covers only each prompt's own remainder.

It runs the model's own modules (norms, projections, MLP, rotary embedding) on the very model
object being trained, so weights are always current; ``sync_weights`` only drops the cached
common prefix (which is also dropped whenever a parameter changed since it was computed). The fast path
covers Llama-style decoders (``llama``, ``qwen2``, ``qwen3``, ``mistral`` without sliding window);
any other model falls back to :class:`~mas_trainer.policies.generation.HFBackend`.

Results follow :class:`~mas_trainer.policies.generation.HFBackend` exactly: token ids without prompt or
padding, cut after the first EOS (inclusive), decoded text, ``finish_reason``, and log-probs
``log_softmax(logits / temperature)`` of each sampled token (after temperature, before top-p;
``log_softmax(logits)`` for greedy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.nn.functional as F

from mas_trainer.policies.generation import (
    HFBackend,
    _eval_mode,
    check_generate_args,
    completion_from_row,
    special_token_ids,
)
from mas_trainer.rollout.samples import Completion
from mas_trainer.update.scoring import common_prefix_length

SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "qwen3", "mistral")
PREFIX_MODES = ("cascade", "expand", "none")
# A shorter common prefix is not worth a separate pass.
MIN_SHARED_PREFIX = 16


def supports_fast_path(model: Any) -> bool:
    """True if the model is a Llama-style decoder this module can run layer by layer."""
    config = getattr(model, "config", None)
    if getattr(config, "model_type", None) not in SUPPORTED_MODEL_TYPES:
        return False
    if getattr(config, "use_sliding_window", False) or (
        config.model_type == "mistral" and getattr(config, "sliding_window", None)
    ):
        return False
    inner = getattr(model, "model", None)
    needed = ("layers", "embed_tokens", "norm", "rotary_emb")
    return inner is not None and all(hasattr(inner, name) for name in needed) and hasattr(model, "lm_head")


class PrefixSharedBackend:
    """A :class:`~mas_trainer.policies.generation.GenerationBackend` for K branches per prompt.

    ``prefix_mode`` chooses how branches share their prompt (the non-default modes exist to
    measure what each idea is worth):

    - ``"cascade"`` (default): prefill once, keep one copy of the prompt's keys/values;
    - ``"expand"``: prefill once, copy the prompt's keys/values K times;
    - ``"none"``: prefill K copies of the prompt (what ``generate`` does), same decode loop.

    Prompts are processed in chunks of at most ``max_batch_size`` branch rows (whole prompts per
    chunk). Identical prompts in one call are prefilled once. With ``seed`` the result is
    reproducible for the same ``max_batch_size`` and the global torch RNG is untouched.

    With ``reuse_prefix`` (default) the longest token prefix common to a chunk's prompts (at
    least ``MIN_SHARED_PREFIX`` tokens) is encoded once, and its keys/values are kept for later
    calls: a later chunk reuses the part its own common prefix shares with the kept one and
    encodes only what differs. The kept prefix is tied to the weights it was computed with:
    ``sync_weights()`` drops it, and so does any change of a parameter's storage or in-place
    version counter (optimizer steps, ``load_state_dict``, ``.to()``), so a caller that forgets
    ``sync_weights`` still never gets stale keys/values. (Writes through ``param.data`` bypass
    the version counter: call ``sync_weights`` after those.)
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        max_batch_size: int = 256,
        eos_token_ids: Sequence[int] | None = None,
        prefix_mode: str = "cascade",
        reuse_prefix: bool = True,
    ) -> None:
        if prefix_mode not in PREFIX_MODES:
            raise ValueError(f"prefix_mode must be one of {PREFIX_MODES}, not {prefix_mode!r}")
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.prefix_mode = prefix_mode
        self.reuse_prefix = reuse_prefix
        self._shared_prefix: _SharedPrefix | None = None
        self.eos_token_ids, self.pad_token_id = special_token_ids(model, tokenizer, eos_token_ids)
        self.fast = supports_fast_path(model)
        self._fallback = None if self.fast else HFBackend(model, tokenizer, max_batch_size, self.eos_token_ids)

    def sync_weights(self) -> None:
        """Drop the kept common-prefix keys/values (sampling reads the model's parameters directly)."""
        self._shared_prefix = None

    def generate(
        self,
        prompts: list[list[int]],
        n: int,
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        return_logprobs: bool = False,
        seed: int | None = None,
    ) -> list[list[Completion]]:
        """For each prompt, ``n`` completions (temperature 0 = greedy)."""
        check_generate_args(prompts, n, max_new_tokens)
        if self._fallback is not None:
            return self._fallback.generate(
                prompts, n, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                return_logprobs=return_logprobs, seed=seed,
            )
        # Identical prompts (the first turn of K trajectories of one task, equal tasks) share one
        # prefill. When sampling, every copy still gets its own n draws: copies of one draw would make
        # the K trajectories of trajectory-level GRPO identical, and every group zero-variance.
        positions: dict[tuple[int, ...], list[int]] = {}
        for pos, prompt in enumerate(prompts):
            positions.setdefault(tuple(prompt), []).append(pos)
        sampling = temperature > 0
        branches = {key: n * (len(pos) if sampling else 1) for key, pos in positions.items()}
        generator = torch.Generator(device=self.model.device).manual_seed(seed) if seed is not None else None
        rows_of: dict[tuple[int, ...], list[Completion]] = {}
        # One pass per branch count (usually a single pass: every prompt equally often).
        for count in dict.fromkeys(branches.values()):
            keys = [key for key in positions if branches[key] == count]
            if self.prefix_mode == "none":  # separate copies of each prompt, one branch each
                work, per_prompt = [list(key) for key in keys for _ in range(count)], 1
            else:
                work, per_prompt = [list(key) for key in keys], count
            prompts_per_chunk = max(1, self.max_batch_size // per_prompt)
            rows: list[Completion] = []
            with _eval_mode(self.model), torch.inference_mode():
                for start in range(0, len(work), prompts_per_chunk):
                    rows.extend(
                        self._generate_chunk(
                            work[start : start + prompts_per_chunk], per_prompt, max_new_tokens,
                            temperature, top_p, return_logprobs, generator,
                        )
                    )
            for i, key in enumerate(keys):
                rows_of[key] = rows[i * count : (i + 1) * count]

        out: list[list[Completion]] = [[] for _ in prompts]
        for key, pos in positions.items():
            rows = rows_of[key]
            for j, p in enumerate(pos):
                if sampling:
                    out[p] = rows[j * n : (j + 1) * n]
                else:  # greedy: the same tokens; copies, so callers may mutate one result alone
                    out[p] = rows if j == 0 else [_copy(c) for c in rows]
        return out

    # -----------------------------------------------------------------------------------------
    # One chunk: prefill the distinct prompts, then decode n branches of each.

    def _generate_chunk(
        self,
        prompts: list[list[int]],
        n: int,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        return_logprobs: bool,
        generator: Any,
    ) -> list[Completion]:
        device = self.model.device
        shared, shared_kv = self._common_prefix(prompts)
        prompts = [p[shared:] for p in prompts]  # each prompt's own remainder (never empty)
        num_prompts, width = len(prompts), max(len(p) for p in prompts)
        input_ids = torch.full((num_prompts, width), self.pad_token_id, dtype=torch.long)
        valid = torch.zeros((num_prompts, width), dtype=torch.bool)
        for row, prompt in enumerate(prompts):  # left padding: every prompt ends in the last column
            input_ids[row, width - len(prompt) :] = torch.tensor(prompt)
            valid[row, width - len(prompt) :] = True
        input_ids, valid = input_ids.to(device), valid.to(device)

        last_hidden, prefix_kv = self._prefill(input_ids, valid, shared_kv)
        # The prompt keys are [common prefix | left-padded remainder]: padding holes sit in between.
        valid = torch.cat([valid.new_ones((num_prompts, shared)), valid], 1)
        # Additive mask over the prefix keys, one row per prompt: 0 for prompt tokens, -inf for padding.
        prefix_bias = torch.zeros(valid.shape, dtype=torch.float32, device=device)
        prefix_bias.masked_fill_(~valid, float("-inf"))
        if self.prefix_mode == "expand":  # copy each prompt's cache to its n branches
            prefix_kv = [(k.repeat_interleave(n, 0), v.repeat_interleave(n, 0)) for k, v in prefix_kv]
            prefix_bias = prefix_bias.repeat_interleave(n, 0)
            group = 1
        else:
            group = n

        rows = num_prompts * n
        logits = self._logits(last_hidden).repeat_interleave(n, 0)  # (rows, vocab)
        positions = valid.sum(1).repeat_interleave(n, 0)  # next position of each branch
        branch_kv = self._empty_branch_cache(rows, max_new_tokens, last_hidden.dtype)

        eos = torch.tensor(self.eos_token_ids, device=device)
        finished = torch.zeros(rows, dtype=torch.bool, device=device)
        tokens, logprobs = [], []
        for step in range(max_new_tokens):
            chosen, chosen_logprob = _sample(logits, temperature, top_p, return_logprobs, generator)
            chosen = chosen.masked_fill(finished, self.pad_token_id)
            tokens.append(chosen)
            if chosen_logprob is not None:
                logprobs.append(chosen_logprob)
            finished |= torch.isin(chosen, eos)
            if step == max_new_tokens - 1 or bool(finished.all()):
                break
            hidden = self._decode_step(chosen, positions + step, step, prefix_kv, prefix_bias, branch_kv, group)
            logits = self._logits(hidden)

        generated = torch.stack(tokens, 1).cpu()
        sampled_logprobs = torch.stack(logprobs, 1).float().cpu() if return_logprobs else None
        return [
            self._completion(generated[row], None if sampled_logprobs is None else sampled_logprobs[row])
            for row in range(rows)
        ]

    def _completion(self, tokens: Any, logprobs: Any) -> Completion:
        return completion_from_row(self.tokenizer, self.eos_token_ids, tokens, logprobs)

    # -----------------------------------------------------------------------------------------
    # The common prefix, encoded once and kept across calls while the weights are unchanged.

    def _common_prefix(self, prompts: list[list[int]]) -> tuple[int, list[tuple[Any, Any]] | None]:
        """(length, one-row K/V) of the prefix shared by all ``prompts``; (0, None) when not worth it."""
        # Every prompt keeps at least one token of its own: its last position predicts the next token.
        length = min(common_prefix_length(prompts), min(len(p) for p in prompts) - 1)
        if not self.reuse_prefix or length < MIN_SHARED_PREFIX:
            return 0, None
        tokens = list(prompts[0][:length])
        weights = self._weights_key()
        kept = self._shared_prefix
        reused = 0
        if kept is not None and kept.weights == weights:
            reused = common_prefix_length([kept.tokens, tokens])
        # Causal attention: the K/V of the first tokens of a prefix do not depend on what follows.
        kv = [(k[:, :, :reused], v[:, :, :reused]) for k, v in kept.kv] if reused else None
        if reused < length:
            rest = torch.tensor([tokens[reused:]], device=self.model.device)
            _, kv = self._prefill(rest, torch.ones_like(rest, dtype=torch.bool), kv)
        self._shared_prefix = _SharedPrefix(tokens=tokens, kv=kv, weights=weights)
        return length, kv

    def _weights_key(self) -> tuple:
        """Changes whenever a parameter is written in place or replaced (cheap: no data is read)."""
        return tuple((p.data_ptr(), p._version) for p in self.model.parameters())

    # -----------------------------------------------------------------------------------------
    # The transformer, run layer by layer with the model's own modules.

    def _layers(self) -> Any:
        return self.model.model.layers

    def _shape(self) -> tuple[int, int, int]:
        """(query heads, key/value heads, head dim) of the first attention layer."""
        config = self.model.config
        heads = config.num_attention_heads
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        return heads, kv_heads, head_dim

    def _logits(self, hidden: Any) -> Any:
        """Next-token logits (float32) from last-position hidden states (rows, hidden)."""
        return self.model.lm_head(self.model.model.norm(hidden)).float()

    def _project_qkv(self, attn: Any, x: Any, cos: Any, sin: Any) -> tuple[Any, Any, Any]:
        """Queries (b, heads, L, d), keys and values (b, kv_heads, L, d), with rotary applied."""
        heads, kv_heads, head_dim = self._shape()
        b, length = x.shape[:2]
        q = attn.q_proj(x).view(b, length, heads, head_dim)
        k = attn.k_proj(x).view(b, length, kv_heads, head_dim)
        v = attn.v_proj(x).view(b, length, kv_heads, head_dim)
        if hasattr(attn, "q_norm"):  # Qwen3 normalises each head before the rotary embedding
            q, k = attn.q_norm(q), attn.k_norm(k)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin, v

    def _prefill(
        self, input_ids: Any, valid: Any, past: list[tuple[Any, Any]] | None = None
    ) -> tuple[Any, list[tuple[Any, Any]]]:
        """Run the padded prompts; return the last position's hidden state and each layer's K/V.

        ``past``: keys/values (one row, all valid) of tokens that precede every prompt; the
        returned K/V then cover ``[past | prompt]`` for each prompt.
        """
        inner = self.model.model
        rows, width = input_ids.shape
        offset = past[0][0].shape[2] if past else 0
        positions = offset + (valid.long().cumsum(1) - 1).clamp(min=0)
        causal = torch.ones(width, width, dtype=torch.bool, device=input_ids.device).tril()
        # Padding queries attend to themselves only, so their rows stay finite (never NaN).
        mask = (causal & valid[:, None, :]) | torch.eye(width, dtype=torch.bool, device=input_ids.device)
        if offset:  # every query sees all of the shared past
            mask = torch.cat([mask.new_ones((rows, width, offset)), mask], -1)
        mask = mask[:, None]  # (prompts, 1, width, offset + width)

        x = inner.embed_tokens(input_ids)
        cos, sin = inner.rotary_emb(x, positions)
        heads, kv_heads, _ = self._shape()
        cache = []
        for index, layer in enumerate(self._layers()):
            attn = layer.self_attn
            q, k, v = self._project_qkv(attn, layer.input_layernorm(x), cos, sin)
            if offset:
                past_k, past_v = past[index]
                k = torch.cat([past_k.expand(rows, -1, -1, -1), k], 2)
                v = torch.cat([past_v.expand(rows, -1, -1, -1), v], 2)
            cache.append((k, v))
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, scale=attn.scaling, enable_gqa=heads != kv_heads
            )
            x = x + attn.o_proj(out.transpose(1, 2).reshape(x.shape[0], width, -1))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return x[:, -1], cache

    def _empty_branch_cache(self, rows: int, length: int, dtype: Any) -> list[tuple[Any, Any]]:
        """Preallocated keys/values for the tokens each branch generates (filled step by step)."""
        _, kv_heads, head_dim = self._shape()
        device = self.model.device
        return [
            (
                torch.empty(rows, kv_heads, length, head_dim, dtype=dtype, device=device),
                torch.empty(rows, kv_heads, length, head_dim, dtype=dtype, device=device),
            )
            for _ in self._layers()
        ]

    def _decode_step(
        self, token: Any, position: Any, step: int, prefix_kv: list, prefix_bias: Any, branch_kv: list, group: int
    ) -> Any:
        """Feed one token per branch; return the new hidden state (rows, hidden).

        ``group`` branches in a row share one prefix entry (``prefix_kv`` has rows // group
        entries). Attention scores over the shared prefix are one matrix product per prompt (all
        of its branches' queries at once); scores over each branch's own tokens are separate; one
        softmax normalises both parts together, so the result equals plain attention.
        """
        inner = self.model.model
        heads, kv_heads, head_dim = self._shape()
        per_kv = heads // kv_heads
        rows = token.shape[0]
        prompts = rows // group
        x = inner.embed_tokens(token[:, None])  # (rows, 1, hidden)
        cos, sin = inner.rotary_emb(x, position[:, None])
        bias = prefix_bias[:, None, None, :]  # (prompts, 1, 1, width)
        for layer, (prefix_k, prefix_v), (branch_k, branch_v) in zip(self._layers(), prefix_kv, branch_kv):
            attn = layer.self_attn
            q, k, v = self._project_qkv(attn, layer.input_layernorm(x), cos, sin)
            branch_k[:, :, step] = k[:, :, 0]
            branch_v[:, :, step] = v[:, :, 0]
            # Queries grouped by prompt and kv head: (prompts, kv_heads, group * per_kv, d).
            q = q.reshape(prompts, group, kv_heads, per_kv, head_dim)
            q_by_prompt = q.transpose(1, 2).reshape(prompts, kv_heads, group * per_kv, head_dim)
            prefix_scores = (q_by_prompt @ prefix_k.transpose(-1, -2)).float() * attn.scaling + bias
            width = prefix_scores.shape[-1]
            prefix_scores = prefix_scores.view(prompts, kv_heads, group, per_kv, width).transpose(1, 2)
            prefix_scores = prefix_scores.reshape(rows, kv_heads, per_kv, width)
            q_by_row = q.reshape(rows, kv_heads, per_kv, head_dim)
            own_k, own_v = branch_k[:, :, : step + 1], branch_v[:, :, : step + 1]
            own_scores = (q_by_row @ own_k.transpose(-1, -2)).float() * attn.scaling
            weights = torch.cat([prefix_scores, own_scores], -1).softmax(-1).to(q.dtype)
            prefix_weights = weights[..., :width].reshape(prompts, group, kv_heads, per_kv, width)
            prefix_weights = prefix_weights.transpose(1, 2).reshape(prompts, kv_heads, group * per_kv, width)
            out = (prefix_weights @ prefix_v).view(prompts, kv_heads, group, per_kv, head_dim).transpose(1, 2)
            out = out.reshape(rows, kv_heads, per_kv, head_dim) + weights[..., width:] @ own_v
            x = x + attn.o_proj(out.reshape(rows, 1, heads * head_dim))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return x[:, 0]


@dataclass
class _SharedPrefix:
    """Keys/values (one row per layer) of ``tokens``, valid for the weights keyed by ``weights``."""

    tokens: list[int]
    kv: list[tuple[Any, Any]]
    weights: tuple


def _rotate_half(x: Any) -> Any:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def _sample(logits: Any, temperature: float, top_p: float, return_logprobs: bool, generator: Any) -> tuple[Any, Any]:
    """Pick one token per row; its log-prob under the temperature-scaled distribution if asked.

    When sampling, ``logits`` is overwritten: it is the decode step's own fresh buffer, and working in it
    saves two vocabulary-sized allocations per step (the step's largest cost after the matmuls).
    """
    if temperature <= 0:
        chosen = logits.argmax(-1)
        if not return_logprobs:
            return chosen, None
        return chosen, logits.log_softmax(-1).gather(1, chosen[:, None])[:, 0]
    top = logits.amax(-1, keepdim=True)
    weights = logits.sub_(top).div_(temperature).exp_()  # exp((logits - max) / T): unnormalised probabilities
    drawn_from = weights
    if top_p < 1.0:
        drawn_from = _top_p_filter(weights / weights.sum(-1, keepdim=True), top_p)
    chosen = _draw(drawn_from, generator)
    if not return_logprobs:
        return chosen, None
    # log p = log w - log sum w, before top-p (as documented); a drawn token never has w = 0
    chosen_weight = weights.gather(1, chosen[:, None])[:, 0].double()
    return chosen, (chosen_weight.log() - weights.sum(-1, dtype=torch.float64).log()).float()


# Vocabulary entries per block of the two-level draw: the block is found from the blocks' masses, the token
# from the running sum inside that one block, so no running sum over the whole vocabulary is built.
DRAW_BLOCK = 1024


def _draw(probs: Any, generator: Any) -> Any:
    """One token per row with probability proportional to ``probs`` (rows need not sum to 1).

    Inverse CDF in two levels: one uniform number per row picks a block of :data:`DRAW_BLOCK` entries by the
    running sum of the blocks' masses, and the rest of the same number picks the token by the running sum
    inside the block. It replaces ``torch.multinomial`` (exponential noise for every vocabulary entry) and a
    float64 running sum over the whole vocabulary, the two largest costs of a decode step's draw on a 152k
    vocabulary. Running sums are float64, and the in-block number is rescaled to the block's own sum, so
    a zero-probability token has an empty interval and is never drawn.
    """
    rows, vocab = probs.shape
    full = vocab // DRAW_BLOCK
    mass = probs[:, :full * DRAW_BLOCK].reshape(rows, full, DRAW_BLOCK).sum(-1)
    if vocab > full * DRAW_BLOCK:
        mass = torch.cat([mass, probs[:, full * DRAW_BLOCK:].sum(-1, keepdim=True)], 1)
    block_cdf = mass.cumsum(-1, dtype=torch.float64)
    u = torch.rand(rows, 1, generator=generator, dtype=torch.float64, device=probs.device) * block_cdf[:, -1:]
    block = torch.searchsorted(block_cdf, u, right=True).clamp_(max=block_cdf.size(1) - 1)
    mass_before = torch.where(block > 0, block_cdf.gather(1, (block - 1).clamp(min=0)), torch.zeros_like(u))
    start = block * DRAW_BLOCK
    index = start + torch.arange(DRAW_BLOCK, device=probs.device)
    inside = probs.gather(1, index.clamp(max=vocab - 1)) * (index < vocab)
    inner_cdf = inside.cumsum(-1, dtype=torch.float64)
    inner_total = inner_cdf[:, -1:]
    rest = (u - mass_before) / mass.gather(1, block).double() * inner_total  # in [0, the block's own sum)
    rest = torch.minimum(rest, torch.nextafter(inner_total, torch.zeros_like(inner_total)))
    return (start + torch.searchsorted(inner_cdf, rest, right=True).clamp_(max=DRAW_BLOCK - 1))[:, 0]


def _top_p_filter(probs: Any, top_p: float) -> Any:
    """Zero every token outside the smallest set whose probability reaches ``top_p`` (nucleus)."""
    sorted_probs, order = probs.sort(-1, descending=True)
    mass_before = sorted_probs.cumsum(-1) - sorted_probs
    sorted_probs = sorted_probs.masked_fill(mass_before >= top_p, 0.0)  # the top token always stays
    return torch.zeros_like(probs).scatter_(-1, order, sorted_probs)


def _copy(completion: Completion) -> Completion:
    return Completion(
        token_ids=list(completion.token_ids),
        text=completion.text,
        logprobs=None if completion.logprobs is None else list(completion.logprobs),
        finish_reason=completion.finish_reason,
    )

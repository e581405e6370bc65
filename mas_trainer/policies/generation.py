"""Sampling completions from a policy model.

A :class:`GenerationBackend` turns token-id prompts into :class:`~mas_trainer.rollout.samples.Completion`
records. :class:`HFBackend` does it with one batched ``transformers`` ``generate`` call on the very
model object being trained (so weight syncing is a no-op); the prefix-shared sampler
(:mod:`mas_trainer.policies.prefix_sharing`) and the vLLM engine (:mod:`mas_trainer.policies.vllm_engine`)
implement the same protocol.

Log-probabilities, when asked for, are ``log_softmax(logits / temperature)`` of each sampled token:
after temperature, BEFORE top-p filtering (so they are the policy's temperature-scaled
distribution, which is what the GRPO update recomputes). For greedy decoding (temperature 0) they
are ``log_softmax(logits)``.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Protocol, Sequence, runtime_checkable

import torch
from transformers import GenerationConfig, LogitsProcessorList

from mas_trainer.rollout.samples import Completion


@runtime_checkable
class GenerationBackend(Protocol):
    """Something that samples completions for token-id prompts."""

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
        ...

    def sync_weights(self) -> None:
        """Make the sampler use the trainer's current weights."""
        ...


class _SampledTokenLogprobs:
    """A logits processor that records log-probs of the tokens ``generate`` picks.

    ``generate`` calls its custom processors before the temperature/top-p warpers, once per
    step, with the ids chosen so far. At step s we therefore see the raw logits of step s and the
    token chosen at step s-1; we keep only one step of log-softmax (batch x vocab) in memory.
    """

    def __init__(self, temperature: float) -> None:
        self.temperature = temperature if temperature > 0 else 1.0
        self.previous = None  # log_softmax of the last step, (batch, vocab)
        self.per_step: list[Any] = []  # (batch,) log-probs of the chosen tokens, one per step

    def _take(self, chosen: Any) -> None:
        if self.previous is not None:
            self.per_step.append(self.previous.gather(1, chosen[:, None]).squeeze(1))

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.previous is not None:
            self._take(input_ids[:, -1])
        self.previous = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def finish(self, last_tokens: Any) -> Any:
        """Stack to (batch, steps) once the final chosen tokens are known."""
        self._take(last_tokens)
        self.previous = None
        return torch.stack(self.per_step, dim=1)


class HFBackend:
    """Sample with ``transformers`` ``generate`` on the model being trained.

    All prompts x n are sampled in one batched ``generate`` call (left padding, attention mask),
    split into chunks of at most ``max_batch_size`` sequences. The model is put in eval mode for
    sampling and its training mode restored afterwards. With ``seed`` the result is reproducible
    (for the same ``max_batch_size``); the global torch RNG is left untouched in that case.

    ``eos_token_ids`` ends a completion (default: the model's generation config EOS ids and the
    tokenizer's EOS).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        max_batch_size: int = 256,
        eos_token_ids: Sequence[int] | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.eos_token_ids, self.pad_token_id = special_token_ids(model, tokenizer, eos_token_ids)

    def sync_weights(self) -> None:
        """Nothing to do: generation uses the training model object itself."""

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
        check_generate_args(prompts, n, max_new_tokens)
        expanded = [list(p) for p in prompts for _ in range(n)]
        flat: list[Completion] = []
        with _eval_mode(self.model), _seeded(seed, self.model):
            for start in range(0, len(expanded), self.max_batch_size):
                chunk = expanded[start : start + self.max_batch_size]
                flat.extend(self._generate_chunk(chunk, max_new_tokens, temperature, top_p, return_logprobs))
        return [flat[i * n : (i + 1) * n] for i in range(len(prompts))]

    def _generate_chunk(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        return_logprobs: bool,
    ) -> list[Completion]:
        device = self.model.device
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):  # left padding: the prompt ends at the last column
            input_ids[row, width - len(prompt) :] = torch.tensor(prompt)
            attention_mask[row, width - len(prompt) :] = 1

        greedy = temperature <= 0
        # Every knob set explicitly: generate() fills unset (None) knobs from the model's
        # generation_config and then from global defaults, which include top_k=50.
        config = GenerationConfig(
            max_new_tokens=max_new_tokens,
            do_sample=not greedy,
            temperature=1.0 if greedy else temperature,
            top_p=1.0 if greedy else top_p,
            top_k=None if greedy else 0,  # 0 disables top-k; greedy ignores it (and warns on 0)
            min_p=None,
            typical_p=1.0,
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            num_beams=1,
            eos_token_id=self.eos_token_ids,
            pad_token_id=self.pad_token_id,
            bos_token_id=getattr(self.model.generation_config, "bos_token_id", None),
            use_cache=True,
        )
        recorder = _SampledTokenLogprobs(temperature) if return_logprobs else None
        with torch.no_grad():
            sequences = self.model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention_mask.to(device),
                generation_config=config,
                logits_processor=LogitsProcessorList([recorder]) if recorder else None,
            )
        generated = sequences[:, width:].cpu()
        logprobs = recorder.finish(sequences[:, -1]).cpu() if recorder else None
        return [
            self._completion(generated[row], None if logprobs is None else logprobs[row])
            for row in range(len(prompts))
        ]

    def _completion(self, tokens: Any, logprobs: Any) -> Completion:
        return completion_from_row(self.tokenizer, self.eos_token_ids, tokens, logprobs)


# ---------------------------------------------------------------------- shared by every backend
def special_token_ids(model: Any, tokenizer: Any, eos_token_ids: Sequence[int] | None) -> tuple[list[int], int]:
    """``(eos ids, pad id)``: the given or configured EOS ids; the tokenizer's pad, else the first EOS."""
    eos = list(eos_token_ids) if eos_token_ids is not None else _default_eos(model, tokenizer)
    if not eos:
        raise ValueError("no EOS token id known: pass eos_token_ids")
    pad = tokenizer.pad_token_id
    return eos, (pad if pad is not None else eos[0])


def check_generate_args(prompts: list[list[int]], n: int, max_new_tokens: int) -> None:
    if n < 1 or max_new_tokens < 1:
        raise ValueError("n and max_new_tokens must be >= 1")
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")


def completion_from_row(tokenizer: Any, eos_token_ids: list[int], tokens: Any, logprobs: Any) -> Completion:
    """Cut a generated row after its first EOS (inclusive); padding follows EOS only."""
    ids = tokens.tolist()
    stop = next((i for i, t in enumerate(ids) if t in eos_token_ids), None)
    if stop is not None:
        ids = ids[: stop + 1]
    return Completion(
        token_ids=ids,
        text=tokenizer.decode(ids, skip_special_tokens=True),
        logprobs=None if logprobs is None else logprobs[: len(ids)].tolist(),
        finish_reason="stop" if stop is not None else "length",
    )


def _default_eos(model: Any, tokenizer: Any) -> list[int]:
    ids: list[int] = []
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in [configured, tokenizer.eos_token_id]:
        for token in value if isinstance(value, (list, tuple)) else [value]:
            if token is not None and token not in ids:
                ids.append(int(token))
    return ids


@contextlib.contextmanager
def _eval_mode(model: Any) -> Iterator[None]:
    """Eval mode (no dropout) while sampling; restore the caller's mode afterwards."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


@contextlib.contextmanager
def _seeded(seed: int | None, model: Any) -> Iterator[None]:
    """Seed the sampling RNG without disturbing the caller's global RNG state."""
    if seed is None:
        yield
        return
    devices = [model.device] if model.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield

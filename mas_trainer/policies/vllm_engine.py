"""Sampling with a vLLM engine that lives in the trainer's process ("colocate" mode).

:class:`VLLMBackend` implements the :class:`~mas_trainer.policies.generation.GenerationBackend` protocol
with one ``vllm.LLM`` engine per training model (so ``policy_mode="specialized"`` gets one engine
per role):

- prompts go in as token ids (``TokensPrompt``); the K branches of a prompt are ONE request with
  ``SamplingParams(n=K)``, and prefix caching is on, so a prompt is prefilled once for its K
  branches and shared prompt prefixes across requests are reused;
- the engine is built from the training model's config and tokenizer saved to a temporary folder,
  with dummy weights, and the training model's weights are then loaded in-process from
  ``model.state_dict()`` (like TRL's colocate mode; through the model runner's ``reload_weights``,
  which vLLM 0.32 needs, see :meth:`VLLMBackend.sync_weights`) - no weight file is written;
- :meth:`VLLMBackend.sync_weights` repeats that load after each optimizer step and resets the
  prefix cache, so keys/values computed with the old weights are never reused.

The engine must run in this process for the in-process weight load, so the backend sets
``VLLM_ENABLE_V1_MULTIPROCESSING=0`` before building it.

Results follow :class:`~mas_trainer.policies.generation.HFBackend`: token ids without prompt or padding, cut
after the first EOS (inclusive), decoded text, ``finish_reason`` ``"stop"``/``"length"``.

Log-probabilities: the engine runs with ``logprobs_mode="processed_logprobs"``: vLLM returns the
sampled token's log-prob under the distribution it sampled from, i.e. after temperature AND after
top-k/top-p filtering (renormalised over the kept tokens). With ``top_p=1`` (no filtering) that is
exactly our contract, ``log_softmax(logits / temperature)`` of the sampled token; with
``top_p < 1`` vLLM's value is the nucleus-renormalised one, larger than ours by ``-log(mass of the
nucleus)`` at that step. For greedy decoding they are ``log_softmax(logits)``, as ours.

vLLM is imported lazily: without it, building the backend raises an ``ImportError`` that names
the install command.
"""

from __future__ import annotations

import gc
import os
import random
import sys
import tempfile
from typing import Any, Sequence

import numpy
import torch

from mas_trainer.policies.generation import check_generate_args, completion_from_row, special_token_ids
from mas_trainer.rollout.samples import Completion
from mas_trainer.settings.optional import VLLM_INSTALL_HINT


def import_vllm() -> Any:
    """The ``vllm`` module, or an ``ImportError`` that says how to install it."""
    try:
        import vllm
    except ImportError as err:
        raise ImportError(
            f"the 'vllm' generation backend needs vLLM, which this Python ({sys.executable}) cannot import "
            f"({err}); {VLLM_INSTALL_HINT}"
        ) from err
    return vllm


def engine_options_from_config(config: Any) -> dict[str, Any]:
    """Engine settings taken from a TRL ``GRPOConfig`` (its ``vllm_*`` fields), for :class:`VLLMBackend`."""
    options: dict[str, Any] = {"gpu_memory_utilization": config.vllm_gpu_memory_utilization}
    if getattr(config, "vllm_max_model_length", None):
        options["max_model_len"] = int(config.vllm_max_model_length)
    return options


class VLLMBackend:
    """Sample with an in-process vLLM engine that mirrors ``model``'s weights.

    ``model`` is the training model (kept, to push its weights on :meth:`sync_weights`);
    ``tokenizer`` decodes completions and is saved with the config for the engine.
    Engine settings: ``gpu_memory_utilization`` (GPU only), ``max_model_len`` (prompt + completion
    tokens; default 4096 or the model's limit if smaller), ``dtype`` (default: the model's parameter
    dtype), ``kv_cache_gib`` (CPU only: the KV cache size),
    ``enforce_eager`` (skip torch.compile / CUDA graphs; default: on CPU only, where compiling took
    minutes and decoded within noise of eager),
    ``seed`` (the engine's RNG for unseeded requests), and ``engine_kwargs`` (more ``vllm.LLM``
    arguments). ``eos_token_ids`` ends a completion (default: as :class:`HFBackend`).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        gpu_memory_utilization: float = 0.3,
        max_model_len: int | None = None,
        dtype: str | None = None,
        kv_cache_gib: float = 1.0,
        enforce_eager: bool | None = None,
        seed: int = 0,
        eos_token_ids: Sequence[int] | None = None,
        engine_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if hasattr(model, "peft_config"):
            raise ValueError("VLLMBackend needs a plain transformers model; merge the LoRA adapter first")
        if not 0 < gpu_memory_utilization <= 1:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], not {gpu_memory_utilization}")
        if kv_cache_gib <= 0:
            raise ValueError(f"kv_cache_gib must be > 0, not {kv_cache_gib}")
        # In-process engine core: sync_weights reaches the engine's model object directly.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        vllm = import_vllm()
        from vllm.platforms import current_platform

        extra = dict(engine_kwargs or {})
        if enforce_eager is None:  # on CPU torch.compile took minutes to build for little gain (docs/VLLM.md)
            enforce_eager = current_platform.is_cpu()
        if current_platform.is_cpu():  # on GPU gpu_memory_utilization sizes the KV cache
            extra.setdefault("kv_cache_memory_bytes", int(kv_cache_gib * 2**30))

        self.model = model
        self.tokenizer = tokenizer
        self.eos_token_ids, self.pad_token_id = special_token_ids(model, tokenizer, eos_token_ids)
        limit = getattr(model.config, "max_position_embeddings", None) or 4096
        self.max_model_len = int(max_model_len or min(4096, limit))
        self._folder = tempfile.TemporaryDirectory(prefix="mas-vllm-")
        _save_config_and_tokenizer(model, tokenizer, self._folder.name)
        set_num_threads = torch.set_num_threads
        rng = _RandomStates()  # an in-process engine seeds the global RNGs with `seed`
        try:
            self.llm = vllm.LLM(
                model=self._folder.name,
                load_format="dummy",  # random weights; the real ones arrive by sync_weights() below
                dtype=dtype or _dtype_name(model),
                max_model_len=self.max_model_len,
                gpu_memory_utilization=gpu_memory_utilization,
                enable_prefix_caching=True,
                enforce_eager=enforce_eager,
                seed=seed,
                generation_config="vllm",  # no sampling defaults from generation_config.json: we set every knob
                logprobs_mode="processed_logprobs",
                **extra,
            )
        finally:
            # vLLM's CPU worker replaces torch.set_num_threads with a no-op for the whole process;
            # the rest of this process (training, other backends) keeps control of its threads.
            torch.set_num_threads = set_num_threads
            rng.restore()
        self.sync_weights()

    # ------------------------------------------------------------------ weights
    def model_runner(self) -> Any:
        """The in-process worker's model runner (it owns the engine's ``torch.nn.Module``)."""
        try:
            return self.llm.llm_engine.model_executor.driver_worker.model_runner
        except AttributeError as err:
            raise RuntimeError(
                "cannot reach the vLLM engine's model runner in-process (is VLLM_ENABLE_V1_MULTIPROCESSING=0 "
                f"honoured by this vLLM version?): {err}"
            ) from err

    def sync_weights(self) -> None:
        """Copy the training model's current weights into the engine and drop its prefix cache.

        Uses the runner's ``reload_weights`` (checkpoint-format names, as in ``state_dict()``): after
        loading, vLLM may repack weights into a kernel format (its CPU linear layers do), so a plain
        ``model.load_weights`` on the running engine no longer works there.
        """
        state = self.model.state_dict()
        with torch.no_grad():
            self.model_runner().reload_weights(weights_iterator=((name, t.detach()) for name, t in state.items()))
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        """Free the engine (its KV cache and weights) and the temporary folder."""
        self.llm = None
        gc.collect()
        self._folder.cleanup()

    # ------------------------------------------------------------------ sampling
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
        """For each prompt, ``n`` completions (temperature 0 = greedy). See the module doc for log-probs."""
        check_generate_args(prompts, n, max_new_tokens)
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, not {temperature}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], not {top_p}")
        longest = max((len(p) for p in prompts), default=0)
        if longest + max_new_tokens > self.max_model_len:
            raise ValueError(
                f"a prompt of {longest} tokens + max_new_tokens {max_new_tokens} exceeds the engine's "
                f"max_model_len {self.max_model_len}; build the backend with a larger max_model_len"
            )
        if not prompts:
            return []
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        greedy = temperature <= 0

        def params(index: int) -> Any:
            return SamplingParams(
                n=n,
                temperature=0.0 if greedy else temperature,
                top_p=1.0 if greedy else top_p,
                max_tokens=max_new_tokens,
                stop_token_ids=list(self.eos_token_ids),
                logprobs=0 if return_logprobs else None,  # 0: only the sampled token's log-prob
                # vLLM seeds branch j of a request with seed + j, so prompts step by n.
                seed=None if seed is None or greedy else seed + index * n,
                detokenize=False,  # we decode with our tokenizer, as the other backends do
            )

        requests = [TokensPrompt(prompt_token_ids=list(p)) for p in prompts]
        outputs = self.llm.generate(requests, [params(i) for i in range(len(prompts))], use_tqdm=False)
        return [[self._completion(branch, return_logprobs) for branch in _in_order(out.outputs)] for out in outputs]

    def _completion(self, branch: Any, return_logprobs: bool) -> Completion:
        ids = list(branch.token_ids)
        logprobs = None
        if return_logprobs:
            logprobs = torch.tensor([step[token].logprob for step, token in zip(branch.logprobs, ids)])
        return completion_from_row(self.tokenizer, self.eos_token_ids, torch.tensor(ids, dtype=torch.long), logprobs)


class _RandomStates:
    """The global RNG states of ``random``, ``numpy`` and ``torch`` (CPU), captured now, to put back later."""

    def __init__(self) -> None:
        self.states = (random.getstate(), numpy.random.get_state(), torch.random.get_rng_state())

    def restore(self) -> None:
        python_state, numpy_state, torch_state = self.states
        random.setstate(python_state)
        numpy.random.set_state(numpy_state)
        torch.random.set_rng_state(torch_state)


def _in_order(branches: Sequence[Any]) -> list[Any]:
    """Branches by their index (vLLM may finish, and list, them out of order)."""
    return sorted(branches, key=lambda b: b.index)


def _save_config_and_tokenizer(model: Any, tokenizer: Any, folder: str) -> None:
    """What the engine needs to build the architecture and its tokenizer (no weights)."""
    model.config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def _dtype_name(model: Any) -> str:
    return str(next(model.parameters()).dtype).removeprefix("torch.")


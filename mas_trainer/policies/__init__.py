"""The policies: the models, how they generate and how they are laid out over the roles.

:mod:`~mas_trainer.policies.models` (presets and loading), :mod:`~.generation` (``transformers`` generate),
:mod:`~.prefix_sharing` (K branches from one prefill), :mod:`~.vllm_engine` (an in-process vLLM engine),
:mod:`~.workers` (a policy's rollout and update worker), :mod:`~.lora` (one base, one adapter per role).
``shared`` and ``specialized`` need no module of their own: one worker pair per policy.
"""

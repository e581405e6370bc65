"""The update: one optimizer step of one policy on its routed samples, TRL's GRPO loss as it is.

:mod:`~mas_trainer.update.trainer` (``ATGRPOTrainer``: samples -> TRL's tensors -> loss -> step),
:mod:`~mas_trainer.update.scoring` (completion log-probs, each shared prompt encoded once),
:mod:`~mas_trainer.update.state` (one policy's weights, optimizer and scheduler on disk).
"""

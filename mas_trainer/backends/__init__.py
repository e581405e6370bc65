"""Where a run's policy workers live: :mod:`~mas_trainer.backends.local` (in the trainer's process) or
:mod:`~mas_trainer.backends.ray` (one Ray actor per policy for generation and one for updates, plus env
actors). Both return the same worker interface, so the step loop (:mod:`mas_trainer.run.trainer`) does
not know which one runs.
"""

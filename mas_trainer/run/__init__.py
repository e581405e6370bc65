"""Running it: the step loop (:mod:`~mas_trainer.run.trainer`), checkpoints, metrics, evaluation and the
two commands, ``mas-train`` (:mod:`~.cli`) and ``mas-eval`` (:mod:`~.eval_cli`). The top layer of
:mod:`mas_trainer`: nothing below imports it.
"""

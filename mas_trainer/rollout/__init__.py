"""The rollout: envs, tree sampling, groups and advantages (the paper's algorithm box).

:mod:`~mas_trainer.rollout.atgrpo` reads top to bottom like the algorithm box; :mod:`~.samples` is the data
it hands on, :mod:`~.env_pool` the envs of a run, :mod:`~.prompts` how an observation becomes prompt ids,
:mod:`~.routing` which policy's update a sample feeds. Torch-free: models are reached through the
generation backends handed in (:mod:`mas_trainer.policies`).
"""

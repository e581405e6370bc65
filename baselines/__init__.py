"""The paper's comparison methods as runnable definitions, and a driver that compares them.

``baselines.methods.METHODS`` lists single agent / MAS, prompt-only / GRPO / AT-GRPO (shared and
per-role policies); ``python -m baselines.compare`` trains and evaluates a chosen set of them and
prints the paper-style table.
"""

from mas_trainer.settings.hub import offline_hub_defaults

offline_hub_defaults()  # before transformers is imported (by baselines.methods)

from baselines.methods import METHODS, Budget, Method, MethodOutcome, Training, get_method  # noqa: E402

__all__ = ["METHODS", "Budget", "Method", "MethodOutcome", "Training", "get_method"]

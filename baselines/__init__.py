"""The paper's comparison methods as runnable definitions, and a driver that compares them.

``baselines.methods.METHODS`` lists single agent / MAS, prompt-only / GRPO / AT-GRPO (shared and
per-role policies); ``python -m baselines.compare`` trains and evaluates a chosen set of them and
prints the paper-style table.
"""

from baselines.methods import METHODS, Budget, Method, MethodOutcome, Training, get_method

__all__ = ["METHODS", "Budget", "Method", "MethodOutcome", "Training", "get_method"]

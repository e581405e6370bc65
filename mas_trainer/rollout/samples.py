"""The data that flows from rollouts to updates.

A rollout produces :class:`Sample` records; the grouping code gives each one an advantage; the
router sends each sample to the update worker of ``sample.policy``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable


@dataclass
class Completion:
    """One sampled continuation of a prompt."""

    token_ids: list[int]
    text: str
    logprobs: list[float] | None = None  # per completion token, under the sampling policy
    finish_reason: str = "stop"  # "stop" (EOS) or "length"


@dataclass
class Sample:
    """One training example: a prompt, one completion of it, and its reward.

    ``group`` is the key of the GRPO group the sample belongs to. AT-GRPO uses
    ``(episode, turn, agent)``; every sample of one group has token-identical ``prompt_ids``.
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    reward: float
    group: Hashable
    role: str  # the env agent that produced it (e.g. "planner")
    policy: str  # the policy that produced it and must be updated with it ("shared" or the role)
    advantage: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

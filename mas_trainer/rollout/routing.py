"""Where each sample goes: the update of the policy that produced it."""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from mas_trainer.rollout.samples import Sample


class Router:
    """Sends every sample to the update worker of the policy that produced it."""

    def __init__(self, policies: Iterable[str]):
        self.policies = list(policies)

    def route(self, samples: Iterable[Sample]) -> dict[str, list[Sample]]:
        routed: dict[str, list[Sample]] = defaultdict(list)
        for sample in samples:
            if sample.policy not in self.policies:
                raise KeyError(f"sample of role {sample.role!r} names unknown policy {sample.policy!r}")
            routed[sample.policy].append(sample)
        return {policy: routed.get(policy, []) for policy in self.policies}

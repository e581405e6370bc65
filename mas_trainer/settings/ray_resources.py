"""What each Ray actor asks the cluster for (no Ray import: the config validates these early).

Three actor kinds: ``rollout`` (a policy's generation), ``update`` (a policy's model, optimizer and
TRL trainer) and ``env`` (one of the env workers that step rollout branches). Each kind gets a
resource request ``{"num_cpus": x, "num_gpus": y}``; the user's ``ray_resources`` overrides the
defaults kind by kind.
"""

from __future__ import annotations

from typing import Any

from mas_trainer.settings.role_maps import parse_json_object

ACTOR_KINDS = ("rollout", "update", "env")
RESOURCE_KEYS = ("num_cpus", "num_gpus")

# A GPU per policy, shared by its rollout and update actor (they sit in one placement-group bundle).
GPU_DEFAULTS = {"rollout": {"num_gpus": 0.5}, "update": {"num_gpus": 0.5}, "env": {"num_cpus": 1}}
CPU_DEFAULTS = {"rollout": {"num_cpus": 1}, "update": {"num_cpus": 1}, "env": {"num_cpus": 1}}


def parse_ray_resources(value: Any) -> dict[str, dict[str, float]]:
    """``ray_resources`` as a dict ``{kind: {"num_cpus"/"num_gpus": amount}}``; accepts a JSON string."""
    value = parse_json_object(value, "ray_resources")
    parsed: dict[str, dict[str, float]] = {}
    for kind, request in value.items():
        if kind not in ACTOR_KINDS:
            raise ValueError(f"ray_resources: unknown actor kind {kind!r}; use {', '.join(ACTOR_KINDS)}")
        if not isinstance(request, dict) or set(request) - set(RESOURCE_KEYS):
            raise ValueError(f"ray_resources[{kind!r}] must map {' / '.join(RESOURCE_KEYS)} to amounts, got {request!r}")
        amounts = {}
        for key, amount in request.items():
            if not isinstance(amount, (int, float)) or amount < 0:
                raise ValueError(f"ray_resources[{kind!r}][{key!r}] must be a number >= 0, got {amount!r}")
            amounts[key] = float(amount)
        parsed[kind] = amounts
    return parsed


def actor_resources(overrides: dict[str, dict[str, float]], cluster_has_gpus: bool) -> dict[str, dict[str, float]]:
    """The request of every actor kind: defaults for this cluster, then the user's overrides."""
    defaults = GPU_DEFAULTS if cluster_has_gpus else CPU_DEFAULTS
    return {kind: dict(overrides.get(kind, defaults[kind])) for kind in ACTOR_KINDS}


def as_bundle(*requests: dict[str, float]) -> dict[str, float]:
    """The placement-group bundle holding actors with these requests (Ray names: CPU, GPU)."""
    bundle = {"CPU": 0.0, "GPU": 0.0}
    for request in requests:
        bundle["CPU"] += request.get("num_cpus", 0.0)
        bundle["GPU"] += request.get("num_gpus", 0.0)
    return {name: amount for name, amount in bundle.items() if amount > 0}

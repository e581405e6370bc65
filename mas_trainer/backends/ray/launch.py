"""Starting the Ray backend (the layout of a run: :mod:`mas_trainer.backends.ray`): join or start the cluster,
place one placement group per policy (its rollout and update actor) and one for the env actors, start them.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from mas_trainer.backends.ray.cluster import connect
from mas_trainer.backends.ray.env_workers import EnvActor, RayBranchStepper
from mas_trainer.backends.ray.policy_workers import RayRolloutWorker, RayUpdateWorker, RolloutActor
from mas_trainer.backends.ray.update_actor import UpdateActor
from mas_trainer.policies.models import resolve_model
from mas_trainer.settings.ray_resources import actor_resources, as_bundle

PLACEMENT_TIMEOUT_S = 120.0


class RayPools:
    """The placement groups of a run: one per policy (rollout + update actor), one for the env actors.

    Removed (with their actors) by :meth:`close`, or when the workers holding this object are gone.
    """

    def __init__(self, ray: Any, policies: list[str], requests: dict[str, dict[str, float]], env_workers: int):
        from ray.util.placement_group import placement_group

        self.requests = requests
        self.groups: dict[str, Any] = {}
        policy_bundle = as_bundle(requests["rollout"], requests["update"])
        env_bundle = as_bundle(requests["env"])
        if policy_bundle:
            for policy in policies:
                self.groups[policy] = placement_group([policy_bundle], strategy="STRICT_PACK", name=f"policy-{policy}")
        if env_bundle:
            self.groups["envs"] = placement_group([env_bundle] * env_workers, strategy="PACK", name="env-pool")
        self._finalizer = weakref.finalize(self, _remove_groups, list(self.groups.values()))
        for name, group in self.groups.items():
            try:
                ray.get(group.ready(), timeout=PLACEMENT_TIMEOUT_S)
            except ray.exceptions.GetTimeoutError:
                self.close()
                bundles = policy_bundle if name != "envs" else f"{env_workers} x {env_bundle}"
                raise RuntimeError(
                    f"the Ray cluster cannot hold the {name!r} pool ({bundles}) within {PLACEMENT_TIMEOUT_S:.0f} s; "
                    f"it has {ray.cluster_resources()} (requests per actor: {requests}). Lower the requests with "
                    "ray_resources (e.g. --ray_resources '{\"env\": {\"num_cpus\": 0.5}}'), ray_env_workers, or add nodes."
                ) from None

    def strategy(self, name: str, bundle: int = 0) -> dict[str, Any]:
        """Actor options placing an actor into bundle ``bundle`` of pool ``name`` (nothing if it has none)."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        if name not in self.groups:
            return {}
        return {"scheduling_strategy": PlacementGroupSchedulingStrategy(
            placement_group=self.groups[name], placement_group_bundle_index=bundle)}

    def close(self) -> None:
        """Remove the placement groups; Ray then stops every actor in them."""
        self._finalizer()


def _remove_groups(groups: list[Any]) -> None:
    try:
        import ray
        from ray.util.placement_group import remove_placement_group

        if ray.is_initialized():
            for group in groups:
                remove_placement_group(group)
    except Exception:  # interpreter shutdown or a cluster already gone: nothing left to free
        pass


def start_ray_workers(config: Any, policies: list[str], run_dir: Path,
                      models: dict[str, tuple[Any, Any]] | None = None):
    """``(rollout_workers, update_workers, step_branches)`` for :class:`~mas_trainer.run.trainer.MASTrainer`.

    Joins ``config.ray_address`` (or starts a local cluster), places one pool per policy and one
    env pool, starts the actors and gives every rollout actor its update actor's initial weights.
    ``models`` (tests) are copied into the actors; otherwise each actor loads ``config.model``.
    """
    ray = connect(config.ray_address)
    cluster_has_gpus = ray.cluster_resources().get("GPU", 0) > 0 and not config.use_cpu
    requests = actor_resources(config.ray_resources or {}, cluster_has_gpus)
    pools = RayPools(ray, list(policies), requests, int(config.ray_env_workers))

    update_cls, rollout_cls, env_cls = (ray.remote(c) for c in (UpdateActor, RolloutActor, EnvActor))
    # Policy actors keep state a restart cannot rebuild (optimizer, weights): no restarts, fail loudly.
    update_workers: dict[str, RayUpdateWorker] = {}
    rollout_workers: dict[str, RayRolloutWorker] = {}
    for policy in policies:
        given = models[policy] if models is not None else None
        update_actor = update_cls.options(max_restarts=0, **requests["update"], **pools.strategy(policy)).remote(
            policy, config, str(Path(run_dir) / "tensorboard" / policy), given)
        rollout_actor = rollout_cls.options(max_restarts=0, **requests["rollout"], **pools.strategy(policy)).remote(
            policy, config.model_for(policy), config.rollout_backend, bool(config.use_cpu), given, config.dtype_for(policy))
        update_workers[policy] = RayUpdateWorker(policy, update_actor, Path(run_dir), pools)
        rollout_workers[policy] = RayRolloutWorker(policy, rollout_actor, _driver_tokenizer(config, policy, given), update_workers[policy])

    make_kwargs = config.env_make_kwargs("train")
    env_actors = [env_cls.options(max_restarts=0, **requests["env"], **pools.strategy("envs", i)).remote(config.env, make_kwargs)
                  for i in range(int(config.ray_env_workers))]
    ray.get([actor.ready.remote() for actor in env_actors])
    for worker in rollout_workers.values():
        worker.sync_weights()  # rollout copies start from exactly the update actors' weights
    for worker in rollout_workers.values():
        worker.backend._finish_sync()  # surface construction errors here, not in the first rollout
    return rollout_workers, update_workers, RayBranchStepper(env_actors)


def _driver_tokenizer(config: Any, policy: str, given: tuple[Any, Any] | None) -> Any:
    """The tokenizer the driver builds prompts with (the model itself lives in the actors)."""
    if given is not None:
        return given[1]
    tokenizer = AutoTokenizer.from_pretrained(resolve_model(config.model_for(policy)))
    tokenizer.padding_side = "left"  # as models.load_model_and_tokenizer prepares it
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer

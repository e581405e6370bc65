"""The Ray backend: each policy gets its own resource pool with a rollout actor and an update actor,
a pool of env actors steps the rollout branches, and the driver routes samples between them.

Layout of a run (``backend="ray"``)::

    driver (MASTrainer: env resets, tree_rollout, advantages, Router, checkpoints' run state)
      |-- policy pool <p> (placement group, one bundle):  RolloutActor <p>   UpdateActor <p>
      |-- env pool (placement group, one bundle per actor): EnvActor 0 .. ray_env_workers-1

The algorithm code is the same as with the local backend: ``tree_rollout`` runs in the driver and
only calls out for generation (``RemoteGeneration.generate`` on the policy's rollout actor) and for
branch stepping (``RayBranchStepper`` on the env actors); the update actors run the same
``UpdateWorker`` / ``ATGRPOTrainer`` code on the routed samples, all policies at once. See
docs/RAY.md for resource settings, the weight-sync design and fault handling.

Modules: :mod:`~.launch` places the pools and starts the actors, :mod:`~.policy_workers` holds the
rollout actor and the driver-side workers, :mod:`~.update_actor` the update actor, :mod:`~.env_workers`
the env actors, :mod:`~.cluster` joins or starts the cluster. This package file imports nothing, so an
actor process imports only its own module: a rollout actor never loads TRL.
"""

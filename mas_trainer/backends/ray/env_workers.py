"""Env actors: a pool of CPU workers that step the K branches of every branching point.

An env crosses the process boundary as its ``snapshot()`` (small, picklable, all mutable state),
never pickled whole (PettingZoo's ``EzPickle`` would rebuild it from constructor arguments and lose
its state). Each actor keeps one template env of the run's kind; for a request it restores the
parent's snapshot into a clone of the template, steps it with one candidate's text (running any
sandboxed code there) and returns the child's snapshot. The driver restores that into a clone of the
parent, so the rollout continues exactly as if it had stepped the clone itself.

Faults: requests of an actor that dies (or exceeds ``timeout_s``) go to the surviving actors; if none
is left they are stepped in the driver. Each case is logged as a warning and the rollout completes.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from mas_envs import make_env
from mas_trainer.rollout.atgrpo import step_clones

logger = logging.getLogger(__name__)

Request = tuple[dict[str, Any], list[str]]  # (parent env snapshot, candidate texts)


class EnvActor:
    """Steps branches of one env kind (``make_env(env_name, **make_kwargs)``)."""

    def __init__(self, env_name: str, make_kwargs: dict[str, Any]):
        self.template = make_env(env_name, **make_kwargs)
        self.template.reset(seed=0)  # loads static task data; every request restores its own state

    def step_branches(self, requests: list[Request]) -> list[list[dict[str, Any]]]:
        parents = []
        for snapshot, _ in requests:
            parent = self.template.clone()
            parent.restore(snapshot)
            parents.append(parent)
        stepped = step_clones(parents, [texts for _, texts in requests])
        return [[branch.snapshot() for branch in row] for row in stepped]

    def ready(self) -> bool:
        return True


class RayBranchStepper:
    """``step_branches(envs, texts_per_env)`` for :func:`mas_trainer.rollout.atgrpo.tree_rollout`, on env actors."""

    def __init__(self, actors: Sequence[Any], timeout_s: float | None = None):
        self.actors = list(actors)
        self.timeout_s = timeout_s
        self.failures = 0  # actors lost so far (for logs and tests)

    def __call__(self, envs: Sequence[Any], texts_per_env: Sequence[Sequence[str]]) -> list[list[Any]]:
        requests = [(env.snapshot(), list(texts)) for env, texts in zip(envs, texts_per_env)]
        children = self._run(requests)
        branches = []
        for env, texts, snapshots in zip(envs, texts_per_env, children):
            if snapshots is None:  # no env actor left: step in this process
                branches.extend(step_clones([env], [texts]))
                continue
            row = []
            for snapshot in snapshots:
                branch = env.clone()
                branch.restore(snapshot)
                row.append(branch)
            branches.append(row)
        return branches

    def _run(self, requests: list[Request]) -> list[list[dict[str, Any]] | None]:
        """Spread the requests over the live actors; retry a lost actor's share on the others.

        Requests no actor could take come back as ``None``."""
        import ray
        from ray.exceptions import GetTimeoutError, OutOfMemoryError, RayActorError

        results: list[list[dict[str, Any]] | None] = [None] * len(requests)
        pending = list(range(len(requests)))
        while pending:
            if not self.actors:
                logger.warning("no env actor is left; stepping %d branch requests in the driver", len(pending))
                break
            shares = _split(pending, len(self.actors))
            submitted = [(actor, share, actor.step_branches.remote([requests[i] for i in share]))
                         for actor, share in zip(self.actors, shares) if share]
            pending = []
            for actor, share, ref in submitted:
                try:
                    children = ray.get(ref, timeout=self.timeout_s)
                except (RayActorError, OutOfMemoryError, GetTimeoutError) as err:
                    self._drop(actor, err)
                    pending.extend(share)
                    continue
                for i, row in zip(share, children):
                    results[i] = row
        return results

    def _drop(self, actor: Any, err: Exception) -> None:
        import ray

        if actor in self.actors:
            self.actors.remove(actor)
            self.failures += 1
            logger.warning("env actor lost (%s: %s); retrying its branches on the %d remaining actor(s)",
                           type(err).__name__, str(err).splitlines()[0] if str(err) else "", len(self.actors))
            ray.kill(actor, no_restart=True)  # a hung actor must not answer late into a later step


def _split(indices: list[int], parts: int) -> list[list[int]]:
    """``indices`` in ``parts`` contiguous, nearly equal shares (keeps each actor's batch together)."""
    size, extra = divmod(len(indices), parts)
    shares, start = [], 0
    for p in range(parts):
        end = start + size + (1 if p < extra else 0)
        shares.append(indices[start:end])
        start = end
    return shares

"""The Ray backend (mas_trainer.backends.ray) against the local one, on a real local Ray cluster.

One cluster (2 CPUs, bound to 127.0.0.1, no dashboard) serves the whole module, and one specialized
Plan-Path run (policies ``tool`` and ``planner``) on each backend does the work that the tests then
check: the same groups and losses as the local backend, concurrent updates, an env actor killed in
the middle of a rollout, and a dead update actor followed by ``train(resume=True)``.
Models: the taught tiny Llama of test_trainer.py (real SmolLM2 tokenizer); envs, TRL loss, optimizer
and Ray are all real. Start-up of the policy actors dominates the run time (each imports torch,
transformers and TRL).
"""

from __future__ import annotations

import logging
import math
import sys

import pytest

from mas_trainer.backends.ray.cluster import INSTALL_HINT, import_ray

from tests.test_trainer import load_taught, taught_model_dir  # noqa: F401  (session fixture)

try:
    import_ray()
except ImportError:
    pytest.skip(f"Ray is not installed ({INSTALL_HINT})", allow_module_level=True)

POLICIES = ("tool", "planner")
# The tests on a cluster start two runs of 4 policy actors (each imports torch, transformers and TRL): about two
# minutes on an idle 2-core machine, several when it is busy.
needs_cluster = pytest.mark.slow
# 2 policies x (rollout 0.25 + update 0.5) + 2 env actors x 0.25 = the cluster's 2 CPUs.
RESOURCES = {"rollout": {"num_cpus": 0.25}, "update": {"num_cpus": 0.5}, "env": {"num_cpus": 0.25}}


def make_config(tmp_path, backend, **overrides):
    from mas_trainer.settings.config import ATGRPOConfig

    values = dict(
        output_dir=str(tmp_path / backend), env="plan_path", workflow="mas", policy_mode="specialized",
        model="tiny", envs_per_step=2, num_generations=4, max_turns=2, max_completion_length=4, max_steps=3,
        learning_rate=1e-3, per_device_train_batch_size=8, save_steps=100, rollout_seed=7, backend=backend,
        ray_resources=RESOURCES, ray_env_workers=2,
    )
    values.update(overrides)
    return ATGRPOConfig(**values)


@pytest.fixture(scope="module")
def ray_cluster():
    from mas_trainer.backends.ray.cluster import connect

    ray = connect(None, num_cpus=2)
    assert ray.util.get_node_ip_address() == "127.0.0.1"
    yield ray
    ray.shutdown()


def concurrency_probe(run, rollout, copies: int = 8):
    """Update both policies through ``update_all`` on a batch large enough to take a while.

    Returns the metrics of each policy (with the actors' wall-clock bounds) and the order in which
    the driver started and awaited the updates.
    """
    import copy

    from mas_trainer.rollout.atgrpo import assign_advantages
    from mas_trainer.policies.workers import update_all

    samples = []
    for c in range(copies):
        for s in rollout.samples:
            twin = copy.deepcopy(s)
            twin.group = (*s.group, c)  # distinct groups, each with rewards that differ
            twin.reward = float(s.info["candidate"] % 2)
            samples.append(twin)
    assign_advantages(samples)
    events: list[str] = []
    for policy, worker in run.update_workers.items():
        start = worker.start_update

        def start_and_log(batch, extra_logs=None, start=start, policy=policy):
            events.append(f"start {policy}")
            finish = start(batch, extra_logs)

            def result():
                events.append(f"await {policy}")
                return finish()

            return result

        worker.start_update = start_and_log
    metrics = update_all(run.update_workers, run.router.route(samples))
    for worker in run.update_workers.values():
        del worker.start_update  # back to the class's method
    return metrics, events


def kill_env_actor_on_next_step(run, ray):
    """Kill env actor 0 right before the next batched branch step (i.e. in the middle of a rollout)."""
    stepper = run.step_branches
    victim = stepper.actors[0]
    calls = {"n": 0}

    def step_branches(envs, texts):
        calls["n"] += 1
        if calls["n"] == 2:  # after the first turn's tool step: the episode is under way
            ray.kill(victim)
        return stepper(envs, texts)

    run.step_branches = step_branches
    return stepper


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def runs(ray_cluster, taught_model_dir, tmp_path_factory):  # noqa: F811
    """Three steps on the local backend, then the same on Ray with faults injected; everything recorded."""
    from mas_trainer.run import checkpoints as checkpoint
    from mas_trainer.run.trainer import MASTrainer

    tmp_path = tmp_path_factory.mktemp("ray-backend")
    # All local work first: creating another config resets accelerate's process state, which the
    # in-process trainers of an earlier run read.
    local = MASTrainer(make_config(tmp_path, "local"), models={p: load_taught(taught_model_dir) for p in POLICIES})
    local_rollouts = [local.rollout(0)]
    local_records = [local.train_step()]
    local_rollouts.append(local.rollout(1))
    local_records += [local.train_step(), local.train_step()]
    del local

    remote = MASTrainer(make_config(tmp_path, "ray"), models={p: load_taught(taught_model_dir) for p in POLICIES})
    trace = {"local_rollouts": local_rollouts, "local_records": local_records, "run": remote}
    trace["ray_rollouts"] = [remote.rollout(0)]
    trace["ray_records"] = [remote.train_step()]
    trace["stepper"] = kill_env_actor_on_next_step(remote, ray_cluster)
    warnings = _Collect()
    logging.getLogger("mas_trainer.backends.ray.env_workers").addHandler(warnings)
    trace["ray_rollouts"].append(remote.rollout(1))
    logging.getLogger("mas_trainer.backends.ray.env_workers").removeHandler(warnings)
    trace["env_warnings"] = warnings.messages
    trace["ray_records"].append(remote.train_step())
    trace["checkpoint"] = checkpoint.save_checkpoint(remote)  # step 2, written by the update actors
    # Extra updates after the checkpoint (the resume test starts from the checkpoint, not from these).
    trace["updates"], trace["update_events"] = concurrency_probe(remote, trace["ray_rollouts"][1])
    yield trace


# ------------------------------------------------------------------ same algorithm on both backends


def _group_view(rollout):
    return [(s.group, s.prompt_ids, s.completion_ids, s.reward, s.policy) for s in rollout.samples]


@needs_cluster
def test_ray_rollout_gives_the_same_groups_as_local(runs):
    local, ray_ = runs["local_rollouts"][0], runs["ray_rollouts"][0]
    assert len(local.samples) == 2 * 4 * 2 * 2  # envs x K x turns x roles (no episode ends early here)
    assert _group_view(ray_) == _group_view(local)
    for a, b in zip(local.samples, ray_.samples):
        assert b.advantage == pytest.approx(a.advantage, abs=1e-9)
    assert any(s.advantage != 0 for s in local.samples), "the taught model's groups should carry a signal"


@needs_cluster
def test_ray_step_gives_the_same_loss_as_local(runs):
    for local, remote in zip(runs["local_records"][:2], runs["ray_records"]):
        for policy in POLICIES:
            assert math.isfinite(remote[f"loss/{policy}"])
            assert remote[f"loss/{policy}"] == pytest.approx(local[f"loss/{policy}"], rel=1e-4, abs=1e-6)
            assert remote[f"grad_norm/{policy}"] == pytest.approx(local[f"grad_norm/{policy}"], rel=1e-3, abs=1e-6)
    assert any(runs["local_records"][0][f"grad_norm/{p}"] > 0 for p in POLICIES)


@needs_cluster
def test_specialized_policies_update_concurrently_in_their_own_actors(runs):
    updates = runs["updates"]
    assert set(updates) == set(POLICIES)
    # The driver started both updates before it waited for either ...
    assert runs["update_events"] == ["start tool", "start planner", "await tool", "await planner"]
    tool, planner = updates["tool"], updates["planner"]
    assert tool["samples_updated"] > 0 and planner["samples_updated"] > 0
    assert tool["update_pid"] != planner["update_pid"]
    # ... and the two actors were updating at the same moment: each started before the other finished.
    assert tool["update_started_at"] < planner["update_finished_at"]
    assert planner["update_started_at"] < tool["update_finished_at"]


# ------------------------------------------------------------------ faults


@needs_cluster
def test_killed_env_actor_mid_rollout_is_retried_and_the_step_completes(runs):
    stepper = runs["stepper"]
    assert stepper.failures == 1 and len(stepper.actors) == 1
    assert any("env actor lost" in m and "1 remaining" in m for m in runs["env_warnings"]), runs["env_warnings"]
    # Its branches were stepped on the surviving actor: the rollout is exactly the local one.
    assert _group_view(runs["ray_rollouts"][1]) == _group_view(runs["local_rollouts"][1])
    assert runs["ray_records"][1]["step"] == 2


@needs_cluster
def test_dead_update_worker_stops_the_run_and_resume_continues(runs, ray_cluster, taught_model_dir):  # noqa: F811
    from mas_trainer.backends.ray.policy_workers import WorkerDiedError
    from mas_trainer.run.trainer import MASTrainer

    run, saved = runs["run"], runs["checkpoint"]
    assert (saved / "policies" / "tool" / "optimizer.pt").is_file()
    ray_cluster.kill(run.update_workers["tool"].actor)
    with pytest.raises(WorkerDiedError) as failure:
        run.train_step()
    message = str(failure.value)
    assert "update worker of policy 'tool' died" in message and "--resume" in message and str(saved) in message
    run_dir = run.run_dir
    run.update_workers["tool"].pools.close()  # free the cluster for the resumed run
    del run, runs["run"]

    resumed = MASTrainer(make_config(run_dir.parent, "ray"), models={p: load_taught(taught_model_dir) for p in POLICIES})
    records = resumed.train(resume=True, progress=False)
    assert [r["step"] for r in records] == [3]
    local_third = runs["local_records"][2]
    for policy in POLICIES:  # the resumed step equals the uninterrupted local run's third step
        assert records[0][f"loss/{policy}"] == pytest.approx(local_third[f"loss/{policy}"], rel=1e-4, abs=1e-6)


# ------------------------------------------------------------------ configuration


def test_backend_settings_are_validated_and_reach_the_config(tmp_path):
    from mas_trainer.run.cli import UsageError, parse_config

    with pytest.raises(ValueError, match="unknown backend"):
        make_config(tmp_path, "spark")
    with pytest.raises(ValueError, match="unknown actor kind"):
        make_config(tmp_path, "ray", ray_resources={"gpu_pool": {"num_gpus": 1}})
    with pytest.raises(ValueError, match="not valid JSON"):
        make_config(tmp_path, "ray", ray_resources="{num_cpus: 1}")
    config, _ = parse_config(["--backend", "ray", "--ray-address", "auto", "--model", "tiny",
                              "--ray_resources", '{"update": {"num_gpus": 1}}', "--output", str(tmp_path / "r")])
    assert (config.backend, config.ray_address) == ("ray", "auto")
    assert config.ray_resources == {"update": {"num_gpus": 1.0}}
    with pytest.raises(UsageError, match="unknown backend"):
        parse_config(["--backend", "mpi"])


def test_missing_ray_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` sees when Ray is not installed
    with pytest.raises(ImportError, match=r"stronger-mas\[ray\]"):
        import_ray()

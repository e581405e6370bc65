"""The AT-GRPO trainer: TRL batch building, one real update, policy routing, checkpoints.

Models: the tiny random Llama with SmolLM2's real tokenizer, first taught (a few supervised steps) to
answer Plan-Path prompts with one random direction word, so that sampled moves differ in reward
and the groups carry a learning signal. Envs, tokenizer, TRL loss and optimizer are all real.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from mas_envs import make_env
from mas_trainer.rollout.samples import Sample

WORDS = ["up", "down", "left", "right"]


def teach_tiny_model(folder: Path, steps: int = 40, seed: int = 0) -> Path:
    """Save to ``folder`` a tiny model that answers Plan-Path prompts (single and mas) with a direction word."""
    from mas_trainer.rollout.prompts import chat_prompt_ids
    from mas_trainer.policies.models import tiny_model_and_tokenizer

    model, tok = tiny_model_and_tokenizer(seed=seed)
    prompts = []
    for workflow, agent in (("single", "solver"), ("mas", "planner"), ("mas", "tool")):
        env = make_env("plan_path", preset="4x4", observation_detail="rich", workflow=workflow)
        for s in range(3):
            env.reset(seed=s)
            prompts.append(chat_prompt_ids(tok, env.observe(agent)["prompt"]))
    targets = [tok(w, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for w in WORDS]
    gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-2)
    model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for step in range(steps):
            rows = [(prompts[i % len(prompts)], targets[int(torch.randint(4, (1,), generator=gen))]) for i in range(8)]
            width = max(len(p) + len(t) for p, t in rows)
            ids = torch.full((8, width), tok.pad_token_id)
            mask = torch.zeros(8, width, dtype=torch.long)
            labels = torch.full((8, 2), -100)
            for i, (p, t) in enumerate(rows):
                seq = p + t
                ids[i, width - len(seq):] = torch.tensor(seq)
                mask[i, width - len(seq):] = 1
                labels[i] = torch.tensor(t[-2:])
            logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=3).logits[:, :-1]
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    model.eval()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def taught_model_dir(tmp_path_factory) -> Path:
    # A fixed folder under the session's base temp dir: test_cli.py's copy of this fixture reuses it.
    folder = tmp_path_factory.getbasetemp() / "taught-tiny"
    if not (folder / "config.json").is_file():
        teach_tiny_model(folder)
    return folder


def load_taught(folder: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    tok.padding_side = "left"
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32), tok


def small_config(tmp_path: Path, **overrides):
    from mas_trainer.settings.config import ATGRPOConfig

    values = dict(
        output_dir=str(tmp_path / "run"),
        env="plan_path",
        workflow="single",
        model="tiny",
        envs_per_step=3,
        num_generations=4,
        max_turns=1,
        max_completion_length=2,
        max_steps=3,
        learning_rate=1e-3,
        per_device_train_batch_size=8,
        save_steps=100,
        rollout_seed=7,
    )
    values.update(overrides)
    return ATGRPOConfig(**values)


def make_run(tmp_path, taught_model_dir, **overrides):
    from mas_trainer.run.trainer import MASTrainer

    config = small_config(tmp_path, **overrides)
    policies = ["shared"] if config.policy_mode == "shared" else ["tool", "planner"]
    return MASTrainer(config, models={p: load_taught(taught_model_dir) for p in policies})


def params_of(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ------------------------------------------------------------------ config


def test_config_cpu_defaults():
    from mas_trainer.settings.config import ATGRPOConfig

    single = ATGRPOConfig(output_dir="unused", workflow="single")
    assert single.max_completion_length == 8 and single.learning_rate == 1e-5
    assert single.gradient_checkpointing is False and single.temperature == 1.0
    assert single.bf16 is (torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    assert single.num_generations == 8 and single.model == "smollm2-135m"
    mas = ATGRPOConfig(output_dir="unused")  # mas: the tool writes a program, the planner answers as single does
    assert mas.role_max_completion_length == "tool=448,planner=8" and mas.max_completion_length == 448
    assert mas.sampling_of_roles(["tool", "planner"])[0] == {"tool": 448, "planner": 8}
    kwargs = ATGRPOConfig(output_dir="unused", env_kwargs='{"preset": "4x4"}').env_make_kwargs("test")
    assert kwargs["preset"] == "4x4" and kwargs["split"] == "test" and kwargs["workflow"] == "mas"


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"env": "chess"}, "unknown env 'chess'"),
        ({"policy_mode": "mixture"}, "unknown policy_mode"),
        ({"policy_mode": "lora", "lora_r": 0}, "lora_r must be a positive integer"),
        ({"grouping": "prompt"}, "unknown grouping"),
        ({"workflow": "debate"}, "unknown workflow"),
        ({"num_generations": 1}, "num_generations"),
        ({"envs_per_step": 0}, "envs_per_step"),
        ({"policy_mode": "specialized", "workflow": "single"}, "several roles"),
        ({"env_kwargs": "{not json"}, "not valid JSON"),
        ({"env_kwargs": {"split": "test"}}, "must not set"),
        ({"temperature": 0.0}, "temperature"),
        ({"turns_per_step": 0}, "turns_per_step"),
        ({"turns_per_step": 1, "grouping": "trajectory"}, "whole episodes"),
    ],
)
def test_config_rejects_bad_values(overrides, message):
    from mas_trainer.settings.config import ATGRPOConfig

    with pytest.raises(ValueError, match=message):
        ATGRPOConfig(output_dir="unused", **overrides)


# ------------------------------------------------------------------ the TRL batch


def test_samples_to_batch_matches_trl_layout(tmp_path, taught_model_dir):
    from mas_trainer.rollout.atgrpo import assign_advantages
    from mas_trainer.rollout.prompts import chat_prompt_ids
    from mas_trainer.rollout.samples import Sample

    run = make_run(tmp_path, taught_model_dir)
    trainer = run.trainer_of("shared")
    tok = trainer.processing_class
    env = make_env("plan_path", preset="4x4", workflow="single")
    samples = []
    for seed in (0, 1):  # two groups with prompts of different lengths
        env.reset(seed=seed)
        prompt = chat_prompt_ids(tok, env.observe("solver")["prompt"] + " " * seed * 3 + "Go." * seed)
        for word in WORDS:
            branch = env.clone()
            branch.step(word)
            ids = tok(word, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            samples.append(Sample(prompt, ids, float(branch.rewards["solver"]), (seed, 0, "solver"), "solver", "shared"))
    assign_advantages(samples)
    batch = trainer.samples_to_batch(samples)
    assert batch["prompt_ids"].shape[0] == len(samples)
    assert set(batch) >= {"prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages",
                          "num_items_in_batch"}
    # prompts left-padded, completions right-padded, masks marking real tokens
    for row, s in enumerate(samples):
        n = len(s.prompt_ids)
        assert batch["prompt_ids"][row, -n:].tolist() == s.prompt_ids
        assert batch["prompt_mask"][row].sum() == n and batch["prompt_mask"][row, -1] == 1
        m = len(s.completion_ids)
        assert batch["completion_ids"][row, :m].tolist() == s.completion_ids
        assert batch["completion_mask"][row].sum() == m and batch["completion_mask"][row, 0] == 1
    assert torch.allclose(batch["advantages"], torch.tensor([s.advantage for s in samples]))
    assert float(batch["num_items_in_batch"]) == sum(len(s.completion_ids) for s in samples)
    # TRL's own loss runs on it
    trainer.current_gradient_accumulation_steps = 1
    loss = trainer.compute_loss(trainer.model, batch)
    assert torch.isfinite(loss)
    # TRL's hook returns the queued samples as such a batch, and refuses to run without them
    trainer.queue_samples(samples)
    assert torch.equal(trainer._generate_and_score_completions([])["completion_ids"], batch["completion_ids"])
    with pytest.raises(RuntimeError, match="does not generate"):
        trainer._generate_and_score_completions([])


def test_completion_only_logprobs_match_trl(tmp_path, taught_model_dir):
    """The CPU fast path (completion positions only) gives TRL's log-probs and entropies."""
    from trl import GRPOTrainer

    run = make_run(tmp_path, taught_model_dir, temperature=0.7)
    trainer = run.trainer_of("shared")
    torch.manual_seed(0)
    ids = torch.randint(100, 2000, (3, 40))
    mask = torch.ones_like(ids)
    ours = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, 5, compute_entropy=True)
    theirs = GRPOTrainer._get_per_token_logps_and_entropies(trainer, trainer.model, ids, mask, 5, compute_entropy=True)
    assert ours[0].shape == theirs[0].shape == (3, 5)
    assert torch.allclose(ours[0], theirs[0], atol=1e-4) and torch.allclose(ours[1], theirs[1], atol=1e-4)


def test_shared_prompt_pass_gives_same_logits_and_gradients():
    """Encoding a group's prompt once and repeating its KV cache equals running every row in full."""
    from mas_trainer.policies.models import tiny_model_and_tokenizer
    from mas_trainer.update.trainer import completion_logits

    model, _ = tiny_model_and_tokenizer(seed=1)
    gen = torch.Generator().manual_seed(0)
    prompt_a, prompt_b = torch.randint(100, 2000, (30,), generator=gen), torch.randint(100, 2000, (25,), generator=gen)
    rows = [(p, torch.randint(100, 2000, (n,), generator=gen)) for p, n in
            [(prompt_a, 4), (prompt_a, 2), (prompt_b, 4), (prompt_a, 1), (prompt_b, 3)]]
    width, n = 30, 4
    ids = torch.full((len(rows), width + n), 2)
    mask = torch.zeros_like(ids)
    for i, (p, c) in enumerate(rows):  # left-padded prompt | right-padded completion
        ids[i, width - len(p):width], mask[i, width - len(p):width] = p, 1
        ids[i, width:width + len(c)], mask[i, width:width + len(c)] = c, 1
    valid = mask[:, width:].bool()

    def completion_logprob_sum(logits):
        return logits.log_softmax(-1).gather(-1, ids[:, width:].unsqueeze(-1)).squeeze(-1)[valid].sum()

    full = model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
                 logits_to_keep=n + 1).logits[:, :-1]
    completion_logprob_sum(full).backward()
    full_grads = {k: v.grad.clone() for k, v in model.named_parameters()}
    model.zero_grad()
    shared = completion_logits(model, ids, mask, n)
    completion_logprob_sum(shared).backward()
    assert shared.shape == full.shape
    assert torch.allclose(shared[valid], full[valid], atol=1e-4)
    for name, param in model.named_parameters():
        assert torch.allclose(param.grad, full_grads[name], atol=1e-3, rtol=1e-3), name


# ------------------------------------------------------------------ one real step


def test_one_step_changes_weights_with_finite_loss(tmp_path, taught_model_dir):
    run = make_run(tmp_path, taught_model_dir)
    before = params_of(run.model_of("shared"))
    record = run.train_step()
    after = params_of(run.model_of("shared"))
    assert record["step"] == 1 and run.global_step == 1
    assert record["samples"] == 3 * 4  # 3 envs x K=4 x 1 turn
    assert record["samples_updated/shared"] > 0, "the taught model's moves should differ in reward"
    assert math.isfinite(record["loss/shared"]) and record["grad_norm/shared"] > 0
    assert not same_weights(before, after)
    for key in ("reward_mean", "success_rate", "zero_variance_share", "time_generation", "time_env", "time_update",
                "rollout_tokens_per_s", "update_tokens_per_s"):
        assert key in record
    assert run.trainer_of("shared").state.global_step == 1


def test_kl_penalty_measures_distance_to_the_frozen_start_model(tmp_path, taught_model_dir):
    run = make_run(tmp_path, taught_model_dir, beta=0.04)
    trainer = run.trainer_of("shared")
    start = params_of(run.model_of("shared"))
    assert trainer.ref_model is not None and trainer.ref_model is not run.model_of("shared")
    assert same_weights(start, params_of(trainer.ref_model))
    first = run.train_step()
    # The first step's log-probs are taken before its optimizer step: policy == reference, KL 0.
    assert first["kl/shared"] == pytest.approx(0.0, abs=1e-6)
    second = run.train_step()
    assert second["kl/shared"] > 0, "the updated policy must differ from its reference"
    assert not same_weights(start, params_of(run.model_of("shared")))
    assert same_weights(start, params_of(trainer.ref_model)), "the reference must stay frozen"


def test_kl_reference_is_the_model_in_memory_not_the_path_in_its_config(tmp_path, taught_model_dir):
    """A model changed in memory (or built there, like the tiny test model, whose config names a
    tokenizer folder) must be its own reference: TRL would load the weights at the config's path."""
    from mas_trainer.run.trainer import MASTrainer

    model, tokenizer = load_taught(taught_model_dir)
    with torch.no_grad():
        model.lm_head.weight.mul_(1.5)  # now differs from the weights on disk
    start = params_of(model)
    run = MASTrainer(small_config(tmp_path, beta=0.04), models={"shared": (model, tokenizer)})
    trainer = run.trainer_of("shared")
    assert trainer.beta == trainer.args.beta == 0.04
    assert same_weights(start, params_of(trainer.ref_model)) and trainer.ref_model is not run.model_of("shared")
    assert not any(p.requires_grad for p in trainer.ref_model.parameters())
    assert run.train_step()["kl/shared"] == pytest.approx(0.0, abs=1e-6)  # policy == reference before the update
    assert run.train_step()["kl/shared"] > 0  # the reference really is a separate, frozen model
    assert same_weights(start, params_of(trainer.ref_model))


def test_turn_level_steps_continue_episodes_across_updates(tmp_path, taught_model_dir):
    """turns_per_step=1: each step advances the live episodes one turn; ended episodes are replaced."""
    from mas_trainer.run import checkpoints as checkpoint
    from mas_trainer.settings import run_layout

    run = make_run(tmp_path, taught_model_dir, turns_per_step=1, max_turns=3, envs_per_step=2, max_steps=4)
    seen_groups: set = set()
    last_turn: dict[int, int] = {}
    for _ in range(4):
        before = {id(ep): ep.env for ep in run.live_episodes}
        rollout = run.rollout(run.global_step)
        groups = {s.group for s in rollout.samples}
        assert len(rollout.samples) == 2 * 4 and len(groups) == 2  # 2 live episodes x K=4, one turn each
        assert not groups & seen_groups, "a group key repeated across steps"
        seen_groups |= groups
        for episode, turn, _agent in groups:
            assert turn == last_turn.get(episode, -1) + 1, "an episode skipped or repeated a turn"
            last_turn[episode] = turn
        for ep in rollout.live:  # the continuing env is the chosen clone, not the env of the last step
            assert before.get(id(ep)) is not ep.env
        for ep in rollout.episodes:
            assert ep.turns == 3 or ep.success
        run.global_step += 1
    assert run.episodes_started >= 3, "episodes that ended (3 turns each) were not replaced"

    fresh = make_run(tmp_path / "b", taught_model_dir, turns_per_step=1, max_turns=3, envs_per_step=2, max_steps=2)
    records = fresh.train(progress=False)
    assert [r["step"] for r in records] == [1, 2] and all(r["samples"] == 8 for r in records)
    assert all("episodes_finished" in r for r in records)
    resumed = make_run(tmp_path / "b", taught_model_dir, turns_per_step=1, max_turns=3, envs_per_step=2, max_steps=3)
    checkpoint.load_checkpoint(resumed, run_layout.latest_checkpoint(resumed.run_dir))
    assert resumed.episodes_started == fresh.episodes_started  # new episode ids continue after the saved ones


def test_trajectory_grouping_also_trains(tmp_path, taught_model_dir):
    run = make_run(tmp_path, taught_model_dir, grouping="trajectory", max_turns=2)
    rollout = run.rollout(0)
    groups = {s.group for s in rollout.samples}
    assert groups == set(run.env_pool.seeds_for_step(0)), "trajectory grouping: one group per task"
    record = run.train_step()
    assert math.isfinite(record["loss/shared"])


# ------------------------------------------------------------------ policies


def test_shared_policy_sees_every_role(tmp_path, taught_model_dir):
    run = make_run(tmp_path, taught_model_dir, workflow="mas", max_turns=1)
    assert run.policies == ["shared"] and run.roles == ["tool", "planner"]
    run.train_step()
    seen = {s.role for s in run.trainer_of("shared").last_samples}
    assert seen == {"tool", "planner"}


def test_specialized_routes_roles_and_trains_separate_models(tmp_path, taught_model_dir):
    run = make_run(tmp_path, taught_model_dir, workflow="mas", policy_mode="specialized", max_turns=1)
    assert run.policies == ["tool", "planner"]
    assert run.model_of("tool") is not run.model_of("planner")
    opt_tool, opt_planner = run.trainer_of("tool").optimizer, run.trainer_of("planner").optimizer
    assert opt_tool is not opt_planner
    before = {p: params_of(run.model_of(p)) for p in run.policies}
    assert same_weights(before["tool"], before["planner"])  # both start from the same checkpoint
    record = run.train_step()
    for policy in run.policies:
        seen = run.trainer_of(policy).last_samples
        assert seen and {s.role for s in seen} == {policy} and {s.policy for s in seen} == {policy}
    # the planner's moves differ in reward -> it is updated; the policies end up different
    assert record["samples_updated/planner"] > 0
    after = {p: params_of(run.model_of(p)) for p in run.policies}
    assert not same_weights(before["planner"], after["planner"])
    assert not same_weights(after["tool"], after["planner"])


def test_each_specialized_policy_updates_on_its_own_samples(tmp_path, taught_model_dir):
    """Both policies get an optimizer step from their own role's groups and diverge from each other."""
    from mas_trainer.rollout.atgrpo import assign_advantages
    from mas_trainer.rollout.prompts import chat_prompt_ids
    from mas_trainer.rollout.samples import Sample

    run = make_run(tmp_path, taught_model_dir, workflow="mas", policy_mode="specialized")
    env = make_env("plan_path", preset="4x4", workflow="mas")
    env.reset(seed=0)
    tok = run.trainer_of("tool").processing_class
    samples = []
    for role, texts in (("tool", ["```python\nprint('right')\n```", "print(", "up", "```python\nprint('up')\n```"]),
                        ("planner", WORDS)):
        prompt = chat_prompt_ids(tok, f"{role}: " + env.observe(env.agent_selection)["prompt"])
        for i, text in enumerate(texts):
            ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            samples.append(Sample(prompt, ids, float(i % 2), (0, 0, role), role, role))
    assign_advantages(samples)
    before = {p: params_of(run.model_of(p)) for p in run.policies}
    routed = run.router.route(samples)
    for policy in run.policies:
        metrics = run.update_workers[policy].update(routed[policy])
        assert metrics["samples_updated"] == 4 and math.isfinite(metrics["loss"])
    after = {p: params_of(run.model_of(p)) for p in run.policies}
    for policy in run.policies:
        assert not same_weights(before[policy], after[policy])
    assert not same_weights(after["tool"], after["planner"])


# ------------------------------------------------------------------ checkpoints


def test_checkpoint_roundtrip_restores_weights_optimizer_and_step(tmp_path, taught_model_dir):
    from mas_trainer.run import checkpoints as checkpoint
    from mas_trainer.settings import run_layout

    run = make_run(tmp_path, taught_model_dir, save_total_limit=1)
    run.train_step()
    first = checkpoint.save_checkpoint(run)
    run.train_step()
    path = checkpoint.save_checkpoint(run)
    assert run_layout.list_checkpoints(run.run_dir) == [path] and not first.exists()  # pruned to 1
    assert not any(p.name.startswith(".tmp") for p in path.parent.iterdir())
    saved_weights = params_of(run.model_of("shared"))
    saved_opt = run.trainer_of("shared").optimizer.state_dict()

    fresh = make_run(tmp_path, taught_model_dir)  # same run dir, initial weights
    assert not same_weights(params_of(fresh.model_of("shared")), saved_weights)
    checkpoint.load_checkpoint(fresh, run_layout.latest_checkpoint(fresh.run_dir))
    assert fresh.global_step == 2 and fresh.trainer_of("shared").state.global_step == 2
    assert same_weights(params_of(fresh.model_of("shared")), saved_weights)
    loaded_opt = fresh.trainer_of("shared").optimizer.state_dict()
    for key, state in saved_opt["state"].items():
        assert torch.equal(state["exp_avg"], loaded_opt["state"][key]["exp_avg"])
    assert fresh.trainer_of("shared").lr_scheduler.last_epoch == run.trainer_of("shared").lr_scheduler.last_epoch

    policies, policy_of_role = checkpoint.load_policies(run.run_dir)
    assert policy_of_role == {"solver": "shared"}
    model, tok = policies["shared"]
    assert same_weights(params_of(model), saved_weights) and tok.padding_side == "left"


def test_checkpoint_of_other_policy_mode_is_refused(tmp_path, taught_model_dir):
    from mas_trainer.run import checkpoints as checkpoint
    from mas_trainer.settings import run_layout

    run = make_run(tmp_path, taught_model_dir, workflow="mas")
    path = checkpoint.save_checkpoint(run)
    other = make_run(tmp_path, taught_model_dir, workflow="mas", policy_mode="specialized")
    with pytest.raises(ValueError, match="policies"):
        checkpoint.load_checkpoint(other, path)


# ------------------------------------------------------------------ the real default model


@pytest.mark.slow
def test_real_default_model_one_step_on_plan_path(tmp_path):
    from mas_trainer.settings.config import ATGRPOConfig
    from mas_trainer.policies.models import weights_fingerprint
    from mas_trainer.run.trainer import MASTrainer

    config = ATGRPOConfig(output_dir=str(tmp_path / "run"), env="plan_path", workflow="single", envs_per_step=4,
                          num_generations=4, max_turns=1, max_steps=1, rollout_seed=0)
    assert config.model == "smollm2-135m"
    run = MASTrainer(config)
    before = weights_fingerprint(run.model_of("shared"))
    record = run.train_step()
    assert record["samples"] == 16 and math.isfinite(record["loss/shared"])
    if record["samples_updated/shared"] > 0:
        assert weights_fingerprint(run.model_of("shared")) != before


# ------------------------------------------------------------------ the update goes the right way


def _sequence_logprob(model, prompt: list[int], completion: list[int]) -> float:
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logps = model(input_ids=ids).logits[0, :-1].log_softmax(-1)
    targets = ids[0, 1:]
    return float(logps[len(prompt) - 1:].gather(-1, targets[len(prompt) - 1:].unsqueeze(-1)).sum())


@pytest.mark.parametrize("flip", [False, True])
def test_one_update_raises_the_best_candidate_and_lowers_the_worst(tmp_path, taught_model_dir, flip):
    """One optimizer step on a hand-built group: the best candidate's log-prob goes up, the worst's down.

    With the advantages' sign flipped the same step must do the opposite (so the test can fail).
    """
    from mas_trainer.rollout.atgrpo import assign_advantages

    run = make_run(tmp_path, taught_model_dir, learning_rate=1e-4, scale_rewards="group")
    trainer, model = run.trainer_of("shared"), run.model_of("shared")
    tok = trainer.processing_class
    prompt = tok("Find a path from A to G. Answer with one move:")["input_ids"]
    completions = [tok(t, add_special_tokens=False)["input_ids"] for t in (" right", " up", " left")]
    samples = [Sample(list(prompt), c, r, (0, 0, "solver"), "solver", "shared")
               for c, r in zip(completions, (1.0, 0.0, -1.0))]
    assign_advantages(samples, scale_rewards="group")
    if flip:
        for s in samples:
            s.advantage = -s.advantage
    before = [_sequence_logprob(model, prompt, c) for c in completions]
    trainer.train_on_samples(samples)
    after = [_sequence_logprob(model, prompt, c) for c in completions]
    best, worst = after[0] - before[0], after[2] - before[2]
    if flip:
        assert best < 0 < worst
    else:
        assert best > 0 > worst


def test_mas_turn_level_step_updates_every_role(tmp_path, taught_model_dir):
    """In `mas`, one turn-level step is a whole turn: every update holds groups of the tool and the planner."""
    run = make_run(tmp_path, taught_model_dir, workflow="mas", turns_per_step=1, max_turns=3, envs_per_step=2,
                   max_completion_length=3)
    for _ in range(2):
        rollout = run.rollout(run.global_step)
        roles = {s.role for s in rollout.samples}
        assert roles == {"tool", "planner"}, roles
        for role in ("tool", "planner"):
            assert 0.0 <= rollout.stats[f"nonzero_variance_share/{role}"] <= 1.0
        run.global_step += 1
    record = run.train_step()
    assert "nonzero_variance_share/tool" in record and "nonzero_variance_share/planner" in record


# ------------------------------------------------------------------ per-role models and sampling


@pytest.mark.parametrize("overrides, message", [
    ({"model": "tool=tiny,planner=smollm2-135m"}, "policy_mode='specialized'"),
    ({"model": "tool=tiny,planner=smollm2-135m", "policy_mode": "lora", "workflow": "mas"}, "ONE base"),
    ({"model": "tool=tiny,tool=tiny", "policy_mode": "specialized", "workflow": "mas"}, "given twice"),
    ({"model": "tool=,planner=tiny", "policy_mode": "specialized", "workflow": "mas"}, "not role=value"),
    ({"role_max_completion_length": "320"}, "role=value"),
    ({"role_max_completion_length": "tool=abc"}, "not a valid int"),
    ({"role_max_completion_length": "tool=0"}, "positive"),
    ({"role_temperature": "tool=0"}, "> 0"),
    ({"role_dtype": "tool=bf16", "policy_mode": "specialized", "workflow": "mas"}, "not one of float32"),
    ({"role_dtype": "tool=bfloat16,planner=float32"}, "dtype per role needs policy_mode='specialized'"),
    ({"role_dtype": "bfloat16"}, "role=value"),
    ({"model_init_kwargs": {"dtype": "int8"}}, "dtype 'int8' is not one of"),
    ({"model_init_kwargs": '{"attn_implementation": "sdpa"}'}, "only 'dtype' is used"),
    ({"model_init_kwargs": {"dtype": "bfloat16", "torch_dtype": "bfloat16"}}, "not both"),
])
def test_per_role_settings_reject_bad_values(overrides, message):
    from mas_trainer.settings.config import ATGRPOConfig

    with pytest.raises(ValueError, match=message):
        ATGRPOConfig(output_dir="unused", **overrides)


def test_model_per_role_loads_each_roles_model_and_samples_with_its_budget(tmp_path, taught_model_dir):
    from mas_trainer.run.trainer import MASTrainer

    config = small_config(tmp_path, workflow="mas", policy_mode="specialized", max_turns=2,
                          model=f"tool=tiny,planner={taught_model_dir}",
                          role_max_completion_length="tool=5,planner=2", role_temperature="tool=0.7")
    assert config.model_for("tool") == "tiny" and config.model_for("planner") == str(taught_model_dir)
    assert config.sampling_of_roles(["tool", "planner"]) == ({"tool": 5, "planner": 2}, {"tool": 0.7, "planner": 1.0})
    run = MASTrainer(config)
    tool_params = sum(p.numel() for p in run.model_of("tool").parameters())
    taught = load_taught(taught_model_dir)[0]
    assert run.model_of("planner").config.to_dict()["hidden_size"] == taught.config.hidden_size
    assert params_of(run.model_of("planner")).keys() == params_of(taught).keys()
    assert torch.equal(next(iter(params_of(run.model_of("planner")).values())), next(iter(params_of(taught).values())))
    assert tool_params > 0
    rollout = run.rollout(0)
    lengths = {role: max(len(s.completion_ids) for s in rollout.samples if s.role == role) for role in ("tool", "planner")}
    assert lengths["planner"] <= 2 and 2 < lengths["tool"] <= 5, lengths

    with pytest.raises(ValueError, match="unknown role"):
        MASTrainer(small_config(tmp_path / "b", workflow="mas", policy_mode="specialized",
                                model="tool=tiny,coder=tiny"))


def test_weights_dtype_per_role_and_from_trls_model_init_kwargs(tmp_path, taught_model_dir):
    """TRL's model_init_kwargs sets every policy's dtype (float32 by default); role_dtype overrides it per role,
    and the trainer loads, samples and updates each policy in its dtype."""
    from mas_trainer.run.trainer import MASTrainer
    from mas_trainer.settings.config import ATGRPOConfig

    assert ATGRPOConfig(output_dir="unused").dtype_for("shared") == "float32"
    assert ATGRPOConfig(output_dir="unused", model_init_kwargs='{"torch_dtype": "bfloat16"}').dtype_for("shared") == "bfloat16"
    assert ATGRPOConfig(output_dir="unused", workflow="single", role_dtype="solver=bfloat16").dtype_for("shared") == "bfloat16"
    per_role = MASTrainer(small_config(tmp_path / "roles", workflow="mas", policy_mode="specialized", max_turns=1,
                                       role_dtype="tool=bfloat16", role_max_completion_length="tool=2,planner=2"))
    assert next(per_role.model_of("tool").parameters()).dtype == torch.bfloat16
    assert next(per_role.model_of("planner").parameters()).dtype == torch.float32

    run = MASTrainer(small_config(tmp_path / "bf16", model=str(taught_model_dir), model_init_kwargs={"dtype": "bfloat16"}))
    model = run.model_of("shared")
    assert next(model.parameters()).dtype == torch.bfloat16
    before = params_of(model)
    record = run.train_step()
    assert record["samples_updated/shared"] > 0 and math.isfinite(record["loss/shared"])
    assert not same_weights(before, params_of(model))  # a bf16 policy samples and updates
    assert next(model.parameters()).dtype == torch.bfloat16

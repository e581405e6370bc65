"""The ``lora`` policy mode: one frozen base, one LoRA adapter per role (real peft, real TRL loss).

Base model: the tiny random Llama with SmolLM2's real tokenizer, taught to answer Plan-Path prompts
with direction words (``test_trainer.teach_tiny_model``), so the planner's groups carry a signal.
"""

from __future__ import annotations

import json

import pytest
import torch
from test_trainer import load_taught, taught_model_dir  # noqa: F401  (shared session fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROLES = ["tool", "planner"]


def lora_config(tmp_path, **overrides):
    from mas_trainer.settings.config import ATGRPOConfig

    values = dict(
        output_dir=str(tmp_path / "run"), env="plan_path", workflow="mas", model="tiny", policy_mode="lora",
        envs_per_step=2, num_generations=4, max_turns=2, max_completion_length=4, max_steps=2,
        learning_rate=1e-2, per_device_train_batch_size=8, save_steps=100, rollout_seed=7,
        lora_r=4, lora_alpha=8,
    )
    values.update(overrides)
    return ATGRPOConfig(**values)


def make_lora_run(tmp_path, model_dir, **overrides):
    from mas_trainer.run.trainer import MASTrainer

    return MASTrainer(lora_config(tmp_path, **overrides), models={"base": load_taught(model_dir)})


def adapter_state(run, adapter: str) -> dict[str, torch.Tensor]:
    from mas_trainer.policies.lora import adapter_parameters

    return {n: p.detach().clone() for n, p in adapter_parameters(run.peft_model, adapter).items()}


def base_state(run) -> dict[str, torch.Tensor]:
    from mas_trainer.policies.lora import base_state_dict

    return {n: t.detach().clone() for n, t in base_state_dict(run.peft_model).items()}


def changed(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> list[str]:
    assert before.keys() == after.keys() and before
    return [n for n in before if not torch.equal(before[n], after[n])]


def with_reward_spread(samples):
    """Give every group distinct rewards (by completion length and content), then fresh advantages.

    The tiny model's tool programs all fail (reward -1), so its groups carry no signal on their own;
    this makes the routing test independent of what the random model happens to write.
    """
    from mas_trainer.rollout.atgrpo import assign_advantages

    for i, s in enumerate(samples):
        s.reward = float(i % 4) + 0.01 * sum(s.completion_ids) % 1
    assign_advantages(samples)
    return samples


def perturb_adapters(run, seed: int = 0) -> None:
    """Give each adapter its own large random B matrices, so every adapter changes the model a lot."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in run.peft_model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * 3.0)


# ------------------------------------------------------------------ config


def test_lora_config_defaults_and_cli_choice(tmp_path):
    from mas_trainer.run.cli import parse_config
    from mas_trainer.settings.config import ATGRPOConfig

    config = ATGRPOConfig(output_dir="unused", policy_mode="lora")
    assert (config.lora_r, config.lora_alpha, config.lora_dropout) == (16, 32, 0.0)
    assert config.lora_target_modules is None  # every linear layer but the output head
    parsed, _ = parse_config(["--policy", "lora", "--lora_r", "8", "--lora_target_modules", "q_proj", "v_proj",
                              "--output", str(tmp_path / "r")])
    assert parsed.policy_mode == "lora" and parsed.lora_r == 8 and parsed.lora_target_modules == ["q_proj", "v_proj"]
    assert ATGRPOConfig(output_dir="unused", lora_target_modules="q_proj, v_proj").lora_target_modules == [
        "q_proj", "v_proj"]


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"lora_r": 0}, "lora_r must be a positive integer"),
        ({"lora_r": 2.5}, "lora_r must be a positive integer"),
        ({"lora_alpha": 0}, "lora_alpha must be > 0"),
        ({"lora_dropout": 1.0}, r"lora_dropout must be in \[0, 1\)"),
        ({"lora_target_modules": []}, "lora_target_modules must name at least one module"),
    ],
)
def test_lora_config_rejects_bad_values(overrides, message):
    from mas_trainer.settings.config import ATGRPOConfig

    with pytest.raises(ValueError, match=message):
        ATGRPOConfig(output_dir="unused", policy_mode="lora", **overrides)


# ------------------------------------------------------------------ structure and updates


def test_one_base_one_adapter_per_role_with_own_optimizer(tmp_path, taught_model_dir):
    from mas_trainer.policies.lora import adapter_parameters

    run = make_lora_run(tmp_path, taught_model_dir)
    assert run.policies == ROLES and [run.policy_of_role(r) for r in ROLES] == ROLES
    assert sorted(run.peft_model.peft_config) == sorted(ROLES)
    # Both trainers train the same base object; each optimizer holds exactly its adapter's tensors.
    assert run.model_of("tool") is run.model_of("planner") is run.peft_model.get_base_model()
    for role in ROLES:
        owned = {id(p) for g in run.trainer_of(role).optimizer.param_groups for p in g["params"]}
        assert owned == {id(p) for p in adapter_parameters(run.peft_model, role).values()}
    # "all-linear": the 7 attention + MLP projections of both layers, not the output head.
    targets = run.peft_model.peft_config["tool"].target_modules
    assert {t.split(".")[-1] for t in targets} == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                  "down_proj"}
    # The rollout backend is the prefix-shared fast path, running the LoRA-injected modules.
    backend = run.rollout_workers["tool"].backend
    assert type(backend.inner).__name__ == "PrefixSharedBackend" and backend.inner.fast


def test_each_role_updates_only_its_own_adapter(tmp_path, taught_model_dir):
    run = make_lora_run(tmp_path, taught_model_dir)
    samples = with_reward_spread(run.rollout(0).samples)
    routed = run.router.route(samples)
    assert routed["tool"] and routed["planner"]
    base0, tool0, planner0 = base_state(run), adapter_state(run, "tool"), adapter_state(run, "planner")

    metrics = run.update_workers["planner"].update(routed["planner"])  # planner samples only
    assert metrics["samples_updated"] > 0 and metrics["grad_norm"] > 0
    assert changed(planner0, adapter_state(run, "planner"))
    assert not changed(tool0, adapter_state(run, "tool")), "planner samples moved the tool adapter"
    assert not changed(base0, base_state(run)), "the base model must stay frozen"

    planner1 = adapter_state(run, "planner")
    run.update_workers["tool"].update(routed["tool"])  # tool samples only
    assert changed(tool0, adapter_state(run, "tool"))
    assert not changed(planner1, adapter_state(run, "planner")), "tool samples moved the planner adapter"
    assert not changed(base0, base_state(run))

    # After training the two adapters are different functions (B @ A of one projection differs).
    layer = run.peft_model.get_base_model().model.layers[0].self_attn.q_proj
    deltas = {r: layer.lora_B[r].weight @ layer.lora_A[r].weight for r in ROLES}
    assert deltas["tool"].abs().sum() > 0 and deltas["planner"].abs().sum() > 0
    assert not torch.allclose(deltas["tool"], deltas["planner"])


def test_gradient_checkpointing_still_trains_the_adapter(tmp_path, taught_model_dir):
    run = make_lora_run(tmp_path, taught_model_dir, gradient_checkpointing=True)
    routed = run.router.route(with_reward_spread(run.rollout(0).samples))
    before = adapter_state(run, "planner")
    assert run.update_workers["planner"].update(routed["planner"])["grad_norm"] > 0
    assert changed(before, adapter_state(run, "planner"))


def test_train_step_in_lora_mode(tmp_path, taught_model_dir):
    run = make_lora_run(tmp_path, taught_model_dir)
    base0, planner0 = base_state(run), adapter_state(run, "planner")
    record = run.train_step()
    assert record["samples/tool"] > 0 and record["samples/planner"] > 0
    assert record["samples_updated/planner"] > 0  # the taught planner's moves differ in reward
    assert changed(planner0, adapter_state(run, "planner"))
    assert not changed(base0, base_state(run))


def test_kl_reference_is_the_base_with_adapters_disabled(tmp_path, taught_model_dir):
    run = make_lora_run(tmp_path, taught_model_dir, beta=0.04)
    trainer = run.trainer_of("planner")
    # No second model loaded as the reference: the base under the adapters is the reference.
    assert trainer.ref_model is None and trainer.beta == trainer.args.beta == 0.04
    perturb_adapters(run)  # the adapters now change the model a lot, so policy != reference
    routed = run.router.route(with_reward_spread(run.rollout(0).samples))
    samples = routed["planner"]
    batch = trainer.samples_to_batch(samples)

    input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    keep = batch["completion_ids"].size(1)
    with torch.no_grad():
        plain_base, _ = load_taught(taught_model_dir)  # a fresh copy of the base, no adapters at all
        expected, _, _ = trainer._get_per_token_logps_and_entropies(plain_base, input_ids, mask, keep)
        policy, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, input_ids, mask, keep)
    live = batch["completion_mask"].bool()
    torch.testing.assert_close(batch["ref_per_token_logps"][live], expected[live], rtol=1e-4, atol=1e-4)
    assert not torch.allclose(policy[live], expected[live], atol=1e-2)
    # Switching the adapters off for the reference leaves the planner's adapter active and trainable.
    assert run.peft_model.active_adapter == "planner"
    assert all(p.requires_grad for p in adapter_parameters_of(run, "planner"))
    assert not any(p.requires_grad for p in adapter_parameters_of(run, "tool"))

    # The update pays the KL penalty and still moves only the planner's adapter.
    base0, tool0, planner0 = base_state(run), adapter_state(run, "tool"), adapter_state(run, "planner")
    assert run.update_workers["planner"].update(samples)["kl"] > 0
    assert changed(planner0, adapter_state(run, "planner"))
    assert not changed(tool0, adapter_state(run, "tool")) and not changed(base0, base_state(run))


def adapter_parameters_of(run, adapter: str) -> list[torch.nn.Parameter]:
    from mas_trainer.policies.lora import adapter_parameters

    return list(adapter_parameters(run.peft_model, adapter).values())


def test_single_role_workflow_trains_one_shared_adapter(tmp_path, taught_model_dir):
    run = make_lora_run(tmp_path, taught_model_dir, workflow="single", max_turns=1, max_completion_length=2)
    assert run.policies == ["shared"] and list(run.peft_model.peft_config) == ["shared"]
    before = adapter_state(run, "shared")
    record = run.train_step()
    assert record["samples_updated/shared"] > 0 and changed(before, adapter_state(run, "shared"))
    # Saved and loaded for evaluation like any shared run: one policy "shared" for the solver role.
    from mas_trainer.run import checkpoints as checkpoint
    from mas_trainer.settings import run_layout

    checkpoint.save_checkpoint(run)
    models, policy_of_role = checkpoint.load_policies(tmp_path / "run")
    assert list(models) == ["shared"] and policy_of_role == {"solver": "shared"}


# ------------------------------------------------------------------ generation


@pytest.mark.parametrize("backend", ["prefix_shared", "hf"])
def test_generation_with_each_adapter_equals_its_merged_model(tmp_path, taught_model_dir, backend):
    from mas_envs import make_env
    from mas_trainer.policies.generation import HFBackend
    from mas_trainer.rollout.prompts import chat_prompt_ids
    from mas_trainer.policies.lora import attach_adapters

    run = make_lora_run(tmp_path, taught_model_dir, rollout_backend=backend)
    perturb_adapters(run)
    tokenizer = run.rollout_workers["tool"].tokenizer
    env = make_env("plan_path", preset="4x4", observation_detail="rich", workflow="mas")
    prompts = []
    for seed in range(3):
        env.reset(seed=seed)
        prompts.append(chat_prompt_ids(tokenizer, env.observe("planner")["prompt"]))

    def greedy(b):
        return [c[0].token_ids for c in b.generate(prompts, 1, max_new_tokens=6, temperature=0.0)]

    # References: peft's own generate with the adapter set, and a merged copy (weights copied by name
    # into a fresh base + adapters; copy.deepcopy would keep the trainer-wrapped forward of the original).
    merged, peft_generate = {}, {}
    for role in ROLES:
        run.peft_model.set_adapter(role)
        peft_generate[role] = greedy(HFBackend(run.peft_model, tokenizer))
        fresh = attach_adapters(load_taught(taught_model_dir)[0], ROLES, run.config)
        fresh.load_state_dict(run.peft_model.state_dict())
        fresh.set_adapter(role)
        merged[role] = greedy(HFBackend(fresh.merge_and_unload(), tokenizer))
    assert merged == peft_generate
    assert merged["tool"] != merged["planner"], "the perturbed adapters should change the outputs"
    # Interleaved calls through the rollout backends: each must switch to its own adapter first.
    for role in ["tool", "planner", "tool", "planner"]:
        assert greedy(run.rollout_workers[role].backend) == merged[role], role


# ------------------------------------------------------------------ checkpoints and evaluation


def test_checkpoint_resume_restores_adapters_and_step(tmp_path, taught_model_dir):
    from mas_trainer.run import checkpoints as checkpoint
    from mas_trainer.settings import run_layout
    from mas_trainer.policies.lora import ADAPTER_WEIGHTS, BASE_DIR, FINGERPRINT_FILE
    from mas_trainer.policies.models import tiny_model_and_tokenizer
    from mas_trainer.run.trainer import MASTrainer

    run = make_lora_run(tmp_path, taught_model_dir, save_steps=1, save_total_limit=0)
    run.train(progress=False)
    perturb_adapters(run, seed=3)  # make both adapters non-trivial before the saved state we compare
    saved_path = checkpoint.save_checkpoint(run)
    assert saved_path.name == "step-000002"
    for role in ROLES:
        assert (saved_path / "policies" / role / "adapter" / ADAPTER_WEIGHTS).is_file()
        assert (saved_path / "policies" / role / "optimizer.pt").is_file()
        assert not (saved_path / "policies" / role / "model").exists()  # no full model copy per role
    assert (tmp_path / "run" / BASE_DIR / FINGERPRINT_FILE).is_file()
    assert not list((tmp_path / "run" / "checkpoints").glob(".tmp-*"))
    saved = {r: adapter_state(run, r) for r in ROLES}

    resumed = make_lora_run(tmp_path, taught_model_dir, max_steps=3)  # fresh adapters on a fresh base
    assert changed(saved["planner"], adapter_state(resumed, "planner"))
    checkpoint.load_checkpoint(resumed, run_layout.latest_checkpoint(tmp_path / "run"))
    assert resumed.global_step == 2
    for role in ROLES:
        assert not changed(saved[role], adapter_state(resumed, role))
        assert resumed.trainer_of(role).state.global_step == 2
        original = run.trainer_of(role).optimizer.state_dict()["state"]
        restored = resumed.trainer_of(role).optimizer.state_dict()["state"]
        assert original.keys() == restored.keys()
        for index, moments in original.items():  # Adam moments restored
            assert all(torch.equal(moments[k], restored[index][k]) for k in moments)
    assert run.trainer_of("planner").optimizer.state_dict()["state"]  # the planner did take optimizer steps
    records = resumed.train(resume=True, progress=False)
    assert [r["step"] for r in records] == [3]
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2, 3]

    other_base = MASTrainer(lora_config(tmp_path), models={"base": tiny_model_and_tokenizer(seed=1)})
    with pytest.raises(ValueError, match="differs from the one its adapters were trained on"):
        checkpoint.load_checkpoint(other_base, run_layout.latest_checkpoint(tmp_path / "run"))
    with pytest.raises(ValueError, match="differs from the one its adapters were trained on"):
        checkpoint.save_checkpoint(other_base)  # a new run in this folder would mix two bases


def test_mas_eval_of_a_lora_run_uses_each_adapter(tmp_path, taught_model_dir):
    from mas_trainer.run import checkpoints as checkpoint
    from mas_trainer.settings import run_layout
    from mas_trainer.run.eval_cli import main as eval_main
    from mas_trainer.run.evaluate import load_policies_for
    from mas_trainer.policies.generation import HFBackend
    from mas_trainer.rollout.prompts import chat_prompt_ids
    from mas_envs import make_env

    run = make_lora_run(tmp_path, taught_model_dir)
    perturb_adapters(run, seed=5)
    checkpoint.save_checkpoint(run)
    run_dir = tmp_path / "run"

    loaded = load_policies_for(str(run_dir))
    assert sorted(loaded.models) == sorted(ROLES) and loaded.policy_mode == "specialized"
    env = make_env("plan_path", preset="4x4", observation_detail="rich", workflow="mas")
    env.reset(seed=0)
    prompt = chat_prompt_ids(loaded.models["tool"][1], env.observe("planner")["prompt"])
    outputs = {}
    for role in ROLES:
        run.peft_model.set_adapter(role)
        live = run.rollout_workers[role].backend.generate([prompt], 1, max_new_tokens=6, temperature=0.0)
        evaluated = HFBackend(*loaded.models[role]).generate([prompt], 1, max_new_tokens=6, temperature=0.0)
        assert evaluated[0][0].token_ids == live[0][0].token_ids, role
        outputs[role] = live[0][0].token_ids
    assert outputs["tool"] != outputs["planner"]

    out = tmp_path / "results.json"
    assert eval_main(["--env", "plan_path", "--model", str(run_dir), "--episodes", "2", "--quiet",
                      "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    policies = results["model"]["policies"]
    assert sorted(policies) == sorted(ROLES) and results["method"] == "mas_at_grpo_specialized"
    assert policies["tool"]["weights_sha256"] != policies["planner"]["weights_sha256"]

"""The paper's methods and the comparison driver, with the real tiny model, real envs and the real trainer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baselines.methods import METHODS, Budget, get_method
from leaderboard.validate import result_problems

FAST_ENV = {"preset": "4x4", "max_turns": 1}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_methods_are_the_papers():
    from leaderboard import METHODS as RESULT_METHODS
    from mas_trainer.run.eval_cli import build_parser
    from mas_trainer.settings.methods import METHOD_NAMES, METHOD_TABLE

    assert tuple(METHODS) == METHOD_NAMES == RESULT_METHODS  # one table, in the paper's order
    schema = json.loads((Path(__file__).resolve().parent.parent / "leaderboard/schema/results.schema.json").read_text())
    assert schema["properties"]["method"]["enum"] == list(METHOD_NAMES)  # the results-file enum
    eval_method = next(a for a in build_parser()._actions if a.dest == "method")
    assert tuple(eval_method.choices) == METHOD_NAMES  # mas-eval --method
    assert {m.sampler for m in METHOD_TABLE.values()} == {"greedy", "tree", "trajectory"}
    assert [m.workflow for m in METHODS.values()] == ["single", "single", "single", "mas", "mas", "mas", "mas"]
    untrained = [m.name for m in METHODS.values() if not m.trained]
    assert untrained == ["single_prompt", "mas_prompt"]
    assert get_method("single_grpo").training.grouping == "trajectory"
    assert get_method("single_at_grpo").training.grouping == "at_grpo"
    assert get_method("mas_naive_grpo").training.grouping == "trajectory"
    assert get_method("mas_at_grpo_shared").training.policy == "shared"
    spec = get_method("mas_at_grpo_specialized").training
    assert (spec.grouping, spec.policy) == ("at_grpo", "specialized")
    with pytest.raises(KeyError, match="unknown method"):
        get_method("mas_magic")
    with pytest.raises(ValueError, match="steps or minutes"):
        Budget()
    with pytest.raises(ValueError, match="clock must be"):
        Budget(minutes=1, clock="sundial")


def test_cpu_budget_counts_this_process_cpu_time_not_sleep():
    import time

    budget = Budget(minutes=1, clock="cpu")
    assert budget.describe() == "1 CPU min"
    t0 = budget.seconds_used()
    time.sleep(0.3)  # sleeping uses no CPU
    slept = budget.seconds_used() - t0
    t1 = budget.seconds_used()
    end = time.process_time() + 0.3
    while time.process_time() < end:  # busy for 0.3 s of CPU
        pass
    busy = budget.seconds_used() - t1
    assert slept < 0.1 and busy >= 0.28  # process_time ticks can land a hair short of 0.3


def test_trained_method_within_a_time_budget(tmp_path):
    """single_grpo: real (trajectory-grouped) training under a minutes budget capped at 1 step, then eval."""
    from mas_trainer.settings.run_layout import latest_checkpoint

    method = get_method("single_grpo")
    outcome = method.run(
        "plan_path", model="tiny", out_dir=tmp_path, budget=Budget(minutes=5, max_steps=1), episodes=2,
        env_kwargs=FAST_ENV, max_new_tokens=3, progress=False,
        train_args={"num_generations": 2, "envs_per_step": 2, "max_completion_length": 3,
                    "per_device_train_batch_size": 4},
    )
    assert outcome.train_steps == 1 and outcome.run_dir == tmp_path / "plan_path" / "single_grpo" / "run"
    assert latest_checkpoint(outcome.run_dir).name == "step-000001"
    state = json.loads((latest_checkpoint(outcome.run_dir) / "run_state.json").read_text())
    assert state["config"]["grouping"] == "trajectory" and state["config"]["workflow"] == "single"
    assert state["config"]["max_turns"] == 1  # the settled env kwargs reach training too
    data = json.loads(outcome.results_path.read_text())
    assert_valid_results(data)
    assert data["method"] == "single_grpo" and data["provenance"]["run_dir"] == str(outcome.run_dir)
    assert data["env"]["kwargs"] == {"preset": "4x4", "observation_detail": "rich", "parse_penalty": -0.12, "max_turns": 1, "alpha": 1.0}
    assert len((outcome.run_dir / "metrics.jsonl").read_text().splitlines()) == 1


def test_compare_two_prompt_methods_prints_and_writes_the_table(tmp_path, capsys):
    from baselines.compare import main

    out_dir = tmp_path / "cmp"
    rc = main(["--envs", "plan_path", "--methods", "single_prompt,mas_prompt", "--model", "tiny", "--episodes", "2",
               "--env-kwargs", json.dumps(FAST_ENV), "--max-new-tokens", "3", "--out-dir", str(out_dir)])
    assert rc == 0
    printed = capsys.readouterr().out
    results = {m: json.loads((out_dir / "plan_path" / m / "results.json").read_text())
               for m in ("single_prompt", "mas_prompt")}
    for data in results.values():
        assert_valid_results(data)
    # Identical eval envs for both methods: same kwargs (max_turns settled explicitly), same task set.
    assert results["single_prompt"]["env"]["kwargs"] == results["mas_prompt"]["env"]["kwargs"]
    assert results["single_prompt"]["env"]["kwargs"]["max_turns"] == 1
    assert (results["single_prompt"]["env"]["eval_set_fingerprint"]
            == results["mas_prompt"]["env"]["eval_set_fingerprint"])
    assert results["single_prompt"]["env"]["workflow"] == "single" and results["mas_prompt"]["env"]["workflow"] == "mas"

    table = (out_dir / "comparison.md").read_text()
    assert "| Method | Plan-Path |" in table and "| Method | Plan-Path |" in printed
    for name, data in results.items():
        rate = f"{100 * data['summary']['success_rate']:.1f}"
        row = next(line for line in table.splitlines() if line.startswith(f"| {METHODS[name].label} |"))
        assert rate in row
        assert f"| {METHODS[name].label} |" in printed
    assert "[2/2] plan_path" in printed
    index = json.loads((out_dir / "comparison.json").read_text())
    assert {(c["method"], c["success_rate"]) for c in index["cells"]} == {
        (m, d["summary"]["success_rate"]) for m, d in results.items()}

    # A second call reuses the files instead of evaluating again.
    assert main(["--envs", "plan_path", "--methods", "single_prompt", "--model", "tiny", "--episodes", "2",
                 "--out-dir", str(out_dir), "--skip-existing"]) == 0
    assert "reused" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--methods", "mas_at_grpo_shared"], "need --steps and/or --minutes"),
        (["--methods", "mas_magic"], "unknown method"),
        (["--envs", "chess"], "unknown env"),
        (["--methods", "single_prompt", "--env-kwargs", "{bad"], "not valid JSON"),
        (["--methods", "single_prompt", "--episodes", "0"], "--episodes must be >= 1"),
    ],
)
def test_compare_usage_errors(argv, message, capsys, tmp_path):
    from baselines.compare import main

    assert main(argv + ["--out-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not (tmp_path / "comparison.md").exists()


def test_per_env_kwargs_forms():
    from baselines.compare import _per_env_kwargs

    assert _per_env_kwargs({"preset": "4x4"}, ["plan_path", "sokoban"]) == {
        "plan_path": {"preset": "4x4"}, "sokoban": {"preset": "4x4"}}
    assert _per_env_kwargs({"plan_path": {"preset": "6x6"}}, ["plan_path", "sudoku"]) == {
        "plan_path": {"preset": "6x6"}, "sudoku": {}}


def assert_valid_results(data: dict) -> None:
    """The leaderboard's checks: the JSON Schema, then its consistency checks."""
    assert result_problems(data) == []


def test_time_left_estimate_uses_the_mean_of_each_kind_of_job():
    from baselines.compare import estimate_remaining

    assert estimate_remaining({True: [], False: []}, [True, False]) == 0.0  # nothing run yet: no guess
    # One eval-only job took 30 s: both remaining jobs are guessed from it until a trained one has run.
    assert estimate_remaining({True: [], False: [30.0]}, [True, False]) == 60.0
    # Trained jobs at their own mean (600 s), eval-only at theirs (30 s); reused results add nothing.
    assert estimate_remaining({True: [500.0, 700.0], False: [30.0]}, [True, False, True]) == 1230.0


def test_a_model_per_role_reaches_the_trainer_config(tmp_path, monkeypatch):
    """compare --model tool=...,planner=... (parsed as mas-eval and mas-train parse it) trains one model per role."""
    import baselines.methods as methods
    from baselines.compare import parse_args

    args = parse_args(["--envs", "plan_path", "--methods", "mas_prompt,mas_at_grpo_specialized", "--steps", "1",
                       "--model", "tool=tiny,planner=tiny"])
    seen = {}

    class Captured(Exception):
        pass

    def fake_trainer(config):
        seen["config"] = config
        raise Captured

    monkeypatch.setattr(methods, "MASTrainer", fake_trainer)
    with pytest.raises(Captured):
        get_method("mas_at_grpo_specialized").train("plan_path", model=args.model, env_kwargs=dict(FAST_ENV),
                                                    budget=args.budget, run_dir=tmp_path / "run")
    config = seen["config"]
    assert config.policy_mode == "specialized"
    assert {role: config.model_for(role) for role in ("tool", "planner")} == {"tool": "tiny", "planner": "tiny"}
    config.check_roles(["tool", "planner"])  # the spec names exactly the workflow's roles


def test_a_model_per_role_is_refused_for_one_policy_methods():
    from baselines.compare import UsageError, parse_args

    with pytest.raises(UsageError, match="mas_at_grpo_shared"):
        parse_args(["--methods", "mas_prompt,mas_at_grpo_shared", "--steps", "1", "--model", "tool=tiny,planner=tiny"])
    with pytest.raises(UsageError, match="not role=value"):
        parse_args(["--methods", "mas_prompt", "--model", "tool=tiny,planner="])

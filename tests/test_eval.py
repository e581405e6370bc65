"""mas-eval: results files on real envs with the real tiny model; runs of the real trainer; CLI errors.

The tiny model is random, so success is rarely reached: the tests check that the numbers written are
the numbers of the episodes played (and match the env, the weights and the schema), not that they are
high.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leaderboard.validate import result_problems
from mas_envs import make_env

FAST = ["--max-new-tokens", "3", "--env-kwargs", '{"preset": "4x4", "max_turns": 2}']


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_wilson_interval_known_values():
    from mas_trainer.run.evaluate import wilson_interval

    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = wilson_interval(20, 20)
    assert hi == 1.0 and lo == pytest.approx(0.8389, abs=1e-4)


def test_mas_eval_single_writes_valid_results(tmp_path, capsys):
    from mas_trainer.run.eval_cli import main
    from mas_trainer.policies.models import load_model_and_tokenizer, weights_fingerprint

    out = tmp_path / "r.json"
    rc = main(["--env", "plan_path", "--model", "tiny", "--workflow", "single", "--episodes", "3", *FAST,
               "--label", "unit test", "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "success" in printed and "solver" in printed and str(out) in printed
    data = json.loads(out.read_text())
    assert_valid_results(data)

    env = make_env("plan_path", preset="4x4", max_turns=2, workflow="single", split="test")
    assert data["env"]["eval_set_fingerprint"] == env.unwrapped.eval_set_fingerprint()
    assert data["env"]["kwargs"]["preset"] == "4x4" and data["env"]["workflow"] == "single"
    assert data["method"] == "single_prompt" and data["model"]["policy_mode"] == "shared"
    model, _ = load_model_and_tokenizer("tiny")
    assert data["model"]["policies"]["shared"]["weights_sha256"] == weights_fingerprint(model)
    assert data["model"]["params"] == sum(p.numel() for p in model.parameters())

    episodes = data["episodes"]
    assert [e["task_index"] for e in episodes] == [0, 1, 2]
    for e in episodes:
        env.reset(options={"task_index": e["task_index"]})
        assert e["task_id"] == str(env.unwrapped.task_id)
        assert 1 <= e["turns"] <= 2 and 0 < e["tokens"] <= 2 * 3  # one 3-token answer per turn at most
    summary = data["summary"]
    assert summary["success_rate"] == sum(e["success"] for e in episodes) / 3
    assert summary["ci95"][0] <= summary["success_rate"] <= summary["ci95"][1]
    assert summary["avg_turns"] == pytest.approx(sum(e["turns"] for e in episodes) / 3)
    assert set(summary["per_role"]) == {"solver"}
    assert data["decoding"] == {"temperature": 0.0, "samples": 1, "max_new_tokens": 3}
    assert data["provenance"]["label"] == "unit test" and data["provenance"]["command"].startswith("mas-eval ")
    assert data["model"]["policies"]["shared"]["dtype"] == "float32"


def test_mas_eval_in_bf16_is_recorded_and_kept_apart_on_the_leaderboard(tmp_path):
    from leaderboard.rows import row_from_result
    from mas_trainer.run.eval_cli import main

    fp32, bf16 = tmp_path / "fp32.json", tmp_path / "bf16.json"
    args = ["--env", "plan_path", "--model", "tiny", "--workflow", "single", "--episodes", "2", *FAST, "--quiet"]
    assert main(args + ["--out", str(fp32)]) == 0
    assert main(args + ["--dtype", "bfloat16", "--out", str(bf16)]) == 0
    a, b = json.loads(fp32.read_text()), json.loads(bf16.read_text())
    assert_valid_results(b)
    assert b["model"]["policies"]["shared"]["dtype"] == "bfloat16"
    assert b["model"]["policies"]["shared"]["weights_sha256"] != a["model"]["policies"]["shared"]["weights_sha256"]
    row_a, row_b = row_from_result("a.json", a), row_from_result("b.json", b)
    assert row_b.roles == (("shared", "tiny [bfloat16]"),) and row_a.roles == (("shared", "tiny"),)
    assert row_a.key != row_b.key  # not aggregated into one row


def test_best_of_k_samples_k_candidates_per_step(tmp_path):
    """--samples K: every agent step draws K candidates (all counted in tokens) and executes the best."""
    from mas_trainer.run.evaluate import EvalRequest, evaluate

    request = EvalRequest(env="plan_path", model="tiny", workflow="mas", episodes=2, samples=3, seed=5,
                          max_new_tokens=3, env_kwargs={"preset": "4x4", "max_turns": 1})
    data = evaluate(request)
    assert_valid_results(data)
    assert data["decoding"] == {"temperature": 1.0, "samples": 3, "max_new_tokens": 3}
    assert set(data["summary"]["per_role"]) == {"tool", "planner"}
    for e in data["episodes"]:
        # one turn of two roles, three candidates each, at most 3 tokens per candidate
        assert e["turns"] == 1 and 2 * 3 <= e["tokens"] <= 2 * 3 * 3
    assert evaluate(request)["episodes"] == data["episodes"]  # seeded: reproducible


def test_transcripts_hold_every_executed_step_of_the_played_episodes(tmp_path):
    """--transcripts: one line per episode, one entry per executed step, agreeing with the results file;
    a resumed call does not replay (or rewrite) the chunks it reads from the progress file."""
    from mas_trainer.run.eval_cli import main
    from mas_trainer.run.evaluate import EvalRequest, evaluate
    from mas_trainer.run.transcripts import read_transcripts

    out, log = tmp_path / "r.json", tmp_path / "t.jsonl"
    assert main(["--env", "plan_path", "--model", "tiny", "--workflow", "mas", "--episodes", "3", *FAST,
                 "--quiet", "--chunk-size", "2", "--out", str(out), "--transcripts", str(log)]) == 0
    data = json.loads(out.read_text())
    lines = log.read_text().splitlines()
    assert len(lines) == 3
    transcripts = read_transcripts(log)
    env = make_env("plan_path", preset="4x4", max_turns=2, workflow="mas", split="test")
    for e in data["episodes"]:
        t = transcripts[e["task_index"]]
        assert (t["task_id"], t["success"], t["turns"]) == (e["task_id"], e["success"], e["turns"])
        assert [s["agent"] for s in t["steps"]][:2] == ["tool", "planner"]  # the mas turn order
        assert len(t["steps"]) <= 2 * e["turns"]
        assert sum(s["reward"] for s in t["steps"]) == pytest.approx(e["return"])
        assert all(set(s) >= {"turn", "prompt", "text", "team", "local", "parse_error"} for s in t["steps"])
        env.reset(options={"task_index": e["task_index"]})
        first_line = env.observe("tool")["prompt"].splitlines()[0]
        assert first_line in t["steps"][0]["prompt"]  # the prompt is what the first agent was shown

    # A resumed call plays, and transcribes, only the chunk that is not in the progress file.
    request = EvalRequest(env="plan_path", model="tiny", workflow="mas", episodes=3, max_new_tokens=3,
                          env_kwargs={"preset": "4x4", "max_turns": 2}, chunk_size=2)
    partial, first_log, resumed_log = tmp_path / "p.jsonl", tmp_path / "t1.jsonl", tmp_path / "t2.jsonl"
    evaluate(request, progress_path=partial, transcripts_path=first_log)
    partial.write_text(partial.read_text().splitlines()[0] + "\n")  # as if stopped after chunk 0-1
    again = evaluate(request, progress_path=partial, transcripts_path=resumed_log)
    assert again["episodes"] == data["episodes"]
    assert set(read_transcripts(resumed_log)) == {2}
    assert read_transcripts(resumed_log)[2]["steps"] == read_transcripts(first_log)[2]["steps"]  # greedy

    keys = {json.loads(line)["key"] for line in lines}
    assert len(keys) == 1 and set(read_transcripts(log, key=keys.pop())) == {0, 1, 2}
    assert read_transcripts(log, key="another evaluation") == {}
    log.write_text("\n".join(lines[:2]) + "\n{cut short")  # a line cut by a kill is skipped when read
    assert set(read_transcripts(log)) == {0, 1}


def test_replay_tasks_reproduces_the_evaluated_episodes(tmp_path):
    """scripts/replay_tasks.py plays chosen tasks exactly as mas-eval played them (greedy, same seeds)."""
    import importlib.util

    from mas_trainer.run.evaluate import EvalRequest, evaluate
    from mas_trainer.run.transcripts import read_transcripts

    spec = importlib.util.spec_from_file_location("replay_tasks", Path(__file__).parents[1] / "scripts/replay_tasks.py")
    replay = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(replay)
    replayed = tmp_path / "replay.jsonl"
    assert replay.main(["--env", "plan_path", "--model", "tiny", "--tasks", "3,1", "--env-kwargs",
                        '{"preset": "4x4", "max_turns": 2}', "--transcripts", str(replayed)]) == 0
    again = read_transcripts(replayed)
    assert set(again) == {1, 3}
    full = EvalRequest(env="plan_path", model="tiny", workflow="mas", episodes=4,
                       env_kwargs={"preset": "4x4", "max_turns": 2})
    reference = tmp_path / "reference.jsonl"
    evaluate(full, transcripts_path=reference)
    for task in (1, 3):
        assert again[task]["steps"] == read_transcripts(reference)[task]["steps"]
    with pytest.raises(SystemExit):
        replay.main(["--env", "plan_path", "--tasks", "1,1", "--transcripts", str(replayed)])


def test_worker_processes_play_the_same_episodes_as_one_process(tmp_path):
    """--workers 2: chunks played by two spawned processes give the same episodes, transcripts and progress
    records as one process (sampled play, so the per-chunk seeds matter too), and resume from each other."""
    from mas_trainer.run.eval_progress import read_chunks
    from mas_trainer.run.evaluate import EvalRequest, evaluate
    from mas_trainer.run.transcripts import read_transcripts

    base = dict(env="plan_path", model="tiny", workflow="mas", episodes=5, temperature=1.0, seed=3,
                max_new_tokens=3, env_kwargs={"preset": "4x4", "max_turns": 2}, chunk_size=2)
    one_log, two_log, partial = tmp_path / "one.jsonl", tmp_path / "two.jsonl", tmp_path / "p.jsonl"
    one = evaluate(EvalRequest(**base), transcripts_path=one_log)
    two = evaluate(EvalRequest(**base, workers=2), progress_path=partial, transcripts_path=two_log)
    assert two["episodes"] == one["episodes"] and two["summary"]["per_role"] == one["summary"]["per_role"]
    assert read_transcripts(two_log) == read_transcripts(one_log)
    assert two["provenance"]["machines"][0]["torch_threads"] >= 1
    key = json.loads(partial.read_text().splitlines()[0])["key"]
    assert sorted(read_chunks(partial, key)) == [(0, 2), (2, 4), (4, 5)]

    # A run of one process resumes the chunks two processes played, and the other way round.
    lines = partial.read_text().splitlines()
    partial.write_text("\n".join(line for line in lines if json.loads(line)["start"] != 2) + "\n")
    again = evaluate(EvalRequest(**base, workers=2), progress_path=partial)
    assert again["episodes"] == one["episodes"] and again["provenance"]["resumed_episodes"] == 3


def test_workers_are_checked(tmp_path, capsys):
    from mas_trainer.policies.models import tiny_model_and_tokenizer
    from mas_trainer.run.eval_cli import main
    from mas_trainer.run.evaluate import EvalError, EvalRequest, LoadedPolicies, evaluate

    assert main(["--env", "plan_path", "--model", "tiny", "--workers", "0", "--out", str(tmp_path / "r.json")]) == 2
    assert "--workers must be >= 1" in capsys.readouterr().err
    loaded = LoadedPolicies({"shared": tiny_model_and_tokenizer(seed=0)}, "shared", "tiny", {"shared": "tiny"})
    with pytest.raises(EvalError, match="models passed in memory"):
        evaluate(EvalRequest(env="plan_path", model="tiny", episodes=2, workers=2), loaded=loaded)


def test_transcripts_path_that_is_a_folder_is_refused(tmp_path, capsys):
    from mas_trainer.run.eval_cli import main

    assert main(["--env", "plan_path", "--transcripts", str(tmp_path), "--out", str(tmp_path / "r.json")]) == 2
    assert "is a folder" in capsys.readouterr().err


# ------------------------------------------------------------------ trained runs (real trainer)


@pytest.fixture(scope="module")
def specialized_run(tmp_path_factory) -> Path:
    """A 1-step specialized AT-GRPO run whose two roles start from different tiny models."""
    from mas_trainer.settings.config import ATGRPOConfig
    from mas_trainer.policies.models import tiny_model_and_tokenizer
    from mas_trainer.run.trainer import MASTrainer

    run_dir = tmp_path_factory.mktemp("spec-run")
    config = ATGRPOConfig(
        output_dir=str(run_dir), env="plan_path", workflow="mas", policy_mode="specialized", model="tiny",
        env_kwargs={"preset": "4x4"}, envs_per_step=2, num_generations=2, max_turns=1, max_completion_length=3,
        max_steps=1, save_steps=1, per_device_train_batch_size=4, report_to="none",
    )
    models = {"tool": tiny_model_and_tokenizer(seed=0), "planner": tiny_model_and_tokenizer(seed=1)}
    MASTrainer(config, models=models).train(progress=False)
    return run_dir


def test_run_dir_loads_per_role_policies(specialized_run):
    from mas_trainer.run.evaluate import default_method, load_policies_for, role_routing
    from mas_trainer.policies.models import weights_fingerprint

    loaded = load_policies_for(str(specialized_run))
    assert loaded.policy_mode == "specialized" and sorted(loaded.models) == ["planner", "tool"]
    assert loaded.run_config["grouping"] == "at_grpo" and default_method("mas", loaded) == "mas_at_grpo_specialized"
    prints = {p: weights_fingerprint(m) for p, (m, _) in loaded.models.items()}
    assert prints["tool"] != prints["planner"]
    assert role_routing(["tool", "planner"], loaded, False) == {"tool": "tool", "planner": "planner"}
    assert role_routing(["tool", "planner"], loaded, True) == {"tool": "planner", "planner": "tool"}


def test_swap_roles_plays_each_role_with_the_other_policy(specialized_run):
    from mas_trainer.run.evaluate import load_policies_for, make_eval_envs, play, role_routing
    from mas_trainer.policies.generation import HFBackend
    from mas_trainer.rollout.prompts import chat_prompt_ids

    loaded = load_policies_for(str(specialized_run))
    kwargs = {"preset": "4x4", "max_turns": 1}
    for swap in (False, True):
        routing = role_routing(["tool", "planner"], loaded, swap)
        envs = make_eval_envs("plan_path", kwargs, "mas", "test", 1, 0)
        first_prompt = envs[0].observe("tool")["prompt"]
        rollout = play(envs, loaded, routing, samples=1, temperature=0.0, top_p=1.0, max_new_tokens=3, seed=0)
        assert {(s.role, s.policy) for s in rollout.samples} == {(r, routing[r]) for r in ("tool", "planner")}
        # The tool's action is what the routed model itself answers greedily to the tool prompt.
        model, tok = loaded.models[routing["tool"]]
        expected = HFBackend(model, tok).generate([chat_prompt_ids(tok, first_prompt)], 1, max_new_tokens=3,
                                                  temperature=0.0)[0][0]
        tool_sample = next(s for s in rollout.samples if s.role == "tool")
        assert tool_sample.completion_ids == expected.token_ids


def test_mas_eval_on_run_dir_and_swapped(specialized_run, tmp_path, capsys):
    from mas_trainer.run.eval_cli import main
    from mas_trainer.run.evaluate import load_policies_for
    from mas_trainer.policies.models import weights_fingerprint

    loaded = load_policies_for(str(specialized_run))
    results = {}
    for swap in (False, True):
        out = tmp_path / f"swap{swap}.json"
        argv = ["--env", "plan_path", "--model", str(specialized_run), "--episodes", "2", "--quiet", "--out", str(out)]
        assert main(argv + (["--swap-roles"] if swap else [])) == 0
        results[swap] = data = json.loads(out.read_text())
        assert_valid_results(data)
        assert data["method"] == "mas_at_grpo_specialized" and data["env"]["workflow"] == "mas"
        assert data["env"]["kwargs"]["max_turns"] == 1  # the run's settings are the defaults
        assert data["decoding"]["max_new_tokens"] == 3
        assert data["provenance"]["swap_roles"] is swap
        assert data["provenance"]["run_dir"] == str(specialized_run)
        assert {p: v["weights_sha256"] for p, v in data["model"]["policies"].items()} == {
            p: weights_fingerprint(m) for p, (m, _) in loaded.models.items()}
    assert "[roles swapped]" in capsys.readouterr().out
    assert results[False]["env"] == results[True]["env"]


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--env", "chess"], "unknown env 'chess'"),
        (["--env", "plan_path", "--env-kwargs", "{oops"], "not valid JSON"),
        (["--env", "plan_path", "--env-kwargs", "[1]"], "must be a JSON object"),
        (["--env", "plan_path", "--env-kwargs", '{"preset": "3x3"}'], "unknown preset"),
        (["--env", "plan_path", "--env-kwargs", '{"split": "train"}'], "must not set 'split'"),
        (["--env", "plan_path", "--episodes", "0"], "--episodes must be >= 1"),
        (["--env", "plan_path", "--episodes", "201"], "exceeds the test split"),
        (["--env", "plan_path", "--samples", "2", "--temperature", "0"], "needs --temperature > 0"),
        (["--env", "plan_path", "--model", "no-such-org/no-such-model"], "cannot load model"),
        (["--env", "plan_path", "--model", "tiny", "--swap-roles"], "needs a specialized run"),
        (["--env", "plan_path", "--model", "tiny", "--method", "single_prompt"], "needs workflow 'single'"),
        (["--env", "plan_path", "--model", "tiny", "--method", "mas_at_grpo_specialized"], "needs a specialized"),
        (["--env", "plan_path", "--method", "best_method"], "invalid choice"),
        (["--env", "plan_path", "--dtype", "int8"], "invalid choice"),
    ],
)
def test_cli_errors_exit_2_with_one_line(argv, message, capsys):
    from mas_trainer.run.eval_cli import main

    assert main(argv + ["--out", "/nonexistent/never-written.json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mas-eval: error:") and message in err[0], err


@pytest.mark.slow
def test_default_model_plan_path_greedy(tmp_path):
    """The real SmolLM2-135M on Plan-Path 4x4 (single workflow), a few greedy episodes (3 turns each)."""
    from mas_trainer.run.eval_cli import main

    out = tmp_path / "smollm2.json"
    assert main(["--env", "plan_path", "--model", "smollm2-135m", "--workflow", "single", "--episodes", "4",
                 "--env-kwargs", '{"max_turns": 3}', "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert_valid_results(data)
    assert data["model"]["params"] > 100_000_000 and data["summary"]["episodes"] == 4


def assert_valid_results(data: dict) -> None:
    """The leaderboard's checks: the JSON Schema, then its consistency checks."""
    assert result_problems(data) == []


def test_mas_eval_with_a_model_per_role(tmp_path, capsys):
    """`--model tool=A,planner=B`: untrained models, one per role, recorded per policy (method mas_prompt)."""
    from mas_trainer.run.eval_cli import main

    out = tmp_path / "r.json"
    rc = main(["--env", "plan_path", "--model", "tool=tiny,planner=tiny", "--workflow", "mas", "--episodes", "2",
               *FAST, "--out", str(out)])
    assert rc == 0, capsys.readouterr()
    data = json.loads(out.read_text())
    assert_valid_results(data)
    assert data["method"] == "mas_prompt" and data["model"]["policy_mode"] == "specialized"
    assert set(data["model"]["policies"]) == {"tool", "planner"}
    assert main(["--env", "plan_path", "--model", "tool=tiny,tool=tiny", "--workflow", "mas", "--episodes", "1",
                 *FAST, "--out", str(tmp_path / "x.json")]) == 2
    assert "given twice" in capsys.readouterr().err

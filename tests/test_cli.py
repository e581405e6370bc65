"""``mas-train``: argument errors, outputs (metrics, curve, TensorBoard), kill + resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from test_trainer import params_of, taught_model_dir  # noqa: F401  (shared session fixture)

from mas_trainer.run.cli import main

REPO = Path(__file__).resolve().parents[1]


def run_args(model: Path, output: Path, steps: int) -> list[str]:
    return [
        "--env", "plan_path", "--workflow", "single", "--model", str(model), "--steps", str(steps),
        "--output", str(output), "--envs_per_step", "3", "--num_generations", "4", "--max_turns", "1",
        "--max_completion_length", "2", "--learning_rate", "1e-3", "--per_device_train_batch_size", "8",
        "--save_steps", "1", "--save_total_limit", "0", "--rollout_seed", "7", "--no-progress",
    ]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--env", "chess"], "unknown env 'chess'"),
        (["--policy", "mixture"], "unknown policy mode"),
        (["--policy", "lora", "--lora_r", "0"], "lora_r must be a positive integer"),
        (["--workflow", "debate"], "unknown workflow"),
        (["--steps", "0"], "--steps must be >= 1"),
        (["--num_generations", "1"], "num_generations"),
        (["--learning_rate", "abc"], "invalid float value"),
        (["--frobnicate", "3"], "unknown option: --frobnicate"),
        (["--policy", "specialized", "--workflow", "single"], "several roles"),
        (["--model", "/no/such/model-folder", "--workflow", "single"], "cannot load model"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv, message, capsys, tmp_path):
    assert main([*argv, "--output", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mas-train: error:") and message in err, err
    assert "\n" not in err and "Traceback" not in err


def test_module_entry_point_reports_errors_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "mas_trainer.run.cli", "--env", "nope"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("mas-train: error: unknown env 'nope'")
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def final_weights(run_dir: Path, step: int) -> dict[str, torch.Tensor]:
    from mas_trainer.run.checkpoints import load_policies

    policies, _ = load_policies(run_dir, step=step)
    return params_of(policies["shared"][0])


def test_killed_run_resumes_without_losing_steps(tmp_path, taught_model_dir):  # noqa: F811
    steps = 6
    # Reference: the same run, never interrupted (also checks TensorBoard output).
    reference = tmp_path / "reference"
    assert main([*run_args(taught_model_dir, reference, steps), "--report_to", "tensorboard"]) == 0
    assert list((reference / "tensorboard" / "shared").rglob("events.out.tfevents.*"))

    # Same run in a subprocess, killed right after its step-2 checkpoint appears.
    run_dir = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())}
    proc = subprocess.Popen([sys.executable, "-m", "mas_trainer.run.cli", *run_args(taught_model_dir, run_dir, steps)],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    step2 = run_dir / "checkpoints" / "step-000002"
    deadline = time.monotonic() + 240
    while not step2.is_dir() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    still_running = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert step2.is_dir(), proc.stderr.read().decode()[-2000:]
    assert still_running, "the run finished before it could be killed"
    done_before_kill = sorted(p.name for p in (run_dir / "checkpoints").glob("step-*"))
    assert f"step-{steps:06d}" not in done_before_kill

    # Resume: completes the missing steps only.
    assert main([*run_args(taught_model_dir, run_dir, steps), "--resume"]) == 0
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == list(range(1, steps + 1))
    for key in ("reward_mean", "success_rate", "zero_variance_share", "time_generation", "time_env",
                "time_update", "rollout_tokens_per_s", "update_tokens_per_s"):
        assert key in lines[-1]
    state = json.loads((run_dir / "checkpoints" / f"step-{steps:06d}" / "run_state.json").read_text())
    assert state["global_step"] == steps
    png = run_dir / "learning_curve.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # The resumed run continued from the saved weights, optimizer and RNG: it ends where the
    # uninterrupted run ends (a restart from scratch or from other weights would not).
    resumed, uninterrupted = final_weights(run_dir, steps), final_weights(reference, steps)
    assert all(torch.allclose(resumed[k], uninterrupted[k], atol=1e-6) for k in uninterrupted)
    assert any(not torch.equal(resumed[k], final_weights(run_dir, 2)[k]) for k in resumed)

    # Resuming a finished run does nothing and keeps the metrics.
    assert main([*run_args(taught_model_dir, run_dir, steps), "--resume"]) == 0
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) == steps


# ---------------------------------------------------------------------- mas-train flags, as TRL's CLIs take them
@pytest.mark.parametrize("argv,field,value", [
    (["--learning-rate", "3e-4"], "learning_rate", 3e-4),          # dashed, as TRL's own CLIs accept
    (["--learning_rate", "3e-4"], "learning_rate", 3e-4),
    (["--learning_rate=2e-4"], "learning_rate", 2e-4),
    (["--no_skip_zero_variance_groups"], "skip_zero_variance_groups", False),
    (["--num-generations", "3"], "num_generations", 3),
])
def test_mas_train_flags_are_never_silently_ignored(argv, field, value):
    from mas_trainer.run.cli import parse_config

    config, _ = parse_config(argv)
    assert getattr(config, field) == pytest.approx(value) if isinstance(value, float) else getattr(config, field) == value


def test_mas_train_misspelled_flag_names_the_closest_field():
    from mas_trainer.run.cli import UsageError, parse_config

    with pytest.raises(UsageError, match=r"--learnin_rate \(did you mean --learning_rate\?\)"):
        parse_config(["--learnin_rate", "1e-4"])

"""Leaderboard: schema, `mas-leaderboard submit` checks (real jsonschema, real env fingerprints), `build` output."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from leaderboard import SCHEMA_PATH, loading
from leaderboard.cli import main
from leaderboard.sample import sample_result, wilson_interval
from leaderboard.schema_check import schema_problems
from leaderboard.store import content_hash

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def entries(tmp_path: Path) -> Path:
    return tmp_path / "entries"


@pytest.fixture(scope="module")
def good() -> dict:
    """A valid plan_path 4x4 result with the installed env's real fingerprint."""
    return sample_result("plan_path", {"preset": "4x4"}, "mas_at_grpo_shared", successes=[True, False, True, True, False])


def write(tmp_path: Path, data, name: str = "results.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def submit(path: Path, entries: Path, capsys) -> tuple[int, str, str]:
    code = main(["submit", str(path), "--entries", str(entries)])
    out, err = capsys.readouterr()
    return code, out, err


def refused(tmp_path, entries, capsys, data) -> str:
    """Submit ``data``; assert it is refused cleanly (exit 2, nothing stored, no traceback); return stderr."""
    code, out, err = submit(write(tmp_path, data), entries, capsys)
    assert code == 2, (out, err)
    assert "Traceback" not in err
    assert err.startswith("refused:")
    assert not entries.exists() or not list(entries.glob("*.json"))
    return err


# ---------------------------------------------------------------- schema


def test_schema_is_valid_draft_2020_12_and_strict():
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)

    def closed_objects(node, where="schema"):
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                assert node.get("additionalProperties") is False, f"{where} allows unknown fields"
                assert node.get("required"), f"{where} has no required fields"
            for key, value in node.items():
                closed_objects(value, f"{where}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                closed_objects(value, f"{where}[{i}]")

    closed_objects(schema)


def test_brief_example_matches_schema(good):
    example = copy.deepcopy(good)
    example["provenance"]["label"] = "optional free text"
    assert schema_problems(example) == []
    del example["provenance"]["label"]  # label is optional
    assert schema_problems(example) == []


def test_wilson_interval_contains_rate():
    for wins, n in [(0, 1), (1, 1), (0, 50), (31, 50), (50, 50)]:
        lo, hi = wilson_interval(wins, n)
        assert 0.0 <= lo <= wins / n <= hi <= 1.0


# ---------------------------------------------------------------- submit: accepted


def test_valid_file_is_accepted_and_stored(tmp_path, entries, capsys, good):
    code, out, err = submit(write(tmp_path, good), entries, capsys)
    assert code == 0, err
    stored = list(entries.glob("*.json"))
    assert [p.name for p in stored] == [f"plan_path__mas_at_grpo_shared__{content_hash(good)[:12]}.json"]
    assert json.loads(stored[0].read_text()) == good
    assert "accepted" in out
    assert not list(entries.glob(".*"))  # no temp files left behind by the atomic write


def test_specialized_and_single_methods_are_accepted(tmp_path, entries, capsys):
    for i, (env, method) in enumerate([("sudoku", "mas_at_grpo_specialized"), ("plan_path", "single_prompt")]):
        code, _, err = submit(write(tmp_path, sample_result(env, method=method), f"r{i}.json"), entries, capsys)
        assert code == 0, err
    assert len(list(entries.glob("*.json"))) == 2


def test_validate_command_does_not_store(tmp_path, entries, good):
    assert main(["validate", str(write(tmp_path, good)), "--entries", str(entries)]) == 0
    assert not entries.exists()


# ---------------------------------------------------------------- submit: refused


def test_malformed_json(tmp_path, entries, capsys):
    err = refused(tmp_path, entries, capsys, '{"schema_version": 1,')
    assert "(root): not valid JSON" in err and "line 1" in err


def test_not_an_object_nan_and_repeated_keys(tmp_path, entries, capsys):
    assert "(root): must be a JSON object, got a JSON array" in refused(tmp_path, entries, capsys, "[1, 2]")
    assert "NaN is not valid JSON" in refused(tmp_path, entries, capsys, '{"a": NaN}')
    assert "repeated key 'a'" in refused(tmp_path, entries, capsys, '{"a": 1, "a": 2}')


def test_too_large_and_missing_file(tmp_path, entries, capsys, monkeypatch, good):
    monkeypatch.setattr(loading, "MAX_BYTES", 100)
    assert "the limit is 100 bytes" in refused(tmp_path, entries, capsys, good)
    code, _, err = submit(tmp_path / "nope.json", entries, capsys)
    assert code == 2 and "does not exist" in err


def test_missing_field(tmp_path, entries, capsys, good):
    bad = copy.deepcopy(good)
    del bad["seed"]
    del bad["env"]["eval_set_fingerprint"]
    err = refused(tmp_path, entries, capsys, bad)
    assert "seed: required field is missing" in err
    assert "env.eval_set_fingerprint: required field is missing" in err


def test_wrong_type_bad_enum_and_unknown_field(tmp_path, entries, capsys, good):
    bad = copy.deepcopy(good)
    bad["summary"]["success_rate"] = "0.6"
    bad["episodes"][2]["success"] = 1
    bad["method"] = "magic"
    bad["model"]["surprise"] = True
    err = refused(tmp_path, entries, capsys, bad)
    assert "summary.success_rate: wrong type: expected number, got string" in err
    assert "episodes[2].success: wrong type: expected boolean, got integer" in err
    assert 'method: "magic" is not one of:' in err
    assert "model.surprise: unexpected field" in err


def test_inconsistent_success_rate(tmp_path, entries, capsys, good):
    bad = copy.deepcopy(good)
    bad["summary"]["success_rate"] = 0.61  # the episodes say 3/5 = 0.6
    err = refused(tmp_path, entries, capsys, bad)
    assert "summary.success_rate: is 0.61 but the episodes' success mean is 0.6" in err


def test_inconsistent_counts_ci_and_repeated_task(tmp_path, entries, capsys, good):
    bad = copy.deepcopy(good)
    bad["summary"]["episodes"] = 50
    bad["summary"]["ci95"] = [0.7, 0.9]
    bad["episodes"][3]["task_index"] = 0
    err = refused(tmp_path, entries, capsys, bad)
    assert "summary.episodes: is 50 but the file lists 5 episodes" in err
    assert "summary.ci95: [0.7, 0.9] does not contain success_rate 0.6" in err
    assert "episodes[3].task_index: 0 repeats episodes[0]" in err


def test_fingerprint_mismatch(tmp_path, entries, capsys, good):
    bad = copy.deepcopy(good)
    # The 5x5 eval set's real fingerprint under 4x4 kwargs: a different evaluation set.
    bad["env"]["eval_set_fingerprint"] = sample_result("plan_path", {"preset": "5x5"})["env"]["eval_set_fingerprint"]
    err = refused(tmp_path, entries, capsys, bad)
    assert "env.eval_set_fingerprint: fingerprint mismatch" in err


def test_env_version_unknown_env_and_bad_kwargs(tmp_path, entries, capsys, good):
    bad = copy.deepcopy(good)
    bad["env"]["version"] = "7"
    err = refused(tmp_path, entries, capsys, bad)
    assert "env.version: env version mismatch" in err and "fingerprint" not in err.split("env.version")[0]
    bad = copy.deepcopy(good)
    bad["env"]["name"] = "chess"
    assert "env.name: unknown env 'chess'" in refused(tmp_path, entries, capsys, bad)
    bad = copy.deepcopy(good)
    bad["env"]["kwargs"] = {"preset": "99x99"}
    assert "env.kwargs: the installed plan_path env rejects these kwargs" in refused(tmp_path, entries, capsys, bad)
    bad = copy.deepcopy(good)
    bad["env"]["split"] = "train"
    assert "env.split: is 'train'" in refused(tmp_path, entries, capsys, bad)


def test_method_workflow_mismatch(tmp_path, entries, capsys, good):
    bad = copy.deepcopy(good)
    bad["method"] = "single_grpo"
    err = refused(tmp_path, entries, capsys, bad)
    assert "env.workflow: is 'mas' but method 'single_grpo' needs workflow 'single'" in err


def test_policy_mode_must_follow_method(tmp_path, entries, capsys, good):
    bad = copy.deepcopy(good)
    bad["method"] = "mas_at_grpo_specialized"
    assert "model.policy_mode: is 'shared' but method 'mas_at_grpo_specialized' needs 'specialized'" in refused(
        tmp_path, entries, capsys, bad
    )
    bad["model"]["policy_mode"] = "specialized"
    bad["model"]["policies"] = {"planner": good["model"]["policies"]["shared"]}
    err = refused(tmp_path, entries, capsys, bad)
    assert "model.policies: specialized mode needs one policy per role ['planner', 'tool']" in err


def test_duplicate_is_refused_even_with_a_new_label(tmp_path, entries, capsys, good):
    assert submit(write(tmp_path, good), entries, capsys)[0] == 0
    again = copy.deepcopy(good)
    again["provenance"]["label"] = "resubmitted"
    again["provenance"]["date"] = "2026-12-03T09:00:00Z"
    code, _, err = submit(write(tmp_path, again, "again.json"), entries, capsys)
    assert code == 2 and "duplicate" in err and "Traceback" not in err
    assert len(list(entries.glob("*.json"))) == 1
    other_seed = copy.deepcopy(good)
    other_seed["seed"] = 1
    assert submit(write(tmp_path, other_seed, "seed1.json"), entries, capsys)[0] == 0


def test_cli_runs_as_module_and_as_plain_script(tmp_path, good):
    path = write(tmp_path, {**good, "seed": "zero"})
    for launcher in (["-m", "leaderboard.cli"], [str(REPO / "leaderboard" / "cli.py")]):
        proc = subprocess.run(
            [sys.executable, *launcher, "submit", str(path), "--entries", str(tmp_path / "e")],
            cwd=tmp_path if launcher[0] != "-m" else REPO, capture_output=True, text=True, timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        assert "seed: wrong type: expected integer, got string" in proc.stderr
        assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------- build


def _populate(tmp_path, entries, capsys):
    results = [
        sample_result("plan_path", method="mas_at_grpo_shared", successes=[True] * 4 + [False]),
        sample_result("plan_path", method="single_prompt", successes=[False] * 4 + [True], params=1_700_000_000,
                      model_id="Qwen3-1.7B", label="<script>alert('x')</script>"),
        sample_result("sudoku", method="mas_at_grpo_specialized", successes=[True, False]),
    ]
    for i, result in enumerate(results):
        assert submit(write(tmp_path, result, f"r{i}.json"), entries, capsys)[0] == 0
    return results


def test_build_renders_entries_and_escapes_labels(tmp_path, entries, capsys):
    _populate(tmp_path, entries, capsys)
    site = tmp_path / "site"
    assert main(["build", "--entries", str(entries), "--out", str(site)]) == 0
    html = (site / "index.html").read_text()
    markdown = (site / "leaderboard.md").read_text()
    assert (site / "success.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    for text in ("mas_at_grpo_shared", "single_prompt", "mas_at_grpo_specialized", "Qwen3-1.7B", "1.7B", "135M"):
        assert text in html
    assert html.count("<tr data-entry=") == 3
    assert '<table class="board" data-env="plan_path">' in html and '<table class="board" data-env="sudoku">' in html
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "data:image/png;base64," in html and "http://" not in html and "https://" not in html
    assert "| mas_at_grpo_shared | 80.0 [" in markdown and "| single_prompt | 20.0 [" in markdown
    assert "## Qwen3-1.7B (1.7B params)" in markdown and "| Method | plan_path | sudoku |" in markdown


def test_build_is_deterministic_and_handles_no_entries(tmp_path, entries, capsys):
    _populate(tmp_path, entries, capsys)
    outputs = []
    for name in ("a", "b"):
        assert main(["build", "--entries", str(entries), "--out", str(tmp_path / name)]) == 0
        outputs.append({p.name: p.read_bytes() for p in sorted((tmp_path / name).iterdir())})
    assert outputs[0] == outputs[1] and set(outputs[0]) == {"index.html", "leaderboard.md", "success.png"}
    empty = tmp_path / "empty"
    assert main(["build", "--entries", str(tmp_path / "none"), "--out", str(empty)]) == 0
    assert "No entries yet" in (empty / "index.html").read_text()
    capsys.readouterr()


def test_build_skips_hand_broken_entries(tmp_path, entries, capsys):
    _populate(tmp_path, entries, capsys)
    (entries / "zz_broken.json").write_text('{"schema_version": 1}')
    assert main(["build", "--entries", str(entries), "--out", str(tmp_path / "site")]) == 0
    assert "skipping zz_broken.json" in capsys.readouterr().err
    assert (tmp_path / "site" / "index.html").read_text().count("<tr data-entry=") == 3


def test_fingerprint_computation_is_time_limited(tmp_path, entries, capsys, monkeypatch, good):
    from leaderboard import envinfo

    monkeypatch.setattr(envinfo, "FINGERPRINT_TIMEOUT_S", 0.001)
    bad = copy.deepcopy(good)
    bad["env"]["kwargs"] = {"preset": "4x4", "test_size": 10**9}  # would run for hours; must be cut off
    err = refused(tmp_path, entries, capsys, bad)
    assert "env.kwargs: the installed plan_path env rejects these kwargs: computing the eval-set fingerprint took over" in err

"""scripts/probe_tool_programs.py: samples real tool programs from a (tiny) model and grades them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "probe_tool_programs.py"


def load_script():
    spec = importlib.util.spec_from_file_location("probe_tool_programs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_probe_grades_every_sampled_program(capsys):
    probe = load_script()
    assert probe.main(["--model", "tiny", "--tool-prompt", "function", "--tasks", "2", "--samples", "3",
                       "--max-new-tokens", "12", "--show", "0"]) == 0
    out = capsys.readouterr().out
    assert "6 programs" in out  # 2 tasks x K=3, each graded
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ") and "(" in line}
    assert set(rows) == {"solved", "valid", "ran, no answer", "crashed / no code"}
    counted = sum(int(line.split("|")[2].split("(")[0]) for line in rows.values())
    assert counted == 6


def test_probe_outcomes_follow_the_env_grading():
    probe = load_script()
    assert probe.outcome_of({"parse_error": None, "tool_credit": 1.0}) == "solved"
    assert probe.outcome_of({"parse_error": None, "tool_credit": 0.5}) == "valid"
    assert probe.outcome_of({"parse_error": "output is not a valid answer", "tool_credit": 0.25}) == "ran, no answer"
    assert probe.outcome_of({"parse_error": "code failed (crash)"}) == "crashed / no code"


def test_probe_refuses_the_test_split():
    probe = load_script()
    with pytest.raises(SystemExit):
        probe.main(["--model", "tiny", "--split", "test"])

"""All checks a result file must pass before it is stored: JSON, schema, consistency, installed env."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from leaderboard import envinfo, semantics
from leaderboard.loading import load_result_file
from leaderboard.problems import Problem, SubmissionError
from leaderboard.schema_check import schema_problems


def result_problems(data: Any) -> list[Problem]:
    """Every reason ``data`` (a parsed result object) cannot be accepted; empty when it is valid.

    Consistency checks only run on schema-valid data, since they rely on its types.
    """
    problems = schema_problems(data)
    if problems:
        return problems
    problems += semantics.summary_problems(data)
    problems += semantics.episode_problems(data)
    problems += semantics.method_problems(data)
    env_issues, roles = envinfo.env_problems(data)
    problems += env_issues
    problems += semantics.policy_problems(data, roles)
    problems += semantics.per_role_problems(data, roles)
    return problems


def validate_file(path: str | Path) -> dict[str, Any]:
    """Load and check ``path``; return the result object or raise :class:`SubmissionError`."""
    data = load_result_file(path)
    problems = result_problems(data)
    if problems:
        raise SubmissionError(problems)
    return data

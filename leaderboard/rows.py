"""Turn stored entries into flat, display-ready rows (one per entry), in a deterministic order."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from leaderboard import METHODS
from leaderboard.schema_check import schema_problems
from leaderboard.store import iter_entries

# Env columns/tables in the paper's order; unknown envs follow alphabetically.
ENV_ORDER = ("plan_path", "sokoban", "sudoku", "coder_tester", "math_tool")


@dataclass(frozen=True)
class Row:
    """One leaderboard entry as the page and the Markdown table show it."""

    entry: str
    env: str
    method: str
    model: str
    params: int
    policy_mode: str
    workflow: str
    success: float
    ci_low: float
    ci_high: float
    episodes: int
    date: str
    label: str

    @property
    def size_label(self) -> str:
        return human_params(self.params)


def human_params(params: int) -> str:
    """134515008 -> '135M', 1_700_000_000 -> '1.7B' (three significant digits at most)."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if params >= scale:
            value = params / scale
            text = f"{value:.0f}" if value >= 100 else f"{value:.3g}"
            return f"{text}{unit}"
    return str(params)


def env_sort_key(name: str) -> tuple[int, str]:
    return (ENV_ORDER.index(name), name) if name in ENV_ORDER else (len(ENV_ORDER), name)


def method_rank(method: str) -> int:
    return METHODS.index(method) if method in METHODS else len(METHODS)


def row_from_result(entry: str, result: dict[str, Any]) -> Row:
    summary = result["summary"]
    provenance = result["provenance"]
    return Row(
        entry=entry,
        env=result["env"]["name"],
        method=result["method"],
        model=result["model"]["id"],
        params=int(result["model"]["params"]),
        policy_mode=result["model"]["policy_mode"],
        workflow=result["env"]["workflow"],
        success=float(summary["success_rate"]),
        ci_low=float(summary["ci95"][0]),
        ci_high=float(summary["ci95"][1]),
        episodes=int(summary["episodes"]),
        date=provenance["date"],
        label=provenance.get("label") or "",
    )


def default_order(rows: Iterable[Row]) -> list[Row]:
    """Best success first; ties broken by method order, model, entry name (so output is deterministic)."""
    return sorted(rows, key=lambda r: (-r.success, method_rank(r.method), r.params, r.model, r.entry))


def load_rows(entries_dir: str | Path, warn=None) -> list[Row]:
    """Rows of every stored entry that still matches the schema; others are reported on ``warn`` and skipped."""
    rows = []
    for path, result in iter_entries(entries_dir):
        problems = schema_problems(result)
        if problems:
            print(f"warning: skipping {path.name}: {problems[0]}", file=warn or sys.stderr)
            continue
        rows.append(row_from_result(path.name, result))
    return default_order(rows)


def rows_by_env(rows: Iterable[Row]) -> dict[str, list[Row]]:
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        grouped.setdefault(row.env, []).append(row)
    return {env: default_order(grouped[env]) for env in sorted(grouped, key=env_sort_key)}


def best_by_env_method(rows: Iterable[Row]) -> dict[tuple[str, str], Row]:
    """The highest-success row for each (env, method) pair (first in default order on ties)."""
    best: dict[tuple[str, str], Row] = {}
    for row in default_order(rows):
        best.setdefault((row.env, row.method), row)
    return best

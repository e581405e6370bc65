"""Stored entries as display-ready rows: one :class:`Row` per results file, one :class:`Group` per configuration.

A row identifies its run: seed, training budget (steps reached and the budget asked for), the env
settings that differ from the env's defaults, the answer budget (decoding), the model of each role,
the eval-set fingerprint and the task set, and the results file with its provenance command.

Entries whose configuration is the same except for the seed (see :func:`config_key`) form one
:class:`Group`: the mean success over its runs, each run's success, and a 95% interval from a
hierarchical bootstrap (seeds, then tasks within each seed); a group of one run keeps that run's
per-task (Wilson) interval. Everything is deterministic: same entries, same rows, same order.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from leaderboard import METHODS, envinfo, stats
from leaderboard.schema_check import schema_problems
from leaderboard.store import iter_entries

# Env sections in the paper's order; unknown envs follow alphabetically.
ENV_ORDER = ("plan_path", "sokoban", "sudoku", "coder_tester", "math_tool")
SHORT_FP = 8
GROUP_HASH = 8

_BUDGET = re.compile(r"--budget[ =](?:'([^']*)'|\"([^\"]*)\"|(\S+))")
_STEP = re.compile(r"(?:^|/)step-0*(\d+)(?:/|$)")
_CHECKPOINT = re.compile(r"(?:^|/)(?:checkpoints?|step-\d+|policies)(?:/|$)")


@dataclass(frozen=True)
class Row:
    """One results file (one run) as the page shows it."""

    entry: str  # file name in the entries folder
    path: Path
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
    seed: int = 0
    version: str = ""
    fingerprint: str = ""
    settings: tuple[tuple[str, str], ...] = ()  # (key, value as text) of non-default env kwargs
    decoding: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    roles: tuple[tuple[str, str], ...] = ()  # (role or "shared", model shown for it)
    swap_roles: bool = False
    trained: bool = False
    budget: str | None = None  # the training budget asked for (e.g. "15 CPU min"), from the command
    steps: tuple[int, ...] = ()  # training steps of the evaluated checkpoint(s)
    command: str = ""
    machines: str = ""  # which machine played which tasks, as text (provenance.machines), "" when not recorded
    task_ids: tuple[str, ...] = ()  # sorted
    outcomes: tuple[int, ...] = ()  # 0/1 per task, in task_ids order
    canonical_tasks: bool = True  # task_index values are 0..N-1 (the env's first N test tasks)
    key: str = ""  # canonical JSON of the configuration without the seed (see config_key)

    @property
    def size_label(self) -> str:
        return human_params(self.params)

    @property
    def run_id(self) -> str:
        return self.entry[:-5] if self.entry.endswith(".json") else self.entry

    @property
    def group_id(self) -> str:
        return f"{self.env}-{hashlib.sha256(self.key.encode('utf-8')).hexdigest()[:GROUP_HASH]}"

    @property
    def short_fp(self) -> str:
        return self.fingerprint[:SHORT_FP]

    @property
    def tasks_hash(self) -> str:
        return hashlib.sha256("\n".join(self.task_ids).encode("utf-8")).hexdigest()[:SHORT_FP]

    # ----- display texts (the page and the Markdown table use the same ones)
    @property
    def settings_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.settings) if self.settings else "defaults"

    @property
    def decoding_text(self) -> str:
        return decoding_text(self.decoding)

    @property
    def roles_text(self) -> str:
        text = " · ".join(model if role == "shared" else f"{role}: {model}" for role, model in self.roles)
        return text + (" · roles swapped" if self.swap_roles else "")

    @property
    def training_text(self) -> str:
        return training_text(self.trained, self.budget, [self.steps])

    @property
    def tasks_text(self) -> str:
        return str(self.episodes) if self.canonical_tasks else f"{self.episodes} (set {self.tasks_hash})"


@dataclass(frozen=True)
class Group:
    """Runs whose configuration differs only in seed: one row of the default (aggregated) view."""

    id: str
    runs: tuple[Row, ...]  # by seed, then file name
    mean: float
    ci_low: float
    ci_high: float
    interval: str  # "wilson" (one run) or "hierarchical bootstrap"

    @property
    def first(self) -> Row:
        return self.runs[0]

    def __getattr__(self, name: str) -> Any:  # the shared configuration: method, model, settings_text, ...
        if name.startswith("__") or name in ("id", "runs", "mean", "ci_low", "ci_high", "interval"):
            raise AttributeError(name)
        return getattr(self.runs[0], name)

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(r.seed for r in self.runs)

    @property
    def per_seed(self) -> tuple[tuple[int, float], ...]:
        return tuple((r.seed, r.success) for r in self.runs)

    @property
    def date(self) -> str:
        return max(r.date for r in self.runs)

    @property
    def label(self) -> str:
        return "; ".join(dict.fromkeys(r.label for r in self.runs if r.label))

    @property
    def training_text(self) -> str:
        return training_text(self.first.trained, self.first.budget, [r.steps for r in self.runs])

    @property
    def wins(self) -> tuple[int, ...]:
        """Per task (in ``task_ids`` order): how many runs solved it."""
        return tuple(sum(col) for col in zip(*(r.outcomes for r in self.runs)))

    @property
    def seeds_text(self) -> str:
        return ", ".join(str(s) for s in self.seeds)

    @property
    def per_seed_text(self) -> str:
        return ", ".join(f"{100 * r.success:.1f}" for r in self.runs)


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


def _plain(value: Any) -> Any:
    """Settings values in one form: integral floats as ints (``-6.0`` and ``-6`` are one setting)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(_plain(value))


def decoding_text(decoding: dict[str, Any]) -> str:
    """``max 48 tok (planner 64, tool 32) · 1 sample · T=0`` (+ ``top-p``)."""
    text = f"max {decoding.get('max_new_tokens')} tok"
    per_role = decoding.get("max_new_tokens_per_role") or {}
    if per_role:
        text += " (" + ", ".join(f"{role} {n}" for role, n in sorted(per_role.items())) + ")"
    samples = decoding.get("samples", 1)
    text += f" · {samples} sample{'s' if samples != 1 else ''} · T={_value_text(decoding.get('temperature'))}"
    if decoding.get("top_p") is not None:
        text += f" · top-p={_value_text(decoding['top_p'])}"
    return text


def training_text(trained: bool, budget: str | None, steps_per_run: Sequence[Sequence[int]]) -> str:
    """``21 steps · budget 15 CPU min`` (several runs: ``steps 21, 23``); ``untrained`` for prompt methods."""
    if not trained:
        return "untrained"
    shown = ["/".join(str(s) for s in steps) if steps else "?" for steps in steps_per_run]
    if len(shown) == 1:
        steps = f"{shown[0]} step{'' if shown[0] == '1' else 's'}"
    else:
        steps = "steps " + ", ".join(shown)
    if not budget:
        return f"{steps} · budget not recorded"
    if "min" in budget and "cpu" not in budget.lower():
        budget += " (wall clock)"
    return f"{steps} · budget {budget}"


def machines_text(machines: list[dict[str, Any]]) -> str:
    """``'tasks 0-111: not recorded; tasks 112-163: AMD EPYC (avx2, fma), 2 torch threads'`` from
    ``provenance.machines`` ("" when the file records none)."""
    parts = []
    for m in machines:
        start, stop = m["tasks"]
        where = (f"{m['cpu']} ({', '.join(m.get('cpu_flags') or []) or 'no listed vector flags'}), "
                 f"{m.get('torch_threads', '?')} torch threads" if m.get("cpu") else "not recorded")
        parts.append(f"{f'task {start}' if stop - start == 1 else f'tasks {start}-{stop - 1}'}: {where}")
    return "; ".join(parts)


def parse_budget(command: str) -> str | None:
    """The ``--budget`` the provenance command asked for (``'15 CPU min'``), if it records one."""
    match = _BUDGET.search(command or "")
    if not match:
        return None
    return " ".join(next(g for g in match.groups() if g is not None).split()) or None


def _is_checkpoint(policy_id: str) -> bool:
    return bool(_CHECKPOINT.search(policy_id))


def _roles(result: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The model of each role: the policy's id, or ``<base> (trained)`` for a training checkpoint path, with
    ``[bfloat16]`` when its weights were not float32 (files without a dtype were all float32): another dtype
    gives other greedy tokens, so it is part of the row's identity."""
    base = result["model"]["id"]
    return tuple(
        (role, (f"{base} (trained)" if _is_checkpoint(p["id"]) else p["id"])
         + (f" [{p['dtype']}]" if p.get("dtype", "float32") != "float32" else ""))
        for role, p in sorted(result["model"]["policies"].items())
    )


def config_key(row: Row) -> str:
    """Canonical JSON of everything that defines a run's configuration, except its seed.

    env (name, version, workflow, split, eval-set fingerprint, non-default settings), the evaluated task
    ids, method, model (id, params, policy mode, the model of each role, roles swapped), decoding, and the
    training budget asked for; when no budget is recorded for a trained method, its steps instead.
    Not in the key: seed, weights hashes, steps reached under a recorded budget, date, label, command,
    run folder and, of course, the outcomes.
    """
    key = {
        "env": {"name": row.env, "version": row.version, "workflow": row.workflow, "fingerprint": row.fingerprint,
                "settings": [[k, v] for k, v in row.settings]},
        "tasks": hashlib.sha256("\n".join(row.task_ids).encode("utf-8")).hexdigest(),
        "method": row.method,
        "model": {"id": row.model, "params": row.params, "policy_mode": row.policy_mode,
                  "roles": [list(r) for r in row.roles], "swap_roles": row.swap_roles},
        "decoding": {k: _plain(v) for k, v in sorted(row.decoding.items())},
        "training": None if not row.trained else (
            {"budget": row.budget} if row.budget else {"steps": list(row.steps)}),
    }
    return json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def row_from_result(entry: str, result: dict[str, Any], non_default: Iterable[str] | None = None,
                    path: Path | None = None) -> Row:
    """A :class:`Row`; ``non_default`` names the env kwargs to show (default: all but workflow/split)."""
    env, summary, provenance = result["env"], result["summary"], result["provenance"]
    kwargs = env["kwargs"]
    shown = sorted(non_default) if non_default is not None else sorted(k for k in kwargs if k not in ("workflow", "split"))
    by_task: dict[str, int] = {}
    for episode in result["episodes"]:
        by_task[episode["task_id"]] = int(bool(episode["success"]))
    task_ids = tuple(sorted(by_task))
    indices = sorted(e["task_index"] for e in result["episodes"])
    policies = result["model"]["policies"]
    steps = sorted({int(m.group(1)) for p in policies.values() for m in [_STEP.search(p["id"])] if m})
    trained = not result["method"].endswith("_prompt") or any(_is_checkpoint(p["id"]) for p in policies.values())
    row = Row(
        entry=entry,
        path=path if path is not None else Path(entry),
        env=env["name"],
        method=result["method"],
        model=result["model"]["id"],
        params=int(result["model"]["params"]),
        policy_mode=result["model"]["policy_mode"],
        workflow=env["workflow"],
        success=float(summary["success_rate"]),
        ci_low=float(summary["ci95"][0]),
        ci_high=float(summary["ci95"][1]),
        episodes=int(summary["episodes"]),
        date=provenance["date"],
        label=provenance.get("label") or "",
        seed=int(result["seed"]),
        version=str(env["version"]),
        fingerprint=env["eval_set_fingerprint"],
        settings=tuple((k, _value_text(kwargs[k])) for k in shown if k in kwargs),
        decoding=dict(result["decoding"]),
        roles=_roles(result),
        swap_roles=bool(provenance.get("swap_roles")),
        trained=trained,
        budget=parse_budget(provenance.get("command", "")) if trained else None,
        steps=tuple(steps),
        command=provenance.get("command", ""),
        machines=machines_text(provenance.get("machines") or []),
        task_ids=task_ids,
        outcomes=tuple(by_task[t] for t in task_ids),
        canonical_tasks=indices == list(range(len(indices))),
    )
    return _with_key(row)


def _with_key(row: Row) -> Row:
    from dataclasses import replace

    return replace(row, key=config_key(row))


def default_order(rows: Iterable[Row]) -> list[Row]:
    """Best success first; ties broken by method order, model, entry name (so output is deterministic)."""
    return sorted(rows, key=lambda r: (-r.success, method_rank(r.method), r.params, r.model, r.entry))


def load_valid_entries(entries_dir: str | Path, warn=None) -> list[tuple[Path, dict[str, Any]]]:
    """Stored entries that still match the schema; others are reported on ``warn`` and skipped."""
    found = []
    for path, result in iter_entries(entries_dir):
        problems = schema_problems(result)
        if problems:
            print(f"warning: skipping {path.name}: {problems[0]}", file=warn or sys.stderr)
            continue
        found.append((path, result))
    return found


def rows_from_results(found: Sequence[tuple[Path, dict[str, Any]]]) -> list[Row]:
    """Rows for (path, result) pairs; the non-default env settings are asked of the installed envs once."""
    items, index = [], {}
    for _, result in found:
        env = result["env"]
        ident = (env["name"], env["workflow"], json.dumps(env["kwargs"], sort_keys=True))
        if ident not in index:
            index[ident] = len(items)
            items.append((env["name"], env["workflow"], dict(env["kwargs"])))
    answers = envinfo.non_default_keys(items)
    rows = []
    for path, result in found:
        env = result["env"]
        ident = (env["name"], env["workflow"], json.dumps(env["kwargs"], sort_keys=True))
        rows.append(row_from_result(path.name, result, answers[index[ident]], path=path))
    return default_order(rows)


def load_rows(entries_dir: str | Path, warn=None) -> list[Row]:
    """One row per valid stored entry, in default order."""
    return rows_from_results(load_valid_entries(entries_dir, warn=warn))


def make_group(runs: Sequence[Row]) -> Group:
    runs = tuple(sorted(runs, key=lambda r: (r.seed, r.entry)))
    mean = sum(r.success for r in runs) / len(runs)
    if len(runs) == 1:
        lo, hi, kind = runs[0].ci_low, runs[0].ci_high, "wilson"
    else:
        lo, hi = stats.hierarchical_bootstrap([r.outcomes for r in runs])
        kind = "hierarchical bootstrap"
    return Group(id=runs[0].group_id, runs=runs, mean=mean, ci_low=lo, ci_high=hi, interval=kind)


def aggregate(rows: Iterable[Row]) -> list[Group]:
    """Runs with the same :func:`config_key` form one group; groups in default order (mean first)."""
    by_key: dict[str, list[Row]] = {}
    for row in rows:
        by_key.setdefault(row.key, []).append(row)
    groups = [make_group(runs) for runs in by_key.values()]
    return sorted(groups, key=lambda g: (-g.mean, method_rank(g.method), g.params, g.model, g.id))


def rows_by_env(rows: Iterable[Row]) -> dict[str, list[Row]]:
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        grouped.setdefault(row.env, []).append(row)
    return {env: default_order(grouped[env]) for env in sorted(grouped, key=env_sort_key)}


def groups_by_env(groups: Iterable[Group]) -> dict[str, list[Group]]:
    grouped: dict[str, list[Group]] = {}
    for group in groups:
        grouped.setdefault(group.env, []).append(group)
    return {env: grouped[env] for env in sorted(grouped, key=env_sort_key)}

"""``mas-leaderboard compare A B``: does A beat B on the same tasks?

A and B are results files (a path, or a file name / run id in the entries folder) or aggregated-row ids
as the page shows them (``plan_path-1a2b3c4d``). Only the tasks both evaluated count. For each side the
per-task value is the success (0/1) of a run, or for an aggregated row the mean success over its seeds.

- paired difference: mean over the shared tasks of ``a_i - b_i`` (= success of A minus success of B there);
- 95% interval: paired bootstrap over the shared tasks (:func:`leaderboard.stats.paired_bootstrap`);
- p-value: exact two-sided McNemar test on the discordant tasks (:func:`leaderboard.stats.mcnemar_exact`),
  when both sides have one binary outcome per task (one run each); for rows averaged over several seeds
  the outcomes are not binary, and only the bootstrap interval is given.

Entries with different eval-set fingerprints are refused: they were not drawn from the same tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from leaderboard import stats
from leaderboard.loading import load_result_file
from leaderboard.problems import SubmissionError
from leaderboard.rows import Group, Row, aggregate, load_rows, rows_from_results
from leaderboard.schema_check import schema_problems


class CompareError(Exception):
    """The two sides cannot be compared (or one cannot be found); the message says why."""


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a run or an aggregated row, with its per-task success counts."""

    name: str
    kind: str  # "run" or "row"
    description: str
    env: str
    fingerprint: str
    task_ids: tuple[str, ...]
    wins: tuple[int, ...]
    runs: int
    files: tuple[str, ...]

    def value(self, index: int) -> float:
        return self.wins[index] / self.runs


@dataclass(frozen=True)
class Comparison:
    a: Side
    b: Side
    shared: tuple[str, ...]
    success_a: float
    success_b: float
    diff: float
    ci_low: float
    ci_high: float
    a_only: int | None  # discordant tasks: A solved, B did not (binary sides only)
    b_only: int | None
    p_value: float | None

    @property
    def binary(self) -> bool:
        return self.p_value is not None


def _describe(row: Row | Group, runs: int) -> str:
    seeds = f"seed {row.seeds_text}" if isinstance(row, Group) else f"seed {row.seed}"
    if isinstance(row, Group) and runs > 1:
        seeds = f"seeds {row.seeds_text} ({runs} runs)"
    return (f"{row.method} · {row.roles_text} · {row.settings_text} · {row.decoding_text} · {row.training_text} · "
            f"{seeds}")


def side_from_row(row: Row) -> Side:
    return Side(name=row.run_id, kind="run", description=_describe(row, 1), env=row.env, fingerprint=row.fingerprint,
                task_ids=row.task_ids, wins=row.outcomes, runs=1, files=(str(row.path),))


def side_from_group(group: Group) -> Side:
    return Side(name=group.id, kind="row", description=_describe(group, len(group.runs)), env=group.env,
                fingerprint=group.fingerprint, task_ids=group.task_ids, wins=group.wins, runs=len(group.runs),
                files=tuple(str(r.path) for r in group.runs))


def _load_file(path: Path) -> Row:
    result = load_result_file(path)
    problems = schema_problems(result)
    if problems:
        raise CompareError(f"{path} is not a valid results file: {problems[0]}")
    return rows_from_results([(path, result)])[0]


def resolve(name: str, entries_dir: str | Path, groups: Sequence[Group] | None = None) -> Side:
    """A path to a results file, an entry's file name or run id in ``entries_dir``, or an aggregated-row id."""
    entries = Path(entries_dir)
    for candidate in (Path(name), entries / name, entries / f"{name}.json"):
        if candidate.is_file():
            try:
                return side_from_row(_load_file(candidate))
            except SubmissionError as exc:
                raise CompareError(f"{candidate}: {exc.problems[0]}") from None
    if groups is None:
        groups = aggregate(load_rows(entries))
    for group in groups:
        if group.id == name:
            return side_from_group(group)
    raise CompareError(
        f"{name!r} is neither a results file nor an aggregated-row id in {entries} "
        "(row ids look like plan_path-1a2b3c4d: the Row column of leaderboard/site/index.html)"
    )


def compare(a: Side, b: Side, resamples: int = stats.BOOTSTRAP_RESAMPLES, seed: int = stats.BOOTSTRAP_SEED) -> Comparison:
    """Paired comparison of ``a`` and ``b`` on their shared task ids; raises :class:`CompareError` if not comparable."""
    if a.fingerprint != b.fingerprint:
        raise CompareError(
            f"eval-set fingerprints differ: {a.name} ({a.env}) has {a.fingerprint[:16]}..., {b.name} ({b.env}) has "
            f"{b.fingerprint[:16]}...; they were not evaluated on the same evaluation set, so a paired "
            "comparison would be meaningless"
        )
    in_b = {t: i for i, t in enumerate(b.task_ids)}
    pairs = [(i, in_b[t]) for i, t in enumerate(a.task_ids) if t in in_b]
    if not pairs:
        raise CompareError(f"{a.name} and {b.name} share no task ids")
    va = [a.value(i) for i, _ in pairs]
    vb = [b.value(j) for _, j in pairs]
    n = len(pairs)
    diffs = [x - y for x, y in zip(va, vb)]
    lo, hi = stats.paired_bootstrap(diffs, resamples=resamples, seed=seed)
    a_only = b_only = p = None
    if a.runs == 1 and b.runs == 1:
        a_only = sum(1 for x, y in zip(va, vb) if x > y)
        b_only = sum(1 for x, y in zip(va, vb) if y > x)
        p = stats.mcnemar_exact(a_only, b_only)
    return Comparison(a=a, b=b, shared=tuple(a.task_ids[i] for i, _ in pairs), success_a=sum(va) / n,
                      success_b=sum(vb) / n, diff=sum(diffs) / n, ci_low=lo, ci_high=hi, a_only=a_only,
                      b_only=b_only, p_value=p)


def _shown_path(path: str) -> str:
    """``path`` relative to the working directory when it lies below it, else as given."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return path


def pct(x: float) -> str:
    return stats.fixed(100 * x, 1)


def report(c: Comparison, resamples: int = stats.BOOTSTRAP_RESAMPLES, seed: int = stats.BOOTSTRAP_SEED) -> str:
    """The text ``mas-leaderboard compare`` prints."""
    n = len(c.shared)
    lines = []
    for tag, side in (("A", c.a), ("B", c.b)):
        what = "run" if side.kind == "run" else f"aggregated row, {side.runs} run{'s' if side.runs != 1 else ''}"
        lines.append(f"{tag}: {side.name} ({what}): {side.description}")
        for f in side.files:
            lines.append(f"   {_shown_path(f)}")
    lines.append(f"eval set: {c.a.env}, fingerprint {c.a.fingerprint[:16]}... (same for both); shared tasks: {n} "
                 f"(A has {len(c.a.task_ids)}, B has {len(c.b.task_ids)})")
    if c.a.runs > 1 or c.b.runs > 1:
        lines.append("per-task values: mean success over each row's seeds (runs); "
                     "the interval is a paired bootstrap over tasks of those per-task means")
    lines.append(f"success on the shared tasks: A {pct(c.success_a)}%, B {pct(c.success_b)}%")
    lines.append(
        f"paired difference A - B: {stats.signed(100 * c.diff, 1)} points, 95% CI [{stats.signed(100 * c.ci_low, 1)}, "
        f"{stats.signed(100 * c.ci_high, 1)}] (paired bootstrap over the {n} shared tasks, {resamples} resamples, "
        f"RNG seed {seed})"
    )
    if c.binary:
        lines.append(
            f"discordant tasks: A only {c.a_only}, B only {c.b_only}; exact two-sided McNemar test on them: "
            f"{stats.format_p(c.p_value)}"
        )
    else:
        lines.append("p-value: not computed (exact McNemar needs one 0/1 outcome per task on each side; "
                     "rows averaged over seeds have fractional per-task values)")
    return "\n".join(lines)

"""The README's main job: the whole stronger-mas loop on one CPU, in about 15-30 minutes.

    python -m baselines.main_job [--minutes 15] [--episodes 50] [--env plan_path] [--out runs/main]

1. evaluates the untrained default model on held-out tasks (``single_prompt``; ``mas_prompt`` with
   ``--workflow mas``);
2. trains it with tree-sampled, turn-grouped GRPO for ``--minutes`` of wall clock (``single_at_grpo``;
   with ``--workflow mas`` the two-agent AT-GRPO with one shared policy, ``mas_at_grpo_shared``);
3. evaluates the trained policy on the same held-out tasks;
4. submits both result files to the leaderboard (``leaderboard/entries/``) and builds the page;
5. prints the comparison and where the page and the learning curve are.

Re-running reuses nothing but the leaderboard: identical results are recognised as already stored.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from baselines.methods import Budget, get_method
from leaderboard.build import build_site
from leaderboard.problems import SubmissionError
from leaderboard.store import find_duplicate, store_entry
from leaderboard.validate import validate_file

REPO = Path(__file__).resolve().parent.parent


def _say(message: str) -> None:
    print(f"[main] {message}", file=sys.stderr, flush=True)


def submit_to_leaderboard(results_path: Path, entries_dir: Path) -> str:
    """Store ``results_path`` as a leaderboard entry; an identical stored entry is fine."""
    result = validate_file(results_path)  # raises SubmissionError with the problems listed
    duplicate = find_duplicate(result, entries_dir)
    if duplicate is not None:
        return f"already on the leaderboard as {duplicate.name}"
    try:
        return f"stored as {store_entry(result, entries_dir).name}"
    except SubmissionError as exc:
        raise SystemExit(f"[main] leaderboard refused {results_path}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m baselines.main_job", description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="plan_path", help="environment (default: plan_path, 4x4 CPU preset)")
    parser.add_argument("--model", default="smollm2-135m", help="base model (default: smollm2-135m)")
    parser.add_argument("--workflow", default="single", choices=["single", "mas"],
                        help="single: one agent, prompt-only vs tree-sampled AT-GRPO (fast on a CPU); "
                             "mas: the tool+planner team, mas_prompt vs mas_at_grpo_shared")
    parser.add_argument("--minutes", type=float, default=15.0, help="AT-GRPO training budget in minutes")
    parser.add_argument("--clock", default="wall", choices=["wall", "cpu"],
                        help="what --minutes counts: wall-clock (default) or CPU time of the training process")
    parser.add_argument("--episodes", type=int, default=30, help="held-out evaluation tasks")
    parser.add_argument("--out", default=str(REPO / "runs" / "main"), help="output folder")
    parser.add_argument("--entries", default=str(REPO / "leaderboard" / "entries"), help="leaderboard entries")
    parser.add_argument("--site", default=str(REPO / "leaderboard" / "site"), help="leaderboard page folder")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.episodes < 1:
        parser.error("--minutes must be > 0 and --episodes >= 1")

    start = time.perf_counter()
    outcomes = {}
    untrained, trained_name = (("single_prompt", "single_at_grpo") if args.workflow == "single"
                               else ("mas_prompt", "mas_at_grpo_shared"))
    plan = [(untrained, None), (trained_name, Budget(minutes=args.minutes, clock=args.clock))]
    for i, (name, budget) in enumerate(plan, 1):
        method = get_method(name)
        what = f"train {budget.describe()} + evaluate" if budget else "evaluate"
        _say(f"step {i}/{len(plan)}: {method.label} on {args.env}: {what} ({args.episodes} held-out tasks)")
        outcomes[name] = method.run(args.env, model=args.model, out_dir=args.out, budget=budget,
                                    episodes=args.episodes, progress=True)
        o = outcomes[name]
        _say(f"  success {100 * o.success_rate:.1f}% ({o.train_steps} training steps in {o.train_seconds:.0f} s, "
             f"evaluation {o.eval_seconds:.0f} s)")

    _say("submitting both results to the leaderboard")
    entries = Path(args.entries)
    for name, o in outcomes.items():
        _say(f"  {name}: {submit_to_leaderboard(o.results_path, entries)}")
    site = build_site(entries, args.site)

    print()
    print(f"{'method':<32} {'success %':>9} {'95% CI':>15} {'train steps':>11}")
    for name, o in outcomes.items():
        lo, hi = o.results["summary"]["ci95"]
        print(f"{get_method(name).label:<32} {100 * o.success_rate:>9.1f} {f'[{100 * lo:.0f}, {100 * hi:.0f}]':>15} "
              f"{o.train_steps:>11}")
    trained = outcomes[trained_name]
    curve = Path(trained.run_dir) / "learning_curve.png" if trained.run_dir else None
    print()
    print(f"leaderboard page: {site.html}  ({site.entries} entries; chart {site.png})")
    if curve is not None:
        print(f"learning curve:   {curve}{'' if curve.exists() else ' (not written)'}")
    print(f"results files:    {outcomes[untrained].results_path}, {trained.results_path}")
    print(f"done in {(time.perf_counter() - start) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())

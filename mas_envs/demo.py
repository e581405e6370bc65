"""Play every environment with its scripted (solver-backed) policy, in both workflows, and print a table.

    python -m mas_envs.demo [--episodes 20]

This proves each env is solvable through its text interface: in the ``mas`` workflow the tool agent's
program really runs in the sandbox and the planner answers from its output.
"""

from __future__ import annotations

import argparse
import sys
import time

from mas_envs.testing import available_envs, play_episode, quick_env, scripted_policy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20, help="episodes per env and workflow (test split)")
    parser.add_argument("--envs", nargs="*", default=None, help="subset of envs (default: all)")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error("--episodes must be >= 1")
    names = args.envs or available_envs()
    rows = []
    for name in names:
        for workflow in ("single", "mas"):
            env = quick_env(name, workflow=workflow, split="test")
            wins, turns, seconds = 0, 0, 0.0
            for i in range(args.episodes):
                print(f"\r{name:<13} {workflow:<6} episode {i + 1}/{args.episodes}", end="", file=sys.stderr, flush=True)
                out = play_episode(env, scripted_policy, seed=i, options={"task_index": i})
                wins += out.success
                turns += out.turns
                seconds += out.seconds
            rows.append((name, workflow, args.episodes, 100.0 * wins / args.episodes, turns / args.episodes,
                         1000.0 * seconds / args.episodes))
    print("\r" + " " * 60 + "\r", end="", file=sys.stderr)
    print(f"{'env':<13} {'workflow':<8} {'episodes':>8} {'success %':>9} {'turns':>6} {'ms/episode':>10}")
    for name, workflow, n, success, turns, ms in rows:
        print(f"{name:<13} {workflow:<8} {n:>8} {success:>9.1f} {turns:>6.2f} {ms:>10.1f}")
    return 0 if all(r[3] == 100.0 for r in rows) else 1


if __name__ == "__main__":
    t0 = time.perf_counter()
    code = main()
    print(f"done in {time.perf_counter() - t0:.1f} s")
    sys.exit(code)

"""Grading K=8 candidate programs for one task: in parallel (one sandbox batch) vs one at a time, and
the grading a program cannot touch (runner + judge, mas_envs.code_grading) vs the single-process
harness it replaced (bench/legacy_grading.py, kept only as this baseline).

    .venv/bin/python bench/bench_grading.py [--tasks 4]

Both modes grade the same programs, uncached (a fresh ``Sandbox`` cache state per run: programs get a
unique comment so the cache never hits), interleaved per task so machine-load swings hit both alike.
Rows: HumanEval function problems (per-test harness) and stdin/stdout training problems (one run per
test). Columns: programs/s in each mode and the ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import legacy_grading  # noqa: E402
from mas_envs import code_grading
from mas_envs.code_grading import Grader, GradeRequest
from mas_envs.data.code_problems import STDIO, load_humaneval, load_train

K = 8


def candidates(problem) -> list[GradeRequest]:
    """K distinct (never cached) copies of the reference solution."""
    return [
        GradeRequest(f"{problem.reference}\n# candidate {uuid.uuid4().hex}", problem.tests,
                     problem.entry_point, problem.context)
        for _ in range(K)
    ]


def measure(problems, grader: Grader) -> tuple[float, float]:
    parallel_s = sequential_s = 0.0
    for problem in problems:
        start = time.perf_counter()
        reports = grader.grade_many(candidates(problem))
        parallel_s += time.perf_counter() - start
        assert all(r.all_passed for r in reports), problem.task_id
        start = time.perf_counter()
        for request in candidates(problem):
            assert grader.grade(request).all_passed, problem.task_id
        sequential_s += time.perf_counter() - start
    n = K * len(problems)
    return n / parallel_s, n / sequential_s


def replay_vs_legacy(problems, cold: bool) -> tuple[float, float]:
    """Programs/s of K=8 distinct reference copies per task, graded by today's and the old grader,
    interleaved per task. ``cold``: every task's calls are discovered again (first sight of a problem, as
    in one evaluation pass); warm: discovered once before (training, where problems repeat)."""
    new_s = old_s = 0.0
    old_grader, new_grader = legacy_grading.Grader(), Grader()
    for problem in problems:
        if not cold:
            new_grader.grade_many(candidates(problem)[:1])
        for grade_new in (True, False):
            code_grading._REPORTS.clear()
            code_grading._VERDICTS.clear()  # distinct programs rarely share all results; do not let copies
            if cold:
                code_grading._DISCOVERED.clear()
            requests = candidates(problem)
            start = time.perf_counter()
            if grade_new:
                reports = new_grader.grade_many(requests)
            else:
                reports = old_grader.grade_many([legacy_grading.GradeRequest(r.program, r.suite, r.entry_point, r.context)
                                                 for r in requests])
            elapsed = time.perf_counter() - start
            assert all(r.all_passed for r in reports), problem.task_id
            new_s, old_s = (new_s + elapsed, old_s) if grade_new else (new_s, old_s + elapsed)
    n = K * len(problems)
    return n / new_s, n / old_s


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=4, help="tasks per row")
    args = parser.parse_args()
    grader = Grader()
    humaneval = [p for p in load_humaneval() if p.reference][: args.tasks]
    stdio = [p for p in load_train() if p.kind == STDIO and p.reference][: args.tasks]
    print(f"K={K} candidates per task, {args.tasks} tasks per row, {grader.max_workers} sandbox workers, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'problems':<28} {'parallel prog/s':>16} {'one at a time prog/s':>21} {'ratio':>7}")
    for name, problems in (("HumanEval (function)", humaneval), ("train (stdin/stdout)", stdio)):
        par, seq = measure(problems, grader)
        print(f"{name:<28} {par:>16.2f} {seq:>21.2f} {par / seq:>6.1f}x")
    print()
    print(f"{'HumanEval, K=8 per task':<34} {'runner+judge prog/s':>20} {'old harness prog/s':>19} {'cost ratio':>11}")
    for label, cold in (("calls already discovered (train)", False), ("first sight of each task (eval)", True)):
        new, old = replay_vs_legacy(humaneval, cold)
        print(f"{label:<34} {new:>20.2f} {old:>19.2f} {old / new:>10.2f}x")


if __name__ == "__main__":
    main()

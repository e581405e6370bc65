"""Sandbox costs: per-run overhead against a bare subprocess, batch throughput, cache-hit cost.

Run: ``.venv/bin/python bench/bench_sandbox.py [--reps 20]``. Absolute times on a shared 2-core
machine are noisy; read the ratios.

The last rows time one tree-sampling step of K=8 Plan-Path tool candidates (eight different programs,
new to the cache every round): stepping the eight clones one after another, as the rollout did, against
``step_clones``, which first runs the eight programs as one parallel batch (``prefetch_candidates``).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import time

from mas_envs import make_env
from mas_envs.sandbox import Job, Sandbox, cgroups, interpreter, isolation, run_python, sandbox_mode
from mas_trainer.rollout.atgrpo import step_clones

SMALL_PROGRAM = "import sys\nn = int(sys.stdin.read())\nprint(sum(i * i for i in range(n)))"


def interleaved_medians(cases: dict, reps: int) -> dict[str, float]:
    """Median ms per case, timing the cases round-robin so that load swings hit them all alike."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(reps):
        for name, fn in cases.items():
            started = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(samples) * 1000 for name, samples in times.items()}


def sandboxed_pass(mode: str, use_cgroups: bool):
    def once() -> None:
        with layers(mode, use_cgroups):
            result = run_python("pass", use_cache=False)
        assert result.ok, result

    return once


@contextlib.contextmanager
def layers(mode: str, use_cgroups: bool):
    """Temporarily run with a given jail mode and with or without run cgroups (bench only)."""
    saved_mode, saved_parents = isolation._mode, cgroups._parents
    isolation._mode = mode
    if not use_cgroups:
        cgroups._parents = None
    try:
        yield
    finally:
        isolation._mode, cgroups._parents = saved_mode, saved_parents


def tree_step_times(reps: int, k: int = 8) -> tuple[float, float]:
    """Median ms of one K-candidate tool step on Plan-Path 4x4: clones one by one, and ``step_clones``."""
    env = make_env("plan_path", workflow="mas", split="validation", preset="4x4")
    env.reset(seed=0, options={"task_index": 0})
    program = env.unwrapped.scripted_action("tool")
    counter = iter(range(10**9))

    def texts() -> list[str]:  # K programs this process has never run (the cache cannot answer them)
        return [program.replace("```python\n", f"```python\n# {next(counter)}\n", 1) for _ in range(k)]

    def one_by_one() -> None:
        for text in texts():
            env.clone().step(text)

    def batched() -> None:
        step_clones([env], [texts()])

    times = interleaved_medians({"one by one": one_by_one, "step_clones": batched}, reps)
    return times["one by one"], times["step_clones"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=20, help="runs per timing (median is reported)")
    args = parser.parse_args()

    python = interpreter()
    print(f"sandbox mode: {sandbox_mode()}   interpreter: {python}")
    run_python("pass", use_cache=False)  # warm up (the mode probe runs once)

    with_cgroups = cgroups.cgroups_available()
    mode = sandbox_mode()
    cases = {
        "bare subprocess.run([python, '-c', 'pass'])": lambda: subprocess.run([python, "-c", "pass"], check=True),
        "bare subprocess.run([python, '-I', '-S', '-c', 'pass'])": lambda: subprocess.run(
            [python, "-I", "-S", "-c", "pass"], check=True
        ),
        f"run_python('pass', use_cache=False) [{mode}{', cgroups' if with_cgroups else ''}]": sandboxed_pass(
            mode, with_cgroups
        ),
    }
    if mode == "bwrap" and with_cgroups:
        cases["  same, bwrap, no cgroups"] = sandboxed_pass("bwrap", False)
    cases[f"  same, weak mode{', cgroups' if with_cgroups else ''}"] = sandboxed_pass("weak", with_cgroups)
    if with_cgroups:
        cases["  same, weak mode, no cgroups"] = sandboxed_pass("weak", False)
    overheads = interleaved_medians(cases, args.reps)
    bare, _, sandboxed = list(overheads.values())[:3]

    jobs = [Job(SMALL_PROGRAM, stdin=str(10_000 + i), timeout=10.0) for i in range(16)]
    throughput = {}
    for workers in (1, 2, 4):
        sandbox = Sandbox()
        started = time.perf_counter()
        results = sandbox.run_many(jobs, max_workers=workers, use_cache=False)
        elapsed = time.perf_counter() - started
        assert all(r.ok for r in results), [r.reason for r in results if not r.ok]
        throughput[workers] = len(jobs) / elapsed

    sandbox = Sandbox()
    sandbox.run(Job(SMALL_PROGRAM, stdin="100"))
    hits = 10_000
    started = time.perf_counter()
    for _ in range(hits):
        sandbox.run(Job(SMALL_PROGRAM, stdin="100"))
    hit_us = (time.perf_counter() - started) / hits * 1e6

    serial_ms, batched_ms = tree_step_times(max(3, args.reps // 4))

    rows = [(name, f"{ms:.1f} ms", f"{ms / bare:.2f}x") for name, ms in overheads.items()]
    rows += [
        ("16 small programs, sequential", f"{throughput[1]:.1f} runs/s", "1.00x"),
        ("16 small programs, run_many 2 workers", f"{throughput[2]:.1f} runs/s", f"{throughput[2] / throughput[1]:.2f}x"),
        ("16 small programs, run_many 4 workers", f"{throughput[4]:.1f} runs/s", f"{throughput[4] / throughput[1]:.2f}x"),
        ("cache hit (Sandbox.run, same job)", f"{hit_us:.1f} us", f"{hit_us / 1000 / sandboxed:.5f}x of a run"),
        ("K=8 tool candidates (Plan-Path), clones one by one", f"{serial_ms:.1f} ms", "1.00x"),
        ("K=8 tool candidates, step_clones (one parallel batch)", f"{batched_ms:.1f} ms",
         f"{serial_ms / batched_ms:.2f}x faster"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measurement':<{width}}  {'median / rate':>14}  ratio")
    print("-" * (width + 30))
    for name, value, ratio in rows:
        print(f"{name:<{width}}  {value:>14}  {ratio}")


if __name__ == "__main__":
    main()

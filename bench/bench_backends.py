"""Wall time per training step, local backend vs Ray backend, on the same work (specialized mode).

Both runs do identical steps (same seeds, same model, same settings: the Ray run's groups and losses
equal the local run's), interleaved step by step so that load from other processes hits both alike.
The first step of each backend is a warm-up and is not counted.

    OMP_NUM_THREADS=1 python bench/bench_backends.py --model tiny --steps 4
    OMP_NUM_THREADS=1 python bench/bench_backends.py --model smollm2-135m --steps 3 --envs 4 --k 4

Prints one row per backend (mean seconds per step: total, generation, env stepping, update) and
the Ray/local ratio. Starts a local Ray cluster on 127.0.0.1 with ``--cpus`` CPUs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, not an installed copy
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--steps", type=int, default=4, help="steps per backend, the first is a warm-up")
    parser.add_argument("--envs", type=int, default=2)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--max-turns", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=4)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--update-all-groups", action="store_true",
                        help="update on zero-variance groups too (skip_zero_variance_groups=False): a random "
                             "model's groups are mostly all-equal, and the update would otherwise be skipped")
    parser.add_argument("--output", default="runs/bench-backends")
    args = parser.parse_args()

    from mas_trainer.backends.ray.cluster import connect

    connect(None, num_cpus=args.cpus)
    from mas_trainer.settings.config import ATGRPOConfig
    from mas_trainer.run.trainer import MASTrainer

    def config(backend: str) -> ATGRPOConfig:
        return ATGRPOConfig(
            output_dir=f"{args.output}/{backend}", env="plan_path", workflow="mas", policy_mode="specialized",
            model=args.model, envs_per_step=args.envs, num_generations=args.k, max_turns=args.max_turns,
            max_completion_length=args.max_new_tokens, max_steps=args.steps, save_steps=10_000, rollout_seed=7,
            backend=backend, ray_env_workers=2, skip_zero_variance_groups=not args.update_all_groups,
            # Fits 2 policies x (rollout + update) + 2 env actors into 2 CPUs.
            ray_resources={"rollout": {"num_cpus": 0.25}, "update": {"num_cpus": 0.5}, "env": {"num_cpus": 0.25}},
        )

    # The Ray run first: creating a config resets accelerate's state, which in-process trainers read.
    start = time.perf_counter()
    remote = MASTrainer(config("ray"))
    ray_startup = time.perf_counter() - start
    start = time.perf_counter()
    local = MASTrainer(config("local"))
    local_startup = time.perf_counter() - start

    records: dict[str, list[dict]] = {"local": [], "ray": []}
    for _ in range(args.steps):
        for name, run in (("local", local), ("ray", remote)):
            records[name].append(run.train_step())

    def mean(name: str, key: str) -> float:
        return statistics.mean(r[key] for r in records[name][1:])

    print(f"model={args.model} envs={args.envs} K={args.k} max_turns={args.max_turns} "
          f"max_new_tokens={args.max_new_tokens} steps={args.steps} (first not counted) cpus={args.cpus} "
          f"update_all_groups={args.update_all_groups}")
    print(f"start-up s: local {local_startup:.1f}, ray {ray_startup:.1f} (cluster already up)")
    print("| backend | step s | generation s | env s | update s |")
    print("|---|---|---|---|---|")
    for name in ("local", "ray"):
        print(f"| {name} | {mean(name, 'time_step'):.2f} | {mean(name, 'time_generation'):.2f} | "
              f"{mean(name, 'time_env'):.3f} | {mean(name, 'time_update'):.2f} |")
    print(f"ray / local step time: {mean('ray', 'time_step') / mean('local', 'time_step'):.2f}")
    same = all(abs(a[f"loss/{p}"] - b[f"loss/{p}"]) < 1e-4 for a, b in zip(records["local"], records["ray"])
               for p in remote.policies)
    print(f"same losses on both backends: {same}")


if __name__ == "__main__":
    main()

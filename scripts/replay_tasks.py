"""Replay chosen test tasks of an evaluation, greedily, and write their transcripts (a diagnosis tool).

A results file says which tasks a method lost; this says how. It plays the given task indices with the
same settings ``mas-eval`` uses by default (env defaults, per-role answer budgets, greedy decoding, the
same reset seeds) and appends one transcript per task (:mod:`mas_trainer.run.transcripts`). It writes
no results file: a hand-picked set of tasks is not an evaluation. Example, the HumanEval tasks that the
coder alone solves and the coder + tester team does not::

    python scripts/replay_tasks.py --env coder_tester --model qwen2.5-coder-0.5b --workflow mas \
        --tasks 6,33,41 --transcripts replay.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys

from mas_trainer.settings.hub import offline_hub_defaults

offline_hub_defaults()  # before transformers is imported

from mas_trainer.run.evaluate import (  # noqa: E402
    EvalError,
    _probe_env,
    answer_budgets,
    describe_target,
    load_policies_for,
    make_eval_envs,
    play,
    role_routing,
)
from mas_trainer.run.transcripts import append_transcripts, episode_transcripts  # noqa: E402
from mas_trainer.settings.envs import resolve_env_kwargs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", required=True)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--workflow", choices=("mas", "single"), default="mas")
    parser.add_argument("--split", choices=("test", "validation", "train"), default="test")
    parser.add_argument("--tasks", required=True, help="comma-separated task indices, e.g. 6,33,41")
    parser.add_argument("--env-kwargs", default="{}", help="JSON object of extra make_env arguments")
    parser.add_argument("--seed", type=int, default=0, help="reset seed, as mas-eval's --seed (default: 0)")
    parser.add_argument("--transcripts", required=True, help="JSON-lines file the transcripts are appended to")
    args = parser.parse_args(argv)
    try:
        tasks = [int(t) for t in args.tasks.split(",") if t.strip()]
        kwargs = json.loads(args.env_kwargs)
    except ValueError as err:
        parser.error(f"bad --tasks or --env-kwargs: {err}")
    if not tasks or min(tasks) < 0 or len(set(tasks)) != len(tasks):
        parser.error("--tasks needs distinct task indices >= 0")
    try:
        run_config = describe_target(args.model).run_config  # a mas-train run's settings, as mas-eval reads them
        env_kwargs = resolve_env_kwargs(args.env, dict(kwargs), run_config)
        probe, _ = _probe_env(args.env, env_kwargs, args.workflow, args.split, max(tasks) + 1)
        roles = list(probe.possible_agents)
        probe.close()
        loaded = load_policies_for(args.model)
        routing = role_routing(roles, loaded, False)
    except (EvalError, ValueError) as err:
        print(f"replay_tasks: error: {err}", file=sys.stderr)
        return 2
    max_new_tokens, role_budgets = answer_budgets(args.env, args.workflow, env_kwargs, run_config, roles)
    envs = [make_eval_envs(args.env, env_kwargs, args.workflow, args.split, 1, args.seed, i)[0] for i in tasks]
    rollout = play(envs, loaded, routing, samples=1, temperature=0.0, top_p=1.0, max_new_tokens=role_budgets or max_new_tokens,
                   seed=args.seed, episode_ids=tasks)
    lines = episode_transcripts(rollout, loaded.tokenizers(), key=f"replay {args.env} {args.workflow} {args.model}")
    append_transcripts(args.transcripts, lines)
    for line in lines:
        print(f"task {line['task_index']:>4} {line['task_id']:<16} success={line['success']!s:<5} "
              f"turns={line['turns']} steps={len(line['steps'])}")
    print(f"transcripts: {args.transcripts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

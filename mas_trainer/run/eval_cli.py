"""``mas-eval``: evaluate a model or a trained run on an env's test (or validation) split; write a results file.

Examples (in this order: the later ones evaluate the run the first one trains)::

    mas-train --env plan_path --policy specialized --model tiny --steps 1 --output runs/pp-spec  # a quick run
    mas-eval --env plan_path --model smollm2-135m --workflow single --episodes 50
    mas-eval --env plan_path --model runs/pp-spec --out results/pp-spec.json          # the mas-train run
    mas-eval --env plan_path --model runs/pp-spec --swap-roles                       # the role-swap ablation
    mas-eval --env plan_path --model runs/pp-spec --split validation        # choosing a checkpoint or preset
    mas-eval --env plan_path --model tiny --samples 4 --temperature 1.0             # best-of-4 tree search
    mas-eval --env sokoban --model smollm2-135m --env-kwargs '{"size": 7, "num_boxes": 2}'
    mas-eval --env coder_tester --model qwen2.5-coder-0.5b --episodes 8 --transcripts t.jsonl  # what each agent wrote
    mas-eval --env math_tool --model qwen2.5-coder-0.5b --episodes 300 --chunk-size 10 --workers 2  # 2 processes

Plays tasks 0..N-1 of the split (greedy by default; ``--samples K`` = best-of-K by env reward at every
step, see :mod:`mas_trainer.run.evaluate`), prints a short table and writes the results JSON (format:
``leaderboard/schema/results.schema.json``) atomically to ``--out``. Tasks are played ``--chunk-size`` at a
time and every finished chunk is kept in ``<out>.partial.jsonl``, so running a stopped command again
resumes it (:mod:`mas_trainer.run.eval_progress`). Bad arguments (unknown env or
model, bad JSON, N < 1 ...) exit with status 2 and a one-line message.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
from typing import Iterator

from mas_trainer.settings.hub import offline_hub_defaults

offline_hub_defaults()  # before transformers is imported (below)

from transformers.utils import logging as hf_logging  # noqa: E402

from mas_trainer.run.eval_progress import progress_path_for  # noqa: E402
from mas_trainer.run.evaluate import (  # noqa: E402
    EvalError,
    EvalRequest,
    describe_target,
    evaluate,
    format_table,
    workflow_and_method,
    write_results,
)
from mas_trainer.settings.dtypes import MODEL_DTYPES  # noqa: E402
from mas_trainer.settings.methods import METHOD_NAMES  # noqa: E402
from mas_trainer.settings.optional import VLLM_INSTALL_HINT, vllm_available  # noqa: E402

PROG = "mas-eval"


class UsageError(Exception):
    """Reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print the usage block; we want one line
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Evaluate LLM agents on a stronger-mas env and write a results file.")
    p.add_argument("--env", required=True, help="environment name (e.g. plan_path, sokoban, sudoku)")
    p.add_argument("--model", default="smollm2-135m",
                   help="model preset, local folder, HF id, or a mas-train run folder (default: smollm2-135m)")
    p.add_argument("--workflow", choices=("mas", "single"), default=None,
                   help="mas (multi-agent) or single (one solver); default: the run's, else mas")
    p.add_argument("--split", choices=("test", "validation", "train"), default="test",
                   help="task split (default: test). Choose presets and hyperparameters on validation; "
                        "run test once, for the table")
    p.add_argument("--episodes", type=int, default=50, help="number of tasks, indices 0..N-1 (default: 50)")
    p.add_argument("--seed", type=int, default=0, help="sampling / reset seed (default: 0)")
    p.add_argument("--samples", type=int, default=1,
                   help="K candidates per agent step; K > 1 executes the best by env reward (best-of-K)")
    p.add_argument("--temperature", type=float, default=None,
                   help="sampling temperature (default: 0 = greedy for K=1, 1.0 for K>1)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling threshold (default: 1.0)")
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help="tokens per agent action (default: the run's, else sized to the env's answer "
                        "format: Plan-Path 8 single / 48 mas, Sokoban 32 / 96, 4x4 Sudoku 64 / 128)")
    p.add_argument("--env-kwargs", default=None, help="JSON object of extra make_env arguments")
    p.add_argument("--method", choices=METHOD_NAMES, default=None, help="method label (default: inferred)")
    p.add_argument("--swap-roles", action="store_true", help="swap the two roles' policies (specialized runs)")
    p.add_argument("--checkpoint-step", type=int, default=None, help="which checkpoint of a run (default: latest)")
    p.add_argument("--backend", choices=("auto", "hf", "prefix_shared", "vllm"), default="auto",
                   help="generation backend (default auto: prefix_shared where the architecture allows, else hf; "
                        "vllm needs vLLM installed, see docs/VLLM.md)")
    p.add_argument("--dtype", choices=MODEL_DTYPES, default=None,
                   help="weights' dtype (default: float32 for a model, the saved dtype for a trained run); bf16 "
                        "is ~2x faster on CPUs with AMX and on GPUs, ~50x slower on AVX2-only CPUs, and changes "
                        "greedy tokens, so its results are kept apart on the leaderboard")
    p.add_argument("--label", default=None, help="free text stored in provenance.label")
    p.add_argument("--out", default=None, help="results file (default: results/<env>-<method>-seed<S>.json)")
    p.add_argument("--chunk-size", type=int, default=32,
                   help="tasks played per batch (default: 32); each finished chunk is saved to "
                        "<out>.partial.jsonl, so the same command resumes a stopped run")
    p.add_argument("--workers", type=int, default=1,
                   help="processes playing chunks at once, each with its own copy of the weights and "
                        "threads/N torch threads (default: 1); on a small CPU, one per core is fastest. "
                        "Results do not depend on it")
    p.add_argument("--transcripts", default=None, metavar="PATH",
                   help="also append every played episode, step by step (each agent's prompt and reply, "
                        "rewards, parse errors), to this JSON-lines file")
    p.add_argument("--restart", action="store_true",
                   help="ignore (and replace) the progress file of an earlier run of this evaluation")
    p.add_argument("--quiet", action="store_true", help="no progress messages")
    return p


def parse_request(argv: list[str]):
    """``(EvalRequest, out_path_or_None, quiet, restart, transcripts_or_None)``; raises :class:`UsageError`."""
    args = build_parser().parse_args(argv)
    env_kwargs = {}
    if args.env_kwargs:
        try:
            env_kwargs = json.loads(args.env_kwargs)
        except json.JSONDecodeError as err:
            raise UsageError(f"--env-kwargs is not valid JSON: {err}") from None
        if not isinstance(env_kwargs, dict):
            raise UsageError(f"--env-kwargs must be a JSON object, got {type(env_kwargs).__name__}")
    if args.backend == "vllm":
        if not vllm_available():
            raise UsageError(f"--backend vllm: vLLM is not installed in this Python; {VLLM_INSTALL_HINT}")
    if args.label is not None and len(args.label) > 200:
        raise UsageError("--label is longer than 200 characters")
    request = EvalRequest(
        env=args.env, model=args.model, workflow=args.workflow, split=args.split, episodes=args.episodes,
        seed=args.seed, samples=args.samples, temperature=args.temperature, top_p=args.top_p,
        max_new_tokens=args.max_new_tokens, env_kwargs=env_kwargs, method=args.method,
        swap_roles=args.swap_roles, checkpoint_step=args.checkpoint_step, label=args.label, backend=args.backend,
        chunk_size=args.chunk_size, dtype=args.dtype, workers=args.workers,
        command=" ".join([PROG, *map(shlex.quote, argv)]),
    )
    if args.transcripts is not None and os.path.isdir(args.transcripts):
        raise UsageError(f"--transcripts {args.transcripts!r} is a folder; name a file")
    return request, args.out, args.quiet, args.restart, args.transcripts


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``mas-eval``; returns the exit status (2 for bad arguments)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        request, out, quiet, restart, transcripts = parse_request(argv)
        out = out or default_out(request)
        partial = progress_path_for(out)
        if restart and partial.exists():
            partial.unlink()
        with _quiet_loading():
            results = evaluate(request, progress=not quiet, progress_path=partial, transcripts_path=transcripts)
    except (UsageError, EvalError) as err:
        text = str(err).strip()
        print(f"{PROG}: error: {text.splitlines()[0] if text else repr(err)}", file=sys.stderr)
        return 2
    path = write_results(results, out)
    partial.unlink(missing_ok=True)  # every chunk is in the results file now
    print(format_table(results))
    print(f"results: {path}")
    return 0


def default_out(request) -> str:
    """``results/<env>-<method>-seed<S>.json``, with the method the evaluation will record."""
    method = request.method
    if method is None:
        try:
            _, method = workflow_and_method(request, describe_target(request.model, request.checkpoint_step))
        except (OSError, ValueError):
            method = "eval"  # evaluate() reports what is wrong with the model argument
    return os.path.join("results", f"{request.env}-{method}-seed{request.seed}.json")


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """No per-tensor "Loading weights" bar (a one-second load needs none; errors stay one line)."""
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


if __name__ == "__main__":
    sys.exit(main())

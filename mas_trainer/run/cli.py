"""``mas-train``: train LLM agents on a stronger-mas environment with AT-GRPO.

Examples::

    mas-train --env plan_path --policy shared --workflow single --steps 200
    mas-train --env plan_path --policy specialized --output runs/pp-spec
    mas-train --env plan_path --policy lora --lora_r 16 --output runs/pp-lora
    mas-train --env plan_path --output runs/pp-spec --resume          # continue a killed run
    mas-train --env sokoban --policy specialized --learning_rate 5e-6 --num_generations 4
    mas-train --env plan_path --policy specialized --backend ray       # Ray actors (docs/RAY.md)

Every field of :class:`mas_trainer.settings.config.ATGRPOConfig` (hence of ``trl.GRPOConfig``) can be given
as ``--field value`` (``mas-train --help-all`` lists them). The defaults run on a 2-core CPU: the
SmolLM2-135M preset, Plan-Path 4x4 with the rich observation, 8 envs x K=8 per step.

Writes ``OUTPUT/metrics.jsonl`` (one line per step), ``OUTPUT/learning_curve.png``,
``OUTPUT/checkpoints/step-N/`` and, with ``--report_to tensorboard``, ``OUTPUT/tensorboard/<policy>``.
Bad arguments exit with status 2 and a one-line message.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys

from mas_trainer.settings.hub import offline_hub_defaults

offline_hub_defaults()  # before transformers is imported (below)

from transformers import HfArgumentParser  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from mas_envs.registry import list_envs  # noqa: E402
from mas_trainer.backends.ray.policy_workers import WorkerDiedError  # noqa: E402  (Ray itself is imported lazily)
from mas_trainer.run.trainer import MASTrainer  # noqa: E402
from mas_trainer.settings.config import BACKENDS, POLICY_MODES, WORKFLOWS, ATGRPOConfig  # noqa: E402

PROG = "mas-train"


class UsageError(Exception):
    """A bad command line or configuration: reported in one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse prints usage + message; we want one line
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Train LLM agents on a stronger-mas environment with AT-GRPO (TRL-based).",
        epilog="Any ATGRPOConfig / trl.GRPOConfig field can be passed as --field value; see --help-all.",
        add_help=True,
    )
    parser.add_argument("--env", default=None, help="environment name (default: plan_path)")
    parser.add_argument("--policy", default=None, help="shared | specialized (one model per role) | lora (one base + one LoRA adapter per role)")
    parser.add_argument("--model", default=None, help="model preset, local folder or HF id (default: smollm2-135m)")
    parser.add_argument("--workflow", default=None, help="mas | single (default: mas)")
    parser.add_argument("--grouping", default=None, help="at_grpo | trajectory (baseline)")
    parser.add_argument("--backend", default=None, help="local (one process, default) | ray (actors per policy)")
    parser.add_argument("--ray-address", default=None, help="Ray cluster to join (default: start a local one)")
    parser.add_argument("--steps", type=int, default=None, help="training steps (= max_steps)")
    parser.add_argument("--output", default=None, help="run folder (default: runs/<env>-<policy>-<workflow>)")
    parser.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --output")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--help-all", action="store_true", help="list every configuration field and exit")
    return parser


def _config_parser():
    parser = HfArgumentParser(ATGRPOConfig, prog=PROG)
    parser.error = lambda message: (_ for _ in ()).throw(UsageError(message))  # type: ignore[method-assign]
    return parser


def _unknown_flags_message(unknown: list[str], fields: dict) -> str:
    flags = [a for a in unknown if a.startswith("--")]
    if not flags:
        return f"unrecognized arguments: {' '.join(unknown)}"
    hints = []
    for flag in flags:
        name = flag[2:].split("=", 1)[0].replace("-", "_")
        close = difflib.get_close_matches(name, list(fields), n=1)
        hints.append(f"{flag} (did you mean --{close[0]}?)" if close else flag)
    return f"unknown option{'s' if len(flags) > 1 else ''}: {', '.join(hints)}; --help-all lists every field"


def parse_config(argv: list[str] | None):
    """``(config, options)`` from a command line; raises :class:`UsageError` for bad input."""
    options, rest = build_parser().parse_known_args(argv)
    # Cheap checks first, so a typo fails before a model is loaded.
    env = options.env or "plan_path"
    if env not in list_envs():
        raise UsageError(f"unknown env {env!r}; available: {', '.join(list_envs())}")
    policy = options.policy or "shared"
    if policy not in POLICY_MODES:
        raise UsageError(f"unknown policy mode {policy!r}; choose {_choices(POLICY_MODES)}")
    if options.workflow is not None and options.workflow not in WORKFLOWS:
        raise UsageError(f"unknown workflow {options.workflow!r}; choose {_choices(WORKFLOWS)}")
    if options.backend is not None and options.backend not in BACKENDS:
        raise UsageError(f"unknown backend {options.backend!r}; choose {_choices(BACKENDS)}")
    if options.steps is not None and options.steps < 1:
        raise UsageError(f"--steps must be >= 1, got {options.steps}")

    parser = _config_parser()
    if options.help_all:
        parser.print_help()
        raise SystemExit(0)
    namespace, unknown = parser.parse_known_args(rest)
    if unknown:
        raise UsageError(_unknown_flags_message(unknown, vars(namespace)))
    # What the command line set = what differs from a parse of nothing. Comparing values (not spelling)
    # keeps --learning-rate, --learning_rate and --no_<flag> alike, as HfArgumentParser accepts all three.
    defaults = vars(parser.parse_args([]))
    given = {k: v for k, v in vars(namespace).items() if v != defaults.get(k)}
    overrides = {"env": env, "policy_mode": policy}
    for field, value in (("model", options.model), ("workflow", options.workflow), ("grouping", options.grouping),
                         ("max_steps", options.steps), ("backend", options.backend),
                         ("ray_address", options.ray_address)):
        if value is not None:
            overrides[field] = value
    given.update(overrides)
    workflow = given.get("workflow", "mas")
    given.setdefault("output_dir", options.output or os.path.join("runs", f"{env}-{policy}-{workflow}"))
    if options.output:
        given["output_dir"] = options.output

    try:
        config = ATGRPOConfig(**given)
    except (ValueError, TypeError) as err:
        raise UsageError(str(err).strip().splitlines()[0]) from None
    return config, options


def _choices(names: tuple[str, ...]) -> str:
    return ", ".join(names[:-1]) + f" or {names[-1]}"


def _summary(run) -> str:
    c = run.config
    roles = ", ".join(f"{r}->{run.policy_of_role(r)}" for r in run.roles)
    return (
        f"{PROG}: env={c.env} workflow={c.workflow} roles[{roles}] model={c.model} grouping={c.grouping} "
        f"K={c.num_generations} envs/step={c.envs_per_step} max_new_tokens={c.max_completion_length} "
        f"lr={c.learning_rate} steps={c.max_steps} output={c.output_dir}"
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``mas-train``; returns the exit status (2 for bad arguments)."""
    try:
        config, options = parse_config(argv)
        hf_logging.disable_progress_bar()  # one bar (ours); no per-checkpoint "Writing model shards" bars

        try:
            run = MASTrainer(config)
        except (ValueError, FileNotFoundError, OSError, ImportError) as err:
            raise UsageError(str(err).strip().splitlines()[0]) from None
    except UsageError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    print(_summary(run), file=sys.stderr)
    try:
        records = run.train(resume=options.resume, progress=not options.no_progress)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted at step {run.global_step}; continue with --resume", file=sys.stderr)
        return 130
    except WorkerDiedError as err:  # backend=ray: a policy actor died; the message says how to resume
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 1
    if records:
        last = records[-1]
        print(
            f"{PROG}: done, step {last['step']}: reward {last['reward_mean']:.3f}, success {last['success_rate']:.2f}; "
            f"metrics {run.metrics_path}, curve {run.run_dir / 'learning_curve.png'}",
            file=sys.stderr,
        )
    else:
        print(f"{PROG}: nothing to do: the run in {run.run_dir} is already at step {run.global_step}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

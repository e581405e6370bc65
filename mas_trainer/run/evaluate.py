"""Evaluation: load the policies, play held-out episodes, and summarise them as a results file.

An evaluation plays tasks ``0..N-1`` of an env's test split (``options={"task_index": i}``) with the
env's workflow, one policy per role (the same one for every role in ``shared`` mode), and writes one
JSON object in the format of ``leaderboard/schema/results.schema.json``.

Decoding:

* ``samples=1, temperature=0`` (default): greedy play, one completion per agent step.
* ``samples=1, temperature>0``: plain sampling, one completion per agent step.
* ``samples=K>1`` ("best-of-K"): tree search at inference. At every agent step K candidates are
  sampled from the same prompt, each is stepped on its own clone of the env, and the one with the
  highest env reward continues the episode (this is AT-GRPO's rollout with the env as the judge;
  it uses the env's reward, so it measures search-with-feedback, not one-shot skill).

``tokens`` of an episode counts every generated completion token, all K candidates included (it is
the generation cost of the episode). Per-role stats are over the executed steps.

What is evaluated (``model`` argument):

* a preset name, a local ``save_pretrained`` folder or a Hugging Face id: one ``shared`` policy;
* a run folder of ``mas-train`` (or one of its ``checkpoints/step-N`` folders): the policies of its
  latest (or that) checkpoint, with the run's role -> policy map. The run's env settings (its
  ``env_kwargs``, ``max_turns``, ``alpha``) and ``max_completion_length`` become the defaults.

Env keyword arguments (:func:`mas_trainer.settings.envs.resolve_env_kwargs`): the trainer's CPU preset
defaults (e.g. Plan-Path ``4x4`` with the rich observation), then the run's settings, then the caller's
``env_kwargs``. The resolved set (all but
``workflow`` and ``split``, which have their own fields) is recorded in the results file.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import math
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from importlib import metadata

import torch
from tqdm.auto import tqdm

from leaderboard.sample import wilson_interval  # one definition, the one submit checks
from mas_envs import __version__ as mas_envs_version
from mas_envs import list_envs, make_env
from mas_envs.games.splits import SPLITS
from mas_trainer.policies.models import load_model_and_tokenizer, weights_fingerprint
from mas_trainer.run.checkpoints import load_policies
from mas_trainer.run.chunk_play import ChunkJob, chunk_of, make_eval_envs, play, play_chunks  # noqa: F401 (re-exported)
from mas_trainer.run.eval_progress import Chunk, append_chunk, chunk_plan, machines_of, outcome_key, read_chunks
from mas_trainer.run.transcripts import append_transcripts
from mas_trainer.settings import run_layout
from mas_trainer.settings.dtypes import MODEL_DTYPES
from mas_trainer.settings.envs import default_max_new_tokens, default_role_budgets, resolve_env_kwargs
from mas_trainer.settings.methods import METHOD_NAMES, method_of, method_problem
from mas_trainer.settings.role_maps import parse_role_map

SCHEMA_VERSION = 1
WORKFLOWS = ("mas", "single")


class EvalError(ValueError):
    """A bad request (unknown env or model, bad kwargs, impossible settings): one-line message."""


@dataclass
class EvalRequest:
    """Everything ``mas-eval`` can be asked; ``None`` means "use the default" (see module docstring)."""

    env: str
    model: str = "smollm2-135m"
    workflow: str | None = None
    split: str = "test"
    episodes: int = 50
    seed: int = 0
    samples: int = 1
    temperature: float | None = None
    top_p: float = 1.0
    max_new_tokens: int | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    method: str | None = None
    swap_roles: bool = False
    checkpoint_step: int | None = None
    label: str | None = None
    command: str = ""
    # generation backend (mas_trainer.policies.workers.make_backend): auto = prefix_shared (common prompt prefix
    # encoded once, same greedy tokens as hf in the equivalence tests) where the architecture allows, else hf
    backend: str = "auto"
    # tasks played per batch; each finished chunk is saved to the progress file, so a stopped run resumes
    chunk_size: int = 32
    # weights' dtype (settings/dtypes.py); None: float32 for a plain model, the saved dtype for a trained run
    dtype: str | None = None
    # processes playing chunks at once, each with its own copy of the weights (run/chunk_play.py); not part of
    # the outcome: a task's result is the same whichever process plays it
    workers: int = 1


@dataclass
class LoadedPolicies:
    """The models to evaluate and where they came from."""

    models: dict[str, tuple[Any, Any]]  # policy name -> (model, tokenizer)
    policy_mode: str  # "shared" | "specialized"
    model_id: str  # the base model (preset / path / HF id)
    policy_ids: dict[str, str]  # policy name -> what was loaded for it
    policy_of_role: dict[str, str] = field(default_factory=dict)  # empty: every role uses "shared"
    run_dir: Path | None = None
    run_config: dict[str, Any] | None = None  # the saved ATGRPOConfig of a run, as JSON

    def tokenizers(self) -> dict[str, Any]:
        """Policy name -> its tokenizer."""
        return {name: tokenizer for name, (_, tokenizer) in self.models.items()}


# --------------------------------------------------------------------------------------------------
# Statistics


# --------------------------------------------------------------------------------------------------
# Finding and loading what to evaluate


def find_checkpoint(path: str | os.PathLike, step: int | None = None) -> tuple[Path, Path] | None:
    """``(run_dir, checkpoint_dir)`` if ``path`` is a run folder or a checkpoint folder, else None."""
    p = Path(path)
    if not p.is_dir():
        return None
    if (p / "run_state.json").is_file() and p.name.startswith(run_layout.PREFIX):
        return p.parent.parent, p
    if (p / run_layout.CHECKPOINTS).is_dir():
        ckpt = run_layout.checkpoint_dir(p, step) if step is not None else run_layout.latest_checkpoint(p)
        if ckpt is None or not (ckpt / "run_state.json").is_file():
            wanted = f"step {step}" if step is not None else "any checkpoint"
            raise EvalError(f"run folder {p} has no complete checkpoint ({wanted})")
        return p, ckpt
    return None


def load_policies_for(model: str, step: int | None = None, device: str = "cpu",
                      dtype: str | None = None) -> LoadedPolicies:
    """Load a run's policies, or one shared policy from a preset / folder / HF id; in ``dtype`` if given
    (else float32 for a plain model and the dtype it was saved in for a run's checkpoint)."""
    if dtype is not None and dtype not in MODEL_DTYPES:
        raise EvalError(f"--dtype {dtype!r}: choose one of {', '.join(MODEL_DTYPES)}")
    per_role = model_per_role(model)
    if per_role is not None:  # untrained models, one per role: "tool=qwen2.5-coder-0.5b,planner=smollm2-135m"
        models = {}
        for role, name in per_role.items():
            try:
                models[role] = load_model_and_tokenizer(name, dtype=dtype or "float32", device=device)
            except (ValueError, OSError) as err:
                raise EvalError(f"role {role}: " + str(err).strip().splitlines()[0]) from None
        return LoadedPolicies(models, "specialized", model, dict(per_role), {r: r for r in per_role})
    found = find_checkpoint(model, step)
    if found is None:
        try:
            pair = load_model_and_tokenizer(model, dtype=dtype or "float32", device=device)
        except (ValueError, OSError) as err:
            raise EvalError(str(err).strip().splitlines()[0]) from None
        return LoadedPolicies({"shared": pair}, "shared", model, {"shared": model})

    run_dir, ckpt = found
    state = json.loads((ckpt / "run_state.json").read_text())
    models, policy_of_role = load_policies(run_dir, step=int(ckpt.name.split("-")[-1]), device=device)
    if dtype is not None:
        models = {p: (m.to(dtype=getattr(torch, dtype)), t) for p, (m, t) in models.items()}
    config = dict(state.get("config") or {})
    mode = "specialized" if config.get("policy_mode") == "specialized" or len(models) > 1 else "shared"
    ids = {p: f"{run_dir.name}/{ckpt.parent.name}/{ckpt.name}/policies/{p}" for p in models}
    return LoadedPolicies(models, mode, str(config.get("model") or run_dir.name), ids, dict(policy_of_role),
                          run_dir, config)


@dataclass
class Target:
    """What a ``model`` argument names, read without loading any weights."""

    run_config: dict[str, Any] | None = None  # the saved ATGRPOConfig of a run; None for a plain model
    policy_mode: str = "shared"
    policy_of_role: dict[str, str] = field(default_factory=dict)


def describe_target(model: str, step: int | None = None) -> Target:
    """Policy layout and run settings of ``model`` (a run / checkpoint folder, or a plain model)."""
    per_role = model_per_role(model)
    if per_role is not None:
        return Target(None, "specialized", {r: r for r in per_role})
    found = find_checkpoint(model, step)
    if found is None:
        return Target()
    state = json.loads((found[1] / "run_state.json").read_text())
    config = dict(state.get("config") or {})
    specialized = config.get("policy_mode") == "specialized" or len(state.get("policies", [])) > 1
    return Target(config, "specialized" if specialized else "shared", dict(state.get("policy_of_role") or {}))


def model_per_role(model: str) -> dict[str, str] | None:
    """``{"tool": ..., "planner": ...}`` for a ``role=model,...`` argument (not an existing folder), else None."""
    if "=" not in model or Path(model).exists():
        return None
    try:
        return parse_role_map(model, "--model", str)
    except ValueError as err:
        raise EvalError(str(err)) from None


def default_method(workflow: str, target: Target | LoadedPolicies) -> str:
    """The paper method a model / run stands for (:mod:`mas_trainer.settings.methods`): untrained models are
    ``<workflow>_prompt``; a run is looked up by its workflow, grouping and policy layout."""
    config = target.run_config
    if config is None:
        return method_of(workflow, None, target.policy_mode)
    return method_of(workflow, config.get("grouping") or "at_grpo", target.policy_mode)


def workflow_and_method(request: EvalRequest, target: Target | LoadedPolicies) -> tuple[str, str]:
    """The workflow (asked, else the run's, else mas) and the method label (asked, else inferred)."""
    workflow = request.workflow or (target.run_config or {}).get("workflow") or "mas"
    return workflow, request.method or default_method(workflow, target)


def check_method(method: str, workflow: str, policy_mode: str) -> None:
    """Reject a method name that contradicts the workflow or the policy layout (the leaderboard would)."""
    problem = method_problem(method, workflow, policy_mode)
    if problem is not None:
        raise EvalError(problem)


def role_routing(roles: list[str], target: Target | LoadedPolicies, swap_roles: bool) -> dict[str, str]:
    """role -> policy name; with ``swap_roles`` the two roles exchange their policies (paper ablation)."""
    if target.policy_mode == "shared":
        if swap_roles:
            raise EvalError("--swap-roles needs a specialized run (one policy per role)")
        return {role: "shared" for role in roles}
    missing = [r for r in roles if r not in target.policy_of_role]
    if missing:
        raise EvalError(f"the run has no policy for role(s) {missing} (its roles: {sorted(target.policy_of_role)})")
    routing = {role: target.policy_of_role[role] for role in roles}
    if swap_roles:
        if len(roles) != 2:
            raise EvalError(f"--swap-roles needs exactly two roles, the workflow has {roles}")
        a, b = roles
        routing = {a: routing[b], b: routing[a]}
    return routing


# --------------------------------------------------------------------------------------------------
# Environment settings


def _probe_env(env_name: str, kwargs: dict[str, Any], workflow: str, split: str, episodes: int) -> tuple[Any, str]:
    """Build one env to check the settings early; return it and its eval-set fingerprint."""
    if env_name not in list_envs():
        raise EvalError(f"unknown env {env_name!r}; available: {', '.join(list_envs())}")
    try:
        env = make_env(env_name, workflow=workflow, split=split, **kwargs)
    except (TypeError, ValueError) as err:
        raise EvalError(f"cannot create env {env_name!r} with {kwargs}: {str(err).splitlines()[0]}") from None
    base = env.unwrapped
    # fixed lists: the validation/test lists of generated puzzles (test_size each), or a problem set
    size = getattr(base, "test_size", None) if split in ("validation", "test") else None
    if size is not None and episodes > int(size):
        raise EvalError(f"--episodes {episodes} exceeds the {split} split of {env_name} ({size} tasks; "
                        "pass test_size in --env-kwargs for more)")
    problems = getattr(base, "problems", None)
    if problems is not None and episodes > len(problems):
        raise EvalError(f"--episodes {episodes} exceeds the {split} split of {env_name} ({len(problems)} problems)")
    if not hasattr(base, "eval_set_fingerprint"):
        raise EvalError(f"env {env_name!r} has no eval_set_fingerprint(); it cannot be evaluated reproducibly")
    return env, str(base.eval_set_fingerprint())


# --------------------------------------------------------------------------------------------------
# Playing and summarising


def summarize(chunks: list[Chunk], roles: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per-episode records (in task order) and the summary block of a results file."""
    chunks = sorted(chunks, key=lambda c: c.start)
    episodes = [e for c in chunks for e in c.episodes]
    n = len(episodes)
    wins = sum(e["success"] for e in episodes)
    per_role = {}
    for role in roles:
        steps, reward, errors = (sum(c.role_steps.get(role, [0, 0.0, 0])[i] for c in chunks) for i in range(3))
        per_role[role] = {
            "mean_reward": float(reward / steps) if steps else 0.0,
            "parse_error_rate": float(errors / steps) if steps else 0.0,
        }
    wall_time_s = sum(c.wall_time_s for c in chunks)
    lo, hi = wilson_interval(wins, n)
    summary = {
        "episodes": n,
        "success_rate": wins / n,
        "ci95": [lo, hi],
        "avg_turns": _mean([e["turns"] for e in episodes]),
        "tokens_per_episode": _mean([e["tokens"] for e in episodes]),
        "per_role": per_role,
        "wall_time_s": round(float(wall_time_s), 3),
    }
    return episodes, summary


def evaluate(request: EvalRequest, loaded: LoadedPolicies | None = None, progress: bool = False,
             progress_path: str | os.PathLike | None = None,
             transcripts_path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Run one evaluation and return the results object (see the module docstring).

    ``loaded`` lets a caller reuse models already in memory (e.g. the baselines driver); otherwise
    ``request.model`` is loaded. Tasks are played in chunks of ``request.chunk_size``; with
    ``progress_path`` every finished chunk is appended there and chunks already recorded for the same
    settings are not played again (:mod:`mas_trainer.run.eval_progress`). Raises :class:`EvalError`
    for bad requests. With ``transcripts_path`` the episodes this call plays are also written there step by
    step (:mod:`mas_trainer.run.transcripts`).
    """
    _check_numbers(request)
    if request.split not in SPLITS:
        raise EvalError(f"unknown split {request.split!r}; choose one of {', '.join(SPLITS)}")
    # Cheap checks of the env first, before the model is loaded.
    if request.env not in list_envs():
        raise EvalError(f"unknown env {request.env!r}; available: {', '.join(list_envs())}")
    if request.workflow is not None and request.workflow not in WORKFLOWS:
        raise EvalError(f"unknown workflow {request.workflow!r}; choose mas or single")
    if request.method is not None and request.method not in METHOD_NAMES:
        raise EvalError(f"unknown method {request.method!r}; choose one of {', '.join(METHOD_NAMES)}")
    if request.samples > 1 and request.temperature is not None and request.temperature <= 0:
        raise EvalError("--samples K > 1 (best-of-K) needs --temperature > 0: greedy candidates are all identical")
    target: Target | LoadedPolicies = loaded or describe_target(request.model, request.checkpoint_step)
    run_config = target.run_config
    workflow, method = workflow_and_method(request, target)
    try:
        env_kwargs = resolve_env_kwargs(request.env, dict(request.env_kwargs), run_config)
    except ValueError as err:
        raise EvalError(str(err)) from None
    probe, fingerprint = _probe_env(request.env, env_kwargs, workflow, request.split, request.episodes)
    roles = list(probe.possible_agents)
    version = str(getattr(probe.unwrapped, "env_version", "0"))
    probe.close()
    if run_config and run_config.get("env") not in (None, request.env):
        _warn(f"the run was trained on {run_config.get('env')!r}, evaluating on {request.env!r}")

    # Everything that can be wrong with the request is checked before the weights are loaded.
    routing = role_routing(roles, target, request.swap_roles)
    check_method(method, workflow, target.policy_mode)
    loaded_here = loaded is None
    if request.workers > 1 and not loaded_here:
        raise EvalError("workers > 1 loads the model in each worker process; it cannot use models passed in memory")
    if loaded_here:
        loaded = load_policies_for(request.model, request.checkpoint_step, dtype=request.dtype)

    temperature = request.temperature
    if temperature is None:
        temperature = 1.0 if request.samples > 1 else 0.0
    max_new_tokens, role_budgets = answer_budgets(request.env, workflow, env_kwargs, run_config, roles,
                                                  request.max_new_tokens)

    env_block = {"name": request.env, "version": version, "kwargs": env_kwargs, "workflow": workflow,
                 "split": request.split, "eval_set_fingerprint": fingerprint}
    model_block = _model_block(loaded)
    decoding = _decoding_block(temperature, request.samples, max_new_tokens, request.top_p, role_budgets)
    key = outcome_key({"env": env_block, "model": model_block, "decoding": decoding, "seed": request.seed,
                       "routing": routing, "chunk_size": request.chunk_size, "backend": request.backend})
    chunks = read_chunks(progress_path, key)
    plan = chunk_plan(request.episodes, request.chunk_size)
    resumed = sum(stop - start for start, stop in plan if (start, stop) in chunks)
    if progress:
        _warn(f"playing {request.episodes} {request.env} episodes ({workflow}, {method}, "
              f"{'greedy' if temperature == 0 and request.samples == 1 else f'T={temperature} K={request.samples}'})"
              + (f"; {resumed} already played, read from {progress_path}" if resumed else ""))
    todo = [span for span in plan if span not in chunks]
    workers = min(request.workers, len(todo)) if todo else 1
    job = ChunkJob(request.env, env_kwargs, workflow, request.split, int(request.seed), tuple(roles), routing,
                   int(request.samples), float(temperature), float(request.top_p), role_budgets or max_new_tokens,
                   request.backend, key, transcribe=transcripts_path is not None)
    load = functools.partial(load_policies_for, request.model, request.checkpoint_step, dtype=request.dtype)
    if workers > 1 and loaded_here:
        loaded.models.clear()  # each worker loads its own copy; this one was needed only for the weights' digest
    bar = tqdm(total=request.episodes, initial=resumed, desc="episodes", unit="ep") if progress else None
    if bar is not None and workers > 1:
        bar.set_postfix_str(f"{workers} worker processes, {len(todo)} chunks to play", refresh=True)
    try:
        for chunk, lines in play_chunks(job, todo, loaded=loaded, load=load, workers=workers,
                                        threads=max(1, torch.get_num_threads() // workers), bar=bar):
            append_chunk(progress_path, key, chunk)  # first: a transcripts file that cannot be written loses no play
            append_transcripts(transcripts_path, lines)
            chunks[(chunk.start, chunk.stop)] = chunk
    finally:
        if bar is not None:
            bar.close()
    played = [chunks[span] for span in plan]
    episodes, summary = summarize(played, roles)
    return {
        "schema_version": SCHEMA_VERSION,
        "env": env_block,
        "method": method,
        "model": model_block,
        "decoding": decoding,
        "seed": int(request.seed),
        "episodes": episodes,
        "summary": summary,
        "provenance": {
            "package_version": package_version(),
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": request.command[:4000],
            "swap_roles": bool(request.swap_roles),
            "run_dir": str(loaded.run_dir) if loaded.run_dir is not None else None,
            "label": request.label,
            "chunk_size": int(request.chunk_size),
            "resumed_episodes": int(resumed),
            "machines": machines_of(played),
        },
    }


def _model_block(loaded: LoadedPolicies) -> dict[str, Any]:
    first = next(iter(loaded.models.values()))[0]
    return {
        "id": loaded.model_id[:200],
        "params": int(sum(p.numel() for p in first.parameters())),  # of one policy model
        "policy_mode": loaded.policy_mode,
        "policies": {name: {"id": loaded.policy_ids[name][:200], "weights_sha256": weights_fingerprint(model),
                            "dtype": str(next(model.parameters()).dtype).removeprefix("torch.")}
                     for name, (model, _) in sorted(loaded.models.items())},
    }


def answer_budgets(env: str, workflow: str, env_kwargs: dict[str, Any], run_config: dict[str, Any] | None,
                   roles: list[str], requested: int | None = None) -> tuple[int, dict[str, int] | None]:
    """``(max_new_tokens, per-role budgets or None)`` of an evaluation: the requested budget for every role,
    else per-role budgets (:func:`answer_budgets_of_roles`), else the run's or the env's one budget."""
    max_new_tokens = requested or int((run_config or {}).get("max_completion_length") or 0) or (
        default_max_new_tokens(env, workflow, env_kwargs))
    role_budgets = None if requested else answer_budgets_of_roles(env, workflow, env_kwargs, run_config, roles)
    if role_budgets is not None:
        max_new_tokens = max(role_budgets.values())
    return max_new_tokens, role_budgets


def answer_budgets_of_roles(env: str, workflow: str, env_kwargs: dict[str, Any], run_config: dict[str, Any] | None,
                            roles: list[str]) -> dict[str, int] | None:
    """Per-role budgets: the trained run's ``role_max_completion_length``, else the env's defaults, else None."""
    text = (run_config or {}).get("role_max_completion_length")
    if run_config is not None and not text:
        return None  # the run sampled every role with one budget: evaluate it the same way
    budgets = parse_role_map(text, "role_max_completion_length", int) if text else default_role_budgets(
        env, workflow, env_kwargs)
    if not isinstance(budgets, dict) or set(budgets) != set(roles):
        return None
    return {r: int(budgets[r]) for r in roles}


def _decoding_block(temperature: float, samples: int, max_new_tokens: int, top_p: float,
                    role_budgets: dict[str, int] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"temperature": float(temperature), "samples": int(samples),
                             "max_new_tokens": int(max_new_tokens)}
    if role_budgets is not None:
        block["max_new_tokens_per_role"] = dict(role_budgets)
    if temperature > 0 and top_p < 1.0:
        block["top_p"] = float(top_p)
    return block


# --------------------------------------------------------------------------------------------------
# Output


def write_results(results: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write the results JSON atomically (temp file in the same folder, then ``os.replace``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def format_table(results: dict[str, Any]) -> str:
    """A short human-readable summary of one results object."""
    s, env, dec = results["summary"], results["env"], results["decoding"]
    lo, hi = s["ci95"]
    mode = "greedy" if dec["samples"] == 1 and dec["temperature"] == 0 else (
        f"best-of-{dec['samples']} T={dec['temperature']}" if dec["samples"] > 1 else f"sampled T={dec['temperature']}")
    lines = [
        f"{env['name']} ({env['workflow']}, {env['split']}, {json.dumps(env['kwargs'], sort_keys=True)})  "
        f"method={results['method']}  model={results['model']['id']}  {mode}"
        + ("  [roles swapped]" if results["provenance"]["swap_roles"] else ""),
        f"  success     {100 * s['success_rate']:6.1f} %   95% CI [{100 * lo:.1f}, {100 * hi:.1f}]   "
        f"({sum(e['success'] for e in results['episodes'])}/{s['episodes']})",
        f"  avg turns   {s['avg_turns']:6.2f}     tokens/episode {s['tokens_per_episode']:.1f}     "
        f"wall {s['wall_time_s']:.1f} s ({s['wall_time_s'] / s['episodes']:.2f} s/episode)",
        f"  {'role':<10} {'mean reward':>12} {'parse errors':>13}",
    ]
    for role, stats in s["per_role"].items():
        lines.append(f"  {role:<10} {stats['mean_reward']:12.3f} {100 * stats['parse_error_rate']:12.1f}%")
    return "\n".join(lines)


def package_version() -> str:
    try:
        return metadata.version("stronger-mas")
    except metadata.PackageNotFoundError:
        return mas_envs_version


def _check_numbers(request: EvalRequest) -> None:
    if request.episodes < 1:
        raise EvalError(f"--episodes must be >= 1, got {request.episodes}")
    if request.samples < 1:
        raise EvalError(f"--samples must be >= 1, got {request.samples}")
    if request.chunk_size < 1:
        raise EvalError(f"--chunk-size must be >= 1, got {request.chunk_size}")
    if request.seed < 0:
        raise EvalError(f"--seed must be >= 0, got {request.seed}")
    if request.workers < 1:
        raise EvalError(f"--workers must be >= 1, got {request.workers}")
    if request.max_new_tokens is not None and request.max_new_tokens < 1:
        raise EvalError(f"--max-new-tokens must be >= 1, got {request.max_new_tokens}")
    if request.temperature is not None and not (request.temperature >= 0 and math.isfinite(request.temperature)):
        raise EvalError(f"--temperature must be >= 0, got {request.temperature}")
    if not 0 < request.top_p <= 1:
        raise EvalError(f"--top-p must be in (0, 1], got {request.top_p}")


def _warn(message: str) -> None:
    print(f"mas-eval: {message}", file=sys.stderr, flush=True)


def _mean(values: list[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0

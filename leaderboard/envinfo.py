"""What the installed ``mas_envs`` says about an env: is it known, its version, roles and eval-set fingerprint.

Only registered env names are looked up (never a module path from the file), and kwargs are passed as
plain JSON values, so a submission cannot make us import or run anything of its choosing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from leaderboard.problems import Problem, clip


def known_envs() -> list[str]:
    """Env names the installed ``mas_envs`` provides (empty if it is not importable)."""
    try:
        from mas_envs.registry import list_envs
    except ImportError:
        return []
    return list_envs()


def _env_class(name: str) -> type:
    from mas_envs.registry import env_class

    return env_class(name)


def installed_version(name: str) -> str:
    return str(getattr(_env_class(name), "env_version", "0"))


def workflow_roles(name: str, workflow: str) -> tuple[str, ...] | None:
    """Roles acting in ``workflow`` of env ``name``, or None when the env does not offer it."""
    workflows = getattr(_env_class(name), "workflows", {})
    roles = workflows.get(workflow)
    return tuple(roles) if roles is not None else None


FINGERPRINT_TIMEOUT_S = 120.0


class FingerprintError(Exception):
    """The installed env could not compute a fingerprint for the given kwargs."""


@lru_cache(maxsize=64)
def _fingerprint_cached(name: str, split: str, frozen_kwargs: str) -> str:
    # A child process: kwargs such as a huge test_size could make the env run for ever; this bounds it.
    request = json.dumps({"name": name, "split": split, "kwargs": json.loads(frozen_kwargs)})
    env = dict(os.environ)
    spec = importlib.util.find_spec("mas_envs")
    if spec is not None and spec.origin:  # let the child import the same mas_envs, installed or not
        root = str(Path(spec.origin).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    try:
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("fingerprint_worker.py"))],
            input=request, capture_output=True, text=True, timeout=FINGERPRINT_TIMEOUT_S, env=env,
        )
    except subprocess.TimeoutExpired:
        raise FingerprintError(f"computing the eval-set fingerprint took over {FINGERPRINT_TIMEOUT_S:.0f} s") from None
    try:
        reply = json.loads(proc.stdout)
    except ValueError:
        raise FingerprintError(f"the fingerprint worker failed: {proc.stderr.strip()[-300:]}") from None
    if "error" in reply:
        raise FingerprintError(reply["error"])
    return reply["fingerprint"]


def eval_set_fingerprint(name: str, split: str, kwargs: dict[str, Any]) -> str:
    """sha256 of the evaluation set that ``make_env(name, split=split, **kwargs)`` draws from."""
    return _fingerprint_cached(name, split, json.dumps(kwargs, sort_keys=True))


def env_problems(result: dict[str, Any]) -> tuple[list[Problem], tuple[str, ...] | None]:
    """Check the ``env`` block against the installed env; also return the workflow's roles when known."""
    env = result["env"]
    name, kwargs = env["name"], env["kwargs"]
    known = known_envs()
    if name not in known:
        listed = ", ".join(known) if known else "none: mas_envs is not importable"
        return [Problem("env.name", f"unknown env {name!r} (installed envs: {listed})")], None
    roles = workflow_roles(name, env["workflow"])
    if roles is None:
        return [Problem("env.workflow", f"env {name!r} has no workflow {env['workflow']!r}")], None
    problems: list[Problem] = []
    if env["split"] != "test":
        problems.append(Problem("env.split", f"is {env['split']!r}; the leaderboard only ranks results on the 'test' split"))
    if "split" in kwargs:
        problems.append(Problem("env.kwargs.split", "give the split in env.split, not in env.kwargs"))
    if "workflow" in kwargs and kwargs["workflow"] != env["workflow"]:
        problems.append(Problem("env.kwargs.workflow", f"is {kwargs['workflow']!r} but env.workflow is {env['workflow']!r}"))
    version = installed_version(name)
    if env["version"] != version:
        problems.append(
            Problem(
                "env.version",
                f"env version mismatch: the result was made with {name} version {env['version']!r} but the installed "
                f"env is version {version!r}; re-evaluate with the installed version",
            )
        )
    if problems:
        return problems, roles
    try:
        expected = eval_set_fingerprint(name, env["split"], kwargs)
    except FingerprintError as exc:  # the env's own validation of user kwargs: report it, never crash
        return [Problem("env.kwargs", clip(f"the installed {name} env rejects these kwargs: {exc}", 300))], roles
    if env["eval_set_fingerprint"] != expected:
        problems.append(
            Problem(
                "env.eval_set_fingerprint",
                f"fingerprint mismatch: the file says {env['eval_set_fingerprint'][:16]}... but the installed {name} "
                f"env (version {version}) with these kwargs has {expected[:16]}...; the evaluation set differs",
            )
        )
    return problems, roles


SETTINGS_TIMEOUT_S = 120.0


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    spec = importlib.util.find_spec("mas_envs")
    if spec is not None and spec.origin:
        root = str(Path(spec.origin).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def non_default_keys(items: list[tuple[str, str, dict[str, Any]]]) -> list[list[str]]:
    """For each (env name, workflow, kwargs): the kwargs whose value is not what the env does by default.

    Computed by ``settings_worker.py`` in one child process (bounded by ``SETTINGS_TIMEOUT_S``). Where
    the installed env cannot answer (unknown env, import error, timeout), every kwarg except
    ``workflow``/``split`` is reported, so a setting is never hidden.
    """
    every = [sorted(k for k in kwargs if k not in ("workflow", "split")) for _, _, kwargs in items]
    if not items:
        return []
    request = json.dumps({"items": [{"name": n, "workflow": w, "kwargs": k} for n, w, k in items]})
    try:
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("settings_worker.py"))],
            input=request, capture_output=True, text=True, timeout=SETTINGS_TIMEOUT_S, env=_child_env(),
        )
        replies = json.loads(proc.stdout)["results"]
    except (subprocess.TimeoutExpired, ValueError, KeyError, TypeError, OSError):
        return every
    if not isinstance(replies, list) or len(replies) != len(items):
        return every
    out = []
    for reply, fallback in zip(replies, every):
        keys = reply.get("non_default") if isinstance(reply, dict) else None
        out.append(sorted(keys) if isinstance(keys, list) else fallback)
    return out

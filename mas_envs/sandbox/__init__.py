"""Sandbox for untrusted generated code (docs/GRADING.md, "Where code runs", says how graded programs use it).

``run_python(code, stdin, timeout, memory_mb, max_output_bytes)`` runs a program in a fresh
``python3 -I -S`` inside bwrap (no network, no host files, uid 65534, rlimits, a memory+pids cgroup
where available, wall timeout, capped output) and returns a :class:`SandboxResult`; ``run_many`` runs
a batch in parallel; both cache results. ``sandbox_mode()`` says whether the full jail ("bwrap") or
the fallback ("weak") is in use, ``cgroups_available()`` whether runs get their own cgroups.

Modules: ``result`` (the result type), ``isolation`` (jail + rlimits command line, mode probe),
``cgroups`` (per-run cgroups), ``runner`` (one uncached run), ``outcome`` (naming the reason),
``cache`` (LRU + in-flight merging), ``pool`` (``Sandbox``, ``run_python``, ``run_many``).
"""

from mas_envs.sandbox.cgroups import cgroups_available
from mas_envs.sandbox.isolation import Limits, interpreter, sandbox_mode
from mas_envs.sandbox.pool import Job, Sandbox, default_sandbox, run_many, run_python
from mas_envs.sandbox.result import REASONS, SandboxResult

__all__ = [
    "REASONS",
    "Job",
    "Limits",
    "Sandbox",
    "cgroups_available",
    "SandboxResult",
    "default_sandbox",
    "interpreter",
    "run_many",
    "run_python",
    "sandbox_mode",
]

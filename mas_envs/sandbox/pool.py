"""The public face of the sandbox: :class:`Sandbox` (cache + parallel runs) and a shared default."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from mas_envs.sandbox.cache import ResultCache, cache_key
from mas_envs.sandbox.isolation import Limits
from mas_envs.sandbox.result import SandboxResult
from mas_envs.sandbox.runner import run_once


@dataclass(frozen=True)
class Job:
    """One program to run: the arguments of :func:`run_python`."""

    code: str
    stdin: str = ""
    timeout: float = 5.0
    memory_mb: int = 512
    max_output_bytes: int = 1_000_000

    @property
    def limits(self) -> Limits:
        return Limits(self.timeout, self.memory_mb, self.max_output_bytes)


class Sandbox:
    """Runs programs in the sandbox with a result cache; safe to share between threads."""

    def __init__(self, cache_entries: int = 4096, max_workers: int | None = None):
        self.cache = ResultCache(cache_entries)
        self.max_workers = max_workers

    def run(self, job: Job, use_cache: bool = True) -> SandboxResult:
        limits = job.limits
        if not use_cache:
            return run_once(job.code, job.stdin, limits)
        key = cache_key(job.code, job.stdin, limits)
        return self.cache.get_or_run(key, lambda: run_once(job.code, job.stdin, limits))

    def run_many(self, jobs: list[Job], max_workers: int | None = None, use_cache: bool = True) -> list[SandboxResult]:
        """Run ``jobs`` with at most ``max_workers`` at once; results in input order.

        With ``use_cache`` identical jobs run once (a job identical to one still running waits for
        it); without it every job runs.
        """
        if not jobs:
            return []
        workers = max_workers or self.max_workers or os.cpu_count() or 1
        workers = max(1, min(workers, len(jobs)))
        if workers == 1:
            return [self.run(job, use_cache) for job in jobs]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox") as executor:
            return list(executor.map(lambda job: self.run(job, use_cache), jobs))


_default = Sandbox()


def default_sandbox() -> Sandbox:
    """The process-wide :class:`Sandbox` that :func:`run_python` and :func:`run_many` use."""
    return _default


def run_python(
    code: str,
    stdin: str = "",
    timeout: float = 5.0,
    memory_mb: int = 512,
    max_output_bytes: int = 1_000_000,
    use_cache: bool = True,
) -> SandboxResult:
    """Run ``code`` as a fresh, isolated ``python3`` program fed ``stdin``; never raises for bad code.

    ``timeout`` is wall-clock seconds, ``memory_mb`` the address-space limit, ``max_output_bytes``
    the cap on stdout + stderr together. Identical calls are answered from the cache unless
    ``use_cache`` is false.
    """
    job = Job(code, stdin, timeout, memory_mb, max_output_bytes)
    return _default.run(job, use_cache)


def run_many(jobs: list[Job], max_workers: int | None = None, use_cache: bool = True) -> list[SandboxResult]:
    """:meth:`Sandbox.run_many` on the default sandbox."""
    return _default.run_many(jobs, max_workers, use_cache)

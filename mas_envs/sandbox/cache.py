"""A bounded, thread-safe LRU cache of sandbox results that also merges identical runs in flight.

RL rollouts often produce K identical candidates; keyed by a hash of (code, stdin, limits), each
distinct program runs once, and a caller asking for a program that another thread is already running
waits for that run instead of starting a second one.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future

from mas_envs.sandbox.isolation import Limits
from mas_envs.sandbox.result import SandboxResult


def cache_key(code: str, stdin: str, limits: Limits) -> str:
    """sha256 over everything that can change a run's result."""
    payload = json.dumps(
        [code, stdin, limits.timeout, limits.memory_mb, limits.max_output_bytes], ensure_ascii=False
    )
    return hashlib.sha256(payload.encode("utf-8", errors="surrogatepass")).hexdigest()


class ResultCache:
    """LRU map from :func:`cache_key` to :class:`SandboxResult`, at most ``max_entries`` long."""

    def __init__(self, max_entries: int = 4096):
        self.max_entries = max_entries
        self._done: OrderedDict[str, SandboxResult] = OrderedDict()
        self._running: dict[str, Future] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._done)

    def clear(self) -> None:
        with self._lock:
            self._done.clear()
            self.hits = self.misses = 0

    def get_or_run(self, key: str, run: Callable[[], SandboxResult]) -> SandboxResult:
        """The cached result for ``key``, else ``run()``'s (run once even if asked concurrently)."""
        with self._lock:
            if key in self._done:
                self._done.move_to_end(key)
                self.hits += 1
                return self._done[key]
            pending = self._running.get(key)
            if pending is None:
                self.misses += 1
                pending = self._running[key] = Future()
                owner = True
            else:
                self.hits += 1
                owner = False
        if not owner:
            return pending.result()
        try:
            result = run()
        except BaseException as exc:
            with self._lock:
                del self._running[key]
            pending.set_exception(exc)
            raise
        with self._lock:
            del self._running[key]
            self._done[key] = result
            while len(self._done) > self.max_entries:
                self._done.popitem(last=False)
        pending.set_result(result)
        return result

"""What one sandboxed run produced, and how its outcome is named."""

from __future__ import annotations

from dataclasses import dataclass

# Every value ``SandboxResult.reason`` can take.
REASONS = ("ok", "timeout", "memory", "output-limit", "crash", "blocked")


@dataclass(frozen=True)
class SandboxResult:
    """Outcome of running untrusted code once.

    ``exit_code`` is the program's exit status, negative for "killed by signal N" (as in
    :mod:`subprocess`), ``None`` when the sandbox killed it (timeout, output limit).
    ``reason`` is one of :data:`REASONS`:

    * ``ok``           -- exited with status 0
    * ``timeout``      -- ran past the wall-clock or CPU limit
    * ``memory``       -- hit the address-space limit (``MemoryError``)
    * ``output-limit`` -- printed more than the byte cap (stdout and stderr together)
    * ``crash``        -- nonzero exit or uncaught exception
    * ``blocked``      -- the sandbox refused an operation (read-only or missing host path, no
      network, file-size / process-count limit), as far as it can be told from the exception
    """

    stdout: str
    stderr: str
    exit_code: int | None
    wall_time: float
    reason: str

    @property
    def ok(self) -> bool:
        return self.reason == "ok"

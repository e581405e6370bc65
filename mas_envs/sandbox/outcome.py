"""Naming a finished run's outcome (the ``reason`` of a :class:`SandboxResult`)."""

from __future__ import annotations

import errno
import re
import signal

# errnos that mean "the sandbox said no" rather than "the program is wrong".
_REFUSED_ERRNOS = {
    errno.EPERM, errno.EACCES, errno.EROFS,  # host paths are read-only or absent
    errno.EFBIG, errno.ENOSPC, errno.EMFILE,  # file-size, tmpfs-size, open-files limits
    errno.EAGAIN,  # process-count limit (fork/clone refused)
    errno.ENETUNREACH, errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL,  # no network
}
# PermissionError: host path / signal target refused; BlockingIOError: fork refused (NPROC);
# gaierror: no DNS; ConnectionRefusedError: the jail's own loopback has nothing listening.
_REFUSED_EXCEPTIONS = {"PermissionError", "BlockingIOError", "gaierror", "ConnectionRefusedError"}
# Top-level directories visible inside the bwrap jail; a missing absolute path elsewhere (/work,
# /root, /home, /etc ...) is a host path the jail hides.
_JAIL_TOPS = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "proc", "dev", "tmp", "sandbox"}
_MISSING_PATH = re.compile(r"\[Errno 2\] No such file or directory: '/(?P<top>[^/']*)")
# Last line of a Python traceback: "ExceptionName: message" (possibly dotted, possibly no message).
_EXCEPTION_LINE = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)(?::\s*(?P<message>.*))?$")
_ERRNO = re.compile(r"\[Errno (?P<errno>-?\d+)\]")


def final_exception(stderr: str) -> tuple[str, str] | None:
    """(name, message) of the uncaught exception that ended the program, if stderr shows one."""
    lines = [line for line in stderr.rstrip().splitlines() if line.strip()]
    if not lines or not any(line.startswith("Traceback (most recent call last)") for line in lines):
        return None
    match = _EXCEPTION_LINE.match(lines[-1].strip())
    if match is None:
        return None
    return match["name"], match["message"] or ""


def classify(exit_code: int | None, stderr: str, *, timed_out: bool, output_capped: bool) -> str:
    """The ``reason`` for a run that ended with ``exit_code`` (negative = killed by that signal)."""
    if timed_out:
        return "timeout"
    if output_capped:
        return "output-limit"
    if exit_code == 0:
        return "ok"
    if exit_code == -signal.SIGXCPU:
        return "timeout"  # RLIMIT_CPU
    if exit_code == -signal.SIGXFSZ:
        return "blocked"  # RLIMIT_FSIZE, for programs that do not ignore the signal
    exception = final_exception(stderr)
    if exception is not None:
        name, message = exception
        short = name.rsplit(".", 1)[-1]
        if short == "MemoryError":
            return "memory"
        if name in _REFUSED_EXCEPTIONS or short in _REFUSED_EXCEPTIONS:
            return "blocked"
        missing = _MISSING_PATH.search(message)
        if short == "FileNotFoundError" and missing is not None and missing["top"] not in _JAIL_TOPS:
            return "blocked"
        code = _ERRNO.search(message)
        if code is not None and int(code["errno"]) in _REFUSED_ERRNOS:
            return "blocked"
    elif "MemoryError" in stderr[-2000:] or "Cannot allocate memory" in stderr[-2000:]:
        return "memory"  # e.g. the interpreter could not even start under RLIMIT_AS
    return "crash"

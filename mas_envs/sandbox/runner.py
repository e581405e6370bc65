"""Run one program in the sandbox, uncached: spawn, feed stdin, read capped output, enforce the wall
clock, kill everything it started, name the outcome."""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import time

from mas_envs.sandbox.cgroups import run_cgroups
from mas_envs.sandbox.isolation import (
    NOBODY,
    PROCESSES,
    SANDBOX_SCRIPT,
    SHM_BYTES,
    TMPFS_BYTES,
    Limits,
    build_command,
    drop_privileges,
    interpreter,
    popen_kwargs,
    sandbox_mode,
)
from mas_envs.sandbox.outcome import classify
from mas_envs.sandbox.result import SandboxResult

_READ_CHUNK = 65536
# Weak mode only: once the program has exited, how long to keep reading pipes that a leftover
# background process may hold open.
_EXIT_GRACE = 0.2
_POLL = 0.1
# How long bwrap may take to tear the jail down after its init was killed.
_JAIL_TEARDOWN = 5.0
_CHILD_PID = re.compile(rb'"child-pid"\s*:\s*(\d+)')  # in bwrap's JSON status report


def _memfd(name: str, data: bytes) -> int:
    """An anonymous in-memory file holding ``data``, positioned at its start."""
    fd = os.memfd_create(name)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _has_exited(pid: int) -> bool:
    """Whether ``pid`` has exited, without reaping it (so its process group id stays reserved)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None and info.si_pid == pid


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_capped(proc: subprocess.Popen, deadline: float, cap: int) -> tuple[bytes, bytes, bool, bool]:
    """Read stdout/stderr until both close, the deadline passes or more than ``cap`` bytes arrive.

    Reads incrementally with a byte budget, so an output flood costs at most ``cap`` bytes of memory.
    Returns (stdout, stderr, timed_out, output_capped).
    """
    buffers = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    total = 0
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        for fd in buffers:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            now = time.monotonic()
            if now >= deadline:
                return bytes(buffers[proc.stdout.fileno()]), bytes(buffers[proc.stderr.fileno()]), True, False
            if exited_at is None and _has_exited(proc.pid):
                exited_at = now
            if exited_at is not None and now - exited_at > _EXIT_GRACE:
                break  # the program is gone; whoever still holds the pipes is killed below
            for key, _ in selector.select(min(deadline - now, _POLL)):
                try:
                    data = os.read(key.fd, _READ_CHUNK)
                except BlockingIOError:
                    continue
                if not data:
                    selector.unregister(key.fd)
                    continue
                room = cap - total
                buffers[key.fd] += data[: max(room, 0)]
                total += len(data)
                if total > cap:
                    return bytes(buffers[proc.stdout.fileno()]), bytes(buffers[proc.stderr.fileno()]), False, True
    return bytes(buffers[proc.stdout.fileno()]), bytes(buffers[proc.stderr.fileno()]), False, False


def _jail_init_pid(status_fd: int, wait: float = 1.0) -> int | None:
    """Host pid of the jail's init, from bwrap's ``--json-status-fd`` report (None if it never came)."""
    text = b""
    end = time.monotonic() + wait
    with selectors.DefaultSelector() as selector:
        selector.register(status_fd, selectors.EVENT_READ)
        while _CHILD_PID.search(text) is None and time.monotonic() < end:
            if not selector.select(end - time.monotonic()):
                break
            chunk = os.read(status_fd, 4096)
            if not chunk:
                break
            text += chunk
    found = _CHILD_PID.search(text)
    return int(found[1]) if found else None


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as file:
            # "pid (comm) state ppid ...": comm may contain spaces and parentheses, so split after it.
            return int(file.read().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _await_jail_end(init_pid: int) -> None:
    """Wait until the jail's init has finished exiting (gone, or a zombie awaiting its reaper).

    The kernel kills the rest of the jail's pid namespace while its init exits, before the init
    turns into a zombie; bwrap, though, may report the program's exit and quit before that, so
    without this wait a daemon could outlive ``run_python`` by a few milliseconds.
    """
    end = time.monotonic() + _JAIL_TEARDOWN
    while time.monotonic() < end:
        try:
            with open(f"/proc/{init_pid}/stat") as file:
                head, _, rest = file.read().rpartition(")")
        except OSError:
            return  # gone (and reaped)
        if not head.endswith("(bwrap") or rest.split()[0] in ("Z", "X"):
            return  # finished exiting, or the pid already belongs to someone else
        time.sleep(0.005)


def _stop(proc: subprocess.Popen, status_fd: int | None, kill: bool) -> None:
    """Make sure nothing the run started is still alive, then reap ``proc``.

    In bwrap mode we SIGKILL the jail's init: the kernel then kills every process in the jail's pid
    namespace. Killing bwrap itself instead would leave that teardown running asynchronously after we
    return, so we then also wait for the init to finish exiting. Our child bwrap has not been reaped
    when we kill, so the init's pid cannot have been reused by then. The process-group kill is the
    backstop, and the whole mechanism in weak mode (where only the run's cgroup, if any, catches a
    ``setsid`` daemon).
    """
    init_pid = _jail_init_pid(status_fd) if status_fd is not None else None
    if kill and init_pid is not None and _parent_of(init_pid) == proc.pid:  # never kill a stranger
        try:
            os.kill(init_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=_JAIL_TEARDOWN)
        except subprocess.TimeoutExpired:
            pass
    _kill_group(proc.pid)
    proc.wait()
    if init_pid is not None:
        _await_jail_end(init_pid)


def _normalise_exit(mode: str, returncode: int) -> int:
    """Exit status with "killed by signal N" as -N in both modes (bwrap reports it as 128 + N)."""
    if mode == "bwrap" and 128 < returncode < 128 + signal.NSIG:
        return -(returncode - 128)
    return returncode


def _cgroup_bytes(limits: Limits) -> int:
    """Memory for the whole run: the program's limit, the jail's RAM-backed tmpfs, some slack for
    bwrap and the interpreter. One process hits its ``RLIMIT_AS`` first (a clean ``MemoryError``);
    the group bounds many processes together."""
    return (limits.memory_mb << 20) + TMPFS_BYTES + SHM_BYTES + (64 << 20)


def run_once(code: str, stdin: str = "", limits: Limits = Limits()) -> SandboxResult:
    """Run ``code`` as a fresh sandboxed Python program (no caching). Never raises for bad code.

    The wall-clock limit counts from the launch, so it includes the jail's start-up (tens of ms).
    """
    mode = sandbox_mode()
    python = interpreter()
    script_fd = _memfd("sandbox-main", code.encode("utf-8", errors="surrogatepass"))
    stdin_fd = _memfd("sandbox-stdin", stdin.encode("utf-8", errors="surrogatepass"))
    status_read, status_write = os.pipe() if mode == "bwrap" else (None, None)
    # bwrap copies the script into the jail; the weak mode reads it through the inherited fd.
    script = SANDBOX_SCRIPT if mode == "bwrap" else f"/dev/fd/{script_fd}"
    cmd = build_command(mode, python, limits, script, script_fd, status_write)
    groups = run_cgroups(_cgroup_bytes(limits), PROCESSES + 8, NOBODY if drop_privileges() else None)
    if groups is not None:
        cmd = groups.wrap(cmd)
    passed = (script_fd,) if status_write is None else (script_fd, status_write)
    start = time.monotonic()
    deadline = start + limits.timeout
    try:
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=stdin_fd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=passed,
                **popen_kwargs(),
            )
        except OSError as exc:
            if status_read is not None:
                os.close(status_read)
            if groups is not None:
                groups.close()
            return SandboxResult("", f"sandbox failed to start: {exc}", None, 0.0, "crash")
    finally:
        for fd in (stdin_fd, script_fd, status_write):
            if fd is not None:
                os.close(fd)
    oom = False
    try:
        out, err, timed_out, capped = _read_capped(proc, deadline, limits.max_output_bytes)
        if not (timed_out or capped):
            try:  # the pipes are closed, but the program may still be running without them
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        _stop(proc, status_read, kill=proc.poll() is None)
        proc.stdout.close()
        proc.stderr.close()
        if status_read is not None:
            os.close(status_read)  # only now: bwrap writes its exit status there and must not get SIGPIPE
        if groups is not None:
            oom = groups.hit_memory_limit()
            groups.close()  # also kills anything left in the groups (weak-mode daemons)
    wall = time.monotonic() - start
    stderr = err.decode("utf-8", errors="replace")
    exit_code = None if (timed_out or capped) else _normalise_exit(mode, proc.returncode)
    reason = classify(exit_code, stderr, timed_out=timed_out, output_capped=capped)
    if oom and reason in ("crash", "timeout"):
        reason = "memory"  # the run's memory cgroup was full: that is what killed or stalled it
    return SandboxResult(out.decode("utf-8", errors="replace"), stderr, exit_code, wall, reason)

"""Optional per-run control groups: one memory and one pids cgroup (cgroup v1) per sandboxed run.

rlimits are per process: ``RLIMIT_AS`` x ``RLIMIT_NPROC`` would let a program that forks 64 children
hold 64 x ``memory_mb`` of RAM, and memory that is written but never mapped (tmpfs, memfd, SysV shm)
escapes ``RLIMIT_AS`` altogether. A memory cgroup bounds the whole run, whatever it is made of, and a
pids cgroup bounds its process count in the weak mode too. It also lets us find and kill every
process of a run, even a ``setsid`` daemon in the weak mode (it cannot leave the group: the other
groups' ``cgroup.procs`` belong to root).

Used when this process sits in writable cgroup v1 ``memory`` and ``pids`` hierarchies (as on the
project's machines, as root). Elsewhere (cgroup v2 only, no permission) runs go without, logged once:
the bwrap jail and rlimits still apply. ``MAS_SANDBOX_CGROUPS=0`` turns it off.

The sandboxed process joins its groups itself, before anything else runs, through a ``/bin/sh``
prefix that writes its own pid into each group's ``cgroup.procs`` (made writable for uid 65534) and
then ``exec``s the real command; every process it starts inherits the groups.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import uuid

log = logging.getLogger(__name__)

_JOIN_SCRIPT = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
_PREFIX = "mas-sandbox-"


def _v1_parent(controller: str) -> str | None:
    """Directory of this process's cgroup in the v1 hierarchy that has ``controller``, if mounted."""
    try:
        with open("/proc/self/cgroup") as file:
            memberships = [line.rstrip("\n").split(":", 2) for line in file]
        with open("/proc/self/mountinfo") as file:
            mounts = [line.split() for line in file]
    except OSError:
        return None
    own = next((path for _, names, path in memberships if controller in names.split(",")), None)
    if own is None:
        return None
    for fields in mounts:
        dash = fields.index("-")
        fstype, options = fields[dash + 1], fields[-1].split(",")
        if fstype == "cgroup" and controller in options:
            root, mount_point = fields[3], fields[4]
            relative = own[len(root):] if own.startswith(root) else own
            path = os.path.join(mount_point, relative.lstrip("/"))
            return path if os.path.isdir(path) else None
    return None


class RunCgroups:
    """The memory + pids cgroups of one run. Use as a context manager; ``wrap`` the command."""

    def __init__(self, memory_parent: str, pids_parent: str, memory_bytes: int, max_pids: int, owner: int | None):
        name = _PREFIX + uuid.uuid4().hex
        self.memory_dir = os.path.join(memory_parent, name)
        self.pids_dir = os.path.join(pids_parent, name)
        self._made: list[str] = []
        try:
            for directory in (self.memory_dir, self.pids_dir):
                os.mkdir(directory)
                self._made.append(directory)
                if owner is not None:  # the sandboxed process (uid 65534) adds itself
                    os.chown(os.path.join(directory, "cgroup.procs"), owner, owner)
            _write(os.path.join(self.memory_dir, "memory.limit_in_bytes"), memory_bytes)
            _write(os.path.join(self.pids_dir, "pids.max"), max_pids)
        except OSError:
            self.close()
            raise

    def wrap(self, command: list[str]) -> list[str]:
        """``command`` prefixed so that it runs inside this run's groups."""
        procs = [os.path.join(d, "cgroup.procs") for d in (self.memory_dir, self.pids_dir)]
        return ["/bin/sh", "-c", _JOIN_SCRIPT, "sh", *procs, "--", *command]

    def hit_memory_limit(self) -> bool:
        """Whether the run reached its memory limit (the kernel then reclaims, stalls or OOM-kills)."""
        try:
            with open(os.path.join(self.memory_dir, "memory.failcnt")) as file:
                if int(file.read()) > 0:
                    return True
            with open(os.path.join(self.memory_dir, "memory.oom_control")) as file:
                for line in file:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and int(value) > 0:
                        return True
        except (OSError, ValueError):
            pass
        return False

    def kill_all(self, wait: float = 2.0) -> bool:
        """SIGKILL every process still in the run's groups; True once they are empty."""
        end = time.monotonic() + wait
        while True:
            pids = _members(self.memory_dir) | _members(self.pids_dir)
            if not pids:
                return True
            if time.monotonic() > end:
                return False
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.01)

    def close(self) -> None:
        """Kill leftovers and remove the groups."""
        if self._made and not self.kill_all():
            log.warning("sandbox cgroup %s still has processes; leaving it", self._made)
            return
        for directory in reversed(self._made):
            for _ in range(50):  # members that just died may take a moment to leave
                try:
                    os.rmdir(directory)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
            else:
                log.warning("could not remove sandbox cgroup %s", directory)
        self._made = []

    def __enter__(self) -> RunCgroups:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _write(path: str, value: int) -> None:
    with open(path, "w") as file:
        file.write(str(value))


def _members(directory: str) -> set[int]:
    try:
        with open(os.path.join(directory, "cgroup.procs")) as file:
            return {int(line) for line in file if line.strip()}
    except OSError:
        return set()


_parents: tuple[str, str] | None | bool = False  # False: not probed yet
_lock = threading.Lock()


def _probe() -> tuple[str, str] | None:
    if os.environ.get("MAS_SANDBOX_CGROUPS", "1") == "0":
        return None
    memory, pids = _v1_parent("memory"), _v1_parent("pids")
    if memory is None or pids is None:
        log.info("sandbox: no cgroup v1 memory+pids hierarchy; runs are bounded by rlimits only")
        return None
    try:
        RunCgroups(memory, pids, 1 << 30, 8, None).close()
    except OSError as exc:
        log.info("sandbox: cgroups not usable (%s); runs are bounded by rlimits only", exc)
        return None
    return memory, pids


def run_cgroups(memory_bytes: int, max_pids: int, owner: int | None) -> RunCgroups | None:
    """Fresh groups for one run, or None where cgroups are unavailable (probed once)."""
    global _parents
    with _lock:
        if _parents is False:
            _parents = _probe()
        parents = _parents
    if parents is None:
        return None
    try:
        return RunCgroups(parents[0], parents[1], memory_bytes, max_pids, owner)
    except OSError as exc:
        log.warning("sandbox: could not create a run cgroup (%s); running without", exc)
        return None


def cgroups_available() -> bool:
    """Whether runs get their own memory and pids cgroups."""
    global _parents
    with _lock:
        if _parents is False:
            _parents = _probe()
        return _parents is not None

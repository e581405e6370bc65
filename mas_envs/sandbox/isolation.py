"""How a sandboxed process is launched: the interpreter, the bwrap jail, the rlimits, the uid.

Two modes, chosen once per process by a probe (:func:`sandbox_mode`):

* ``bwrap`` -- ``bwrap`` with every namespace unshared (so no network: only the jail's own
  loopback; own pid namespace: when the program ends every process it started dies with it), no
  nested user namespaces, all capabilities dropped, uid/gid 65534 inside, a read-only root with a
  read-only ``/usr`` and nothing else from the host except a fresh ``/proc``, a minimal read-only
  ``/dev`` and small size-capped tmpfs ``/tmp`` and ``/dev/shm``. No ``/work``, ``/root``, ``/etc``.
* ``weak``  -- a plain subprocess in its own session with the same rlimits (and uid 65534 when we
  are root). Used only when bwrap is missing or broken, with a loud warning: the program can then
  read what uid 65534 can read, use the network, and a ``setsid`` daemon can outlive the run.

Interpreter: ``/usr/bin/python3`` (the system Python) by default, overridable with the
``MAS_SANDBOX_PYTHON`` environment variable. Not ``sys.executable``: the project's venv Python is a
symlink into ``/root/.pyenv``, and ``/root`` is mode 0700, so neither uid 65534 nor a bwrap started
as uid 65534 can reach it. The sandbox runs ``python3 -I -S -X utf8``: isolated mode (no env vars, no
user site, no script dir on ``sys.path``), no ``site`` (no site-packages: only the standard library),
UTF-8 I/O whatever the locale.

Limits are set *inside* the jail by util-linux ``prlimit`` (or, where that is missing, a tiny Python
bootstrap), which then ``exec``s the program. Setting
``RLIMIT_NPROC`` there (after bwrap created its user namespace) makes it count only this sandbox's
processes, so parallel sandboxes do not share one budget. bwrap itself is started as uid 65534 when
we are root: the kernel ignores ``RLIMIT_NPROC`` for real uid 0, even inside a user namespace.
rlimits are per process; :mod:`mas_envs.sandbox.cgroups` bounds a run's processes together.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import subprocess
import threading
import warnings
from dataclasses import dataclass

log = logging.getLogger(__name__)

NOBODY = 65534
SANDBOX_SCRIPT = "/sandbox/main.py"  # where the program's source appears inside the bwrap jail

TMPFS_BYTES = 64 * 1024 * 1024  # the jail's writable /tmp (RAM-backed, so kept small)
SHM_BYTES = 16 * 1024 * 1024  # the jail's /dev/shm (likewise)
FILE_BYTES = 16 * 1024 * 1024  # RLIMIT_FSIZE: largest file the program may write
OPEN_FILES = 64  # RLIMIT_NOFILE
PROCESSES = 64  # RLIMIT_NPROC (per sandbox in bwrap mode)

PYTHON_FLAGS = ("-I", "-S", "-X", "utf8")
PRLIMIT = "/usr/bin/prlimit"  # util-linux; inside the jail it is visible through the /usr bind

# Runs first inside the jail: set hard limits (unprivileged code cannot raise them again), then
# replace itself with the real program so the program gets a pristine interpreter.
# argv: cpu_s as_bytes fsize_bytes nofile nproc(-1 = leave) python python-args...
_BOOTSTRAP = (
    "import os,sys,resource as r\n"
    "c,a,f,n,p=map(int,sys.argv[1:6])\n"
    "L=[(r.RLIMIT_CPU,c),(r.RLIMIT_AS,a),(r.RLIMIT_FSIZE,f),(r.RLIMIT_NOFILE,n),(r.RLIMIT_CORE,0)]\n"
    "if p>=0:L.append((r.RLIMIT_NPROC,p))\n"
    "for k,v in L:r.setrlimit(k,(v,v))\n"
    "os.execv(sys.argv[6],sys.argv[6:])\n"
)

# Environment of the sandboxed process (python -I ignores PYTHON* anyway).
_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


def interpreter() -> str:
    """Path of the Python the sandbox runs (see module docstring)."""
    override = os.environ.get("MAS_SANDBOX_PYTHON")
    if override:
        return override
    if os.path.exists("/usr/bin/python3"):
        return "/usr/bin/python3"
    found = shutil.which("python3")
    return os.path.realpath(found) if found else "/usr/bin/python3"


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run."""

    timeout: float = 5.0
    memory_mb: int = 512
    max_output_bytes: int = 1_000_000

    @property
    def cpu_seconds(self) -> int:
        # A little above the wall limit: the wall timer is the precise one, this is the backstop.
        return max(1, math.ceil(self.timeout)) + 1


def drop_privileges() -> bool:
    """Whether to start the sandbox as uid/gid 65534 (only possible, and only needed, as root)."""
    return os.geteuid() == 0


def _bwrap_prefix(python: str, script_fd: int, status_fd: int | None) -> list[str]:
    """The bwrap command line up to (not including) the interpreter."""
    args = ["bwrap"]
    if status_fd is not None:  # bwrap reports the jail's init pid there (see runner._stop)
        args += ["--json-status-fd", str(status_fd)]
    args += [
        "--unshare-all",
        "--unshare-user",  # explicit (not "try"): --disable-userns needs it
        "--disable-userns",  # no nested user namespaces: they would hand the program fresh caps
        "--cap-drop", "ALL",
        "--uid", str(NOBODY), "--gid", str(NOBODY),
        "--die-with-parent",
        "--new-session",
        "--hostname", "sandbox",
        "--ro-bind", "/usr", "/usr",
    ]
    # Merged-/usr systems keep /bin, /lib... as symlinks into /usr; mirror whichever exist.
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = "/" + top
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    python_dir = os.path.dirname(os.path.realpath(python))
    if not python_dir.startswith("/usr/"):  # an interpreter outside /usr needs its prefix too
        prefix = os.path.dirname(python_dir)
        args += ["--ro-bind", prefix, prefix]
    args += [
        "--proc", "/proc",
        "--dev", "/dev",
        # bwrap's /dev and /dev/shm are unbounded tmpfs: cap /dev/shm, make the rest of /dev read-only
        # (device nodes such as /dev/null stay writable), or a program could fill the host's RAM.
        "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm",
        "--remount-ro", "/dev",
        "--size", str(TMPFS_BYTES), "--tmpfs", "/tmp",
        "--perms", "0444", "--ro-bind-data", str(script_fd), SANDBOX_SCRIPT,
        "--remount-ro", "/",
        "--chdir", "/tmp",
    ]
    return args


def _limited(python: str, limits: Limits, nproc: int) -> list[str]:
    """argv prefix that applies the rlimits and then runs ``python``: util-linux ``prlimit`` (a
    small C program, so cheap) where present, else a Python bootstrap (one more interpreter start)."""
    values = [
        ("cpu", limits.cpu_seconds),
        ("as", limits.memory_mb * 1024 * 1024),
        ("fsize", FILE_BYTES),
        ("nofile", OPEN_FILES),
        ("core", 0),
    ]
    if os.path.exists(PRLIMIT):
        if nproc >= 0:
            values.append(("nproc", nproc))
        return [PRLIMIT, *(f"--{name}={value}" for name, value in values), "--", python]
    return [python, *PYTHON_FLAGS, "-c", _BOOTSTRAP, *(str(value) for _, value in values[:4]), str(nproc), python]


def build_command(
    mode: str, python: str, limits: Limits, script: str, script_fd: int | None, status_fd: int | None = None
) -> list[str]:
    """Full argv: ``[bwrap ...] <limiter> python -I -S -X utf8 <script>``.

    ``script`` is the program's path as the sandboxed process sees it; in bwrap mode bwrap copies
    it from ``script_fd`` to :data:`SANDBOX_SCRIPT`.
    """
    # Without a private user namespace RLIMIT_NPROC would count every process of our uid on the
    # host; only set it where it counts this sandbox alone (bwrap) or the dedicated uid 65534.
    nproc = PROCESSES if (mode == "bwrap" or drop_privileges()) else -1
    if mode == "weak" and drop_privileges():
        nproc = PROCESSES * 4  # shared by all weak sandboxes running at once as uid 65534
    inner = _limited(python, limits, nproc) + [*PYTHON_FLAGS, script]
    if mode == "bwrap":
        assert script_fd is not None
        return _bwrap_prefix(python, script_fd, status_fd) + inner
    return inner


def popen_kwargs() -> dict:
    """Keyword arguments for :class:`subprocess.Popen` shared by both modes."""
    # cwd: the weak mode would otherwise start the program in the trainer's working directory.
    kwargs: dict = {"env": dict(_ENV), "start_new_session": True, "close_fds": True, "cwd": "/tmp"}
    if drop_privileges():
        kwargs.update(user=NOBODY, group=NOBODY, extra_groups=[])
    return kwargs


_mode: str | None = None
_mode_lock = threading.Lock()


def _probe_bwrap(python: str) -> str | None:
    """Run a trivial program through the full bwrap path; return None if it works, else why not."""
    if shutil.which("bwrap") is None:
        return "bwrap is not installed"
    fd = os.memfd_create("sandbox-probe")
    try:
        os.write(fd, b"import sys; print(sys.stdin.read() + 'ok')\n")
        os.lseek(fd, 0, os.SEEK_SET)
        cmd = build_command("bwrap", python, Limits(timeout=10), SANDBOX_SCRIPT, fd)
        try:
            proc = subprocess.run(
                cmd, input=b"probe-", capture_output=True, timeout=30, pass_fds=(fd,), **popen_kwargs()
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return f"bwrap failed to start: {exc}"
        if proc.returncode != 0 or proc.stdout.strip() != b"probe-ok":
            return f"bwrap probe exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-300:]}"
        return None
    finally:
        os.close(fd)


def sandbox_mode() -> str:
    """``"bwrap"`` or ``"weak"``; probed once per process (``MAS_SANDBOX_MODE=weak`` forces weak)."""
    global _mode
    with _mode_lock:
        if _mode is None:
            why = "MAS_SANDBOX_MODE=weak" if os.environ.get("MAS_SANDBOX_MODE") == "weak" else _probe_bwrap(interpreter())
            if why is None:
                _mode = "bwrap"
            else:
                _mode = "weak"
                msg = (
                    f"SANDBOX IS WEAK ({why}): generated code runs as a plain subprocess with rlimits "
                    "only -- it can read host files its uid can read, use the network, and leave "
                    "daemons behind. Install bubblewrap (apt-get install bubblewrap) for isolation."
                )
                log.warning(msg)
                warnings.warn(msg, RuntimeWarning, stacklevel=2)
        return _mode

"""The sandbox for generated code: normal runs, the cache and pool, and attacks that must be contained.

Every test runs real sandboxed processes. Attack tests check both the reported ``reason`` and that
the host is untouched afterwards (files, listener, processes, this test process itself).
"""

from __future__ import annotations

import ast
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from mas_envs.sandbox import REASONS, Job, Sandbox, SandboxResult, run_many, run_python, sandbox_mode
from mas_envs.sandbox.cgroups import cgroups_available
from mas_envs.sandbox.isolation import PROCESSES, drop_privileges
from mas_envs.sandbox.outcome import classify

REPO = Path(__file__).resolve().parents[1]
needs_bwrap = pytest.mark.skipif(sandbox_mode() != "bwrap", reason="only the bwrap jail contains this")


def run(code: str, stdin: str = "", timeout: float = 2.0, **kwargs) -> SandboxResult:
    """An uncached run, so every test really executes its program."""
    return run_python(code, stdin=stdin, timeout=timeout, use_cache=False, **kwargs)


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


def run_watching(code: str, marker: str, timeout: float) -> tuple[SandboxResult, int]:
    """Run ``code`` while counting host processes tagged ``marker``; (result, most seen at once)."""
    results: list[SandboxResult] = []
    worker = threading.Thread(target=lambda: results.append(run(code, timeout=timeout)))
    worker.start()
    most = 0
    while worker.is_alive():
        most = max(most, len(processes_with(marker)))
        time.sleep(0.02)
    worker.join()
    return results[0], most


# ---------------------------------------------------------------------------------- normal runs
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_mode_is_bwrap_where_bwrap_is_installed():
    # A fall back to the weak mode while bwrap is installed would be a regression.
    assert sandbox_mode() == "bwrap"


def test_stdin_is_echoed():
    result = run("import sys\nprint(sys.stdin.read()[::-1], end='')", stdin="hello\nworld")
    assert result.ok and result.reason == "ok" and result.exit_code == 0
    assert result.stdout == "dlrow\nolleh"
    assert result.stderr == ""
    assert 0 < result.wall_time < 2.0


def test_exit_codes():
    assert run("import sys; sys.exit(0)").reason == "ok"
    failed = run("import sys; sys.exit(3)")
    assert (failed.reason, failed.exit_code, failed.ok) == ("crash", 3, False)
    raised = run("raise ValueError('bad value')")
    assert raised.reason == "crash" and raised.exit_code == 1
    assert raised.stderr.strip().splitlines()[-1] == "ValueError: bad value"
    killed = run("import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert killed.reason == "crash" and killed.exit_code == -15


def test_unicode_and_stderr_are_captured():
    result = run("import sys\nprint('héllo ∑ 🐍')\nprint('wärning', file=sys.stderr)", stdin="")
    assert result.ok
    assert result.stdout == "héllo ∑ 🐍\n"
    assert result.stderr == "wärning\n"


def test_only_the_standard_library_is_importable():
    result = run("import json, re, itertools, collections, math\nimport numpy")
    assert result.reason == "crash"
    assert "ModuleNotFoundError" in result.stderr


def test_runs_as_nobody_in_an_empty_jail():
    result = run("import os\nprint(os.getuid(), os.getgid())\nprint(sorted(os.listdir('/')))")
    assert result.ok
    ids, listing = result.stdout.splitlines()
    assert ids == "65534 65534"
    if sandbox_mode() == "bwrap":
        for hidden in ("work", "root", "home", "etc"):
            assert f"'{hidden}'" not in listing


def test_host_environment_does_not_leak(monkeypatch):
    monkeypatch.setenv("MAS_TEST_SECRET", "hunter2")  # what a token in the trainer's env would be
    code = "import os\nprint(sorted(os.environ))\nprint(open('/proc/1/environ').read())"
    result = run(code)
    assert result.ok
    assert "hunter2" not in result.stdout and "MAS_TEST_SECRET" not in result.stdout
    names = set(ast.literal_eval(result.stdout.splitlines()[0]))
    assert names <= {"HOME", "LANG", "LC_ALL", "PATH", "PWD"}  # bwrap adds PWD


def test_large_stdin():
    data = "0123456789" * 500_000  # 5 MB: more than a pipe holds, delivered without deadlock
    result = run("import sys\nprint(len(sys.stdin.read()))", stdin=data)
    assert result.ok and result.stdout == f"{len(data)}\n"


def test_classify_names_outcomes():
    trace = "Traceback (most recent call last):\n  File \"x\", line 1\n"
    assert classify(0, "", timed_out=False, output_capped=False) == "ok"
    assert classify(None, "", timed_out=True, output_capped=False) == "timeout"
    assert classify(None, "", timed_out=False, output_capped=True) == "output-limit"
    assert classify(-24, "", timed_out=False, output_capped=False) == "timeout"  # SIGXCPU
    assert classify(1, trace + "MemoryError\n", timed_out=False, output_capped=False) == "memory"
    assert classify(1, trace + "PermissionError: [Errno 13] no\n", timed_out=False, output_capped=False) == "blocked"
    assert classify(1, trace + "OSError: [Errno 30] Read-only file system: '/x'\n", timed_out=False, output_capped=False) == "blocked"
    missing_host = "FileNotFoundError: [Errno 2] No such file or directory: '/work/x'\n"
    assert classify(1, trace + missing_host, timed_out=False, output_capped=False) == "blocked"
    missing_local = "FileNotFoundError: [Errno 2] No such file or directory: 'input.txt'\n"
    assert classify(1, trace + missing_local, timed_out=False, output_capped=False) == "crash"
    assert classify(1, trace + "KeyError: 'a'\n", timed_out=False, output_capped=False) == "crash"
    assert set(REASONS) == {"ok", "timeout", "memory", "output-limit", "crash", "blocked"}


# --------------------------------------------------------------------------------- cache and pool
def test_cache_hit_returns_the_same_result_quickly():
    code = f"print({uuid.uuid4().int % 1000})"
    first = run_python(code, timeout=2.0)
    started = time.perf_counter()
    second = run_python(code, timeout=2.0)
    hit_seconds = time.perf_counter() - started
    assert second == first and first.ok
    assert hit_seconds < min(0.02, first.wall_time / 2)  # a hit is ~0.1 ms, a run tens of ms
    # Different limits are a different key: this one really runs again.
    third = run_python(code, timeout=2.5)
    assert third.stdout == first.stdout and third is not first


def test_cache_is_bounded_lru():
    sandbox = Sandbox(cache_entries=2)
    for value in range(3):
        sandbox.run(Job(f"print({value})", timeout=2.0))
    assert len(sandbox.cache) == 2
    assert sandbox.cache.misses == 3
    sandbox.run(Job("print(2)", timeout=2.0))  # most recent: still cached
    assert sandbox.cache.hits == 1


def test_run_many_keeps_order_and_runs_in_parallel():
    sandbox = Sandbox()
    jobs = [Job(f"import time\ntime.sleep(0.4)\nprint({i})", timeout=3.0) for i in range(4)]
    started = time.perf_counter()
    results = sandbox.run_many(jobs, max_workers=4)
    elapsed = time.perf_counter() - started
    assert [r.stdout for r in results] == ["0\n", "1\n", "2\n", "3\n"]
    assert all(r.ok for r in results)
    assert elapsed < 1.3, elapsed  # four 0.4 s sleeps one after another would take >= 1.6 s


def test_run_many_computes_identical_jobs_once():
    sandbox = Sandbox()
    jobs = [Job("print('same')", timeout=2.0)] * 6 + [Job("print('other')", timeout=2.0)]
    results = sandbox.run_many(jobs, max_workers=3)
    assert [r.stdout for r in results] == ["same\n"] * 6 + ["other\n"]
    assert sandbox.cache.misses == 2 and sandbox.cache.hits == 5


def test_module_level_run_many():
    results = run_many([Job("print(input())", stdin=s, timeout=2.0) for s in ("a", "b")], max_workers=2)
    assert [r.stdout for r in results] == ["a\n", "b\n"]


# -------------------------------------------------------------------------------------- attacks
def test_infinite_loop_times_out():
    result = run("while True:\n    pass", timeout=1.0)
    assert result.reason == "timeout" and result.exit_code is None
    assert 1.0 <= result.wall_time < 2.5


def test_sleep_past_the_timeout():
    result = run("import time\nprint('start', flush=True)\ntime.sleep(30)", timeout=1.0)
    assert result.reason == "timeout"
    assert result.stdout == "start\n"  # output before the kill is kept
    assert result.wall_time < 2.5


def test_fork_bomb_is_contained():
    marker = f"bomb-{uuid.uuid4().hex}"
    child = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    code = (
        "import os, sys\n"
        "while True:\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        f"            os.execv(sys.executable, [sys.executable, '-c', {child!r}, {marker!r}])\n"
        "    except OSError:\n"
        "        pass\n"
    )
    result, most = run_watching(code, marker, timeout=1.5)
    assert result.reason in ("timeout", "blocked")
    assert 0 < most <= PROCESSES  # RLIMIT_NPROC held it to the per-sandbox budget
    assert processes_with(marker) == []  # and everything died with the run
    # The host can still start processes.
    assert subprocess.run(["true"], timeout=5).returncode == 0


def test_memory_bomb():
    # Small limit and chunks: touching pages is slow on a loaded 2-core machine.
    result = run("chunks = []\nwhile True:\n    chunks.append(bytearray(8 * 1024 * 1024))", memory_mb=96, timeout=5.0)
    assert result.reason == "memory", result
    assert result.stderr.strip().endswith("MemoryError")
    one_shot = run("x = [0] * (10 ** 10)")
    assert one_shot.reason == "memory"


def test_output_flood_is_cut_at_the_cap():
    cap = 100_000
    result = run("while True:\n    print('x' * 1000)", max_output_bytes=cap)
    assert result.reason == "output-limit" and result.exit_code is None
    assert 0 < len(result.stdout.encode()) <= cap
    assert result.wall_time < 2.0


def test_stderr_flood_counts_too():
    result = run("import sys\nwhile True:\n    sys.stderr.write('e' * 4096)", max_output_bytes=50_000)
    assert result.reason == "output-limit"
    assert len(result.stderr) <= 50_000


def test_huge_file_write_is_refused_and_host_untouched():
    name = f"sandbox-huge-{uuid.uuid4().hex}"
    code = f"with open('/tmp/{name}', 'wb') as f:\n    while True:\n        f.write(b'0' * (1 << 20))"
    result = run(code)
    assert result.reason in ("blocked", "crash")
    assert "File too large" in result.stderr or "No space left" in result.stderr
    assert not Path("/tmp", name).exists()  # the jail's /tmp is its own


def test_many_files_cannot_fill_memory():
    code = (
        "for i in range(1000):\n"
        "    with open(f'/tmp/f{i}', 'wb') as f:\n"
        "        f.write(b'0' * (8 << 20))\n"
    )
    result = run(code, timeout=5.0)
    assert result.reason == "blocked"
    assert "No space left" in result.stderr  # the jail's tmpfs is size-capped


def test_host_files_cannot_be_read():
    for path in ("/root/.bashrc", "/root", str(REPO / "pyproject.toml"), "/etc/passwd"):
        code = f"import os\np = {path!r}\nprint(os.listdir(p) if os.path.isdir(p) else open(p).read())"
        result = run(code)
        assert result.reason in ("blocked", "crash"), path
        assert result.stdout == "", path


def test_repo_cannot_be_written():
    target = REPO / f"pwned-{uuid.uuid4().hex}.txt"
    result = run(f"open({str(target)!r}, 'w').write('pwned')")
    assert result.reason in ("blocked", "crash")
    assert not target.exists()
    result = run("open('/usr/pwned', 'w').write('x')")
    assert result.reason == "blocked"
    assert not Path("/usr/pwned").exists()


@needs_bwrap
def test_network_cannot_reach_a_host_listener():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    try:
        code = (
            "import socket\n"
            f"s = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
            "s.sendall(b'leak')\n"
            "print('connected')\n"
        )
        result = run(code)
        assert result.reason == "blocked"
        assert "connected" not in result.stdout
        listener.settimeout(0.3)
        with pytest.raises(socket.timeout):
            listener.accept()  # nothing ever reached the host's loopback
    finally:
        listener.close()


@needs_bwrap
def test_no_route_outside():
    result = run("import socket\nsocket.create_connection(('192.0.2.1', 80), timeout=1)")
    assert result.reason == "blocked"


@needs_bwrap
@pytest.mark.parametrize("use_cgroups", [True, False], ids=["cgroups", "no-cgroups"])
def test_daemon_does_not_outlive_the_run(use_cgroups, monkeypatch):
    from mas_envs.sandbox import cgroups

    if not use_cgroups:
        monkeypatch.setattr(cgroups, "_parents", None)  # the jail alone must be enough
    elif not cgroups_available():
        pytest.skip("no cgroups here")
    marker = f"daemon-{uuid.uuid4().hex}"
    code = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        for fd in (0, 1, 2):\n"
        "            os.close(fd)\n"  # no pipe left to give it away
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}])\n"
        "    os._exit(0)\n"
        "time.sleep(0.3)\n"
        "print('parent done')\n"
    )
    for _ in range(2):  # the teardown is a race we must win every time
        result, most = run_watching(code, marker, timeout=3.0)
        assert result.ok and result.stdout == "parent done\n"
        assert most == 1  # the daemon really ran...
        assert processes_with(marker) == []  # ...and is gone once run_python returned


def test_program_that_closes_its_output_still_times_out():
    marker = f"closer-{uuid.uuid4().hex}"
    code = (
        "import os, sys\n"
        "os.close(1)\nos.close(2)\n"
        f"os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}])\n"
    )
    result, _ = run_watching(code, marker, timeout=1.0)
    assert result.reason == "timeout"
    assert processes_with(marker) == []


def test_signals_cannot_reach_the_host():
    me = os.getpid()
    attacks = [
        f"import os, signal\nos.kill({me}, signal.SIGKILL)",  # this test process, by host pid
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('still here')",
        "import os, signal\nos.kill(-1, signal.SIGKILL)",
        f"import os, signal\nos.killpg({os.getpgid(0)}, signal.SIGKILL)",
    ]
    for code in attacks:
        result = run(code)
        assert result.reason in ("ok", "crash", "blocked"), (code, result)
    assert os.getpid() == me  # we are still alive and well
    assert run("print('fine')").stdout == "fine\n"


RLIMITS_PROGRAM = (
    "import resource as r\n"
    "for name in ('CPU', 'AS', 'FSIZE', 'NOFILE', 'CORE', 'NPROC'):\n"
    "    soft, hard = r.getrlimit(getattr(r, 'RLIMIT_' + name))\n"
    "    print(name, soft, hard)\n"
)


def expected_rlimits(timeout: float, memory_mb: int) -> str:
    from mas_envs.sandbox.isolation import FILE_BYTES, OPEN_FILES, Limits

    cpu = Limits(timeout=timeout).cpu_seconds
    rows = [("CPU", cpu), ("AS", memory_mb << 20), ("FSIZE", FILE_BYTES), ("NOFILE", OPEN_FILES), ("CORE", 0), ("NPROC", PROCESSES)]
    return "".join(f"{name} {value} {value}\n" for name, value in rows)


@needs_bwrap
def test_rlimits_are_hard_limits_inside():
    result = run(RLIMITS_PROGRAM, timeout=2.0, memory_mb=300)
    assert result.ok
    assert result.stdout == expected_rlimits(2.0, 300)
    raised = run("import resource as r\nr.setrlimit(r.RLIMIT_AS, (-1, -1))")
    assert raised.reason in ("crash", "blocked") and "ValueError" in raised.stderr


@needs_bwrap
def test_python_bootstrap_sets_the_same_limits_without_prlimit(monkeypatch):
    from mas_envs.sandbox import isolation

    monkeypatch.setattr(isolation, "PRLIMIT", "/nonexistent/prlimit")
    result = run(RLIMITS_PROGRAM, timeout=2.0, memory_mb=300)
    assert result.ok, result.stderr
    assert result.stdout == expected_rlimits(2.0, 300)


@needs_bwrap
def test_nested_user_namespaces_are_refused():
    code = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nprint(libc.unshare(0x10000000))"  # CLONE_NEWUSER
    result = run(code)
    assert result.ok and result.stdout == "-1\n"


# ------------------------------------------------------------------------- cgroups and weak mode
needs_cgroups = pytest.mark.skipif(not cgroups_available(), reason="no writable cgroup v1 memory+pids here")


@needs_cgroups
def test_memory_outside_the_address_space_is_bounded_by_the_run_cgroup():
    # memfd pages are never mapped, so RLIMIT_AS does not see them; the run's memory cgroup does.
    code = (
        "import os\n"
        "held = []\n"
        "for i in range(40):\n"
        "    fd = os.memfd_create('hoard')\n"
        "    os.write(fd, b'0' * (15 << 20))\n"
        "    held.append(fd)\n"
        "print('held', 15 * len(held), 'MB')\n"
    )
    result = run(code, memory_mb=128, timeout=4.0)
    assert result.reason == "memory", result
    assert "held" not in result.stdout


@needs_cgroups
def test_run_cgroups_are_removed_afterwards(monkeypatch):
    from mas_envs.sandbox import cgroups

    made: list[str] = []
    real_init = cgroups.RunCgroups.__init__

    def recording_init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        made.extend([self.memory_dir, self.pids_dir])

    monkeypatch.setattr(cgroups.RunCgroups, "__init__", recording_init)
    assert run("print('x')").ok
    assert len(made) == 2
    assert not any(os.path.exists(directory) for directory in made)


@pytest.fixture
def weak_mode(monkeypatch):
    """Run through the fallback path (as if bwrap were unusable), for real."""
    from mas_envs.sandbox import isolation

    monkeypatch.setattr(isolation, "_mode", "weak")
    yield


def test_weak_mode_still_runs_and_limits(weak_mode):
    assert sandbox_mode() == "weak"
    assert run("print(input()[::-1])", stdin="abc").stdout == "cba\n"
    assert run("while True:\n    pass", timeout=1.0).reason == "timeout"
    assert run("x = [0] * (10 ** 10)").reason == "memory"
    assert run("print('y' * 10 ** 6)", max_output_bytes=1000).reason == "output-limit"
    if drop_privileges():
        assert run("import os\nprint(os.getuid())").stdout == "65534\n"
        assert run("open('/root/.bashrc').read()").reason == "blocked"


@needs_cgroups
def test_weak_mode_daemon_is_killed_through_its_cgroup(weak_mode):
    marker = f"weak-daemon-{uuid.uuid4().hex}"
    code = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        for fd in (0, 1, 2):\n"
        "            os.close(fd)\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}])\n"
        "    os._exit(0)\n"
        "time.sleep(0.5)\n"
        "print('parent done')\n"
    )
    result, most = run_watching(code, marker, timeout=3.0)
    assert result.ok and most == 1
    assert processes_with(marker) == []

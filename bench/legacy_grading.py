"""The function-problem grader this project used until 2026-12-06, kept only as the baseline of
bench/bench_grading.py: one sandboxed process ran the program and the tests together and printed one
nonce-tagged line per test. Do not use it to grade: a program can game it (tests/grading_attacks.py).
"""

from __future__ import annotations

import hashlib
import json

from mas_envs.code_grading import (
    DETAIL_CHARS, MAX_RESUMES, MAX_TIMEOUTS, GradeReport, GradeRequest, TestOutcome, _probe, _stdio_outcome,
    default_workers,
)
from mas_envs.data.code_problems import STDIO, TestStep

__all__ = ["Grader", "GradeRequest"]


class Grader:
    """Grades many (program, suite) pairs with one batch of sandbox runs per round."""

    def __init__(self, test_timeout: float = 2.0, memory_mb: int = 512, max_workers: int | None = None):
        self.test_timeout = float(test_timeout)
        self.memory_mb = int(memory_mb)
        self.max_workers = max_workers or default_workers()

    def grade(self, request: GradeRequest) -> GradeReport:
        return self.grade_many([request])[0]

    def grade_many(self, requests: list[GradeRequest]) -> list[GradeReport]:
        from mas_envs.sandbox import Job, run_many  # lazily: loading problems needs no sandbox

        reports: list[GradeReport | None] = [None] * len(requests)
        # stdio tests and first harness runs go out as one parallel batch
        jobs: list[Job] = []
        owners: list[tuple[int, int]] = []  # (request index, case index or -1 for a harness run)
        harness_state: dict[int, _HarnessProgress] = {}
        for r, req in enumerate(requests):
            if req.suite.n_tests == 0:
                reports[r] = GradeReport((), load_error="no tests")
            elif req.suite.kind == STDIO:
                program = (req.context + "\n" + req.program) if req.context else req.program
                for c, case in enumerate(req.suite.cases):
                    jobs.append(Job(program, case.input, self.test_timeout, self.memory_mb, 200_000))
                    owners.append((r, c))
            else:
                harness_state[r] = _HarnessProgress(req.suite.n_tests)
                jobs.append(self._harness_job(req, 0))
                owners.append((r, -1))
        stdio_outcomes: dict[int, list[TestOutcome]] = {}
        for rounds in range(MAX_RESUMES + 1):
            results = run_many(jobs, max_workers=self.max_workers) if jobs else []
            next_jobs, next_owners = [], []
            for (r, c), job, result in zip(owners, jobs, results):
                req = requests[r]
                if c >= 0:
                    outcomes = stdio_outcomes.setdefault(r, [TestOutcome("not run")] * req.suite.n_tests)
                    outcomes[c] = _stdio_outcome(result, req.suite.cases[c])
                    continue
                progress = harness_state[r]
                progress.absorb(result, _nonce(job.code))
                if progress.finished:
                    continue
                if rounds < MAX_RESUMES and progress.timeouts < MAX_TIMEOUTS:
                    next_jobs.append(self._harness_job(req, progress.next_index, progress.timeouts))
                    next_owners.append((r, -1))
            jobs, owners = next_jobs, next_owners
            if not jobs:
                break
        for r, outcomes in stdio_outcomes.items():
            reports[r] = GradeReport(tuple(outcomes))
        for r, progress in harness_state.items():
            reports[r] = progress.report()
        return [rep if rep is not None else GradeReport((), load_error="not graded") for rep in reports]

    def _harness_job(self, req: GradeRequest, start: int, prior_timeouts: int = 0):
        from mas_envs.sandbox import Job

        remaining = req.suite.n_tests - start
        # Room for a few slow tests; a program that is slower than that resumes in a new process.
        wall = self.test_timeout * (min(remaining, 3) + 1) + 1.0
        code = build_harness(
            req.program, req.suite.steps, req.entry_point, req.context, start, self.test_timeout, prior_timeouts
        )
        return Job(code, "", wall, self.memory_mb, 1_000_000)


class _HarnessProgress:
    """Collects per-test results of a function problem across resumed harness runs."""

    def __init__(self, n_tests: int):
        self.outcomes: list[TestOutcome | None] = [None] * n_tests
        self.load_error: str | None = None
        self.finished = False

    @property
    def timeouts(self) -> int:
        return sum(o is not None and o.status == "timeout" for o in self.outcomes)

    @property
    def next_index(self) -> int:
        return next((i for i, o in enumerate(self.outcomes) if o is None), len(self.outcomes))

    def absorb(self, result, nonce: str) -> None:
        done = loaded = False
        for line in result.stdout.splitlines():
            if not line.startswith(nonce + " "):
                continue
            try:
                index, status, detail = json.loads(line[len(nonce) + 1:])
            except (ValueError, TypeError):
                continue
            if index == -1 and status == "loaded":
                loaded = True
            elif index == -1:
                self.load_error = f"{status}: {detail}"
                self.outcomes = [TestOutcome(status, "the program failed to load") for _ in self.outcomes]
                done = True
            elif index == -2:
                done = True
            elif isinstance(index, int) and 0 <= index < len(self.outcomes):
                self.outcomes[index] = TestOutcome(str(status), str(detail)[:DETAIL_CHARS])
        if not done and not loaded:
            # Killed while loading the program: every run would die the same way.
            why = result.reason if result.reason != "ok" else "exited"
            self.load_error = f"{why}: the program was killed while loading"
            self.outcomes = [o or TestOutcome("timeout" if why == "timeout" else "crash", self.load_error) for o in self.outcomes]
            done = True
        if not done:
            # The process died inside the first unfinished test: blame that test, resume after it.
            i = self.next_index
            if i < len(self.outcomes):
                why = result.reason if result.reason != "ok" else "exited"
                self.outcomes[i] = TestOutcome("timeout" if why == "timeout" else "crash", f"the program was killed ({why})")
            if self.next_index >= len(self.outcomes):
                done = True
        self.finished = done or self.next_index >= len(self.outcomes)

    def report(self) -> GradeReport:
        why = "skipped after repeated timeouts" if self.timeouts >= MAX_TIMEOUTS else "an earlier test killed the program"
        outcomes = tuple(o if o is not None else TestOutcome("not run", why) for o in self.outcomes)
        return GradeReport(outcomes, self.load_error)


def _nonce(harness_code: str) -> str:
    # The harness's first line holds its nonce; derived from the content, so runs stay cacheable.
    return harness_code.split("\n", 1)[0].split("=", 1)[1].strip().strip("'\"")


_HARNESS_BODY = r'''
import sys as _s, json as _j, signal as _g
class _MasTimeout(BaseException):
    pass
def _mas_alarm(*_):
    raise _MasTimeout()
_g.signal(_g.SIGALRM, _mas_alarm)
_out = _s.stdout
class _Sink:
    def write(self, s):
        return len(s)
    def flush(self):
        pass
    def isatty(self):
        return False
_s.stdout = _Sink()
def _report(i, status, detail=""):
    _out.write(_NONCE + " " + _j.dumps([i, status, str(detail)[:300]]) + "\n")
    _out.flush()
def _limited(fn):
    _g.setitimer(_g.ITIMER_REAL, _LIMIT)
    try:
        return fn()
    finally:
        _g.setitimer(_g.ITIMER_REAL, 0)
def _why(e):
    if isinstance(e, _MasTimeout):
        return "timeout", "took longer than %gs" % _LIMIT
    try:
        return "error", _limited(lambda: "%s: %s" % (type(e).__name__, e))
    except BaseException:
        return "error", type(e).__name__
_ns = {"__name__": "__mas_solution__", "__builtins__": __builtins__}
if _CONTEXT:
    try:
        _limited(lambda: exec(compile(_CONTEXT, "<context>", "exec"), _ns))
    except BaseException:
        pass
try:
    _limited(lambda: exec(compile(_PROGRAM, "<solution>", "exec"), _ns))
except BaseException as e:
    _report(-1, *_why(e))
    _s.exit(0)
_cand = None
_sol = _ns.get("Solution")
if _ENTRY and isinstance(_sol, type) and hasattr(_sol, _ENTRY):
    try:
        _cand = getattr(_sol(), _ENTRY)
    except BaseException:
        _cand = None
if _cand is None and _ENTRY:
    _cand = _ns.get(_ENTRY)
_t = dict(_ns)
_t["__name__"] = "__mas_tests__"
if _cand is not None:
    _t["candidate"] = _cand
    _t[_ENTRY] = _cand
_report(-1, "loaded")
_k = -1
_timeouts = _PRIOR_TIMEOUTS
for _src, _is_test, _probe in _STEPS:
    if _is_test:
        _k += 1
        if _k < _START:
            continue
    try:
        _code = compile(_src, "<test>", "exec")
    except BaseException as e:
        if _is_test:
            _report(_k, "error", "SyntaxError: %s" % e)
        continue
    if _timeouts >= _MAX_TIMEOUTS:
        break
    try:
        _limited(lambda: exec(_code, _t))
    except AssertionError as e:
        if _is_test:
            _d = ""
            if _probe is not None:
                try:
                    _d = _limited(lambda: "expected %s but got %s" % (_probe[1][:120], repr(eval(_probe[0], _t))[:150]))
                except BaseException as e2:
                    _d = "%s raised %s" % (_probe[0][:120], _why(e2)[1])
            _report(_k, "fail", _d or "assertion failed")
        continue
    except BaseException as e:
        if isinstance(e, _MasTimeout):
            _timeouts += 1
        if _is_test:
            _report(_k, *_why(e))
        continue
    if _is_test:
        _report(_k, "pass")
_report(-2, "done")
'''


def build_harness(
    program: str,
    steps: tuple[TestStep, ...],
    entry_point: str | None,
    context: str,
    start: int,
    limit: float,
    prior_timeouts: int = 0,
) -> str:
    """Source of the harness program (see the module docstring); tests before ``start`` are skipped."""
    step_data = [(s.source, s.is_test, _probe(s.source) if s.is_test else None) for s in steps]
    nonce = hashlib.sha256(json.dumps([program, step_data, context, start, prior_timeouts]).encode("utf-8", "surrogatepass")).hexdigest()[:24]
    header = (
        f"_NONCE = {('MAS' + nonce)!r}\n"
        f"_PROGRAM = {program!r}\n_CONTEXT = {context!r}\n_ENTRY = {entry_point!r}\n"
        f"_STEPS = {step_data!r}\n_START = {int(start)}\n_LIMIT = {float(limit)!r}\n"
        f"_PRIOR_TIMEOUTS = {int(prior_timeouts)}\n_MAX_TIMEOUTS = {MAX_TIMEOUTS}\n"
    )
    return header + _HARNESS_BODY

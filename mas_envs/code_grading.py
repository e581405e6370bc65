"""Grading generated programs against test suites, in the sandbox, one result per test.

Nothing here executes generated code in this process: every program runs through
``mas_envs.sandbox`` (``run_many``, which runs jobs in parallel and caches identical runs).

* **stdio problems** -- every test is one sandboxed run of the program with the test's input on
  stdin; it passes when the output matches (whitespace-insensitive, numbers within 1e-6).
* **function problems** -- one sandboxed run of a *harness* per program: it runs the problem's
  context and the program (with ``__name__`` not ``"__main__"``, so a demo ``main`` does not run),
  binds ``candidate`` to the entry-point function (or the method of ``class Solution``), then runs
  the test steps in order, each under its own time limit (``SIGALRM``), and prints one result line
  per test, tagged with a nonce the program cannot know in advance. The program's own prints are
  discarded. If the process dies (hard timeout, ``os._exit``, memory), the test it was on is
  recorded as failed and the harness resumes after it in a new process (at most
  ``MAX_RESUMES`` times; tests never reached are "not run"). After ``MAX_TIMEOUTS`` timed-out tests
  the rest are not run, so an endless loop costs about two time limits, not one per test.
  The nonce guards against accidental interference (a program printing look-alike lines), not
  against a program written to inspect the harness's memory and forge results.

The tester's text becomes a :class:`TestSuite` with :func:`parse_tester_tests` (format in
:data:`TESTER_FORMAT_FUNCTION` / :data:`TESTER_FORMAT_STDIO`).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
from dataclasses import dataclass

from mas_envs.data.code_problems import FUNCTION, STDIO, StdioCase, TestStep, TestSuite, steps_from_source
from mas_envs.parsing import MAX_PARSE_CHARS, extract_code_block

MAX_TESTS = 20  # tests beyond this many in one tester message are ignored (keeps grading cheap)
MAX_RESUMES = 3  # new harness processes after the program killed one
MAX_TIMEOUTS = 2  # after this many timed-out tests the rest are not run (an endless loop costs ~2 limits, not n)
DETAIL_CHARS = 300  # how much of an error / got-value a result keeps

TESTER_FORMAT_FUNCTION = (
    "Write your unit tests in one ```python code block. Every top-level `assert` statement is one "
    "test, e.g. `assert {name}(3) == 9`. Other top-level statements (imports, helper variables) are "
    "setup and run before the tests that follow them. The function under test is called by its "
    "name (`candidate` also refers to it). At most {max_tests} tests are used."
)
TESTER_FORMAT_STDIO = (
    "Write your unit tests as a JSON list in one ```json code block, each test an object "
    '{{"input": "<text given on stdin>", "output": "<exact expected stdout>"}}; or as plain pairs '
    "of lines `Input:` ... `Output:` .... At most {max_tests} tests are used."
)


@dataclass(frozen=True)
class TestOutcome:
    """Result of one test: status is pass | fail | error | timeout | crash | not run."""

    status: str
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "pass"


@dataclass(frozen=True)
class GradeReport:
    """Per-test results of one program on one suite; ``load_error`` when the program itself failed."""

    outcomes: tuple[TestOutcome, ...]
    load_error: str | None = None

    @property
    def n_tests(self) -> int:
        return len(self.outcomes)

    @property
    def n_passed(self) -> int:
        return sum(o.passed for o in self.outcomes)

    @property
    def pass_rate(self) -> float:
        return self.n_passed / self.n_tests if self.outcomes else 0.0

    @property
    def all_passed(self) -> bool:
        return bool(self.outcomes) and all(o.passed for o in self.outcomes)

    def passed_mask(self) -> list[bool]:
        return [o.passed for o in self.outcomes]


@dataclass(frozen=True)
class GradeRequest:
    """One program to grade on one suite."""

    program: str
    suite: TestSuite
    entry_point: str | None = None
    context: str = ""


def describe_failures(report: GradeReport, suite: TestSuite, limit: int = 6) -> list[str]:
    """Readable lines for the failed tests (at most ``limit``): which test, expected vs got, the error."""
    if report.load_error:
        return [f"The program failed before any test ran: {report.load_error}"]
    lines = []
    failed = [(i, o, t) for i, (o, t) in enumerate(zip(report.outcomes, suite.test_texts())) if not o.passed]
    for i, outcome, text in failed[:limit]:
        detail = f": {outcome.detail}" if outcome.detail else ""
        lines.append(f"Test {i + 1}: {text[:200]} -> {outcome.status}{detail}")
    if len(failed) > limit:
        lines.append(f"... and {len(failed) - limit} more failing tests")
    return lines


# ---------------------------------------------------------------------- grading
def default_workers() -> int:
    """Sandbox runs at once: a run spends much of its wall time starting up (namespaces, interpreter),
    not computing, so a few per core measured ~2x the throughput of one per core on 2 cores."""
    return min(8, 4 * (os.cpu_count() or 1))


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


def _stdio_outcome(result, case: StdioCase) -> TestOutcome:
    if result.reason == "timeout":
        return TestOutcome("timeout")
    if result.reason != "ok":
        tail = result.stderr.strip().splitlines()[-1:] if result.stderr.strip() else []
        return TestOutcome("error" if result.reason == "crash" else result.reason, tail[0][:DETAIL_CHARS] if tail else result.reason)
    if outputs_match(result.stdout, case.output):
        return TestOutcome("pass")
    return TestOutcome("fail", f"got {_short(result.stdout)}")


def _short(text: str, limit: int = 120) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def outputs_match(got: str, expected: str, tol: float = 1e-6) -> bool:
    """Token-wise equality (whitespace-insensitive); tokens that are both numbers match within ``tol``."""
    a, b = got.split(), expected.split()
    if a == b:
        return True
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        try:
            fx, fy = float(x), float(y)
        except ValueError:
            return False
        if not abs(fx - fy) <= tol * max(1.0, abs(fy)):
            return False
    return True


# ---------------------------------------------------------------------- the function-problem harness
def _probe(source: str) -> tuple[str, str] | None:
    """For ``assert A == B``: (A, B), so a failure can say what A was."""
    try:
        tree = ast.parse(source)
        if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
            return None
        test = tree.body[0].test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is)):
            return ast.unparse(test.left), ast.unparse(test.comparators[0])
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    return None


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


# ---------------------------------------------------------------------- tester output
_FENCED = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|$)", re.DOTALL)
# A header line of the plain format: "Input:", "**Output:** 3", "Expected output:" (matched per line: linear time).
_IO_HEADER = re.compile(r"^[ \t*#>]*(input|expected output|output)[ \t*]*(?::[ \t*]*(.*))?$", re.IGNORECASE)


def parse_tester_tests(text: str, kind: str) -> tuple[TestSuite | None, str | None]:
    """The tester's tests as a suite (at most :data:`MAX_TESTS`), or ``(None, reason)``; never raises."""
    text = text[:MAX_PARSE_CHARS]
    if kind == FUNCTION:
        return _parse_function_tests(text)
    return _parse_stdio_tests(text)


def _parse_function_tests(text: str) -> tuple[TestSuite | None, str | None]:
    code, error = extract_code_block(text)
    if error is not None:
        return None, error
    try:
        steps = steps_from_source(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return None, f"tests are not valid Python: {type(exc).__name__}"
    suite = first_tests(TestSuite(FUNCTION, steps=steps), MAX_TESTS)
    if suite.n_tests == 0:
        return None, "no assert statements found"
    return suite, None


def first_tests(suite: TestSuite, limit: int) -> TestSuite:
    """``suite`` cut to its first ``limit`` tests (setup steps after the cut are dropped too)."""
    if suite.kind == STDIO:
        return TestSuite(STDIO, cases=suite.cases[:limit])
    kept, n = [], 0
    for step in suite.steps:
        if step.is_test:
            if n >= limit:
                break
            n += 1
        kept.append(step)
    return TestSuite(FUNCTION, steps=tuple(kept))


def _parse_stdio_tests(text: str) -> tuple[TestSuite | None, str | None]:
    cases: list[StdioCase] | None = None
    for _lang, body in reversed(_FENCED.findall(text)):
        cases = _cases_from_json(body)
        if cases:
            break
    if not cases:
        cases = _cases_from_json(text.strip())
    if not cases:
        cases = _cases_from_plain_pairs(text)
    if not cases:
        return None, 'no tests found (expected a ```json list of {"input": ..., "output": ...})'
    return first_tests(TestSuite(STDIO, cases=tuple(cases)), MAX_TESTS), None


def _cases_from_plain_pairs(text: str) -> list[StdioCase]:
    """``Input:`` / ``Output:`` pairs; a header's text after the colon is the block's first line."""
    cases: list[StdioCase] = []
    given: list[str] | None = None
    wanted: list[str] | None = None

    def close() -> None:
        if given is not None and wanted is not None and any(line.strip() for line in wanted):
            cases.append(StdioCase(_clean(given), _clean(wanted)))

    for line in text.splitlines():
        if line.strip().startswith("```"):
            continue
        header = _IO_HEADER.match(line)
        if header:
            rest = [header.group(2)] if header.group(2) else []
            if header.group(1).lower() == "input":
                close()
                given, wanted = rest, None
            elif given is not None:
                wanted = rest
            continue
        if wanted is not None:
            wanted.append(line)
        elif given is not None:
            given.append(line)
    close()
    return cases


def _clean(lines: list[str]) -> str:
    return "\n".join(line.rstrip() for line in lines).strip("\n") + "\n"


def _cases_from_json(body: str) -> list[StdioCase] | None:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if isinstance(data, dict):
        data = data.get("tests", [data])
    if not isinstance(data, list):
        return None
    cases = []
    for item in data:
        if not isinstance(item, dict):
            continue
        given = item.get("input", item.get("stdin"))
        wanted = item.get("output", item.get("expected_output", item.get("expected")))
        if given is None or wanted is None:
            continue
        cases.append(StdioCase(_text(given), _text(wanted)))
    return cases or None


def _text(value) -> str:
    if isinstance(value, list):
        return "\n".join(map(str, value)) + "\n"
    return value if isinstance(value, str) else json.dumps(value)

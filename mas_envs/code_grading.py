"""Grading generated programs against test suites, in the sandbox, one result per test.

Nothing here executes generated code in this process: every program runs through
``mas_envs.sandbox`` (``run_many``, which runs jobs in parallel and caches identical runs).

* **stdio problems** -- every test is one sandboxed run of the program with the test's input on
  stdin; it passes when the output matches (whitespace-insensitive, numbers within 1e-6).
* **function problems** -- graded so that the program cannot touch its own grade. Two kinds of
  sandboxed process take part (:mod:`mas_envs.grading_harness`): a *runner* holds the program and no
  tests; it calls the entry point (or the method of ``class Solution``) on argument lists it is given
  and returns each result as plain data (:mod:`mas_envs.value_wire`: exact builtin types only, size-
  capped). A *judge* holds the tests and no program: ``candidate`` there answers each call with the
  runner's recorded result, rebuilt as a real builtin value, so an object whose ``__eq__`` always says
  True never reaches a comparison, and patched ``json``/``print``/builtins or a replaced harness in the
  runner can only change which values are claimed, which the judge then checks. The calls a suite
  makes are found once per suite (a judge run whose stand-in accepts everything; cached), every
  program of a batch is run on them, and one judge run per suite judges the whole batch. A test whose
  arguments depend on earlier results asks for more calls, answered in another round (at most
  ``MAX_JUDGE_ROUNDS``). A test sees return values, not changes the program makes to its arguments.
  If a runner dies (hard timeout, ``os._exit``, memory), the call it was on is recorded as crashed and
  it resumes after it in a new process (at most ``MAX_RESUMES`` times); after ``MAX_TIMEOUTS``
  timed-out calls the rest are not run, so an endless loop costs about two time limits, not one per
  test. Results travel as JSON lines framed by a per-run secret given on stdin.

The tester's text becomes a :class:`TestSuite` with :func:`parse_tester_tests` (format in
:data:`TESTER_FORMAT_FUNCTION` / :data:`TESTER_FORMAT_STDIO`).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import hmac
import json
import os
import re
from collections import OrderedDict
from dataclasses import dataclass

from mas_envs.data.code_problems import FUNCTION, STDIO, StdioCase, TestStep, TestSuite, is_test_statement
from mas_envs.grading_harness import judge_source, runner_source
from mas_envs.parsing import MAX_PARSE_CHARS, extract_code_block
from mas_envs.tester_code import tester_statements

MAX_TESTS = 20  # tests beyond this many in one tester message are ignored (keeps grading cheap)
MAX_RESUMES = 3  # new processes after the program (or a test) killed one
MAX_TIMEOUTS = 2  # after this many timed-out calls the rest are not run (an endless loop costs ~2 limits, not n)
MAX_JUDGE_ROUNDS = 4  # runner + judge rounds for tests whose arguments come from earlier results
MAX_CALLS = 5_000  # distinct calls of one program on one suite
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
        keys = [self._report_key(req) for req in requests]
        jobs: list[Job] = []
        owners: list[tuple[int, int]] = []
        functions: list[tuple[int, _FunctionGrading]] = []
        for r, req in enumerate(requests):
            if keys[r] in _REPORTS:
                reports[r] = _REPORTS[keys[r]]
            elif req.suite.n_tests == 0:
                reports[r] = GradeReport((), load_error="no tests")
            elif req.suite.kind == STDIO:
                program = (req.context + "\n" + req.program) if req.context else req.program
                for c, case in enumerate(req.suite.cases):
                    jobs.append(Job(program, case.input, self.test_timeout, self.memory_mb, 200_000))
                    owners.append((r, c))
            else:
                functions.append((r, _FunctionGrading(req)))
        # stdio tests: one run each, compared here, in this process
        stdio_outcomes: dict[int, list[TestOutcome]] = {}
        for (r, c), result in zip(owners, run_many(jobs, max_workers=self.max_workers) if jobs else []):
            outcomes = stdio_outcomes.setdefault(r, [TestOutcome("not run")] * requests[r].suite.n_tests)
            outcomes[c] = _stdio_outcome(result, requests[r].suite.cases[c])
        for r, outcomes in stdio_outcomes.items():
            reports[r] = GradeReport(tuple(outcomes))
        self._grade_functions([g for _, g in functions])
        for r, grading in functions:
            reports[r] = grading.report()
        for key, rep in zip(keys, reports):
            if rep is not None:
                _lru_put(_REPORTS, key, rep)
        return [rep if rep is not None else GradeReport((), load_error="not graded") for rep in reports]

    def _report_key(self, req: GradeRequest) -> str:
        """Everything that can change a report. Runs are cached by the sandbox anyway (identical runs
        give identical results); caching the report too spares a branch that re-sends the same code
        the bookkeeping of a whole grading round."""
        head = json.dumps([_suite_digest(req.suite), req.context, req.entry_point, self.test_timeout, self.memory_mb])
        return hashlib.sha256((head + "\0" + req.program).encode("utf-8", "surrogatepass")).hexdigest()

    # ------------------------------------------------------------------ function problems
    def _grade_functions(self, gradings: list[_FunctionGrading]) -> None:
        """Discover each suite's calls (cached), then alternate runner and judge rounds until every test
        has a verdict: a judge round may ask for calls whose arguments came from earlier results."""
        self._discover({g.suite_id: g for g in gradings if g.suite_id not in _DISCOVERED}.values())
        for g in gradings:
            g.want(_DISCOVERED.get(g.suite_id, ()))
        active = list(gradings)
        for _round in range(MAX_JUDGE_ROUNDS):
            self._run_programs([g for g in active if g.todo() or not g.loaded])
            active = [g for g in active if g.load_error is None]
            self._judge(active)
            active = [g for g in active if g.pending]
            if not active:
                return
        for g in active:
            g.give_up()

    def _discover(self, gradings) -> None:
        """One judge run per new suite with every call answered by an all-accepting stand-in: it records
        the calls the tests make, so the programs can be run on all of them at once."""
        from mas_envs.sandbox import run_many

        gradings = list(gradings)
        jobs = [self._judge_job(g, [{"results": {}}], 0, 0, discovering=True) for g in gradings]
        for g, job, result in zip(gradings, jobs, run_many(jobs, max_workers=self.max_workers) if jobs else []):
            keys: list[str] = []
            for fields in _framed(result.stdout, job.stdin):
                if len(fields) == 5 and isinstance(fields[4], list):
                    keys += [k for k in fields[4] if isinstance(k, str) and k not in keys]
            _remember(g.suite_id, tuple(keys[:MAX_CALLS]))

    def _run_programs(self, gradings: list[_FunctionGrading]) -> None:
        from mas_envs.sandbox import run_many

        plans = [(g, g.todo()) for g in gradings]
        starts = {id(g): 0 for g in gradings}
        for resume in range(MAX_RESUMES + 1):
            if not plans:
                return
            jobs = [self._runner_job(g, keys, starts[id(g)]) for g, keys in plans]
            next_plans = []
            for (g, keys), job, result in zip(plans, jobs, run_many(jobs, max_workers=self.max_workers)):
                resume_at = g.absorb_run(result, keys, job.stdin, starts[id(g)])
                if resume_at is None:
                    continue
                if resume < MAX_RESUMES and g.timeouts() < MAX_TIMEOUTS:
                    starts[id(g)] = resume_at
                    next_plans.append((g, keys))
                else:
                    g.skip(keys[resume_at:], "an earlier test killed the program")
            plans = next_plans

    def _judge(self, gradings: list[_FunctionGrading]) -> None:
        from mas_envs.sandbox import run_many

        groups: dict[str, list[_FunctionGrading]] = {}
        for g in gradings:
            g.pending = False
            if not g.recall_verdicts():
                groups.setdefault(g.suite_id, []).append(g)
        plans = [(members, 0, 0) for members in groups.values()]
        for resume in range(MAX_RESUMES + 1):
            if not plans:
                break
            jobs = [self._judge_job(members[0], [{"results": g.results} for g in members], p0, k0)
                    for members, p0, k0 in plans]
            next_plans = []
            for (members, p0, k0), job, result in zip(plans, jobs, run_many(jobs, max_workers=self.max_workers)):
                resume_at = _absorb_judgement(members, result, job.stdin, p0, k0)
                if resume_at is not None and resume < MAX_RESUMES:
                    next_plans.append((members, *resume_at))
            plans = next_plans
        for g in gradings:
            g.store_verdicts()

    def _runner_job(self, g: _FunctionGrading, keys: list[str], start: int):
        from mas_envs.sandbox import Job

        code = runner_source(g.req.program, g.req.context, g.req.entry_point, MAX_TIMEOUTS)
        payload = {"keys": keys, "start": start, "prior_timeouts": g.timeouts(), "limit": self.test_timeout}
        # Room for loading and a few slow calls; a program slower than that resumes in a new process.
        wall = self.test_timeout * (min(len(keys) - start, 3) + 1) + 1.0
        return Job(code, _framing(code, payload), wall, self.memory_mb, 4_000_000)

    def _judge_job(self, g: _FunctionGrading, programs: list[dict], start_program: int, start_test: int,
                   discovering: bool = False):
        from mas_envs.sandbox import Job

        code = judge_source(g.steps, g.req.context, g.req.entry_point, MAX_TIMEOUTS)
        payload = {"programs": programs, "start_program": start_program, "start_test": start_test,
                   "discovering": discovering, "limit": self.test_timeout}
        wall = self.test_timeout * (MAX_TIMEOUTS * len(programs) + 2) + 1.0
        return Job(code, _framing(code, payload), wall, self.memory_mb, 4_000_000)


# Shared by every Grader in this process: the calls discovered per suite (sha256 of its judge), and
# the verdicts per (suite, results) -- a judge sees only data, so equal results get equal verdicts and
# a branch graded again after its batch needs no new judge run.
_DISCOVERED: OrderedDict[str, tuple[str, ...]] = OrderedDict()
_VERDICTS: OrderedDict[str, tuple[TestOutcome, ...]] = OrderedDict()
_REPORTS: OrderedDict[str, GradeReport] = OrderedDict()  # by Grader._report_key
_CACHE_ENTRIES = 4096
_SECRET_KEY = os.urandom(32)


def _remember(suite_id: str, keys: tuple[str, ...]) -> None:
    _lru_put(_DISCOVERED, suite_id, keys)


def _lru_put(cache: OrderedDict, key: str, value) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > _CACHE_ENTRIES:
        cache.popitem(last=False)


def _framing(code: str, payload: dict) -> str:
    """stdin of a grading program: a secret first (keyed on the content, so identical runs stay
    cacheable; unknown to a program written in advance), then the job as JSON."""
    body = json.dumps(payload, separators=(",", ":"))
    secret = "MAS" + hmac.new(_SECRET_KEY, (code + "\0" + body).encode("utf-8", "surrogatepass"), "sha256").hexdigest()[:32]
    return secret + "\n" + body


def _framed(stdout: str, stdin: str):
    """The JSON lists a grading program printed under its secret (anything else is ignored)."""
    prefix = stdin.split("\n", 1)[0] + " "
    for line in stdout.splitlines():
        if line.startswith(prefix):
            try:
                fields = json.loads(line[len(prefix):])
            except (ValueError, RecursionError):
                continue
            if isinstance(fields, list) and fields:
                yield fields


def _killed(result) -> tuple[str, str]:
    why = result.reason if result.reason != "ok" else "exited"
    return ("timeout" if why == "timeout" else "crash"), why


@functools.lru_cache(maxsize=1024)
def _suite_digest(suite: TestSuite) -> str:
    body = json.dumps([suite.kind, [(t.source, t.is_test) for t in suite.steps],
                       [(c.input, c.output) for c in suite.cases]])
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


@functools.lru_cache(maxsize=1024)
def _suite_plan(steps: tuple, context: str, entry_point: str | None) -> tuple[tuple, str]:
    """The judge's view of a suite and its id; the same suite is graded again on every step (cached)."""
    plan = tuple((s.source, s.is_test, _probe(s.source) if s.is_test else None) for s in steps)
    suite_id = hashlib.sha256(json.dumps([plan, context, entry_point]).encode("utf-8", "surrogatepass")).hexdigest()
    return plan, suite_id


class _FunctionGrading:
    """One program on one function-problem suite: the runner's results by call, the tests' verdicts."""

    def __init__(self, req: GradeRequest):
        self.req = req
        self.steps, self.suite_id = _suite_plan(req.suite.steps, req.context, req.entry_point)
        self.wanted: list[str] = []
        self.results: dict[str, list] = {}
        self.loaded = False
        self.load_error: str | None = None
        self.outcomes: list[TestOutcome | None] = [None] * req.suite.n_tests
        self.pending = False

    def want(self, keys) -> None:
        for key in keys:
            if key not in self.results and key not in self.wanted and len(self.wanted) < MAX_CALLS:
                self.wanted.append(key)

    def todo(self) -> list[str]:
        return [k for k in self.wanted if k not in self.results]

    def timeouts(self) -> int:
        return sum(r[0] == "timeout" for r in self.results.values())

    def skip(self, keys: list[str], why: str) -> None:
        for key in keys:
            self.results.setdefault(key, ["skipped", why])

    def absorb_run(self, result, keys: list[str], stdin: str, start: int) -> int | None:
        """Record one runner process's results; the index to resume at if it died, else None."""
        loaded = done = False
        for fields in _framed(result.stdout, stdin):
            head = fields[0]
            if head == "load" and len(fields) == 3:
                loaded = True
                if fields[1] != "ok":
                    status = "timeout" if fields[1] == "timeout" else "error"
                    self.fail_to_load(status, f"{status}: {str(fields[2])[:DETAIL_CHARS]}")
                    return None
            elif head == "done":
                done = True
            elif isinstance(head, int) and start <= head < len(keys) and len(fields) >= 2:
                self.results[keys[head]] = [str(fields[1])] + [f if fields[1] == "ok" else str(f)[:DETAIL_CHARS]
                                                                for f in fields[2:]]
        if not loaded:
            # Killed while loading the program: every run would die the same way.
            status, why = _killed(result)
            message = f"{why}: the program was killed while loading"
            self.fail_to_load(status, message, detail=message)
            return None
        self.loaded = True
        missing = [i for i in range(start, len(keys)) if keys[i] not in self.results]
        if not missing:
            return None
        if done:  # the runner stopped after repeated timeouts
            self.skip([keys[i] for i in missing], "skipped after repeated timeouts")
            return None
        status, why = _killed(result)
        self.results[keys[missing[0]]] = [status, f"the program was killed ({why})"]
        return missing[0] + 1 if missing[0] + 1 < len(keys) else None

    def fail_to_load(self, status: str, message: str, detail: str = "the program failed to load") -> None:
        self.load_error = message
        self.outcomes = [TestOutcome(status, detail) for _ in self.outcomes]

    def _verdict_key(self) -> str:
        return hashlib.sha256(json.dumps([self.suite_id, sorted(self.results.items())]).encode(
            "utf-8", "surrogatepass")).hexdigest()

    def recall_verdicts(self) -> bool:
        """Take the verdicts of an earlier judge run on exactly these results, if there was one."""
        cached = _VERDICTS.get(self._verdict_key())
        if cached is not None:
            self.outcomes = list(cached)
        return cached is not None

    def store_verdicts(self) -> None:
        if not self.pending and all(o is not None for o in self.outcomes):
            _lru_put(_VERDICTS, self._verdict_key(), tuple(self.outcomes))

    def give_up(self) -> None:
        why = f"the test's calls depend on the program's results beyond {MAX_JUDGE_ROUNDS} rounds"
        self.outcomes = [o if o is not None else TestOutcome("error", why) for o in self.outcomes]

    def report(self) -> GradeReport:
        outcomes = tuple(o if o is not None else TestOutcome("not run", "the grader could not run it")
                         for o in self.outcomes)
        return GradeReport(outcomes, self.load_error)


def _absorb_judgement(members: list[_FunctionGrading], result, stdin: str, p0: int, k0: int) -> tuple[int, int] | None:
    """Record one judge process's verdicts; where to resume (program, test) if it died, else None."""
    finished = set()
    seen: dict[int, set[int]] = {}
    for fields in _framed(result.stdout, stdin):
        if fields[0] == "done":
            return None
        if not (isinstance(fields[0], int) and p0 <= fields[0] < len(members)):
            continue
        g = members[fields[0]]
        if len(fields) == 2 and fields[1] == "done":
            finished.add(fields[0])
        elif len(fields) == 5 and isinstance(fields[1], int) and 0 <= fields[1] < len(g.outcomes):
            status, detail, needed = str(fields[2]), str(fields[3])[:DETAIL_CHARS], fields[4]
            seen.setdefault(fields[0], set()).add(fields[1])
            if status == "need":
                g.pending = True
                g.outcomes[fields[1]] = None
                if isinstance(needed, list):
                    g.want(k for k in needed if isinstance(k, str))
            else:
                g.outcomes[fields[1]] = TestOutcome(status, detail)
    # The judge died (a test killed it): blame the first test without a verdict, resume after it.
    status, why = _killed(result)
    for p in range(p0, len(members)):
        if p in finished:
            continue
        g, first = members[p], (k0 if p == p0 else 0)
        blamed = next((k for k in range(first, len(g.outcomes)) if k not in seen.get(p, set())), None)
        if blamed is None:
            continue
        g.outcomes[blamed] = TestOutcome(status, f"the test killed the grader ({why})")
        return (p, blamed + 1) if blamed + 1 < len(g.outcomes) else ((p + 1, 0) if p + 1 < len(members) else None)
    return None


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




# ---------------------------------------------------------------------- tester output
_FENCED = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|$)", re.DOTALL)
# A header line of the plain format: "Input:", "**Output:** 3", "Expected output:" (matched per line: linear time).
_IO_HEADER = re.compile(r"^[ \t*#>]*(input|expected output|output)[ \t*]*(?::[ \t*]*(.*))?$", re.IGNORECASE)


def parse_tester_tests(text: str, kind: str, entry_point: str | None = None) -> tuple[TestSuite | None, str | None]:
    """The tester's tests as a suite (at most :data:`MAX_TESTS`), or ``(None, reason)``; never raises.

    Function tests are read as :func:`mas_envs.tester_code.tester_statements` means them (asserts in
    ``test_*`` functions and ``TestCase`` methods count; a copy of ``entry_point`` is dropped)."""
    text = text[:MAX_PARSE_CHARS]
    if kind == FUNCTION:
        return _parse_function_tests(text, entry_point)
    return _parse_stdio_tests(text)


def _parse_function_tests(text: str, entry_point: str | None) -> tuple[TestSuite | None, str | None]:
    code, error = extract_code_block(text)
    if error is not None:
        return None, error
    protected = {"candidate"} | ({entry_point} if entry_point else set())
    try:
        steps = tuple(TestStep(ast.unparse(stmt), is_test_statement(stmt))
                      for stmt in tester_statements(code, protected))
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

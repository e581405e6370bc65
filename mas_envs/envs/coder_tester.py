"""``coder_tester``: a coder writes a program, a tester writes unit tests, both revise from the mismatches.

Workflows:

* ``mas`` (default) -- roles ``coder`` then ``tester`` each turn. The coder answers with a program in a
  ```python block; the tester answers with unit tests (format below). Each step runs the coder's
  latest code against the tester's latest tests in the sandbox, and later prompts show both agents
  which tests failed (expected vs got, errors). The episode ends (terminates) when, at the end of a
  turn, the code passes all of the tester's tests, or is truncated after ``max_turns`` turns.
  With ``parallel=True`` both roles act on the state at the start of the turn: the tester is not
  shown the coder's code (or its results) from the current turn.
* ``single`` -- one ``coder`` writes the program once; the episode ends after that step.

Test format for the tester:

* function problems (HumanEval style): one ```python block; every top-level ``assert`` is one test
  (e.g. ``assert add(2, 3) == 5``); other top-level statements are setup. ``candidate`` is an alias
  of the function.
* stdin/stdout problems: one ```json block holding a list of ``{"input": ..., "output": ...}``
  (or ``Input:`` / ``Output:`` pairs of lines).
At most ``mas_envs.code_grading.MAX_TESTS`` tests per message are used.

Rewards (``infos`` report ``team_reward`` and ``local_reward``; the step reward is
``alpha * team + local``):

* team, every step: pass rate of the current code on the hidden golden tests (0 before any code).
* coder local: the same golden pass rate (parse penalty when the reply has no code block).
* tester local: ``0.5 * validity + 0.5 * discrimination + catch_bonus * caught``. ``validity`` = fraction
  of its tests the reference solution passes (right tests); ``discrimination`` = fraction of its tests
  that are valid *and* fail on at least one known-wrong program -- the null program (a function that
  returns None, or a program that prints nothing), and the current code when it is wrong on the golden
  tests -- so a test that checks nothing (``assert True``) is right but earns no discrimination;
  ``caught`` = 1 when the current code is wrong on the golden tests and at least one valid test fails
  on it (0 otherwise). Top reward 1 (1 + catch_bonus when there was wrong code to catch). Problems
  without a reference solution (LiveCodeBench) give validity and discrimination 0. Parse penalty when
  no tests can be read.
* success: the final code passes ALL golden tests.

Data: ``dataset="train"`` / ``"validation"`` (the bundled problems, split 49 / 14 by prompt hash) or
``"humaneval"`` (164 problems, the test split); ``split="train"|"validation"|"test"`` picks the same
built-in sets and wins over ``dataset`` when both name a built-in set. ``dataset=<path.jsonl>`` with ``format=`` one of
``native | apps | codecontests | livecodebench`` loads user files (see ``mas_envs.data.code_problems``).
Generated code runs only in the sandbox (``mas_envs.sandbox``), graded by ``mas_envs.code_grading``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from mas_envs.code_grading import (
    MAX_TESTS,
    TESTER_FORMAT_FUNCTION,
    TESTER_FORMAT_STDIO,
    GradeReport,
    GradeRequest,
    Grader,
    describe_failures,
    first_tests,
    parse_tester_tests,
)
from mas_envs.core.text_env import StepResult, TextAECEnv
from mas_envs.data.code_problems import FUNCTION, STDIO, CodeProblem, TestSuite, fingerprint, load_problems
from mas_envs.parsing import extract_code_block

SHOWN_LOG_ENTRIES = 4  # how many earlier test-run summaries a prompt shows
SHOWN_CODE_CHARS = 4000
BUILTIN_SETS = {"train": "train", "validation": "validation", "test": "humaneval"}


@dataclass(frozen=True)
class CoderTesterState:
    """All mutable task state; immutable values only, so snapshots and clones share nothing mutable."""

    index: int
    code: str | None = None  # the coder's latest program
    golden: GradeReport | None = None  # that program on the hidden golden tests
    tests_source: str | None = None  # the tester's latest tests as text
    tests: TestSuite | None = None
    check: GradeReport | None = None  # latest program on the tester's latest tests
    turn_start_code: str | None = None  # what a parallel tester sees
    log: tuple[tuple[int, str, str], ...] = ()  # (turn, role that caused it, summary) of test runs


class CoderTesterEnv(TextAECEnv):
    metadata = {"render_modes": ["human", "ansi"], "name": "coder_tester_v0", "is_parallelizable": False}
    env_name = "coder_tester"
    workflows = {"mas": ("coder", "tester"), "single": ("coder",)}
    default_workflow = "mas"

    def __init__(
        self,
        *,
        dataset: str | None = None,
        split: str | None = None,
        format: str = "native",
        parallel: bool = False,
        sandbox_timeout: float = 2.0,
        catch_bonus: float = 0.5,
        max_turns: int = 3,
        max_workers: int | None = None,
        **kwargs: Any,
    ):
        super().__init__(max_turns=max_turns, **kwargs)
        if split is not None and split not in BUILTIN_SETS:
            raise ValueError(f"coder_tester: split must be one of {', '.join(BUILTIN_SETS)}, got {split!r}")
        if dataset is None or dataset in BUILTIN_SETS.values():
            dataset = BUILTIN_SETS[split] if split else (dataset or "train")
        self.dataset = dataset
        named = {d: s for s, d in BUILTIN_SETS.items()}
        self.split = split or named.get(dataset, "train")
        self.problems: tuple[CodeProblem, ...] = load_problems(dataset, format)
        if not self.problems:
            raise ValueError(f"coder_tester: dataset {dataset!r} has no gradable problems")
        self.parallel = bool(parallel)
        self.sandbox_timeout = float(sandbox_timeout)
        self.catch_bonus = float(catch_bonus)
        self.grader = Grader(test_timeout=self.sandbox_timeout, max_workers=max_workers)
        self.state = CoderTesterState(index=0)
        self._fingerprint: str | None = None

    # ------------------------------------------------------------------ task data
    @property
    def problem(self) -> CodeProblem:
        return self.problems[self.state.index]

    @property
    def task_id(self) -> str:
        return self.problem.task_id

    def eval_set_fingerprint(self) -> str:
        """sha256 of the problem set this env draws from (record it with evaluation results)."""
        if self._fingerprint is None:
            self._fingerprint = fingerprint(self.problems)
        return self._fingerprint

    # ------------------------------------------------------------------ TextAECEnv hooks
    def _reset_task(self, options: dict[str, Any]) -> None:
        self.state = CoderTesterState(index=self.choose_task_index(options, len(self.problems)))

    def _get_task_state(self) -> Any:
        return self.state

    def _set_task_state(self, state: Any) -> None:
        self.state = state

    def _is_success(self) -> bool:
        return self.state.golden is not None and self.state.golden.all_passed

    def _act(self, agent: str, text: str) -> StepResult:
        if agent == "coder":
            return self._coder_act(text)
        return self._tester_act(text)

    def prefetch_candidates(self, texts: list[str], agent: str | None = None) -> None:
        """Grade the K candidate actions of ``agent`` (default: the one to act) in one parallel batch.

        Changes no env state: it only fills the sandbox's result cache, so that stepping K clones
        with these texts afterwards (tree sampling) costs cache look-ups instead of K serial runs.
        """
        agent = agent or self.agent_selection
        problem, state = self.problem, self.state
        requests: list[GradeRequest] = []
        for text in texts:
            text = text if isinstance(text, str) else ""
            if agent == "coder":
                code, error = extract_code_block(text)
                if error is None:
                    requests.append(GradeRequest(code, problem.tests, problem.entry_point, problem.context))
                    if state.tests is not None:
                        requests.append(GradeRequest(code, state.tests, problem.entry_point, problem.context))
            else:
                suite, error = parse_tester_tests(text, problem.kind, problem.entry_point)
                if error is None:
                    null = self._null_program_if_wrong() if problem.reference is not None else None
                    for program in (problem.reference, state.code, null):
                        if program is not None:
                            requests.append(GradeRequest(program, suite, problem.entry_point, problem.context))
        self.grader.grade_many(requests)

    def _golden_rate(self) -> float:
        return self.state.golden.pass_rate if self.state.golden is not None else 0.0

    def _coder_act(self, text: str) -> StepResult:
        single = self.workflow == "single"
        code, error = extract_code_block(text)
        if error is not None:
            return StepResult(team=0.0, local=self.parse_penalty, parse_error=error, done=single,
                              feedback=f"no code: {error}", info=self._facts())
        problem = self.problem
        requests = [GradeRequest(code, problem.tests, problem.entry_point, problem.context)]
        if self.state.tests is not None:
            requests.append(GradeRequest(code, self.state.tests, problem.entry_point, problem.context))
        reports = self.grader.grade_many(requests)
        golden, check = reports[0], (reports[1] if len(reports) > 1 else None)
        log = self.state.log
        if check is not None:
            log += ((self.turn, "coder", self._check_summary(check, self.state.tests)),)
        self.state = dataclasses.replace(
            self.state, code=code, golden=golden, check=check, log=log,
            turn_start_code=self.state.turn_start_code if self.parallel else code,
        )
        rate = golden.pass_rate
        feedback = f"code ran; passed {check.n_passed}/{check.n_tests} of the tester's tests" if check else "code submitted"
        return StepResult(team=rate, local=rate, done=single, feedback=feedback, info=self._facts())

    def _tester_act(self, text: str) -> StepResult:
        problem = self.problem
        suite, error = parse_tester_tests(text, problem.kind, problem.entry_point)
        if error is not None:
            self._end_turn()
            return StepResult(team=self._golden_rate(), local=self.parse_penalty, parse_error=error,
                              feedback=f"no tests: {error}", info=self._facts())
        programs = {"code": self.state.code}
        if problem.reference is not None:
            programs.update(reference=problem.reference, null=self._null_program_if_wrong())
        programs = {k: v for k, v in programs.items() if v is not None}
        reports = dict(zip(programs, self.grader.grade_many(
            [GradeRequest(code, suite, problem.entry_point, problem.context) for code in programs.values()]
        )))
        check = reports.get("code")
        valid = reports["reference"].passed_mask() if "reference" in reports else [False] * suite.n_tests
        validity = sum(valid) / suite.n_tests
        code_wrong = self.state.golden is not None and not self.state.golden.all_passed
        wrong_programs = [reports["null"].passed_mask()] if "null" in reports else []
        if code_wrong and check is not None:
            wrong_programs.append(check.passed_mask())
        # a discriminating test is right (the reference passes it) and fails on some known-wrong program
        discriminating = [v and any(not mask[i] for mask in wrong_programs) for i, v in enumerate(valid)]
        discrimination = sum(discriminating) / suite.n_tests
        caught = bool(
            code_wrong and check is not None and any(v and not ok for v, ok in zip(valid, check.passed_mask()))
        )
        tests_source = _suite_text(suite)
        log = self.state.log
        if check is not None:
            log += ((self.turn, "tester", self._check_summary(check, suite)),)
        self.state = dataclasses.replace(self.state, tests_source=tests_source, tests=suite, check=check, log=log)
        self._end_turn()
        local = 0.5 * validity + 0.5 * discrimination + (self.catch_bonus if caught else 0.0)
        done = check is not None and check.all_passed
        feedback = (f"{suite.n_tests} tests; the code passes {check.n_passed}" if check else f"{suite.n_tests} tests; no code yet")
        info = self._facts()
        info.update(tester_validity=validity, tester_discrimination=discrimination, tester_caught=caught,
                    tester_n_tests=suite.n_tests,
                    tester_has_reference=problem.reference is not None)
        return StepResult(team=self._golden_rate(), local=local, done=done, feedback=feedback, info=info)

    def _null_program_if_wrong(self) -> str | None:
        """The null program of this problem (returns None / prints nothing), when the golden tests say it is
        wrong (almost always; a problem whose answer is always None would make it right)."""
        problem = self.problem
        if problem.kind == STDIO:
            null = "pass\n"
        else:
            null = f"def {problem.entry_point}(*args, **kwargs):\n    return None\n"
        golden = self.grader.grade_many([GradeRequest(null, problem.tests, problem.entry_point, problem.context)])[0]
        return None if golden.all_passed else null

    def _end_turn(self) -> None:
        self.state = dataclasses.replace(self.state, turn_start_code=self.state.code)

    def _facts(self) -> dict[str, Any]:
        """Deterministic facts about the current code for infos (no timings)."""
        golden, check = self.state.golden, self.state.check
        return {
            "task_id": self.task_id,
            "golden_pass_rate": golden.pass_rate if golden else 0.0,
            "golden_passed": golden.n_passed if golden else 0,
            "golden_total": self.problem.tests.n_tests,
            "tests_pass_rate": check.pass_rate if check else None,
        }

    @staticmethod
    def _check_summary(check: GradeReport, suite: TestSuite) -> str:
        head = f"the code passed {check.n_passed}/{check.n_tests} of the tester's tests"
        failures = describe_failures(check, suite)
        return head + (":\n" + "\n".join(failures) if failures else ".")

    # ------------------------------------------------------------------ prompts
    def _prompt(self, agent: str) -> str:
        problem, state = self.problem, self.state
        parts = [self._role_intro(agent), "Problem:\n" + problem.prompt.strip()]
        visible_code = state.turn_start_code if (agent == "tester" and self.parallel) else state.code
        if visible_code is not None:
            label = "Your current program" if agent == "coder" else "The coder's current program"
            parts.append(f"{label}:\n```python\n{visible_code[:SHOWN_CODE_CHARS].strip()}\n```")
        if state.tests_source is not None:
            label = "Your current tests" if agent == "tester" else "The tester's current tests"
            parts.append(f"{label}:\n{state.tests_source}")
        log = [e for e in state.log if not (agent == "tester" and self.parallel and e[0] == self.turn and e[1] == "coder")]
        if log:
            lines = [f"Turn {t + 1}, after the {role}'s message: {summary}" for t, role, summary in log[-SHOWN_LOG_ENTRIES:]]
            parts.append("Test runs so far:\n" + "\n".join(lines))
        parts.append(self._instructions(agent))
        return "\n\n".join(parts)

    def _role_intro(self, agent: str) -> str:
        if self.workflow == "single":
            return "You are an expert Python programmer. Solve the problem below."
        if agent == "coder":
            return "You are the coder in a team of two: you write the program, a tester writes unit tests for it."
        return "You are the tester in a team of two: a coder writes the program, you write unit tests that check it."

    def _instructions(self, agent: str) -> str:
        problem = self.problem
        if agent == "coder":
            if problem.kind == FUNCTION:
                what = f"the complete function `{problem.entry_point}` (with the imports it needs)"
            else:
                what = "a complete program that reads standard input and prints the answer to standard output"
            revise = " If tests failed, fix the program (or keep it if you believe the test is wrong)." if self.state.log else ""
            return f"Write {what} in one ```python code block.{revise}"
        fmt = TESTER_FORMAT_FUNCTION if problem.kind == FUNCTION else TESTER_FORMAT_STDIO
        return (
            "Write unit tests for the problem that a correct program passes and a wrong one fails. "
            + fmt.format(name=problem.entry_point, max_tests=MAX_TESTS)
        )

    def _render_text(self) -> str:
        state = self.state
        lines = [f"coder_tester {self.task_id} turn {self.turn}/{self.max_turns}"]
        if state.golden is not None:
            lines.append(f"golden tests passed: {state.golden.n_passed}/{state.golden.n_tests}")
        if state.check is not None:
            lines.append(f"tester's tests passed: {state.check.n_passed}/{state.check.n_tests}")
        lines += [f"[{h.agent}] -> {h.feedback}" for h in self.history[-4:]]
        return "\n".join(lines)

    # ------------------------------------------------------------------ scripted policy
    def scripted_action(self, agent: str | None = None) -> str:
        """Coder: the reference solution. Tester: tests taken from the golden tests (all correct)."""
        agent = agent or self.agent_selection
        problem = self.problem
        if agent == "coder":
            code = problem.reference if problem.reference is not None else "# no reference solution in this data set\n"
            return f"```python\n{code}\n```"
        return _suite_text(first_tests(problem.tests, MAX_TESTS))


def _suite_text(suite: TestSuite) -> str:
    """A suite in the tester's answer format (also how tests are shown in prompts)."""
    if suite.kind == STDIO:
        cases = [json.dumps({"input": c.input, "output": c.output}, ensure_ascii=False) for c in suite.cases]
        return "```json\n[\n" + ",\n".join(cases) + "\n]\n```"
    return "```python\n" + "\n".join(s.source for s in suite.steps) + "\n```"

"""``math_tool``: a tool agent and a reasoner solve a math problem together.

Workflows:

* ``mas`` (default) -- each turn the ``tool`` agent writes Python code whose printed output is its
  answer (the code runs only in the sandbox, ``mas_envs.sandbox.run_python``); then the ``reasoner``
  reasons and gives a final answer in ``\\boxed{}``. In later (refinement) turns both see the previous
  attempts: the tool's code, output and answer, and the reasoner's answer. The episode ends as soon
  as the tool's and the reasoner's answers of one turn agree, or after ``max_turns`` turns.
* ``single`` -- one ``reasoner`` solves alone; the episode ends at its first ``\\boxed{}`` answer
  (or after ``max_turns`` turns without one).

Rewards (mixed by the base class as ``alpha * team + local``):

* reasoner: ``team`` = ``local`` = 1 if its answer is correct, else 0; no ``\\boxed{}`` answer is the
  parse penalty (``local``) and ``infos["parse_error"]``.
* tool: ``local`` = 1 if the answer its code printed is correct, else 0; code that is missing, fails to
  run (error, timeout, memory, output flood) or prints nothing is the parse penalty instead.
  ``team`` at the tool's step: the reasoner has not answered yet, so ``team`` is the best available
  estimate of the team outcome -- the tool's answer being correct (the answer the reasoner can
  adopt). A failed tool step has ``team`` = 0.

Success = the reasoner's answer of the last turn played equals the ground truth.

A final answer is the content of the last ``\\boxed{}``; without one, the number of the last ``#### N``
line (GSM8K's own answer format, commas dropped) is accepted too. The tool's answer is that, read from
its output, else the last non-empty line of its output. Answers are compared by :mod:`mas_envs.math_check` (fast path for
plain numbers, math-verify with a deadline otherwise). ``infos`` carry ``answer`` and ``correct`` (and
for the tool ``sandbox_reason``); all deterministic, no timings.

Settings: ``dataset`` -- ``gsm8k`` (default), ``math``, ``math500``, ``arith`` (generated, for tiny
models), or a JSONL path together with ``format=`` ``aime`` | ``olympiadbench`` | ``gsm8k`` | ``math``
(see :mod:`mas_envs.data.math_problems`); ``split`` -- ``train`` | ``test`` (ignored for a path);
``workflow`` -- ``mas`` | ``single``; ``max_turns`` (default 2); ``alpha``; ``sandbox_timeout`` (s per
tool program); ``check_timeout`` (s per math-verify comparison). ``reset(options={"task_index": i})``
picks problem ``i``; otherwise the problem is drawn from ``self.np_random``.
"""

from __future__ import annotations

from typing import Any

from mas_envs.core.text_env import StepResult, TextAECEnv
from mas_envs.data.math_problems import MathProblem, fingerprint, load_jsonl, load_problems
from mas_envs.envs.tool_programs import ToolProgramMixin
from mas_envs.math_check import DEFAULT_TIMEOUT, answers_match
from mas_envs.parsing import extract_code_block, extract_final_answer

TOOL_OUTPUT_CHARS = 2000  # how much of the tool's stdout later prompts show
TOOL_CODE_CHARS = 4000
REASONER_TEXT_CHARS = 2000
MAX_ANSWER_CHARS = 500


def tool_answer_from_output(stdout: str) -> str | None:
    """The answer a tool program printed: its last ``\\boxed{}``, else its last ``#### N`` line, else its
    last non-empty line."""
    boxed, error = extract_final_answer(stdout)
    if error is None:
        return boxed[:MAX_ANSWER_CHARS]
    lines = [line.strip() for line in stdout.strip().splitlines() if line.strip()]
    return lines[-1][:MAX_ANSWER_CHARS] if lines else None


class MathToolEnv(ToolProgramMixin, TextAECEnv):
    """Tool agent + reasoner on math word problems; see the module docstring."""

    metadata = {**TextAECEnv.metadata, "name": "math_tool_v0"}
    env_name = "math_tool"
    workflows = {"mas": ("tool", "reasoner"), "single": ("reasoner",)}
    default_workflow = "mas"

    def __init__(
        self,
        *,
        dataset: str = "gsm8k",
        split: str = "train",
        format: str | None = None,
        max_turns: int = 2,
        sandbox_timeout: float = 5.0,
        check_timeout: float = DEFAULT_TIMEOUT,
        **kwargs: Any,
    ):
        super().__init__(max_turns=max_turns, **kwargs)
        if format is not None:
            self.problems = load_jsonl(str(dataset), format)
            self.dataset_name = f"{format}:{dataset}"
        else:
            self.problems = load_problems(dataset, split)
            self.dataset_name = dataset
        self.split = split
        self.sandbox_timeout = float(sandbox_timeout)
        self.check_timeout = float(check_timeout)
        self._fingerprint: str | None = None
        self._clear_task(0)

    # ------------------------------------------------------------------ task state
    def _clear_task(self, index: int) -> None:
        self.task_index = index
        self.tool_code: str | None = None
        self.tool_output: str | None = None
        self.tool_status: str | None = None
        self.tool_answer: str | None = None
        self.reasoner_text: str | None = None
        self.reasoner_answer: str | None = None
        self.reasoner_correct = False
        # one summary line per finished step, shown in refinement prompts
        self.attempts: tuple[tuple[int, str, str], ...] = ()

    @property
    def problem(self) -> MathProblem:
        return self.problems[self.task_index]

    @property
    def task_id(self) -> str:
        return f"{self.dataset_name}/{self.split}/{self.task_index}"

    def eval_set_fingerprint(self) -> str:
        """sha256 of this env's problem set (question and answer of every problem, in order)."""
        if self._fingerprint is None:
            self._fingerprint = fingerprint(self.problems)
        return self._fingerprint

    def _reset_task(self, options: dict[str, Any]) -> None:
        self._clear_task(self.choose_task_index(options, len(self.problems)))

    _STATE_FIELDS = (
        "task_index", "tool_code", "tool_output", "tool_status", "tool_answer",
        "reasoner_text", "reasoner_answer", "reasoner_correct", "attempts",
    )

    def _get_task_state(self) -> Any:
        return tuple(getattr(self, name) for name in self._STATE_FIELDS)

    def _set_task_state(self, state: Any) -> None:
        for name, value in zip(self._STATE_FIELDS, state):
            setattr(self, name, value)

    def _is_success(self) -> bool:
        return self.reasoner_correct

    def _correct(self, answer: str | None) -> bool:
        return answers_match(answer, self.problem.answer, timeout=self.check_timeout)

    # ------------------------------------------------------------------ actions
    def _act(self, agent: str, text: str) -> StepResult:
        if agent == "tool":
            return self._tool_act(text)
        return self._reasoner_act(text)

    def _tool_job(self, code: str) -> Any:
        from mas_envs.sandbox import Job  # lazily: the single workflow needs no sandbox

        return Job(code, timeout=self.sandbox_timeout)

    def _tool_act(self, text: str) -> StepResult:
        self.tool_code = self.tool_output = self.tool_status = self.tool_answer = None
        code, error = extract_code_block(text)
        if error is not None:
            self.tool_status = "no code"
            return self._tool_failed(error, {"sandbox_reason": None})
        self.tool_code = code[:TOOL_CODE_CHARS]
        result = self._run_tool_program(code)
        self.tool_status = result.reason
        self.tool_output = result.stdout[:TOOL_OUTPUT_CHARS]
        info = {"sandbox_reason": result.reason}
        if result.reason != "ok":
            tail = result.stderr.strip().splitlines()[-1:] if result.stderr.strip() else []
            return self._tool_failed(f"code failed ({result.reason})" + (f": {tail[0][:200]}" if tail else ""), info)
        answer = tool_answer_from_output(result.stdout)
        if answer is None:
            return self._tool_failed("the code printed nothing", info)
        self.tool_answer = answer
        correct = self._correct(answer)
        self._note(f"tool's code printed the answer: {answer}")
        return StepResult(
            team=float(correct), local=float(correct), feedback=f"answer: {answer}",
            info={**info, "answer": answer, "correct": correct},
        )

    def _tool_failed(self, why: str, info: dict[str, Any]) -> StepResult:
        self._note(f"tool gave no answer ({why})")
        return StepResult(
            local=self.parse_penalty, parse_error=why, feedback=why,
            info={**info, "answer": None, "correct": False},
        )

    def _reasoner_act(self, text: str) -> StepResult:
        self.reasoner_text = text[:REASONER_TEXT_CHARS]
        answer, error = extract_final_answer(text)
        if answer is not None:
            answer = answer[:MAX_ANSWER_CHARS]
        self.reasoner_answer = answer
        self.reasoner_correct = self._correct(answer)
        if error is not None:
            self._note(f"reasoner gave no \\boxed{{}} answer ({error})")
            return StepResult(
                local=self.parse_penalty, parse_error=error, feedback=f"no answer: {error}",
                info={"answer": None, "correct": False, "agreed": False},
            )
        self._note(f"reasoner answered: {answer}")
        if self.workflow == "single":
            done = True
        else:
            done = self.tool_answer is not None and (
                self.tool_answer == answer or answers_match(answer, self.tool_answer, timeout=self.check_timeout)
            )
        score = float(self.reasoner_correct)
        return StepResult(
            team=score, local=score, done=done, feedback=f"answer: {answer}",
            info={"answer": answer, "correct": self.reasoner_correct, "agreed": bool(done and self.workflow == "mas")},
        )

    def _note(self, line: str) -> None:
        self.attempts = self.attempts + ((self.turn, self.agent_selection, line),)

    # ------------------------------------------------------------------ prompts
    def _prompt(self, agent: str) -> str:
        parts = [self._role_intro(agent), "Problem:\n" + self.problem.question.strip()]
        previous = [a for a in self.attempts if a[0] < self.turn]
        if previous:
            lines = [f"Turn {turn + 1}: {line}" for turn, _, line in previous]
            parts.append("Previous attempts:\n" + "\n".join(lines))
        if agent == "tool":
            if previous and self.tool_code is not None:
                parts.append(f"Your previous code:\n```python\n{self.tool_code.strip()}\n```")
            if previous and self.reasoner_text:
                parts.append(f"The reasoner's previous answer:\n{self.reasoner_text.strip()}")
            parts.append(
                "Write a Python program in a ```python code block that computes the answer and prints "
                f"only the final answer on its last line. It runs with no network and a {self.sandbox_timeout:g} s limit."
            )
        else:
            if self.workflow == "mas":
                if self.tool_code is not None:
                    parts.append(f"The tool agent's code:\n```python\n{self.tool_code.strip()}\n```")
                    parts.append(f"Its output ({self.tool_status}):\n{(self.tool_output or '').strip() or '(nothing)'}")
                elif self.tool_status is not None:
                    parts.append("The tool agent gave no runnable code this turn.")
            if previous and self.reasoner_text:
                parts.append(f"Your previous answer:\n{self.reasoner_text.strip()}")
            parts.append("Reason step by step, then give the final answer as \\boxed{answer}.")
        return "\n\n".join(parts)

    def _role_intro(self, agent: str) -> str:
        if agent == "tool":
            return "You are the tool agent in a team of two. You solve math problems by writing Python code."
        if self.workflow == "mas":
            return "You are the reasoner in a team of two. You check the tool agent's work and decide the final answer."
        return "You solve math problems."

    def _render_text(self) -> str:
        lines = [f"math_tool {self.task_id} turn {self.turn}/{self.max_turns}", self.problem.question[:300]]
        lines += [f"[turn {t + 1}] {line}" for t, _, line in self.attempts[-4:]]
        return "\n".join(lines)

    # ------------------------------------------------------------------ scripted policy
    def scripted_action(self, agent: str | None = None) -> str:
        """A correct action: the tool computes the answer in code, the reasoner boxes the ground truth."""
        agent = agent or self.agent_selection
        if agent == "tool":
            if self.problem.expression is not None:
                code = f"print({self.problem.expression})"
            else:
                code = f"answer = {self.problem.answer!r}\nprint(answer)"
            return "```python\n" + code + "\n```"
        return f"The answer is \\boxed{{{self.problem.answer}}}."

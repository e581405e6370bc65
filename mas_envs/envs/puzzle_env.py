"""``PuzzleEnv``: the shared workflows of the grid puzzles (Plan-Path, Sokoban, Sudoku).

Two workflows, as in the paper:

* ``single`` -- one ``solver`` reads the puzzle and answers with an action; the action is executed.
* ``mas``    -- each turn the ``tool`` agent writes Python code that prints an action; the code runs in
  the sandbox. Then the ``planner`` sees the puzzle, the tool's code and its output, and answers with
  the action that is executed on the puzzle.

Rewards (``reward = alpha * team + local``; docs/REWARDS.md has the table per env).

* ``team`` is the team's outcome of the turn: the puzzle's reward for the action that is (or, for the
  tool, would be) executed. The planner's team term is the reward of the action it executes. The tool acts
  first and does not change the puzzle, so its team term is what the team earns this turn when its
  printed action is executed (the planner following it), computed on a scratch copy: the same number
  the planner's team term is when the planner follows the tool.
* ``local`` is the role's own graded work. Solver / planner: 0, or the parse penalty for an unparseable
  answer. Tool: the parse penalty when there is no code, the code fails (error, time-out) or its output is
  no valid answer (the env contract: an unparseable action is penalised); else the sum of the
  ``TOOL_CREDIT`` parts it earns: it ran and printed a valid action (0.25 + 0.25), that action solves the
  puzzle or reaches the goal (0.25), and its length against the optimum (0.25 x optimum / length). A
  program that ran (exit 0) but printed no valid answer gets the parse penalty plus the "ran" part, so
  it ranks above one that crashed.

A subclass provides the puzzle through a handful of hooks (see "puzzle hooks" below); the game rules
themselves live in ``mas_envs.games``.
"""

from __future__ import annotations

from typing import Any

from mas_envs.core.text_env import StepResult, TextAECEnv
from mas_envs.envs.tool_programs import ToolProgramMixin
from mas_envs.parsing import extract_code_block

TOOL_OUTPUT_CHARS = 2000  # how much of the tool's stdout the planner is shown
# The tool's local reward, graded: each part earned adds its weight (a program that prints an optimal
# solving answer earns 1.0; one that prints a valid but useless answer 0.5).
TOOL_CREDIT = {"ran": 0.25, "valid": 0.25, "solves": 0.25, "optimal": 0.25}
# How the tool agent is asked. "full": the puzzle text every role sees, plus the instruction; the program
# reads the puzzle from stdin. "code": a short code-only request, and the puzzle's state is defined as
# Python variables before the tool's program runs (shown in the prompt), so a small model spends its
# budget on the search, not on restating the puzzle or parsing text. "function": complete a documented
# function stub (the HumanEval shape that code models are trained on); the state is defined as variables
# before the tool's code, and a call of the function, printed as JSON, runs after it. stdin is the same in all.
TOOL_PROMPTS = ("full", "code", "function")


class PuzzleEnv(ToolProgramMixin, TextAECEnv):
    workflows = {"mas": ("tool", "planner"), "single": ("solver",)}
    default_workflow = "mas"

    def __init__(self, *, sandbox_timeout: float = 5.0, tool_prompt: str = "full", **kwargs: Any):
        if tool_prompt not in TOOL_PROMPTS:
            raise ValueError(f"{type(self).__name__}: tool_prompt must be one of {TOOL_PROMPTS}, got {tool_prompt!r}")
        if tool_prompt == "function" and type(self)._tool_function is PuzzleEnv._tool_function:
            raise ValueError(f"{type(self).__name__}: tool_prompt='function' is not available for this env "
                             f"(it defines no function stub); use 'full' or 'code'")
        super().__init__(**kwargs)
        self.sandbox_timeout = float(sandbox_timeout)
        self.tool_prompt = tool_prompt
        self.tool_code: str | None = None
        self.tool_output: str | None = None
        self.tool_status: str | None = None

    # ------------------------------------------------------------------ puzzle hooks
    def _new_puzzle(self, options: dict[str, Any]) -> None:
        """Choose a puzzle (``options.get("task_index")`` on the current split, else from ``self.np_random``)."""
        raise NotImplementedError

    def _puzzle_state(self) -> Any:
        """The puzzle's mutable state as small picklable data."""
        raise NotImplementedError

    def _set_puzzle_state(self, state: Any) -> None:
        raise NotImplementedError

    def _parse_action(self, text: str) -> tuple[Any, str | None]:
        """Parse an answer into a puzzle action: ``(action, None)`` or ``(None, reason)``."""
        raise NotImplementedError

    def _apply(self, action: Any) -> tuple[float, str, bool]:
        """Execute ``action`` on the puzzle: ``(reward, feedback text, episode done)``."""
        raise NotImplementedError

    def _puzzle_text(self) -> str:
        """Rules and current state of the puzzle, as shown to every role."""
        raise NotImplementedError

    def _answer_format(self) -> str:
        """How to write an answer, e.g. 'a JSON list of moves such as ["U", "R"]'."""
        raise NotImplementedError

    def _tool_stdin(self) -> str:
        """Input given to the tool's program on stdin (e.g. the board as text)."""
        return ""

    def _tool_preamble(self) -> str:
        """Python lines that define the puzzle's state as variables (``tool_prompt="code"``); "" if none."""
        return ""

    def _tool_task(self) -> str:
        """What the tool's program must print, one sentence (``tool_prompt="code"``)."""
        return f"Print the answer as {self._answer_format()}."

    def _tool_function(self) -> tuple[str, str]:
        """``(stub, call)`` for ``tool_prompt="function"``: a function's signature and docstring the tool
        completes, and the expression (over the preamble's variables) whose JSON is the answer."""
        raise NotImplementedError

    # ------------------------------------------------------------------ TextAECEnv hooks
    def _reset_task(self, options: dict[str, Any]) -> None:
        self.tool_code = self.tool_output = self.tool_status = None
        self._new_puzzle(options)

    def _get_task_state(self) -> Any:
        return (self._puzzle_state(), self.tool_code, self.tool_output, self.tool_status)

    def _set_task_state(self, state: Any) -> None:
        puzzle, self.tool_code, self.tool_output, self.tool_status = state
        self._set_puzzle_state(puzzle)

    def _act(self, agent: str, text: str) -> StepResult:
        if agent == "tool":
            return self._tool_act(text)
        action, error = self._parse_action(text)
        if error is not None:
            return StepResult(local=self.parse_penalty, parse_error=error, feedback=f"invalid answer: {error}")
        reward, feedback, done = self._apply(action)
        return StepResult(team=reward, feedback=feedback, done=done)

    def _tool_job(self, code: str) -> Any:
        from mas_envs.sandbox import Job  # lazily: the single workflow needs no sandbox

        preamble = self._tool_preamble() if self.tool_prompt in ("code", "function") else ""
        program = f"{preamble}\n{code}" if preamble else code
        if self.tool_prompt == "function":
            # The answer is the function's value, printed last (the only line the env reads).
            program += f"\n\nprint(json.dumps({self._tool_function()[1]}))\n"
        return Job(program, self._tool_stdin(), self.sandbox_timeout)

    def _tool_answer_text(self, stdout: str) -> tuple[str, str | None]:
        """``(answer text, error)`` from the program's stdout: all of it, or (``function``) the value the
        function returned, read from the last line (earlier prints are the tool's own examples)."""
        if self.tool_prompt != "function":
            return stdout, None
        lines = stdout.strip().splitlines()
        return self._function_answer(lines[-1] if lines else "")

    def _function_answer(self, value_json: str) -> tuple[str, str | None]:
        """The answer text for the function's returned value (JSON); by default the value itself."""
        return value_json, None

    def _tool_act(self, text: str) -> StepResult:
        code, error = extract_code_block(text)
        if error is not None:
            self.tool_code, self.tool_output, self.tool_status = None, None, "no code"
            return StepResult(local=self.parse_penalty, parse_error=error, feedback=f"no code: {error}")
        result = self._run_tool_program(code)
        self.tool_code = code
        self.tool_output = result.stdout[:TOOL_OUTPUT_CHARS]
        self.tool_status = result.reason
        info = {"sandbox_reason": result.reason}
        if result.reason != "ok":
            err_tail = result.stderr.strip().splitlines()[-1:] if result.stderr.strip() else []
            why = f"code failed ({result.reason}){': ' + err_tail[0][:200] if err_tail else ''}"
            return StepResult(local=self.parse_penalty, parse_error=why, feedback=why, info=info)
        answer, error = self._tool_answer_text(result.stdout)
        if error is None:
            if answer.strip() != result.stdout.strip():  # show the planner the answer the env read
                self.tool_output = f"{self.tool_output.rstrip()}\nAs an answer: {answer}"[-TOOL_OUTPUT_CHARS:]
            action, error = self._parse_action(answer)
        if error is not None:
            # No answer: a parse error, penalised like any -- but a program that ran beats one that
            # crashed (the first rung of the graded credit), so a group of broken programs still ranks.
            why = f"output is not a valid answer: {error}"
            info["tool_credit"] = TOOL_CREDIT["ran"]
            return StepResult(local=self.parse_penalty + TOOL_CREDIT["ran"], parse_error=why, feedback=why, info=info)
        team, solves, optimality = self._simulate(action)
        credit = TOOL_CREDIT["ran"] + TOOL_CREDIT["valid"]
        if solves:
            credit += TOOL_CREDIT["solves"] + TOOL_CREDIT["optimal"] * optimality
        info["tool_credit"] = credit
        return StepResult(team=team, local=credit, feedback="code ran; output parsed", info=info)

    def _simulate(self, action: Any) -> tuple[float, bool, float]:
        """``(reward, solves, optimality)`` that ``action`` would earn, without changing the puzzle."""
        saved = self._puzzle_state()
        reward, _, done = self._apply(action)
        optimality = self._optimality(saved, action) if done else 0.0
        self._set_puzzle_state(saved)
        return reward, bool(done), optimality

    def _optimality(self, state_before: Any, action: Any) -> float:
        """Optimum / length of a solving ``action`` from ``state_before``, in (0, 1]; 1.0 where not defined."""
        return 1.0

    # ------------------------------------------------------------------ prompts
    def _prompt(self, agent: str) -> str:
        if agent == "tool" and self.tool_prompt == "function":
            return self._function_tool_prompt()
        code_tool = agent == "tool" and self.tool_prompt == "code"
        parts = self._code_tool_head() if code_tool else [self._role_intro(agent), self._puzzle_text()]
        history = self.history_text()
        if history:
            parts.append("Previous turns:\n" + history)
        if code_tool:
            parts.append(f"{self._tool_task()} No network; {self.sandbox_timeout:g} s limit.")
        elif agent == "tool":
            parts.append(
                "Write a Python program in a ```python code block that prints the answer as "
                f"{self._answer_format()}. The program runs with no network and a {self.sandbox_timeout:g} s "
                "limit; the puzzle text above is also given to it on stdin."
            )
        elif agent == "planner":
            if self.tool_code is not None:
                parts.append(f"The tool agent's code:\n```python\n{self.tool_code.strip()}\n```")
                parts.append(f"Its output ({self.tool_status}):\n{(self.tool_output or '').strip() or '(nothing)'}")
            elif self.tool_status is not None:
                parts.append("The tool agent gave no runnable code this turn.")
            parts.append(f"Answer with {self._answer_format()}.")
        else:
            parts.append(f"Answer with {self._answer_format()}.")
        return "\n\n".join(p for p in parts if p)

    def _code_tool_head(self) -> list[str]:
        """The start of the code-only tool prompt: the request, then the puzzle as variables (or text)."""
        preamble = self._tool_preamble()
        state = (f"These lines already run before your code (do not repeat them):\n```python\n{preamble}\n```"
                 if preamble else "The puzzle, given to your program on stdin:\n" + self._puzzle_text())
        return ["Write a short Python program for your team. Reply with one ```python code block and nothing else.",
                state]

    def _function_tool_prompt(self) -> str:
        """The function tool's prompt: the stub to complete, the puzzle it is called on, and the history."""
        stub, call = self._tool_function()
        parts = ["Complete this Python function. Reply with one ```python code block holding the whole "
                 f"function (imports included) and nothing else. No network; {self.sandbox_timeout:g} s limit.",
                 f"```python\n{stub.strip()}\n```",
                 f"It is called as `{call}` on this puzzle:\n```python\n{self._tool_preamble()}\n```"]
        history = self.history_text()
        if history:
            parts.append("Previous turns:\n" + history)
        return "\n\n".join(parts)

    def _role_intro(self, agent: str) -> str:
        return {
            "tool": "You are the tool agent in a team of two. You write code that computes the answer.",
            "planner": "You are the planner in a team of two. You decide the final answer.",
            "solver": "You solve the puzzle.",
        }.get(agent, "")

    # ------------------------------------------------------------------ scripted policy
    def scripted_action(self, agent: str | None = None) -> str:
        """An optimal text action for ``agent`` (default: the one to act), from the puzzle's solver."""
        agent = agent or self.agent_selection
        if agent == "tool":
            code = self._scripted_tool_function() if self.tool_prompt == "function" else self._scripted_tool_code()
            return "```python\n" + code + "\n```"
        return self._scripted_answer()

    def _scripted_answer(self) -> str:
        raise NotImplementedError

    def _scripted_tool_code(self) -> str:
        """Python source that prints an optimal answer; by default it prints the solver's answer."""
        return f"print({self._scripted_answer()!r})"

    def _scripted_tool_function(self) -> str:
        """A correct completion of the ``function`` stub (envs that offer it define it)."""
        raise NotImplementedError

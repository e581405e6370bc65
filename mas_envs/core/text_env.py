"""``TextAECEnv``: the base class of every stronger-mas environment.

A PettingZoo AEC environment whose agents are LLM roles. It owns the AEC bookkeeping (agent order,
turns, reward accumulation, termination/truncation, dead steps) and branchable state
(``clone``/``snapshot``/``restore``); a subclass supplies only the task:

* ``_reset_task(options)``      -- choose and set up a task (use ``self.np_random``)
* ``_act(agent, text)``         -- apply one agent's raw completion, return a :class:`StepResult`
* ``_prompt(agent)``            -- the full role-specific prompt text for ``agent``
* ``_get_task_state()`` / ``_set_task_state(state)`` -- the task's mutable state as small picklable data

Observations are ``{"observation": int64 array, "prompt": str}``: ``prompt`` is what an LLM reads,
``observation`` a small numeric summary (PettingZoo's checks need a numeric array there).
Actions are arbitrary strings: unparseable text is a penalty and ``infos[agent]["parse_error"]``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium.spaces import Box, Dict
from gymnasium.utils import seeding
from pettingzoo import AECEnv

from mas_envs.core.spaces import FreeText

# How many characters of an agent's message are kept in the interaction history shown to others.
HISTORY_CHARS = 2000


@dataclass
class StepResult:
    """What one agent's action did. ``team`` and ``local`` are mixed as ``alpha * team + local``."""

    team: float = 0.0
    local: float = 0.0
    parse_error: str | None = None
    done: bool = False  # the task is finished (the episode terminates after this step)
    feedback: str = ""  # short text shown in later prompts' history
    info: dict[str, Any] = field(default_factory=dict)  # extra deterministic facts for infos


@dataclass(frozen=True)
class HistoryEntry:
    turn: int
    agent: str
    text: str
    feedback: str


class TextAECEnv(AECEnv):
    """Base class; see the module docstring for the subclass hooks."""

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["human", "ansi"],
        "name": "text_env_v0",
        "is_parallelizable": False,
    }
    env_name: ClassVar[str] = "text_env"
    env_version: ClassVar[str] = "0"
    # workflow name -> roles in turn order
    workflows: ClassVar[dict[str, tuple[str, ...]]] = {"single": ("solver",)}
    default_workflow: ClassVar[str] = "single"

    def __init__(
        self,
        *,
        workflow: str | None = None,
        alpha: float = 1.0,
        max_turns: int = 4,
        max_cycles: int | None = None,
        render_mode: str | None = None,
        parse_penalty: float = -1.0,
    ):
        super().__init__()
        workflow = workflow or self.default_workflow
        if workflow not in self.workflows:
            raise ValueError(
                f"{self.env_name}: unknown workflow {workflow!r}; choose one of {sorted(self.workflows)}"
            )
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"{self.env_name}: render_mode must be one of {self.metadata['render_modes']} or None, "
                f"got {render_mode!r}"
            )
        if int(max_turns) < 1:
            raise ValueError(f"{self.env_name}: max_turns must be >= 1, got {max_turns}")
        if max_cycles is not None and int(max_cycles) < 1:
            raise ValueError(f"{self.env_name}: max_cycles must be >= 1, got {max_cycles}")
        self.workflow = workflow
        self.alpha = float(alpha)
        # PettingZoo's convention: a cycle is every agent acting once, i.e. one of our turns.
        self.max_cycles = None if max_cycles is None else int(max_cycles)
        self.max_turns = int(max_turns) if max_cycles is None else min(int(max_turns), int(max_cycles))
        self.render_mode = render_mode
        self.parse_penalty = float(parse_penalty)
        self.possible_agents = list(self.workflows[workflow])
        vec_space = self._observation_vector_space()
        # Spaces are built once: PettingZoo requires the same object on every call.
        self._observation_spaces = {
            a: Dict({"observation": vec_space, "prompt": FreeText()}) for a in self.possible_agents
        }
        self._action_spaces = {a: FreeText(sample_length=96) for a in self.possible_agents}
        self.np_random, self._np_random_seed = seeding.np_random(None)
        self._has_reset = False

    # ------------------------------------------------------------------ spaces
    def observation_space(self, agent: str) -> gymnasium.spaces.Space:
        return self._observation_spaces[agent]

    def action_space(self, agent: str) -> gymnasium.spaces.Space:
        return self._action_spaces[agent]

    def _observation_vector_space(self) -> Box:
        """Space of the numeric part of observations; default ``[turn, agent_index, max_turns]``."""
        return Box(low=0, high=np.iinfo(np.int32).max, shape=(3,), dtype=np.int64)

    def _observation_vector(self, agent: str) -> np.ndarray:
        return np.array(
            [self.turn, self.possible_agents.index(agent), self.max_turns], dtype=np.int64
        )

    # ------------------------------------------------------------------ AEC API
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None:
            self.np_random, self._np_random_seed = seeding.np_random(int(seed))
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.turn = 0
        self.history: list[HistoryEntry] = []
        self.success = False
        self.agent_selection = self.agents[0]
        self._reset_task(dict(options or {}))
        self.infos = {a: self._base_info(a) for a in self.agents}
        self._has_reset = True

    def observe(self, agent: str) -> dict[str, Any]:
        return {"observation": self._observation_vector(agent), "prompt": self._prompt(agent)}

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        text = _as_text(action)
        self._cumulative_rewards[agent] = 0.0
        try:
            result = self._act(agent, text)
        except Exception as exc:  # a bug in task code must not kill a rollout of 1000 episodes
            result = StepResult(
                local=self.parse_penalty, parse_error=f"internal error: {type(exc).__name__}: {exc}"
            )
        if result.parse_error is not None and result.local == 0.0 and result.team == 0.0:
            result = dataclasses.replace(result, local=self.parse_penalty)
        reward = self.alpha * float(result.team) + float(result.local)
        self.rewards = {a: 0.0 for a in self.agents}
        self.rewards[agent] = reward
        self.history.append(HistoryEntry(self.turn, agent, text[:HISTORY_CHARS], result.feedback))

        is_last_role = agent == self.possible_agents[-1]
        if is_last_role:
            self.turn += 1
        if result.done:
            self.success = bool(self._is_success())
            self.terminations = {a: True for a in self.agents}
        elif is_last_role and self.turn >= self.max_turns:
            self.success = bool(self._is_success())
            self.truncations = {a: True for a in self.agents}
        for a in self.agents:
            self.infos[a] = self._base_info(a)
        self.infos[agent].update(
            team_reward=float(result.team),
            local_reward=float(result.local),
            reward=reward,
            parse_error=result.parse_error,
            **result.info,
        )
        self.agent_selection = self._next_agent(agent)
        self._accumulate_rewards()
        if self.render_mode == "human":
            self.render()

    def _next_agent(self, agent: str) -> str:
        order = self.possible_agents
        return order[(order.index(agent) + 1) % len(order)]

    def _base_info(self, agent: str) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "success": self.success,
            "team_reward": 0.0,
            "local_reward": 0.0,
            "reward": 0.0,
            "parse_error": None,
        }

    def render(self) -> str | None:
        if self.render_mode is None:
            gymnasium.logger.warn(
                f"{self.env_name}: render() called without a render_mode; pass render_mode='ansi' or 'human'."
            )
            return None
        text = self._render_text()
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ branching
    def snapshot(self) -> dict[str, Any]:
        """A small picklable copy of all mutable state; ``restore`` brings it back."""
        return {
            "agents": list(self.agents),
            "rewards": dict(self.rewards),
            "cumulative_rewards": dict(self._cumulative_rewards),
            "terminations": dict(self.terminations),
            "truncations": dict(self.truncations),
            "infos": {a: dict(i) for a, i in self.infos.items()},
            "agent_selection": self.agent_selection,
            "turn": self.turn,
            "history": list(self.history),
            "success": self.success,
            "rng": self._rng.bit_generator.state if self._rng is not None else self._rng_state,
            "task": self._get_task_state(),
        }

    def restore(self, snap: dict[str, Any]) -> None:
        self.agents = list(snap["agents"])
        self.rewards = dict(snap["rewards"])
        self._cumulative_rewards = dict(snap["cumulative_rewards"])
        self.terminations = dict(snap["terminations"])
        self.truncations = dict(snap["truncations"])
        self.infos = {a: dict(i) for a, i in snap["infos"].items()}
        self.agent_selection = snap["agent_selection"]
        self.turn = snap["turn"]
        self.history = list(snap["history"])
        self.success = snap["success"]
        # The Generator is rebuilt only when used: building one costs ~50 µs of OS entropy, and a
        # branch usually only steps (no randomness needed).
        self._rng = None
        self._rng_state = snap["rng"]
        self._set_task_state(snap["task"])
        self._has_reset = True

    def clone(self) -> "TextAECEnv":
        """An independent copy that continues exactly like this env under the same actions.

        Configuration, spaces and read-only task data are shared; every piece of mutable state is
        copied through ``snapshot``/``restore``.
        """
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        if self._has_reset:
            new.restore(self.snapshot())
        return new

    @property
    def np_random(self) -> np.random.Generator:
        if self._rng is None:
            bitgen = np.random.PCG64()
            bitgen.state = self._rng_state
            self._rng = np.random.Generator(bitgen)
        return self._rng

    @np_random.setter
    def np_random(self, generator: np.random.Generator) -> None:
        self._rng = generator

    # ------------------------------------------------------------------ subclass hooks
    def _reset_task(self, options: dict[str, Any]) -> None:
        raise NotImplementedError

    def _act(self, agent: str, text: str) -> StepResult:
        raise NotImplementedError

    def _prompt(self, agent: str) -> str:
        raise NotImplementedError

    def _get_task_state(self) -> Any:
        raise NotImplementedError

    def _set_task_state(self, state: Any) -> None:
        raise NotImplementedError

    def _is_success(self) -> bool:
        return False

    def _render_text(self) -> str:
        lines = [f"{self.env_name} turn {self.turn}/{self.max_turns}"]
        lines += [f"[{h.agent}] {h.text[:200]!r} -> {h.feedback}" for h in self.history[-4:]]
        return "\n".join(lines)

    # ------------------------------------------------------------------ helpers for subclasses
    def choose_task_index(self, options: dict[str, Any], n_tasks: int) -> int:
        """``options["task_index"]`` (checked against ``n_tasks``), else a draw from ``self.np_random``."""
        index = options.get("task_index")
        if index is None:
            return int(self.np_random.integers(n_tasks))
        if not 0 <= int(index) < n_tasks:
            raise ValueError(f"{self.env_name}: task_index {index} out of range 0..{n_tasks - 1}")
        return int(index)

    def history_text(self, last_turns: int = 2) -> str:
        """Readable interaction history of the last ``last_turns`` turns (for prompts)."""
        recent = [h for h in self.history if h.turn >= self.turn - last_turns]
        if not recent:
            return ""
        out = []
        for h in recent:
            out.append(f"Turn {h.turn + 1}, {h.agent}:\n{h.text.strip()}")
            if h.feedback:
                out.append(f"Result: {h.feedback}")
        return "\n".join(out)


def _as_text(action: Any) -> str:
    """Any action becomes text: LLM completions are str; anything else is garbage to be penalised."""
    if isinstance(action, str):
        return str(action)
    if isinstance(action, bytes):
        return action.decode("utf-8", errors="replace")
    if action is None:
        return ""
    return repr(action)

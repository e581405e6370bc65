"""Sokoban as a PettingZoo AEC env (workflows ``single`` and ``mas``, see :mod:`mas_envs.envs.puzzle_env`).

Each turn the executing role answers with a JSON list of moves (``["U", "R"]``; lenient words such as
``up, left`` are accepted), at most ``max_moves_per_turn`` of them. Moves run in order; the turn stops
at the first invalid move, when every box is on a goal (success) or at a deadlock (failure, the
episode ends). Rewards per move are those of :mod:`mas_envs.games.sokoban`: step -0.1, box onto a
goal +1, off a goal -1, all boxes on goals +10, invalid move -0.5, deadlock -5, optional shaping.

Puzzles: by default rooms from the seeded reverse-play generator (the paper's 6x6 room, one box),
``split="train"``, ``"validation"`` or ``"test"`` (validation and test: ``test_size`` fixed puzzles each;
the three splits are disjoint by construction);
or a level collection via ``level_file=path`` or ``levels=[texts]`` / ``levels="microban"`` (an
installed cavepacker collection). ``reset(options={"task_index": i})`` picks puzzle ``i``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import numpy as np
from gymnasium.spaces import Box

from mas_envs.envs.puzzle_env import PuzzleEnv
from mas_envs.games import sokoban as rules
from mas_envs.games.sokoban_generate import (
    TEST_SEED_BASE,
    GeneratorConfig,
    Puzzle,
    eval_puzzles,
    fingerprint,
    train_puzzle,
    validation_puzzles,
)
from mas_envs.games.splits import FIXED_SPLITS, check_split
from mas_envs.games.sokoban_levels import Level, find_cavepacker_levels, load_levels, parse_levels

_DIRECTION_NAMES = {"U": "up", "D": "down", "L": "left", "R": "right"}
_RULES_TEXT = (
    "Sokoban: push every box onto a goal. Each move is U (up), D (down), L (left) or R (right). "
    "Walking into a box pushes it one cell if the cell behind it is free; boxes cannot be pulled, "
    "and neither you nor a box can enter a wall. A box pushed into a corner or against another box "
    "where it can never reach a goal ends the game as a failure.\n"
    "Symbols: # wall, (space) floor, $ box, . goal, * box on goal, @ you, + you on a goal."
)

# The scripted tool's program: a breadth-first solver over (player, boxes) that reads the board from
# stdin. Kept stdlib-only because it runs in the sandbox.
_TOOL_PROGRAM = '''import json, sys
from collections import deque
LIMIT = {limit}
lines = [l.rstrip("\\n") for l in sys.stdin.read().splitlines()]
rows = [l for l in lines if l.strip() and "#" in l and set(l) <= set("#@+$*. -_")]
walls, goals, boxes, player = set(), set(), set(), None
for r, line in enumerate(rows):
    for c, ch in enumerate(line):
        if ch == "#": walls.add((r, c))
        if ch in ".*+": goals.add((r, c))
        if ch in "$*": boxes.add((r, c))
        if ch in "@+": player = (r, c)
H, W = len(rows), max(len(l) for l in rows)
STEPS = {{"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}}
def free(p):
    return 0 <= p[0] < H and 0 <= p[1] < W and p not in walls
start = (player, frozenset(boxes))
prev, queue, end = {{start: None}}, deque([start]), None
while queue:
    state = queue.popleft()
    pos, bx = state
    if bx <= goals:
        end = state
        break
    for move, (dr, dc) in STEPS.items():
        nxt = (pos[0] + dr, pos[1] + dc)
        if not free(nxt):
            continue
        nb = bx
        if nxt in bx:
            to = (nxt[0] + dr, nxt[1] + dc)
            if not free(to) or to in bx:
                continue
            nb = (bx - {{nxt}}) | {{to}}
        new = (nxt, nb)
        if new not in prev:
            prev[new] = (state, move)
            queue.append(new)
moves = []
while end is not None and prev[end] is not None:
    end, move = prev[end]
    moves.append(move)
print(json.dumps(moves[::-1][:LIMIT]))
'''


@lru_cache(maxsize=4096)
def _solution(room: rules.Room, state: rules.State, max_expansions: int) -> tuple | None:
    """Optimal moves from ``state`` (memoised: the scripted policy asks once per turn)."""
    result = rules.solve(room, state, max_expansions=max_expansions)
    return tuple(result.moves) if result.moves is not None else None


class SokobanEnv(PuzzleEnv):
    """Sokoban rooms for one solver (``workflow="single"``) or a tool agent plus a planner (``"mas"``).

    Keyword arguments (others go to :class:`PuzzleEnv`: workflow, alpha, max_turns (default 5 here),
    render_mode, parse_penalty, sandbox_timeout):

    * ``size`` or ``width``/``height`` (outer wall included, default 6), ``num_boxes`` (default 1);
    * ``split`` ``"train"``/``"test"`` and ``test_size`` (default 200) for generated rooms;
    * ``level_file`` (a file or a folder of level files) and/or ``levels`` (level texts, or the name of
      an installed cavepacker collection such as ``"microban"``): play those levels instead, in order
      of ``task_index``; ``split`` is then ignored;
    * ``max_moves_per_turn`` (default 10): longer answers are a parse error;
    * ``observation_detail`` ``"bare"`` (board only) or ``"rich"`` (plus coordinates and neighbours);
    * ``shaping``: coefficient of the potential shaping reward (default 0, off);
    * ``solver_max_expansions``: search cap of the scripted policy's solver.
    """

    metadata = {"render_modes": ["human", "ansi"], "name": "sokoban_v0", "is_parallelizable": False}
    env_name = "sokoban"
    env_version = "0"

    def __init__(
        self,
        *,
        size: int = 6,
        width: int | None = None,
        height: int | None = None,
        num_boxes: int = 1,
        max_moves_per_turn: int = 10,
        split: str = "train",
        test_size: int = 200,
        level_file: str | None = None,
        levels: Any = None,
        observation_detail: str = "bare",
        shaping: float = 0.0,
        solver_max_expansions: int = 200_000,
        **kwargs: Any,
    ):
        check_split("sokoban", split)
        if observation_detail not in ("bare", "rich"):
            raise ValueError(f"sokoban: observation_detail must be 'bare' or 'rich', got {observation_detail!r}")
        if int(max_moves_per_turn) < 1:
            raise ValueError(f"sokoban: max_moves_per_turn must be >= 1, got {max_moves_per_turn}")
        kwargs.setdefault("max_turns", 5)
        self.split = split
        self.test_size = int(test_size)
        self.max_moves_per_turn = int(max_moves_per_turn)
        self.observation_detail = observation_detail
        self.shaping = float(shaping)
        self.solver_max_expansions = int(solver_max_expansions)
        self.config = GeneratorConfig(width=width or size, height=height or size, num_boxes=int(num_boxes))
        self.levels = self._load_collection(level_file, levels)
        if self.levels is not None:
            self.level_puzzles = tuple(self._level_puzzle(lv) for lv in self.levels)
            self.grid_height = max(p.room.height for p in self.level_puzzles)
            self.grid_width = max(p.room.width for p in self.level_puzzles)
        else:
            self.level_puzzles = None
            self.grid_height, self.grid_width = self.config.height, self.config.width
        super().__init__(**kwargs)
        self._state: tuple | None = None

    # ------------------------------------------------------------------ puzzle sources
    @staticmethod
    def _load_collection(level_file: Any, levels: Any) -> list[Level] | None:
        if level_file is None and levels is None:
            return None
        found: list[Level] = []
        if level_file is not None:
            found += load_levels(level_file)
        if isinstance(levels, str):
            collection = find_cavepacker_levels(levels)
            if not collection:
                raise ValueError(
                    f"sokoban: no installed cavepacker collection {levels!r} "
                    "(apt-get install cavepacker-data; or pass level_file=PATH)"
                )
            found += collection
        elif levels is not None:
            for i, lv in enumerate(levels):
                found += [lv] if isinstance(lv, Level) else parse_levels(str(lv), source=f"levels[{i}]")
        usable = []
        for lv in found:
            try:
                lv.parse()
            except ValueError:
                continue  # e.g. two-player maps
            usable.append(lv)
        if not usable:
            raise ValueError("sokoban: no playable level found in level_file/levels")
        return usable

    @staticmethod
    def _level_puzzle(level: Level) -> Puzzle:
        room, start = level.parse()
        return Puzzle(room, start, rules.render(room, start), solution_length=-1)

    def eval_puzzles(self) -> tuple[Puzzle, ...]:
        """The fixed list evaluated on: loaded levels, else the validation list for that split, else test."""
        if self.level_puzzles is not None:
            return self.level_puzzles
        if self.split == "validation":
            return validation_puzzles(self.config, self.test_size)
        return eval_puzzles(self.config, self.test_size)

    def eval_set_fingerprint(self) -> str:
        """sha256 of the canonical text of the evaluation puzzles (see :meth:`eval_puzzles`)."""
        return fingerprint(self.eval_puzzles())

    @property
    def num_tasks(self) -> int:
        if self.level_puzzles is not None:
            return len(self.level_puzzles)
        return self.test_size if self.split in FIXED_SPLITS else TEST_SEED_BASE

    @property
    def task_id(self) -> str | None:
        return None if self._state is None else self._state[5]

    @property
    def puzzle(self) -> Puzzle:
        return self._state[0]

    # ------------------------------------------------------------------ puzzle hooks
    def _new_puzzle(self, options: dict[str, Any]) -> None:
        index = options.get("task_index")
        if index is not None:
            index = int(index)
            if not 0 <= index < self.num_tasks:
                raise ValueError(f"sokoban: task_index must be in [0, {self.num_tasks}), got {index}")
        if self.level_puzzles is not None:
            if index is None:
                index = int(self.np_random.integers(len(self.level_puzzles)))
            puzzle, task_id = self.level_puzzles[index], f"sokoban/levels/{index}:{self.levels[index].name}"
        elif self.split in FIXED_SPLITS:
            if index is None:
                index = int(self.np_random.integers(self.test_size))
            puzzle, task_id = self.eval_puzzles()[index], f"sokoban/{self.split}/{index}"
        else:
            if index is None:
                index = int(self.np_random.integers(TEST_SEED_BASE))
            puzzle, task_id = train_puzzle(self.config, index, self.test_size), f"sokoban/train/{index}"
        # (puzzle, player, boxes, moves used, deadlocked, task id): immutable, so clones share it
        self._state = (puzzle, puzzle.start.player, puzzle.start.boxes, 0, False, task_id)

    def _puzzle_state(self) -> Any:
        return self._state

    def _set_puzzle_state(self, state: Any) -> None:
        self._state = state

    def _game_state(self) -> rules.State:
        return rules.State(self._state[1], self._state[2])

    def _parse_action(self, text: str) -> tuple[Any, str | None]:
        from mas_envs.parsing import parse_move_list

        return parse_move_list(text, max_moves=self.max_moves_per_turn)

    def _apply(self, action: Any) -> tuple[float, str, bool]:
        puzzle, _, _, used, deadlocked, task_id = self._state
        room, state = puzzle.room, self._game_state()
        total, done, executed, notes = 0.0, False, [], []
        for move in action:
            result = rules.step(room, state, move, shaping=self.shaping)
            total += result.reward
            if not result.valid:
                notes.append(f"move {len(executed) + 1} ({move}) is blocked: {result.reason}; the rest was not executed")
                break
            state = result.state
            executed.append(move)
            if result.solved:
                notes.append("every box is on a goal: solved")
                done = True
                break
            if result.deadlock:
                notes.append("a box is stuck where it can never reach a goal: deadlock, game over")
                deadlocked = done = True
                break
        self._state = (puzzle, state.player, state.boxes, used + len(executed), deadlocked, task_id)
        on = rules.boxes_on_goals(room, state)
        feedback = f"executed {json.dumps(executed)}; boxes on goals {on}/{len(state.boxes)}"
        if notes:
            feedback += "; " + "; ".join(notes)
        return float(total), feedback, done

    def _is_success(self) -> bool:
        return self._state is not None and rules.is_solved(self.puzzle.room, self._game_state())

    # ------------------------------------------------------------------ text
    def _board(self) -> str:
        return rules.render(self.puzzle.room, self._game_state())

    def _puzzle_text(self) -> str:
        room, state = self.puzzle.room, self._game_state()
        parts = [_RULES_TEXT, "Board:\n" + self._board()]
        parts.append(
            f"Boxes on goals: {rules.boxes_on_goals(room, state)}/{len(state.boxes)}. "
            f"Moves used so far: {self._state[3]}."
        )
        if self.observation_detail == "rich":
            parts.append(self._rich_text(room, state))
        return "\n\n".join(parts)

    def _rich_text(self, room: rules.Room, state: rules.State) -> str:
        def at(cell):
            r, c = room.to_rc(cell)
            return f"(row {r}, col {c})"

        boxes = ", ".join(at(b) + (" on a goal" if b in room.goals else "") for b in sorted(state.boxes))
        goals = ", ".join(at(g) for g in sorted(room.goals))
        around = []
        for k, move in enumerate(rules.MOVES):
            nxt = room.neighbour[state.player][k]
            if nxt < 0:
                what = "wall"
            elif nxt in state.boxes:
                beyond = room.neighbour[nxt][k]
                free = beyond >= 0 and beyond not in state.boxes
                what = "box (can be pushed)" if free else "box (cannot be pushed)"
            else:
                what = "goal" if nxt in room.goals else "floor"
            around.append(f"{_DIRECTION_NAMES[move]} ({move}): {what}")
        return (
            "Rows count from 0 at the top, columns from 0 at the left.\n"
            f"You are at {at(state.player)}.\nBoxes: {boxes}.\nGoals: {goals}.\n"
            "Next to you: " + "; ".join(around) + "."
        )

    def _answer_format(self) -> str:
        return f'a JSON list of at most {self.max_moves_per_turn} moves, e.g. ["U", "R", "R"]'

    def _tool_stdin(self) -> str:
        return self._puzzle_text()

    def _render_text(self) -> str:
        status = "solved" if self._is_success() else ("deadlocked" if self._state[4] else "playing")
        return f"sokoban {self.task_id} turn {self.turn}/{self.max_turns} ({status})\n{self._board()}"

    # ------------------------------------------------------------------ observation vector
    def _observation_vector_space(self) -> Box:
        # [turn, agent index, max turns, moves used, boxes on goals, boxes, rows, cols] + one code per cell
        # of the grid (padded to the largest level), bit flags: 1 wall, 2 goal, 4 box, 8 player
        size = 8 + self.grid_height * self.grid_width
        return Box(low=0, high=np.iinfo(np.int32).max, shape=(size,), dtype=np.int64)

    def _observation_vector(self, agent: str) -> np.ndarray:
        room, state = self.puzzle.room, self._game_state()
        head = [self.turn, self.possible_agents.index(agent), self.max_turns, self._state[3],
                rules.boxes_on_goals(room, state), len(state.boxes), room.height, room.width]
        grid = np.zeros((self.grid_height, self.grid_width), dtype=np.int64)
        w = room.width
        for cells, flag in ((room.walls, 1), (room.goals, 2), (state.boxes, 4), ((state.player,), 8)):
            for cell in cells:
                grid[cell // w, cell % w] |= flag
        return np.concatenate([np.array(head, dtype=np.int64), grid.ravel()])

    def _base_info(self, agent: str) -> dict[str, Any]:
        info = super()._base_info(agent)
        if self._state is not None:
            info.update(
                task_id=self.task_id,
                deadlock=bool(self._state[4]),
                moves_used=self._state[3],
                optimal_moves=self.puzzle.solution_length,  # from the start; -1 for loaded levels
            )
        return info

    # ------------------------------------------------------------------ scripted policy
    def _scripted_moves(self) -> list[str] | None:
        moves = _solution(self.puzzle.room, self._game_state(), self.solver_max_expansions)
        return None if moves is None else list(moves[: self.max_moves_per_turn])

    def _scripted_answer(self) -> str:
        moves = self._scripted_moves()
        # An unsolvable (deadlocked) or too hard room: any legal-looking answer keeps the episode going.
        return json.dumps(moves if moves else ["U"])

    def _scripted_tool_code(self) -> str:
        return _TOOL_PROGRAM.format(limit=self.max_moves_per_turn)

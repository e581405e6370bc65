"""Plan-Path as a PettingZoo AEC env: reach the goal on a grid with walls.

Workflows (see :mod:`mas_envs.envs.puzzle_env`): ``single`` (a solver answers with moves) and ``mas``
(a tool agent writes code that prints moves, then a planner answers). Rules, rewards and generation
live in :mod:`mas_envs.games.plan_path`; this module turns them into prompts and AEC steps.

Options: ``size`` / ``obstacle_ratio`` or a ``preset`` ("4x4", "5x5", "6x6", "10x10"),
``observation_detail`` ("rich": grid plus coordinates, goal direction, neighbours and an example,
one-word answers; "bare": the paper-style grid and instructions), ``max_moves_per_turn``,
``split`` ("train" | "validation" | "test"; validation and test are fixed lists of ``test_size`` mazes)
and ``test_size``.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from typing import Any

import numpy as np
from gymnasium.spaces import Box

from mas_envs.envs.puzzle_env import PuzzleEnv
from mas_envs.games import plan_path as game
from mas_envs.games.splits import FIXED_SPLITS, check_split
from mas_envs.parsing import parse_move_list

PRESETS: dict[str, tuple[int, float]] = {
    "4x4": (4, 0.18),
    "5x5": (5, 0.2),
    "6x6": (6, 0.2),
    "10x10": (10, 0.22),  # the paper's setting
}
MOVE_OF_STEP = {step: move for move, step in game.MOVES.items()}  # (d_row, d_col) -> "U"/"D"/"L"/"R"
# Codes of the numeric observation (the grid as ints).
FREE_CODE, WALL_CODE, GOAL_CODE, AGENT_CODE = 0, 1, 2, 3


class PlanPathEnv(PuzzleEnv):
    metadata = {"render_modes": ["human", "ansi"], "name": "plan_path_v0", "is_parallelizable": False}
    env_name = "plan_path"
    env_version = "1"  # 1: the worked example's direction varies (was always "up")

    def __init__(
        self,
        *,
        size: int = 10,
        obstacle_ratio: float = 0.22,
        preset: str | None = None,
        observation_detail: str = "rich",
        max_moves_per_turn: int | None = None,
        split: str = "train",
        test_size: int = 200,
        **kwargs: Any,
    ):
        if preset is not None:
            if preset not in PRESETS:
                raise ValueError(f"plan_path: unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
            size, obstacle_ratio = PRESETS[preset]
        if int(size) < 2:
            raise ValueError(f"plan_path: size must be >= 2, got {size}")
        if not 0.0 <= float(obstacle_ratio) <= 0.5:
            raise ValueError(f"plan_path: obstacle_ratio must be in [0, 0.5], got {obstacle_ratio}")
        if observation_detail not in ("bare", "rich"):
            raise ValueError(f"plan_path: observation_detail must be 'bare' or 'rich', got {observation_detail!r}")
        check_split("plan_path", split)
        self.size = int(size)
        self.obstacle_ratio = float(obstacle_ratio)
        self.observation_detail = observation_detail
        self.max_moves_per_turn = int(max_moves_per_turn or self.size * self.size)
        self.split = split
        self.test_size = int(test_size)
        # Enough turns for a policy that answers one move per turn (the CPU preset's style).
        kwargs.setdefault("max_turns", 2 * self.size)
        super().__init__(**kwargs)
        self.maze: game.Maze | None = None
        self.walk: game.Walk | None = None
        self.task_id = ""

    # ------------------------------------------------------------------ tasks and splits
    def test_puzzles(self) -> tuple[game.Maze, ...]:
        return game.test_mazes(self.size, self.obstacle_ratio, self.test_size)

    def eval_puzzles(self) -> tuple[game.Maze, ...]:
        """The fixed list evaluated on: the validation list when ``split="validation"``, else the test list."""
        split = "validation" if self.split == "validation" else "test"
        return game.fixed_mazes(split, self.size, self.obstacle_ratio, self.test_size)

    def eval_set_fingerprint(self) -> str:
        """sha256 of the evaluation list's canonical texts (the validation list for that split, else test)."""
        text = "\n\n".join(m.canonical() for m in self.eval_puzzles())
        return hashlib.sha256(text.encode()).hexdigest()

    def _new_puzzle(self, options: dict[str, Any]) -> None:
        index = options.get("task_index")
        tag = f"plan_path-{self.size}x{self.size}-{self.split}"
        if self.split in FIXED_SPLITS:
            if index is None:
                index = int(self.np_random.integers(self.test_size))
            if not 0 <= int(index) < self.test_size:
                raise ValueError(f"plan_path: task_index must be in [0, {self.test_size}), got {index}")
            self.maze = self.eval_puzzles()[int(index)]
            self.task_id = f"{tag}-{int(index)}"
        else:
            seed = int(index) if index is not None else int(self.np_random.integers(2**62))
            self.maze = game.maze_for("train", seed, self.size, self.obstacle_ratio)
            self.task_id = f"{tag}-{seed}"
        self.walk = game.Walk(pos=self.maze.start)

    def _puzzle_state(self) -> Any:
        return (self.maze, self.walk, self.task_id)  # all immutable: sharing is safe

    def _set_puzzle_state(self, state: Any) -> None:
        self.maze, self.walk, self.task_id = state

    # ------------------------------------------------------------------ acting
    def _parse_action(self, text: str) -> tuple[Any, str | None]:
        return parse_move_list(text, max_moves=self.max_moves_per_turn)

    def _apply(self, action: Any) -> tuple[float, str, bool]:
        self.walk, reward, feedback = game.apply_moves(self.maze, self.walk, action)
        return reward, feedback, self.walk.reached

    def _optimality(self, state_before: Any, action: Any) -> float:
        maze, walk, _ = state_before
        used = self.walk.moves + self.walk.invalid - walk.moves - walk.invalid  # moves spent by this action
        return min(1.0, maze.distances[walk.pos] / used) if used > 0 else 1.0

    def _is_success(self) -> bool:
        return bool(self.walk is not None and self.walk.reached)

    # ------------------------------------------------------------------ text
    def _grid_lines(self) -> list[str]:
        marks = {self.maze.goal: "G"}
        marks[self.walk.pos] = "A"
        return self.maze.picture(marks)

    def _puzzle_text(self) -> str:
        n = self.size - 1
        parts = [
            f"Find a path on a {self.size}x{self.size} grid from A (you) to G (the goal).",
            f"Legend: A = you, G = goal, {game.WALL} = wall, {game.FREE} = free cell. "
            f"Rows are numbered 0-{n} from the top, columns 0-{n} from the left.",
            "Moves: U = up (row - 1), D = down (row + 1), L = left (col - 1), R = right (col + 1). "
            "A move into a wall or off the grid is invalid and you stay where you are."
            + (f" Give at most {self.max_moves_per_turn} move(s) per answer." if self._moves_capped() else ""),
            "Grid:\n" + "\n".join(self._grid_lines()),
        ]
        if self.observation_detail == "rich":
            parts.append(self._rich_cues())
        return "\n\n".join(parts)

    def _moves_capped(self) -> bool:
        """Whether the per-answer move limit can bind (a shortest path never exceeds size**2 moves)."""
        return self.max_moves_per_turn < self.size * self.size

    def _rich_cues(self) -> str:
        (ar, ac), (gr, gc) = self.walk.pos, self.maze.goal
        return "\n".join(
            [
                f"You are at row {ar}, col {ac}. The goal is at row {gr}, col {gc}: {relative_direction(ar, ac, gr, gc)}.",
                "Next to you: " + ", ".join(f"{game.MOVE_NAMES[m]} {self._cell_kind(m)}" for m in "UDLR") + ".",
                self._worked_example(),
            ]
        )

    def _worked_example(self) -> str:
        # The example's direction varies with the task and turn: a fixed one ("up") is what an untrained
        # small model copies, and rewarding parseable answers then trains that one word everywhere.
        # It is a function of the state (not of an RNG), so clones and replays see the same prompt.
        word = game.MOVE_NAMES["UDLR"[zlib.crc32(f"{self.task_id}/{self.turn}".encode()) % 4]]
        axis = "rows" if word in ("up", "down") else "cols"
        return f"Example: if the goal is 2 {axis} {word} and the cell {word} is free, answer: {word}"

    def _cell_kind(self, move: str) -> str:
        dr, dc = game.MOVES[move]
        cell = (self.walk.pos[0] + dr, self.walk.pos[1] + dc)
        if not self.maze.inside(cell):
            return "edge"
        if cell == self.maze.goal:
            return "goal"
        return "free" if self.maze.is_free(cell) else "wall"

    def _answer_format(self) -> str:
        if self.observation_detail == "rich":
            return 'one word (up, down, left or right) or a JSON list of moves such as ["U", "R"]'
        return 'a JSON list of moves such as ["U", "R", "D"]'

    def _tool_stdin(self) -> str:
        return self._puzzle_text()

    def _tool_preamble(self) -> str:
        rows = ", ".join(json.dumps(row) for row in self.maze.rows)
        return "\n".join([
            "import json",
            f"grid = [{rows}]  # rows top to bottom; '{game.WALL}' wall, '{game.FREE}' free",
            f"start = {tuple(self.walk.pos)}  # (row, col) of A, where you are",
            f"goal = {tuple(self.maze.goal)}  # (row, col) of G",
            'moves = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}  # (d_row, d_col)',
        ])

    def _tool_task(self) -> str:
        cap = f" (at most {self.max_moves_per_turn})" if self._moves_capped() else ""
        return ("Use breadth-first search from start: for name, (dr, dc) in moves.items(), a neighbour "
                f"(r + dr, c + dc) is usable if it is inside the grid and grid[r + dr][c + dc] != '{game.WALL}'. "
                f"Print the shortest list of move names from start to goal{cap} as JSON: "
                'print(json.dumps(path)), e.g. ["D", "R"].')

    def _tool_function(self) -> tuple[str, str]:
        # The tool returns the cells of the path (the textbook breadth-first search); the env turns them
        # into moves. On validation, asked for move letters, Qwen2.5-Coder-0.5B returned distances or cells
        # instead (docs/RESULTS.md has both variants' counts).
        stub = f'''def shortest_path(grid: list[str], start: tuple[int, int], goal: tuple[int, int]) -> list[tuple[int, int]]:
    """Return the cells of a shortest path from start to goal, both included.

    grid lists the rows from top to bottom; '{game.WALL}' is a wall and '{game.FREE}' a free cell. Cells are
    (row, col). From a cell you may step up, down, left or right onto a free cell inside the grid.
    Use breadth-first search. Return [] if the goal cannot be reached.
    >>> shortest_path(["..", "{game.WALL}."], (0, 0), (1, 1))
    [(0, 0), (0, 1), (1, 1)]
    """'''
        return stub, "shortest_path(grid, start, goal)"

    def _function_answer(self, value_json: str) -> tuple[str, str | None]:
        """Moves (JSON) for the returned path of cells; each step must go to a neighbouring cell."""
        try:
            cells = [tuple(cell) for cell in json.loads(value_json)]
            well_formed = bool(cells) and all(len(c) == 2 and all(isinstance(v, int) for v in c) for c in cells)
        except (ValueError, TypeError):
            well_formed = False
        if not well_formed:
            return "", f"the function did not return a list of (row, col) cells: {value_json[:80]!r}"
        if cells[0] == tuple(self.walk.pos):
            cells = cells[1:]  # the start is included, as the docstring asks (tolerated without)
        moves, here = [], tuple(self.walk.pos)
        for cell in cells:
            step = (cell[0] - here[0], cell[1] - here[1])
            if step not in MOVE_OF_STEP:
                return "", f"the path jumps from {here} to {cell} (not a neighbouring cell)"
            moves.append(MOVE_OF_STEP[step])
            here = cell
        return json.dumps(moves), None

    def _render_text(self) -> str:
        status = f"turn {self.turn}/{self.max_turns}, moves {self.walk.moves}, invalid {self.walk.invalid}"
        return "\n".join(self._grid_lines() + [status])

    # ------------------------------------------------------------------ numeric observation
    def _observation_vector_space(self) -> Box:
        return Box(low=0, high=AGENT_CODE, shape=(self.size, self.size), dtype=np.int64)

    def _observation_vector(self, agent: str) -> np.ndarray:
        if self.maze is None:
            return np.zeros((self.size, self.size), dtype=np.int64)
        grid = self._static_codes(self.maze).copy()
        grid[self.walk.pos] = AGENT_CODE
        return grid

    def _static_codes(self, maze: game.Maze) -> np.ndarray:
        """Walls and goal as codes, cached per maze (read-only; clones may share it)."""
        cached = getattr(self, "_codes_cache", None)
        if cached is None or cached[0] is not maze:
            walls = np.array([[ch == game.WALL for ch in row] for row in maze.rows], dtype=np.int64)
            codes = walls * WALL_CODE
            codes[maze.goal] = GOAL_CODE
            codes.setflags(write=False)
            cached = self._codes_cache = (maze, codes)
        return cached[1]

    # ------------------------------------------------------------------ scripted policy
    def _scripted_answer(self) -> str:
        path = game.shortest_path(self.maze, self.walk.pos) or []
        return json.dumps(path[: self.max_moves_per_turn])

    def _scripted_tool_code(self) -> str:
        return TOOL_CODE.replace("MAX_MOVES", str(self.max_moves_per_turn))

    def _scripted_tool_function(self) -> str:
        return TOOL_FUNCTION.replace("MAX_MOVES", str(self.max_moves_per_turn))


def relative_direction(ar: int, ac: int, gr: int, gc: int) -> str:
    """E.g. '2 rows down and 1 col right' (or 'here' when equal)."""
    parts = []
    if gr != ar:
        n = abs(gr - ar)
        parts.append(f"{n} row{'s' if n > 1 else ''} {'down' if gr > ar else 'up'}")
    if gc != ac:
        n = abs(gc - ac)
        parts.append(f"{n} col{'s' if n > 1 else ''} {'right' if gc > ac else 'left'}")
    return " and ".join(parts) or "here"


# The scripted tool agent's program: read the grid from stdin, BFS from A to G, print the moves.
TOOL_CODE = '''\
import json, sys
from collections import deque

rows = [l.strip() for l in sys.stdin.read().splitlines()]
grid = [l for l in rows if l and set(l) <= set("#.AG")]
start = next((r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch == "A")
goal = next((r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch == "G")
steps = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
prev = {start: None}
queue = deque([start])
while queue:
    cell = queue.popleft()
    if cell == goal:
        break
    for move, (dr, dc) in steps.items():
        r, c = cell[0] + dr, cell[1] + dc
        if 0 <= r < len(grid) and 0 <= c < len(grid[r]) and grid[r][c] != "#" and (r, c) not in prev:
            prev[(r, c)] = (cell, move)
            queue.append((r, c))
path = []
cell = goal
while prev[cell] is not None:
    cell, move = prev[cell]
    path.append(move)
print(json.dumps(path[::-1][:MAX_MOVES]))
'''


# The scripted completion of the ``tool_prompt="function"`` stub: the same search, as a function.
TOOL_FUNCTION = '''\
from collections import deque


def shortest_path(grid, start, goal):
    prev = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if cell == goal:
            break
        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            r, c = cell[0] + dr, cell[1] + dc
            if 0 <= r < len(grid) and 0 <= c < len(grid[r]) and grid[r][c] != "#" and (r, c) not in prev:
                prev[(r, c)] = cell
                queue.append((r, c))
    if goal not in prev:
        return []
    path = [goal]
    while prev[path[-1]] is not None:
        path.append(prev[path[-1]])
    return path[::-1][:MAX_MOVES + 1]
'''

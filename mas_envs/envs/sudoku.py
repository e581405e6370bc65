"""Sudoku as a PettingZoo AEC env: fill a 4x4 (paper) or 9x9 grid.

Workflows (see :mod:`mas_envs.envs.puzzle_env`): ``single`` (a solver answers) and ``mas`` (a tool agent
writes code that prints an answer, then a planner answers). Rules, rewards and generation live in
:mod:`mas_envs.games.sudoku`.

Answers: the completed grid as a JSON list of rows (``0`` or ``null`` = leave the cell), the grid as
lines of digits (``.`` or ``0`` = leave), or a JSON list of ``[row, col, value]`` fills with rows and
columns counted **from 1**. The episode terminates when the grid is solved.

Options: ``size`` (4 or 9), ``difficulty`` ("easy" | "medium" | "hard"; 4x4: 10/8/6 clues, 9x9:
40/32/26) or ``n_clues`` or ``n_holes`` (empty cells), ``split``
("train" | "validation" | "test"; validation and test are fixed lists of ``test_size`` puzzles), ``test_size``.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import numpy as np
from gymnasium.spaces import Box

from mas_envs.envs.puzzle_env import PuzzleEnv
from mas_envs.games import sudoku as game
from mas_envs.games.splits import FIXED_SPLITS, check_split
from mas_envs.parsing import MAX_PARSE_CHARS

# A JSON list whose items are flat lists: [[...], [...], ...]
_LIST_OF_LISTS = re.compile(r"\[\s*\[[^\[\]]*\](?:\s*,\s*\[[^\[\]]*\])*\s*\]")
_ROW_NOISE = re.compile(r"[\s|,\[\]]")
_SEPARATOR_LINE = re.compile(r"^[\s\-+=|_]*$")


class SudokuEnv(PuzzleEnv):
    metadata = {"render_modes": ["human", "ansi"], "name": "sudoku_v0", "is_parallelizable": False}
    env_name = "sudoku"
    env_version = "0"

    def __init__(
        self,
        *,
        size: int = 4,
        difficulty: str = "medium",
        n_clues: int | None = None,
        n_holes: int | None = None,
        split: str = "train",
        test_size: int = 200,
        **kwargs: Any,
    ):
        if size not in game.DIFFICULTY_CLUES:
            raise ValueError(f"sudoku: size must be 4 or 9, got {size!r}")
        if n_holes is not None:
            n_clues = size * size - int(n_holes)
        if n_clues is None:
            if difficulty not in game.DIFFICULTY_CLUES[size]:
                raise ValueError(f"sudoku: difficulty must be one of {sorted(game.DIFFICULTY_CLUES[size])}")
            n_clues = game.DIFFICULTY_CLUES[size][difficulty]
        if not 0 <= int(n_clues) <= size * size:
            raise ValueError(f"sudoku: n_clues must be in [0, {size * size}], got {n_clues}")
        check_split("sudoku", split)
        self.size = int(size)
        self.n_clues = int(n_clues)
        self.split = split
        self.test_size = int(test_size)
        super().__init__(**kwargs)
        self.puzzle: game.Puzzle | None = None
        self.board: game.Grid | None = None
        self.task_id = ""

    # ------------------------------------------------------------------ tasks and splits
    def test_puzzles(self) -> tuple[game.Puzzle, ...]:
        return game.test_puzzles(self.size, self.n_clues, self.test_size)

    def eval_puzzles(self) -> tuple[game.Puzzle, ...]:
        """The fixed list evaluated on: the validation list when ``split="validation"``, else the test list."""
        split = "validation" if self.split == "validation" else "test"
        return game.fixed_puzzles(split, self.size, self.n_clues, self.test_size)

    def eval_set_fingerprint(self) -> str:
        """sha256 of the evaluation list's canonical texts (the validation list for that split, else test)."""
        text = "\n\n".join(p.canonical() for p in self.eval_puzzles())
        return hashlib.sha256(text.encode()).hexdigest()

    def _new_puzzle(self, options: dict[str, Any]) -> None:
        index = options.get("task_index")
        tag = f"sudoku-{self.size}x{self.size}-{self.split}"
        if self.split in FIXED_SPLITS:
            if index is None:
                index = int(self.np_random.integers(self.test_size))
            if not 0 <= int(index) < self.test_size:
                raise ValueError(f"sudoku: task_index must be in [0, {self.test_size}), got {index}")
            self.puzzle = self.eval_puzzles()[int(index)]
            self.task_id = f"{tag}-{int(index)}"
        else:
            seed = int(index) if index is not None else int(self.np_random.integers(2**62))
            self.puzzle = game.puzzle_for("train", seed, self.size, self.n_clues)
            self.task_id = f"{tag}-{seed}"
        self.board = self.puzzle.givens

    def _puzzle_state(self) -> Any:
        return (self.puzzle, self.board, self.task_id)  # all immutable: sharing is safe

    def _set_puzzle_state(self, state: Any) -> None:
        self.puzzle, self.board, self.task_id = state

    # ------------------------------------------------------------------ acting
    def _parse_action(self, text: str) -> tuple[Any, str | None]:
        return parse_answer(text, self.size)

    def _apply(self, action: Any) -> tuple[float, str, bool]:
        self.board, reward, feedback, solved = game.apply_fills(self.puzzle, self.board, action)
        return reward, feedback, solved

    def _is_success(self) -> bool:
        return self.puzzle is not None and self.board == self.puzzle.solution

    # ------------------------------------------------------------------ text
    def _puzzle_text(self) -> str:
        n, b = self.size, int(self.size**0.5)
        parts = [
            f"Fill the {n}x{n} Sudoku grid with digits 1-{n} so that every row, every column and every "
            f"{b}x{b} box contains each digit exactly once. Empty cells are shown as '.'; the given digits "
            "cannot be changed. Rows and columns are counted from 1 (top, left).",
            "Puzzle (givens):\n" + game.grid_text(self.puzzle.givens, n),
        ]
        if self.board != self.puzzle.givens:
            parts.append("Current board (givens and your fills):\n" + game.grid_text(self.board, n))
        return "\n\n".join(parts)

    def _answer_format(self) -> str:
        row = list(range(1, self.size + 1))
        return (
            f"the completed grid as a JSON list of rows, e.g. [{row}, ...], or a JSON list of "
            "[row, col, value] fills with rows and columns counted from 1, e.g. [[1, 3, 2], [2, 1, 4]]"
        )

    def _tool_stdin(self) -> str:
        return self._puzzle_text()

    def _render_text(self) -> str:
        return f"{game.grid_text(self.board, self.size)}\nturn {self.turn}/{self.max_turns}"

    # ------------------------------------------------------------------ numeric observation
    def _observation_vector_space(self) -> Box:
        return Box(low=0, high=self.size, shape=(self.size, self.size), dtype=np.int64)

    def _observation_vector(self, agent: str) -> np.ndarray:
        if self.board is None:
            return np.zeros((self.size, self.size), dtype=np.int64)
        return np.array(self.board, dtype=np.int64).reshape(self.size, self.size)

    # ------------------------------------------------------------------ scripted policy
    def _scripted_answer(self) -> str:
        n = self.size
        sol = self.puzzle.solution
        return json.dumps([list(sol[r * n : (r + 1) * n]) for r in range(n)])

    def _scripted_tool_code(self) -> str:
        return TOOL_CODE.replace("SIZE", str(self.size))


def parse_answer(text: str, n: int) -> tuple[list[tuple[int, int, int]] | None, str | None]:
    """Fills ``(row, col, value)``, 0-based, from a JSON grid, JSON fills or lines of digits."""
    text = text[:MAX_PARSE_CHARS]
    json_error = None
    for candidate in reversed(_LIST_OF_LISTS.findall(text)):
        fills, json_error = _fills_from_json(candidate, n)
        if fills is not None:
            return fills, None
    fills = _fills_from_digit_lines(text, n)
    if fills is not None:
        return fills, None
    return None, json_error or f"no answer found (expected a JSON grid of {n} rows or [row, col, value] fills)"


def _fills_from_json(candidate: str, n: int) -> tuple[list | None, str | None]:
    try:
        rows = json.loads(candidate)
    except (ValueError, RecursionError):
        return None, "answer list is not valid JSON"
    if not rows:
        return None, "empty answer list"
    values = []
    for row in rows:
        if type(row) is list and all(type(item) is int for item in row):  # the common case, checked fast
            values.append(row)
            continue
        ints = []
        for item in row:
            if item is None or item == ".":
                item = 0
            if isinstance(item, str) and item.strip().isdigit():
                item = int(item.strip())
            if not isinstance(item, int) or isinstance(item, bool):
                return None, f"answer contains {str(item)[:20]!r}, not a number"
            ints.append(item)
        values.append(ints)
    if len(values) == n and all(len(row) == n for row in values):
        return [(r, c, v) for r, row in enumerate(values) for c, v in enumerate(row) if v != 0], None
    if all(len(row) == 3 for row in values):
        if len(values) > 4 * n * n:
            return None, f"too many fills ({len(values)})"
        return [(r - 1, c - 1, v) for r, c, v in values], None
    return None, f"expected {n} rows of {n} numbers or [row, col, value] triples"


def _fills_from_digit_lines(text: str, n: int) -> list | None:
    """The last ``n`` lines that are exactly ``n`` digits (``.``/``0``/``_`` = leave the cell)."""
    rows = []
    for line in text.splitlines():
        if _SEPARATOR_LINE.match(line):
            continue
        chars = _ROW_NOISE.sub("", line)
        if len(chars) == n and all(ch in "0123456789._" for ch in chars):
            rows.append(chars)
    if len(rows) < n:
        return None
    rows = rows[-n:]
    return [(r, c, int(ch)) for r, row in enumerate(rows) for c, ch in enumerate(row) if ch.isdigit() and ch != "0"]


# The scripted tool agent's program: read the givens from stdin, solve by backtracking, print the grid.
TOOL_CODE = '''\
import json, sys

N = SIZE
B = int(N ** 0.5)
rows = []
for line in sys.stdin.read().splitlines():
    toks = line.split()
    if len(toks) == N and all(len(t) == 1 and t in ".123456789" for t in toks):
        rows.append([0 if t == "." else int(t) for t in toks])
grid = rows[:N]  # the first board in the text holds the givens


def options(r, c):
    used = set(grid[r]) | {grid[i][c] for i in range(N)}
    br, bc = r // B * B, c // B * B
    used |= {grid[i][j] for i in range(br, br + B) for j in range(bc, bc + B)}
    return [v for v in range(1, N + 1) if v not in used]


def solve():
    best = None
    for r in range(N):
        for c in range(N):
            if grid[r][c] == 0:
                opts = options(r, c)
                if best is None or len(opts) < len(best[2]):
                    best = (r, c, opts)
    if best is None:
        return True
    r, c, opts = best
    for v in opts:
        grid[r][c] = v
        if solve():
            return True
    grid[r][c] = 0
    return False


solve()
print(json.dumps(grid))
'''

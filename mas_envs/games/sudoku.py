"""Sudoku rules, solver and generator (pure: no PettingZoo, gymnasium or torch).

Grids are flat tuples of ``n * n`` ints in row-major order, ``0`` for an empty cell; ``n`` is 4
(2x2 boxes, the paper's setting) or 9 (3x3 boxes).

* :func:`solve` counts solutions up to a limit (bitmask backtracking, fewest-candidates cell first).
* :func:`generate_puzzle` draws a random full solution, then removes clues in random order as long as
  the solution stays unique, down to ``n_clues`` (or as far as uniqueness allows).
* :func:`apply_fills` applies an answer (a list of ``(row, col, value)`` fills, 0-based here) to a board.

Rewards of :func:`apply_fills`:

* ``PROGRESS`` = +0.1 per non-given cell that becomes equal to the solution (and -0.1 per correct
  cell overwritten with a wrong value), i.e. a potential on the number of correct cells;
* ``INVALID_COST`` = -0.1 per invalid fill (position or value out of range, changing a given, or a
  digit repeated in a row, column or box); invalid fills are not applied;
* ``SOLVED_BONUS`` = +1.0 when the board is complete and correct.

Fills of one answer are placed together; a fill that repeats a digit of its row, column or box is
rejected (repeatedly, until the board is consistent), so the board never breaks the rules.

Train/validation/test are disjoint by construction: :func:`split_of` assigns every *solution grid* to one split
by a hash of its text, and each split only uses its own solution grids, so a test puzzle never equals
(or even shares the solution of) a training or validation puzzle.
"""

from __future__ import annotations

import functools
import math
import operator
import random
from dataclasses import dataclass

from mas_envs.games.splits import split_of

PROGRESS = 0.1
INVALID_COST = -0.1
SOLVED_BONUS = 1.0

# Clues kept per difficulty (the generator stops removing at this count, or earlier if it must).
DIFFICULTY_CLUES = {
    4: {"easy": 10, "medium": 8, "hard": 6},
    9: {"easy": 40, "medium": 32, "hard": 26},
}

Grid = tuple[int, ...]


@dataclass(frozen=True)
class Puzzle:
    n: int
    givens: Grid
    solution: Grid

    def canonical(self) -> str:
        return grid_text(self.givens, self.n)


@functools.lru_cache(maxsize=None)
def layout(n: int) -> tuple[tuple[int, int, int], ...]:
    """For each cell index: (row, col, box)."""
    b = math.isqrt(n)
    if b * b != n:
        raise ValueError(f"sudoku: size must be a square (4 or 9), got {n}")
    return tuple((i // n, i % n, (i // n) // b * b + (i % n) // b) for i in range(n * n))


@functools.lru_cache(maxsize=None)
def peers(n: int) -> tuple[tuple[int, ...], ...]:
    """For each cell index: the other cells of its row, column and box (each once)."""
    where = layout(n)
    return tuple(
        tuple(j for j in range(n * n) if j != i and (where[j][0] == r or where[j][1] == c or where[j][2] == b))
        for i, (r, c, b) in enumerate(where)
    )


def grid_text(grid: Grid, n: int) -> str:
    """Rows of digits separated by spaces, ``.`` for empty cells."""
    return "\n".join(
        " ".join(str(v) if v else "." for v in grid[r * n : (r + 1) * n]) for r in range(n)
    )


def solve(grid: Grid, n: int, limit: int = 1, rng: random.Random | None = None) -> tuple[int, Grid | None]:
    """``(number of solutions found, capped at limit; the first solution or None)``.

    A grid whose givens already break the rules has 0 solutions. ``rng`` shuffles the digit order
    (used to draw random full grids).
    """
    cells = list(grid)
    where = layout(n)
    rows, cols, boxes = [0] * n, [0] * n, [0] * n
    for i, v in enumerate(cells):
        if v:
            r, c, b = where[i]
            bit = 1 << v
            if (rows[r] | cols[c] | boxes[b]) & bit:
                return 0, None
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
    empties = [i for i, v in enumerate(cells) if not v]
    all_digits = ((1 << n) - 1) << 1
    found: list[Grid] = []
    count = 0

    def candidates(i: int) -> int:
        r, c, b = where[i]
        return all_digits & ~(rows[r] | cols[c] | boxes[b])

    def search() -> bool:  # True = stop (limit reached)
        nonlocal count
        best, best_mask, best_n = -1, 0, n + 1
        for i in empties:
            if not cells[i]:
                mask = candidates(i)
                k = bin(mask).count("1")
                if k < best_n:
                    best, best_mask, best_n = i, mask, k
                    if k <= 1:
                        break
        if best < 0:
            count += 1
            if not found:
                found.append(tuple(cells))
            return count >= limit
        digits = [v for v in range(1, n + 1) if best_mask >> v & 1]
        if rng is not None:
            rng.shuffle(digits)
        r, c, b = where[best]
        for v in digits:
            bit = 1 << v
            cells[best] = v
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
            stop = search()
            rows[r] &= ~bit
            cols[c] &= ~bit
            boxes[b] &= ~bit
            cells[best] = 0
            if stop:
                return True
        return False

    search()
    return count, (found[0] if found else None)


def random_solution(rng: random.Random, n: int) -> Grid:
    _, solution = solve((0,) * (n * n), n, limit=1, rng=rng)
    assert solution is not None
    return solution


def remove_clues(rng: random.Random, solution: Grid, n: int, n_clues: int) -> Grid:
    """Blank cells in random order while the solution stays unique, until ``n_clues`` remain."""
    grid = list(solution)
    order = list(range(n * n))
    rng.shuffle(order)
    clues = n * n
    for i in order:
        if clues <= n_clues:
            break
        grid[i] = 0
        if solve(tuple(grid), n, limit=2)[0] == 1:
            clues -= 1
        else:
            grid[i] = solution[i]
    return tuple(grid)


def generate_puzzle(rng: random.Random, n: int, n_clues: int, split: str | None = None) -> Puzzle:
    """A random puzzle with a unique solution; with ``split``, its solution grid belongs to that split."""
    while True:
        solution = random_solution(rng, n)
        if split is None or split_of(grid_text(solution, n)) == split:
            break
    return Puzzle(n, remove_clues(rng, solution, n, n_clues), solution)


# ---------------------------------------------------------------------- playing
def conflicts(board: Grid, n: int, i: int) -> bool:
    """Whether cell ``i``'s digit also appears elsewhere in its row, column or box."""
    v = board[i]
    if not v:
        return False
    return v in [board[j] for j in peers(n)[i]]


def apply_fills(puzzle: Puzzle, board: Grid, fills: list[tuple[int, int, int]]) -> tuple[Grid, float, str, bool]:
    """Apply 0-based ``(row, col, value)`` fills; return (new board, reward, feedback, solved)."""
    n = puzzle.n
    invalid: list[str] = []
    placed: dict[int, int] = {}
    for r, c, v in fills:
        if not (0 <= r < n and 0 <= c < n):
            invalid.append(f"({r + 1},{c + 1}) is outside the grid")
            continue
        if not 1 <= v <= n:
            invalid.append(f"({r + 1},{c + 1}) value {v} is not in 1-{n}")
            continue
        i = r * n + c
        if puzzle.givens[i]:
            if v != puzzle.givens[i]:
                invalid.append(f"({r + 1},{c + 1}) is a given")
            continue
        placed[i] = v  # the last fill of a cell wins
    new = list(board)
    for i, v in placed.items():
        new[i] = v
    # Reject fills that repeat a digit; rejecting one can uncover another's conflict, so repeat.
    while True:
        current = tuple(new)
        bad = [i for i in placed if conflicts(current, n, i)]
        if not bad:
            break
        for i in bad:
            invalid.append(f"({i // n + 1},{i % n + 1}) value {placed.pop(i)} repeats a digit")
            new[i] = board[i]
    new_board = tuple(new)
    sol = puzzle.solution
    gained = sum(map(operator.eq, new_board, sol)) - sum(map(operator.eq, board, sol))
    solved = new_board == sol
    reward = PROGRESS * gained + INVALID_COST * len(invalid) + (SOLVED_BONUS if solved else 0.0)
    changed = sum(map(operator.ne, new_board, board))
    feedback = f"{changed} cell(s) changed, {len(invalid)} invalid fill(s)"
    if invalid:
        feedback += ": " + "; ".join(invalid[:5]) + ("; ..." if len(invalid) > 5 else "")
    feedback += "; solved" if solved else f"; {new_board.count(0)} empty cell(s) left"
    return new_board, reward, feedback, solved


# ---------------------------------------------------------------------- splits
def puzzle_for(split: str, seed: int, n: int, n_clues: int) -> Puzzle:
    rng = random.Random(f"sudoku/{split}/{n}/{n_clues}/{seed}")
    return generate_puzzle(rng, n, n_clues, split=split)


@functools.lru_cache(maxsize=16)
def fixed_puzzles(split: str, n: int, n_clues: int, count: int) -> tuple[Puzzle, ...]:
    """The fixed list of a ``validation`` or ``test`` split: the first ``count`` distinct puzzles of that
    split over seeds 0, 1, 2, ..."""
    seen, out, seed = set(), [], 0
    while len(out) < count:
        puzzle = puzzle_for(split, seed, n, n_clues)
        seed += 1
        if puzzle.givens not in seen:
            seen.add(puzzle.givens)
            out.append(puzzle)
    return tuple(out)


def test_puzzles(n: int, n_clues: int, count: int) -> tuple[Puzzle, ...]:
    """The fixed test list (see :func:`fixed_puzzles`)."""
    return fixed_puzzles("test", n, n_clues, count)

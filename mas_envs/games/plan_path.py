"""Plan-Path rules: walk from a start cell to a goal cell on a grid with walls.

Pure game logic (no PettingZoo, gymnasium or torch), used by ``mas_envs.envs.plan_path``.

* A :class:`Maze` is immutable: ``rows`` (strings of ``#`` wall / ``.`` free), ``start`` and ``goal``
  as ``(row, col)``. Row 0 is the top, col 0 the left.
* A :class:`Walk` is the mutable part of an episode as a small frozen value: position, valid moves
  made, invalid moves tried, goal reached.
* :func:`apply_moves` executes a list of moves (``U``/``D``/``L``/``R``) and returns the new walk, the
  reward and a short feedback text.

Rewards (per move; a turn's reward is the sum over its moves):

* ``STEP_COST`` = -0.01 for every valid move;
* ``INVALID_COST`` = -0.1 for a move into a wall or off the grid (the walker stays in place);
* shaping ``SHAPING * (d_before - d_after)`` with ``SHAPING`` = 0.1 and ``d`` the BFS distance to the
  goal (potential-based, so it never changes which paths are optimal);
* ``GOAL_BONUS`` = +1.0 when the goal is reached (moves after that are ignored);
* ``OPTIMAL_BONUS`` = +0.5 more when the whole walk was a shortest path (valid moves == BFS distance
  from start to goal, and no invalid move was tried).

Generation (:func:`generate_maze`) places ``round(obstacle_ratio * size**2)`` walls at random, picks a
start, then a goal among the cells BFS-reachable from it at distance ``>= min_distance``, so every
maze is solvable. Train/validation/test are disjoint by content: :func:`split_of` assigns every maze to
one split by a hash of its canonical text, and the generator for a split rejects mazes of the others.
"""

from __future__ import annotations

import functools
import random
from collections import deque
from dataclasses import dataclass
from typing import Iterable

from mas_envs.games.splits import split_of

STEP_COST = -0.01
INVALID_COST = -0.1
SHAPING = 0.1
GOAL_BONUS = 1.0
OPTIMAL_BONUS = 0.5

WALL, FREE = "#", "."
MAX_GENERATION_TRIES = 1000  # an impossible size/ratio combination fails loudly instead of looping
MOVES: dict[str, tuple[int, int]] = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
MOVE_NAMES = {"U": "up", "D": "down", "L": "left", "R": "right"}

Cell = tuple[int, int]


@dataclass(frozen=True)
class Maze:
    rows: tuple[str, ...]
    start: Cell
    goal: Cell

    @property
    def size(self) -> int:
        return len(self.rows)

    def inside(self, cell: Cell) -> bool:
        r, c = cell
        return 0 <= r < len(self.rows) and 0 <= c < len(self.rows[0])

    def is_free(self, cell: Cell) -> bool:
        return self.inside(cell) and self.rows[cell[0]][cell[1]] == FREE

    @functools.cached_property
    def distances(self) -> dict[Cell, int]:
        """BFS distance to the goal of every cell connected to it."""
        return bfs_distances(self, self.goal)

    @property
    def optimal_length(self) -> int:
        return self.distances[self.start]

    def canonical(self) -> str:
        """One text per maze: the grid with ``S`` at the start and ``G`` at the goal."""
        return "\n".join(self.picture({self.start: "S", self.goal: "G"}))

    def picture(self, marks: dict[Cell, str]) -> list[str]:
        """Grid rows with some cells replaced by marker characters."""
        out = []
        for r, row in enumerate(self.rows):
            chars = list(row)
            for (mr, mc), ch in marks.items():
                if mr == r:
                    chars[mc] = ch
            out.append("".join(chars))
        return out


@dataclass(frozen=True)
class Walk:
    pos: Cell
    moves: int = 0  # valid moves made
    invalid: int = 0  # invalid moves tried
    reached: bool = False


def neighbours(maze: Maze, cell: Cell) -> Iterable[Cell]:
    for dr, dc in MOVES.values():
        nxt = (cell[0] + dr, cell[1] + dc)
        if maze.is_free(nxt):
            yield nxt


def bfs_distances(maze: Maze, source: Cell) -> dict[Cell, int]:
    dist = {source: 0}
    queue = deque([source])
    while queue:
        cell = queue.popleft()
        for nxt in neighbours(maze, cell):
            if nxt not in dist:
                dist[nxt] = dist[cell] + 1
                queue.append(nxt)
    return dist


def shortest_path(maze: Maze, source: Cell) -> list[str] | None:
    """Moves of a shortest path from ``source`` to the goal (``None`` if unreachable)."""
    dist = maze.distances
    if source not in dist:
        return None
    path, cell = [], source
    while cell != maze.goal:
        for move, (dr, dc) in MOVES.items():  # fixed order: deterministic paths
            nxt = (cell[0] + dr, cell[1] + dc)
            if dist.get(nxt) == dist[cell] - 1:
                path.append(move)
                cell = nxt
                break
    return path


def apply_moves(maze: Maze, walk: Walk, moves: list[str]) -> tuple[Walk, float, str]:
    """Execute ``moves``; return the new walk, the summed reward and a feedback text."""
    dist = maze.distances
    pos, n_valid, n_invalid, reward = walk.pos, walk.moves, walk.invalid, 0.0
    notes = []
    for move in moves:
        if walk.reached or pos == maze.goal:
            break
        dr, dc = MOVES[move]
        nxt = (pos[0] + dr, pos[1] + dc)
        if not maze.is_free(nxt):
            n_invalid += 1
            reward += INVALID_COST
            notes.append(f"{MOVE_NAMES[move]} blocked by {'wall' if maze.inside(nxt) else 'edge'}")
            continue
        reward += STEP_COST + SHAPING * (dist[pos] - dist[nxt])
        pos, n_valid = nxt, n_valid + 1
    reached = pos == maze.goal
    if reached and not walk.reached:
        reward += GOAL_BONUS
        if n_invalid == 0 and n_valid == maze.optimal_length:
            reward += OPTIMAL_BONUS
            notes.append("goal reached by a shortest path")
        else:
            notes.append("goal reached")
    new = Walk(pos=pos, moves=n_valid, invalid=n_invalid, reached=reached)
    feedback = f"now at row {pos[0]}, col {pos[1]}, {dist[pos]} steps from the goal"
    if notes:
        feedback += "; " + "; ".join(notes)
    return new, reward, feedback


# ---------------------------------------------------------------------- generation and splits
def generate_maze(rng: random.Random, size: int, obstacle_ratio: float, min_distance: int) -> Maze:
    """A random solvable maze (see the module docstring)."""
    n_walls = round(obstacle_ratio * size * size)
    cells = [(r, c) for r in range(size) for c in range(size)]
    for _ in range(MAX_GENERATION_TRIES):
        walls = set(rng.sample(cells, n_walls))
        rows = tuple("".join(WALL if (r, c) in walls else FREE for c in range(size)) for r in range(size))
        free = [cell for cell in cells if cell not in walls]
        start = rng.choice(free)
        from_start = bfs_distances(Maze(rows, start, start), start)
        far = sorted(cell for cell, d in from_start.items() if d >= min_distance)
        if far:
            return Maze(rows, start, rng.choice(far))
    raise ValueError(
        f"plan_path: no solvable {size}x{size} maze with obstacle_ratio={obstacle_ratio} and a goal "
        f"{min_distance}+ steps away in {MAX_GENERATION_TRIES} tries"
    )


def default_min_distance(size: int) -> int:
    return max(2, size // 2)


def maze_for(split: str, seed: int, size: int, obstacle_ratio: float) -> Maze:
    """The maze of ``split`` for generator ``seed``: the first generated maze belonging to ``split``."""
    rng = random.Random(f"plan_path/{split}/{size}/{obstacle_ratio!r}/{seed}")
    while True:
        maze = generate_maze(rng, size, obstacle_ratio, default_min_distance(size))
        if split_of(maze.canonical()) == split:
            return maze


@functools.lru_cache(maxsize=16)
def fixed_mazes(split: str, size: int, obstacle_ratio: float, count: int) -> tuple[Maze, ...]:
    """The fixed list of a ``validation`` or ``test`` split: the first ``count`` distinct mazes of that
    split over generator seeds 0, 1, 2, ..."""
    seen, out, seed = set(), [], 0
    while len(out) < count:
        maze = maze_for(split, seed, size, obstacle_ratio)
        seed += 1
        if maze.canonical() not in seen:
            seen.add(maze.canonical())
            out.append(maze)
    return tuple(out)


def test_mazes(size: int, obstacle_ratio: float, count: int) -> tuple[Maze, ...]:
    """The fixed test list (see :func:`fixed_mazes`)."""
    return fixed_mazes("test", size, obstacle_ratio, count)

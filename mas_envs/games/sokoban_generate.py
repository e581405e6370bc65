"""Seeded Sokoban room generator: reverse play from a solved room, then verification by the solver.

A room is ``width x height`` including its outer wall (the paper's 6x6 room has a 4x4 inside). The
generator adds a few inner walls (keeping the floor connected), puts the boxes on goals, and plays
backwards: the player walks and sometimes *pulls* a box. Every state reached that way is solvable;
the optimal solver confirms it and records the optimal solution length. Rooms the solver cannot
settle within its cap, or whose solution is too short/long, are discarded and the seed's stream
draws again.

Train, validation and test are disjoint by construction: test puzzle ``i`` comes from seed
``TEST_SEED_BASE + i``, validation puzzle ``i`` from ``VALIDATION_SEED_BASE + i`` (a validation draw equal
to a test puzzle is skipped), train seeds lie in ``[0, TEST_SEED_BASE)``, and a train draw whose text
equals a test or validation puzzle is redrawn (content dedupe).
"""

from __future__ import annotations

import hashlib
import random
from collections import deque
from dataclasses import dataclass
from functools import lru_cache

from mas_envs.games.sokoban import MOVES, Room, State, is_solved, potential, render, solve

TEST_SEED_BASE = 1 << 40  # test seeds: TEST_SEED_BASE + i; train seeds: [0, TEST_SEED_BASE)
VALIDATION_SEED_BASE = 2 << 40  # validation seeds: VALIDATION_SEED_BASE + i (never a train or test seed)
MAX_ATTEMPTS = 200


@dataclass(frozen=True)
class GeneratorConfig:
    width: int = 6
    height: int = 6
    num_boxes: int = 1
    max_inner_walls: int | None = None  # default: a sixth of the inside
    reverse_steps: int | None = None  # default: 3 per inside cell, at least 40
    pull_probability: float = 0.7
    min_solution_length: int = 2
    max_solution_length: int = 40
    max_expansions: int = 20_000

    def __post_init__(self):
        if self.width < 4 or self.height < 4:
            raise ValueError(f"a room needs at least 4x4 cells including walls, got {self.width}x{self.height}")
        inside = (self.width - 2) * (self.height - 2)
        if self.num_boxes < 1 or self.num_boxes + 2 > inside:
            raise ValueError(f"{self.num_boxes} boxes do not fit a {self.width}x{self.height} room")


@dataclass(frozen=True, eq=False)
class Puzzle:
    """A generated (or loaded) start position with its optimal solution length."""

    room: Room
    start: State
    text: str  # canonical level text
    solution_length: int
    seed: int | None = None


def generate(config: GeneratorConfig, seed: int) -> Puzzle:
    """The puzzle of ``seed`` (deterministic). Raises ``RuntimeError`` if no room fits the config."""
    rng = random.Random(seed)
    for _ in range(MAX_ATTEMPTS):
        puzzle = _attempt(config, rng, seed)
        if puzzle is not None:
            return puzzle
    raise RuntimeError(f"no valid Sokoban room after {MAX_ATTEMPTS} attempts for {config} (seed {seed})")


def _attempt(config: GeneratorConfig, rng: random.Random, seed: int) -> Puzzle | None:
    w, h = config.width, config.height
    inside = [r * w + c for r in range(1, h - 1) for c in range(1, w - 1)]
    border = {r * w + c for r in range(h) for c in range(w)} - set(inside)
    max_walls = config.max_inner_walls if config.max_inner_walls is not None else len(inside) // 6
    walls = set(border)
    for cell in rng.sample(inside, rng.randint(0, max_walls)):
        if _connected(w, set(inside) - (walls | {cell}) - border):
            walls.add(cell)
    floor = [c for c in inside if c not in walls]
    if len(floor) < config.num_boxes + 2:
        return None
    goals = rng.sample(floor, config.num_boxes)
    room = Room.build(w, h, walls, goals)
    player = rng.choice([c for c in floor if c not in goals])
    state = _reverse_play(room, State(player, frozenset(goals)), config, rng)
    if is_solved(room, state):
        return None
    result = solve(room, state, max_expansions=config.max_expansions)
    if result.status != "solved":
        return None
    if not config.min_solution_length <= len(result.moves) <= config.max_solution_length:
        return None
    return Puzzle(room, state, render(room, state), len(result.moves), seed)


def _reverse_play(room: Room, state: State, config: GeneratorConfig, rng: random.Random) -> State:
    """Walk backwards from ``state``: a step away from a box may pull it along.

    Returns the visited state whose boxes are farthest (in pushes) from the goals, so that rooms are
    not trivially close to solved.
    """
    player, boxes = state
    best, best_score = state, 0
    inside = (config.width - 2) * (config.height - 2)
    steps = config.reverse_steps if config.reverse_steps is not None else max(40, 3 * inside)
    for _ in range(steps):
        k = rng.randrange(4)
        target = room.neighbour[player][k]
        if target < 0 or target in boxes:
            continue
        behind = room.neighbour[player][k ^ 1]
        if behind in boxes and rng.random() < config.pull_probability:
            boxes = (boxes - {behind}) | {player}
        player = target
        score = potential(room, State(player, boxes))
        if score >= best_score:
            best, best_score = State(player, boxes), score
    return best


def _connected(width: int, cells: set) -> bool:
    if not cells:
        return False
    start = next(iter(cells))
    seen = {start}
    queue = deque([start])
    while queue:
        c = queue.popleft()
        for n in (c - width, c + width, c - 1, c + 1):
            if n in cells and n not in seen:
                seen.add(n)
                queue.append(n)
    return len(seen) == len(cells)


# ---------------------------------------------------------------------- splits
def _distinct_run(config: GeneratorConfig, size: int, first_seed: int, banned: frozenset = frozenset()) -> tuple[Puzzle, ...]:
    """The first ``size`` distinct puzzles over seeds ``first_seed, first_seed + 1, ...``, none in ``banned``."""
    out, seen, seed = [], set(banned), first_seed
    while len(out) < size:
        puzzle = generate(config, seed)
        seed += 1
        if puzzle.text not in seen:
            seen.add(puzzle.text)
            out.append(puzzle)
    return tuple(out)


@lru_cache(maxsize=16)
def eval_puzzles(config: GeneratorConfig, size: int) -> tuple[Puzzle, ...]:
    """The ``size`` test puzzles: seeds ``TEST_SEED_BASE + 0, 1, ...``, duplicates skipped."""
    return _distinct_run(config, size, TEST_SEED_BASE)


@lru_cache(maxsize=16)
def validation_puzzles(config: GeneratorConfig, size: int) -> tuple[Puzzle, ...]:
    """The ``size`` validation puzzles: seeds ``VALIDATION_SEED_BASE + 0, 1, ...``, duplicates and puzzles
    equal to a test puzzle (of a test list of the same ``size``) skipped."""
    return _distinct_run(config, size, VALIDATION_SEED_BASE, banned=_eval_texts(config, size))


@lru_cache(maxsize=16)
def _eval_texts(config: GeneratorConfig, size: int) -> frozenset:
    return frozenset(p.text for p in eval_puzzles(config, size))


@lru_cache(maxsize=16)
def _held_out_texts(config: GeneratorConfig, size: int) -> frozenset:
    return _eval_texts(config, size) | frozenset(p.text for p in validation_puzzles(config, size))


def train_puzzle(config: GeneratorConfig, seed: int, test_size: int) -> Puzzle:
    """The train puzzle of ``seed`` (any int; folded into the train range), never equal to a test or
    validation puzzle."""
    seed %= TEST_SEED_BASE
    banned = _held_out_texts(config, test_size)
    while True:
        puzzle = generate(config, seed)
        if puzzle.text not in banned:
            return puzzle
        seed = (seed * 6364136223846793005 + 1442695040888963407) % TEST_SEED_BASE  # redraw, still train


def fingerprint(puzzles) -> str:
    """sha256 of the canonical texts, in order, separated by blank lines."""
    return hashlib.sha256("\n\n".join(p.text for p in puzzles).encode()).hexdigest()


__all__ = [
    "GeneratorConfig", "Puzzle", "generate", "eval_puzzles", "validation_puzzles", "train_puzzle", "fingerprint", "MOVES",
]

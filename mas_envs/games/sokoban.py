"""Sokoban rules, deadlock detection and an optimal solver (pure Python, no RL imports).

A room's static part (walls, goals, precomputed dead squares and push distances) is an immutable
:class:`Room`; the moving part is a :class:`State` (player cell, frozenset of box cells). Cells are
integers ``row * width + col``; moves that would leave the grid count as walls.

Text format (the standard one): ``#`` wall, `` `` floor (``-``/``_`` also read as floor), ``$`` box,
``.`` goal, ``@`` player, ``*`` box on goal, ``+`` player on goal.

Rewards of one move (:func:`step`), as in gym-sokoban plus two penalties:

* ``STEP_COST = -0.1`` for every executed move;
* ``BOX_ON_GOAL = +1`` when a push puts a box onto a goal, ``BOX_OFF_GOAL = -1`` when it takes one off;
* ``SOLVED_BONUS = +10`` when every box is on a goal;
* ``INVALID_MOVE = -0.5`` (instead of the step cost) for a move into a wall or an unpushable box
  (the state does not change);
* ``DEADLOCK_PENALTY = -5`` when a push leaves the room unsolvable by the simple checks of
  :func:`is_deadlocked` (the episode then ends as a failure);
* optional potential shaping ``shaping * (phi(s) - phi(s'))`` with ``phi`` = sum over boxes of the
  push distance to the nearest goal (off by default).
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

STEP_COST = -0.1
BOX_ON_GOAL = 1.0
BOX_OFF_GOAL = -1.0
SOLVED_BONUS = 10.0
INVALID_MOVE = -0.5
DEADLOCK_PENALTY = -5.0

MOVES = ("U", "D", "L", "R")
_DROW_DCOL = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
_FLOOR_CHARS = {" ", "-", "_"}
_LEVEL_CHARS = set("#@+$*.") | _FLOOR_CHARS
UNREACHABLE = 1 << 30


class State(NamedTuple):
    """The moving part of a room: where the player and the boxes are."""

    player: int
    boxes: frozenset


@dataclass(frozen=True, eq=False)
class Room:
    """The static part of a level. Build with :func:`parse_level` or :meth:`Room.build`."""

    width: int
    height: int
    walls: frozenset
    goals: frozenset
    # neighbour[cell][k] = the cell one step in MOVES[k] from ``cell``, or -1 for a wall / the edge
    neighbour: tuple = field(repr=False)
    # push_distance[cell] = fewest pushes that bring a box on ``cell`` to some goal (other boxes ignored)
    push_distance: tuple = field(repr=False)

    @classmethod
    def build(cls, width: int, height: int, walls, goals) -> "Room":
        walls, goals = frozenset(walls), frozenset(goals)
        neighbour = []
        for cell in range(width * height):
            r, c = divmod(cell, width)
            row = []
            for m in MOVES:
                dr, dc = _DROW_DCOL[m]
                rr, cc = r + dr, c + dc
                ok = 0 <= rr < height and 0 <= cc < width and (rr * width + cc) not in walls
                row.append(rr * width + cc if ok else -1)
            neighbour.append(tuple(row))
        neighbour = tuple(neighbour)
        return cls(width, height, walls, goals, neighbour, _push_distances(neighbour, goals))

    @property
    def dead_squares(self) -> frozenset:
        """Floor cells from which no box can ever reach a goal (corners and dead wall runs)."""
        return frozenset(
            c for c in range(self.width * self.height)
            if c not in self.walls and self.push_distance[c] >= UNREACHABLE
        )

    def to_rc(self, cell: int) -> tuple[int, int]:
        return divmod(cell, self.width)


def _opposite(k: int) -> int:
    return k ^ 1  # MOVES is ordered U, D, L, R: 0<->1, 2<->3


def _push_distances(neighbour: tuple, goals: frozenset) -> tuple:
    """Reverse reachability from the goals: pull a box away from a goal one cell at a time.

    A box on ``b`` can be pushed in direction k to ``b2 = b + k`` when the player stands on ``b - k``;
    in reverse, a box on ``b2`` is pulled to ``b`` by a player walking from ``b`` to ``b - k``.
    """
    dist = [UNREACHABLE] * len(neighbour)
    queue = deque()
    for g in goals:
        dist[g] = 0
        queue.append(g)
    while queue:
        b2 = queue.popleft()
        for k in range(4):
            b = neighbour[b2][_opposite(k)]  # where the box came from
            if b < 0:
                continue
            stand = neighbour[b][_opposite(k)]  # where the pusher stood
            if stand < 0 or dist[b] <= dist[b2] + 1:
                continue
            dist[b] = dist[b2] + 1
            queue.append(b)
    return tuple(dist)


# ---------------------------------------------------------------------- text format
def parse_level(text: str) -> tuple[Room, State]:
    """Read one level in the standard text format. Raises ``ValueError`` on a malformed level."""
    lines = [ln.rstrip("\r\n") for ln in text.splitlines()]
    lines = [ln.rstrip() for ln in lines if ln.strip()]
    if not lines:
        raise ValueError("empty level")
    height, width = len(lines), max(len(ln) for ln in lines)
    walls, goals, boxes, players = set(), set(), set(), []
    for r, line in enumerate(lines):
        for c, ch in enumerate(line):
            cell = r * width + c
            if ch not in _LEVEL_CHARS:
                raise ValueError(f"unexpected character {ch!r} at row {r}, col {c}")
            if ch == "#":
                walls.add(cell)
            if ch in ".*+":
                goals.add(cell)
            if ch in "$*":
                boxes.add(cell)
            if ch in "@+":
                players.append(cell)
    if len(players) != 1:
        raise ValueError(f"a level needs exactly one player, found {len(players)}")
    if not boxes or len(boxes) != len(goals):
        raise ValueError(f"a level needs as many goals as boxes, found {len(boxes)} boxes and {len(goals)} goals")
    return Room.build(width, height, walls, goals), State(players[0], frozenset(boxes))


def render(room: Room, state: State, floor: str = " ") -> str:
    """The standard text form of a room (trailing floor on each line is cut)."""
    rows = []
    for r in range(room.height):
        chars = []
        for c in range(room.width):
            cell = r * room.width + c
            if cell in room.walls:
                ch = "#"
            elif cell == state.player:
                ch = "+" if cell in room.goals else "@"
            elif cell in state.boxes:
                ch = "*" if cell in room.goals else "$"
            else:
                ch = "." if cell in room.goals else floor
            chars.append(ch)
        rows.append("".join(chars).rstrip(" "))
    return "\n".join(rows)


# ---------------------------------------------------------------------- rules
def is_solved(room: Room, state: State) -> bool:
    return state.boxes <= room.goals


def boxes_on_goals(room: Room, state: State) -> int:
    return len(state.boxes & room.goals)


def potential(room: Room, state: State) -> int:
    """Sum of the boxes' push distances to the nearest goal (large when a box is on a dead square)."""
    return sum(min(room.push_distance[b], 1000) for b in state.boxes)


class MoveResult(NamedTuple):
    state: State
    reward: float
    valid: bool
    pushed: bool
    deadlock: bool
    solved: bool
    reason: str  # "" for a valid move, else why it was blocked


def step(room: Room, state: State, move: str, shaping: float = 0.0) -> MoveResult:
    """Apply one move ``U``/``D``/``L``/``R``; see the module docstring for the rewards."""
    k = MOVES.index(move)
    target = room.neighbour[state.player][k]
    if target < 0:
        return MoveResult(state, INVALID_MOVE, False, False, False, False, "wall")
    if target not in state.boxes:
        new = State(target, state.boxes)
        return MoveResult(new, STEP_COST, True, False, False, is_solved(room, new), "")
    beyond = room.neighbour[target][k]
    if beyond < 0 or beyond in state.boxes:
        return MoveResult(state, INVALID_MOVE, False, False, False, False, "box cannot be pushed")
    new = State(target, (state.boxes - {target}) | {beyond})
    reward = STEP_COST
    if beyond in room.goals and target not in room.goals:
        reward += BOX_ON_GOAL
    elif target in room.goals and beyond not in room.goals:
        reward += BOX_OFF_GOAL
    before, after = room.push_distance[target], room.push_distance[beyond]
    if shaping and before < UNREACHABLE and after < UNREACHABLE:  # a push onto a dead square is a deadlock anyway
        reward += shaping * (before - after)
    solved = is_solved(room, new)
    if solved:
        return MoveResult(new, reward + SOLVED_BONUS, True, True, False, True, "")
    dead = box_is_stuck(room, new.boxes, beyond)
    if dead:
        reward += DEADLOCK_PENALTY
    return MoveResult(new, reward, True, True, dead, False, "")


def box_is_stuck(room: Room, boxes: frozenset, box: int) -> bool:
    """Whether the box just pushed onto ``box`` makes the room unsolvable (cheap, sound checks).

    * the box stands on a dead square (a non-goal corner, or along a wall with no goal to reach);
    * the box is part of a 2x2 block of walls and boxes that holds a box off its goal (no box of the
      block can ever move again).
    """
    if box not in room.goals and room.push_distance[box] >= UNREACHABLE:
        return True
    w = room.width
    r, c = divmod(box, w)
    for top in (r - 1, r):
        for left in (c - 1, c):
            cells = [top * w + left, top * w + left + 1, (top + 1) * w + left, (top + 1) * w + left + 1]
            if not all(_blocked(room, boxes, top + dr, left + dc) for dr in (0, 1) for dc in (0, 1)):
                continue
            if any(cell in boxes and cell not in room.goals for cell in cells):
                return True
    return False


def _blocked(room: Room, boxes: frozenset, r: int, c: int) -> bool:
    if not (0 <= r < room.height and 0 <= c < room.width):
        return True
    cell = r * room.width + c
    return cell in room.walls or cell in boxes


def is_deadlocked(room: Room, state: State) -> bool:
    """Whether any box of ``state`` is stuck by the checks of :func:`box_is_stuck`."""
    if is_solved(room, state):
        return False
    return any(box_is_stuck(room, state.boxes, b) for b in state.boxes)


# ---------------------------------------------------------------------- solver
class SolveResult(NamedTuple):
    moves: list | None  # None when unsolvable or the search was capped
    status: str  # "solved", "unsolvable" or "capped"
    expanded: int  # search nodes expanded


def _walk(room: Room, player: int, boxes: frozenset) -> dict:
    """BFS over free floor from ``player``: cell -> (previous cell, move index)."""
    prev = {player: (-1, -1)}
    queue = deque([player])
    neighbour = room.neighbour
    while queue:
        cell = queue.popleft()
        for k, nxt in enumerate(neighbour[cell]):
            if nxt >= 0 and nxt not in boxes and nxt not in prev:
                prev[nxt] = (cell, k)
                queue.append(nxt)
    return prev


def _path_to(prev: dict, cell: int) -> list:
    out = []
    while prev[cell][0] >= 0:
        cell, k = prev[cell]
        out.append(MOVES[k])
    out.reverse()
    return out


def solve(room: Room, state: State, max_expansions: int = 200_000, optimal: bool = True) -> SolveResult:
    """A* over box pushes with move costs.

    ``optimal=True`` returns a solution with the fewest moves (the heuristic, the sum of the boxes'
    push distances, is admissible and consistent). ``optimal=False`` is a faster greedy search that
    merges states whose player regions are equal; its solutions are valid but may be longer.
    Dead squares and 2x2 freezes are pruned. The search stops after ``max_expansions`` nodes.
    """
    if is_solved(room, state):
        return SolveResult([], "solved", 0)
    dist = room.push_distance
    neighbour = room.neighbour

    def h(boxes):
        return sum(dist[b] for b in boxes)

    def key_of(player, boxes, prev=None):
        if optimal:
            return (player, boxes)
        region = prev if prev is not None else _walk(room, player, boxes)
        return (min(region), boxes)

    if h(state.boxes) >= UNREACHABLE:
        return SolveResult(None, "unsolvable", 0)
    start_key = key_of(state.player, state.boxes)
    parent = {start_key: None}  # key -> (parent key, push-from cell, move index, parent state)
    best_g = {start_key: 0}
    counter = 0
    frontier = [(h(state.boxes), 0, counter, start_key, state)]
    expanded = 0
    while frontier:
        _, g, _, key, cur = heapq.heappop(frontier)
        if g > best_g.get(key, UNREACHABLE):
            continue
        if cur.boxes <= room.goals:
            return SolveResult(_reconstruct(room, parent, key), "solved", expanded)
        expanded += 1
        if expanded > max_expansions:
            return SolveResult(None, "capped", expanded)
        prev = _walk(room, cur.player, cur.boxes)
        steps = _walk_lengths(prev)
        for box in cur.boxes:
            for k in range(4):
                stand = neighbour[box][_opposite(k)]
                if stand < 0 or stand not in prev:
                    continue
                beyond = neighbour[box][k]
                if beyond < 0 or beyond in cur.boxes or dist[beyond] >= UNREACHABLE:
                    continue
                boxes = (cur.boxes - {box}) | {beyond}
                if box_is_stuck(room, boxes, beyond) and not boxes <= room.goals:
                    continue
                new_g = g + steps[stand] + 1
                nxt = State(box, boxes)
                nkey = key_of(box, boxes)
                if new_g >= best_g.get(nkey, UNREACHABLE):
                    continue
                best_g[nkey] = new_g
                parent[nkey] = (key, stand, k, cur)
                counter += 1
                prio = new_g + h(boxes) if optimal else h(boxes)
                heapq.heappush(frontier, (prio, new_g, counter, nkey, nxt))
    return SolveResult(None, "unsolvable", expanded)


def _walk_lengths(prev: dict) -> dict:
    lengths = {}
    for cell in prev:  # BFS insertion order: a cell's predecessor is always seen first
        p = prev[cell][0]
        lengths[cell] = 0 if p < 0 else lengths[p] + 1
    return lengths


def _reconstruct(room: Room, parent: dict, key) -> list:
    pushes = []
    while parent[key] is not None:
        pkey, stand, k, pstate = parent[key]
        pushes.append((pstate, stand, k))
        key = pkey
    moves = []
    for pstate, stand, k in reversed(pushes):
        moves += _path_to(_walk(room, pstate.player, pstate.boxes), stand)
        moves.append(MOVES[k])
    return moves


def replay(room: Room, state: State, moves) -> tuple[State, bool]:
    """Apply ``moves``; returns the final state and whether every move was valid."""
    ok = True
    for m in moves:
        res = step(room, state, m)
        ok = ok and res.valid
        state = res.state
    return state, ok

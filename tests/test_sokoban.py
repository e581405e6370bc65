"""Sokoban: rules, solver, deadlocks, generator, splits, level loader, and the PettingZoo adapter."""

from __future__ import annotations

import json
import pickle
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pettingzoo.test import api_test, seed_test

from mas_envs import make_env
from mas_envs.envs.sokoban import SokobanEnv
from mas_envs.games import sokoban as rules
from mas_envs.games.sokoban_generate import GeneratorConfig, fingerprint, generate, eval_puzzles, train_puzzle
from mas_envs.games.sokoban_levels import (
    CAVEPACKER_MAPS,
    cavepacker_collections,
    find_cavepacker_levels,
    load_levels,
    parse_levels,
    parse_solution,
)

CORRIDOR = """
#######
#@ $ .#
#######
"""


def level(text):
    return rules.parse_level(text)


def bfs_moves(room, state, limit=200_000):
    """Reference: plain breadth-first search over single moves (independent of the A* solver)."""
    seen = {state}
    queue = deque([(state, 0)])
    while queue:
        cur, n = queue.popleft()
        if rules.is_solved(room, cur):
            return n
        for m in rules.MOVES:
            res = rules.step(room, cur, m)
            if res.valid and res.state not in seen:
                seen.add(res.state)
                queue.append((res.state, n + 1))
        if len(seen) > limit:
            raise AssertionError("reference BFS too large")
    return None


# ---------------------------------------------------------------------- rules
def test_walk_and_wall():
    room, s = level(CORRIDOR)
    res = rules.step(room, s, "U")
    assert not res.valid and res.reason == "wall" and res.state == s and res.reward == rules.INVALID_MOVE
    res = rules.step(room, s, "R")
    assert res.valid and not res.pushed and res.reward == pytest.approx(rules.STEP_COST)
    assert room.to_rc(res.state.player) == (1, 2)


def test_push_onto_goal_solves_with_bonus():
    room, s = level(CORRIDOR)
    s = rules.step(room, s, "R").state
    res = rules.step(room, s, "R")  # push $ from col 3 to col 4
    assert res.pushed and room.to_rc(next(iter(res.state.boxes))) == (1, 4)
    res = rules.step(room, res.state, "R")
    assert res.solved and res.reward == pytest.approx(rules.STEP_COST + rules.BOX_ON_GOAL + rules.SOLVED_BONUS)


def test_push_off_goal_and_blocked_pushes():
    room, s = level("#######\n#@*$ .#\n#######")
    # pushing * into $ is blocked: a player pushes one box only
    res = rules.step(room, s, "R")
    assert not res.valid and res.reason == "box cannot be pushed" and res.state == s
    room, s = level("########\n#@*  $.#\n########")
    res = rules.step(room, s, "R")
    assert res.valid and res.reward == pytest.approx(rules.STEP_COST + rules.BOX_OFF_GOAL)
    with pytest.raises(ValueError):  # no goal for the box
        rules.parse_level("####\n#@$#\n####")
    room, s = level("######\n#.@$##\n######")
    res = rules.step(room, s, "R")
    assert not res.valid and res.state == s  # box against a wall
    assert rules.step(room, s, "L").valid  # stepping onto a goal is fine


def test_potential_shaping():
    room, s = level(CORRIDOR)
    s = rules.step(room, s, "R").state
    plain = rules.step(room, s, "R").reward
    shaped = rules.step(room, s, "R", shaping=0.5).reward
    assert shaped == pytest.approx(plain + 0.5)  # the box got one push closer to its goal
    assert rules.potential(room, s) == 2


def test_no_pulling():
    room, s = level("######\n# $@.#\n######")
    res = rules.step(room, s, "R")
    assert res.valid and res.state.boxes == s.boxes  # walking away leaves the box


def test_render_round_trip():
    text = "#######\n#  . ##\n# $*@ #\n#######"
    room, s = level(text)
    assert rules.render(room, s) == text
    room2, s2 = level(rules.render(room, s))
    assert s2 == s and room2.walls == room.walls and room2.goals == room.goals


# ---------------------------------------------------------------------- deadlocks
def test_dead_squares_and_corner_deadlock():
    room, s = level("######\n#    #\n# $  #\n# @ .#\n######")
    w = room.width
    assert {w + 1, w + 4, 3 * w + 1} <= room.dead_squares  # non-goal corners
    assert 3 * w + 4 not in room.dead_squares  # the goal corner is live
    assert {w + c for c in range(1, 5)} <= room.dead_squares  # top wall run without a goal
    assert 2 * w + 4 not in room.dead_squares  # can still be pushed down onto the goal
    assert not rules.is_deadlocked(room, s)
    res = rules.step(room, s, "U")  # box into the dead top row
    assert res.deadlock and res.reward == pytest.approx(rules.STEP_COST + rules.DEADLOCK_PENALTY)
    assert rules.is_deadlocked(room, res.state)
    assert rules.solve(room, res.state).status == "unsolvable"


def test_two_by_two_freeze_deadlock():
    # Row 1 is live (goals on it), but two boxes side by side under the wall can never move again.
    room, s = level("#######\n#.$ . #\n#  $  #\n#  @  #\n#######")
    w = room.width
    assert w + 3 not in room.dead_squares
    res = rules.step(room, s, "U")
    assert res.pushed and res.deadlock
    assert rules.solve(room, res.state).status == "unsolvable"
    # four boxes in a square in open floor, one of them off its goal
    room, s = level("########\n#   .  #\n# $$   #\n# $*.. #\n#  @   #\n########")
    assert rules.is_deadlocked(room, s)


def test_deadlock_never_fires_on_solution_paths():
    cfg = GeneratorConfig(num_boxes=2)
    for seed in range(40):
        p = generate(cfg, seed)
        moves = rules.solve(p.room, p.start).moves
        state = p.start
        for m in moves:
            res = rules.step(p.room, state, m)
            assert res.valid and not res.deadlock
            state = res.state
        assert rules.is_solved(p.room, state)


# ---------------------------------------------------------------------- solver
@pytest.mark.parametrize(
    "text, optimum",
    [
        (CORRIDOR, 3),
        ("######\n#.$@ #\n######", 1),
        ("#####\n#.  #\n# $ #\n#  @#\n#####", None),
        ("######\n#    #\n# $$ #\n# .. #\n#  @ #\n######", None),
        ("#######\n#.   .#\n# $$  #\n#   @ #\n#######", None),
    ],
)
def test_solver_is_move_optimal(text, optimum):
    room, s = level(text)
    result = rules.solve(room, s)
    assert result.status == "solved"
    reference = bfs_moves(room, s)
    assert len(result.moves) == reference
    if optimum is not None:
        assert reference == optimum
    final, ok = rules.replay(room, s, result.moves)
    assert ok and rules.is_solved(room, final)


def test_solver_matches_bfs_on_generated_rooms():
    cfg = GeneratorConfig(num_boxes=2)
    for seed in range(100, 130):
        p = generate(cfg, seed)
        assert p.solution_length == bfs_moves(p.room, p.start)


def test_solver_reports_unsolvable_and_cap():
    room, s = level("#####\n#$ .#\n# @ #\n#####")  # box in a non-goal corner
    assert rules.solve(room, s).status == "unsolvable"
    room, s = level("######\n#@$ .#\n#    #\n######")
    assert rules.solve(room, rules.State(s.player, frozenset({room.width + 4}))).moves == []  # already solved
    assert rules.solve(room, s, max_expansions=0).status == "capped"
    fast = rules.solve(room, s, optimal=False)
    final, ok = rules.replay(room, s, fast.moves)
    assert ok and rules.is_solved(room, final)


# ---------------------------------------------------------------------- generator and splits
def test_generator_is_seeded_and_solvable():
    cfg = GeneratorConfig()
    a, b = generate(cfg, 7), generate(cfg, 7)
    assert a.text == b.text and a.solution_length == b.solution_length
    for seed in range(50):
        p = generate(cfg, seed)
        assert p.room.width == 6 and p.room.height == 6 and len(p.start.boxes) == 1
        assert not rules.is_solved(p.room, p.start)
        moves = rules.solve(p.room, p.start).moves
        assert len(moves) == p.solution_length >= cfg.min_solution_length


def test_train_and_test_are_disjoint():
    cfg = GeneratorConfig()
    test = eval_puzzles(cfg, 200)
    assert len({p.text for p in test}) == 200
    test_texts = {p.text for p in test}
    train_texts = {train_puzzle(cfg, seed, 200).text for seed in range(3000)}
    assert not (train_texts & test_texts)
    assert len(train_texts) > 500  # the train stream is varied, not a handful of rooms


def test_fingerprint_is_stable_and_content_based():
    env = SokobanEnv(split="test")
    fp = env.eval_set_fingerprint()
    assert fp == SokobanEnv(split="train").eval_set_fingerprint() == fingerprint(eval_puzzles(GeneratorConfig(), 200))
    assert len(fp) == 64 and fp != SokobanEnv(num_boxes=2).eval_set_fingerprint()


# ---------------------------------------------------------------------- level loader
SMALL_FILE = """; First
#####
#@$.#
#####

; Second
######
#.$ @#
######
Title: not a map line
Comment:
#### this comment block is skipped ####
Comment-End:
  ####
###  #
#@ $.#
######
"""


def test_loader_on_small_file(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text(SMALL_FILE)
    levels = load_levels(path)
    assert [lv.name for lv in levels] == ["mine: First", "mine: Second", "mine#3"]
    for lv in levels:
        room, s = lv.parse()
        assert rules.solve(room, s).status == "solved"
    assert parse_levels("no map here\n;only comments") == []
    assert parse_solution("2(rU)3l") == ["R", "U", "R", "U", "L", "L", "L"]
    with pytest.raises(ValueError):
        parse_solution("rx")


def test_env_on_loaded_levels(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text(SMALL_FILE)
    env = SokobanEnv(workflow="single", level_file=str(path), max_turns=3)
    env.reset(seed=0, options={"task_index": 1})
    assert env.task_id == "sokoban/levels/1:mine: Second"
    _run_scripted(env)
    assert env.success
    fp = env.eval_set_fingerprint()
    assert fp == SokobanEnv(levels=[SMALL_FILE]).eval_set_fingerprint()


needs_cavepacker = pytest.mark.skipif(
    not CAVEPACKER_MAPS.is_dir(), reason="cavepacker-data not installed (apt-get install cavepacker-data)"
)


@needs_cavepacker
def test_cavepacker_levels_load_and_solutions_replay():
    collections = cavepacker_collections()
    assert collections.get("microban01", 0) > 100
    microban = find_cavepacker_levels("microban")
    assert len(microban) >= 250
    # the shipped .sol solutions replay to solved under our rules (checks loader and rules together)
    for lv in microban[:60]:
        room, s = lv.parse()
        moves = parse_solution((CAVEPACKER_MAPS / f"{lv.name}.sol").read_text())
        final, ok = rules.replay(room, s, moves)
        assert ok and rules.is_solved(room, final), lv.name


@needs_cavepacker
def test_solver_on_first_microban_levels():
    microban = find_cavepacker_levels("microban01")
    room, s = microban[0].parse()
    assert len(rules.solve(room, s).moves) == 33  # the shipped solution's length, found optimal here
    solved = sum(rules.solve(*lv.parse(), max_expansions=3000).status == "solved" for lv in microban[:10])
    assert solved >= 8


@needs_cavepacker
def test_env_on_an_installed_collection():
    env = SokobanEnv(workflow="single", levels="microban01", max_moves_per_turn=40, max_turns=2)
    assert env.num_tasks >= 100
    env.reset(seed=0, options={"task_index": 0})
    assert env.task_id == "sokoban/levels/0:microban01_0001"
    _run_scripted(env)
    assert env.success and env.infos["solver"]["moves_used"] == 33


# ---------------------------------------------------------------------- adapter
def _run_scripted(env):
    while not any(env.terminations.values()) and not any(env.truncations.values()):
        env.step(env.scripted_action())


def test_scripted_policy_solves_200_test_rooms_single():
    env = SokobanEnv(workflow="single", split="test")
    for i in range(200):
        env.reset(seed=i, options={"task_index": i})
        _run_scripted(env)
        assert env.success, env.task_id


def test_scripted_policy_solves_in_mas_through_the_sandbox():
    env = SokobanEnv(workflow="mas", split="test", num_boxes=2, observation_detail="rich")
    for i in range(20):
        env.reset(seed=i, options={"task_index": i})
        env.step(env.scripted_action())  # tool: its BFS program runs in the sandbox
        assert env.infos["tool"]["sandbox_reason"] == "ok"
        assert env.infos["tool"]["parse_error"] is None
        printed = json.loads(env.tool_output)
        assert len(printed) == min(env.puzzle.solution_length, env.max_moves_per_turn)
        _run_scripted(env)
        assert env.success, env.task_id


def test_garbage_answers_are_penalised_not_raised():
    env = make_env("sokoban", workflow="single")
    env.reset(seed=3)
    for junk in ["", "🙂", "[", '["X"]', "{}", "\x00" * 10, "U" * 100000, '["U"' * 50, "[]"]:
        if any(env.terminations.values()) or any(env.truncations.values()):
            env.reset(seed=3)
        env.step(junk)
        assert env.infos["solver"]["parse_error"]
        assert env.rewards["solver"] == pytest.approx(-1.0)
    env = make_env("sokoban", workflow="mas")
    env.reset(seed=3)
    env.step("```python\nraise SystemExit(3)\n```")
    assert env.infos["tool"]["parse_error"]


def test_turn_rewards_and_feedback():
    env = SokobanEnv(workflow="single", levels=[CORRIDOR])
    env.reset(seed=0)
    env.step('["L", "R"]')  # blocked first move: nothing executed
    assert env.rewards["solver"] == pytest.approx(rules.INVALID_MOVE)
    assert env.history[-1].feedback.startswith("executed []")
    env.step("right, right, right")
    assert env.success and env.terminations["solver"]
    assert env.rewards["solver"] == pytest.approx(3 * rules.STEP_COST + rules.BOX_ON_GOAL + rules.SOLVED_BONUS)


def test_deadlock_ends_the_episode_as_failure():
    env = SokobanEnv(workflow="single", levels=["######\n#    #\n# $  #\n# @ .#\n######"])
    env.reset(seed=0)
    env.step('["U", "R"]')
    assert env.terminations["solver"] and not env.success and env.infos["solver"]["deadlock"]


def test_rich_observation_and_vector():
    env = SokobanEnv(workflow="single", observation_detail="rich", levels=[CORRIDOR])
    env.reset(seed=0)
    obs = env.observe("solver")
    assert "You are at (row 1, col 1)" in obs["prompt"] and "right (R): floor" in obs["prompt"]
    assert "Boxes: (row 1, col 3)" in obs["prompt"] and "Goals: (row 1, col 5)" in obs["prompt"]
    assert env.observation_space("solver").contains(obs)
    vec = obs["observation"]
    grid = vec[8:].reshape(env.grid_height, env.grid_width)
    assert grid[0, 0] == 1 and grid[1, 1] == 8 and grid[1, 3] == 4 and grid[1, 5] == 2  # wall/player/box/goal
    assert list(vec[4:8]) == [0, 1, 3, 7]  # boxes on goals, boxes, rows, cols
    bare = SokobanEnv(levels=[CORRIDOR], workflow="single")
    bare.reset(seed=0)
    assert "You are at" not in bare.observe("solver")["prompt"]


def test_reset_without_index_draws_from_seed():
    env = SokobanEnv(workflow="single")
    env.reset(seed=5)
    first = (env.task_id, env.puzzle.text)
    env.reset(seed=5)
    assert (env.task_id, env.puzzle.text) == first
    env.reset(seed=6)
    assert env.task_id != first[0]
    with pytest.raises(ValueError):
        SokobanEnv(split="test").reset(options={"task_index": 200})


def test_clone_is_independent_and_continues_identically():
    env = make_env("sokoban", workflow="single", num_boxes=2)
    env.reset(seed=11)
    twin = env.clone()
    assert type(twin) is type(env)
    answer = env.unwrapped.scripted_action()
    twin.step(answer)
    assert env.unwrapped.turn == 0 and env.observe("solver")["prompt"] != twin.observe("solver")["prompt"]
    env.step(answer)
    assert env.observe("solver")["prompt"] == twin.observe("solver")["prompt"]
    assert env.rewards == twin.rewards


def test_snapshot_is_picklable_and_restores():
    env = SokobanEnv(workflow="single", split="test")
    env.reset(seed=0, options={"task_index": 5})
    snap = pickle.loads(pickle.dumps(env.snapshot()))
    other = SokobanEnv(workflow="single", split="test")
    other.reset(seed=1, options={"task_index": 9})
    other.restore(snap)
    assert other.task_id == env.task_id and other.observe("solver")["prompt"] == env.observe("solver")["prompt"]
    _run_scripted(other)
    assert other.success


@pytest.mark.parametrize("workflow", ["single", "mas"])
def test_pettingzoo_api_and_seed(workflow):
    api_test(make_env("sokoban", workflow=workflow), num_cycles=20)
    seed_test(lambda: make_env("sokoban", workflow=workflow), num_cycles=20)


@settings(max_examples=25, deadline=None)
@given(
    moves=st.lists(st.sampled_from(rules.MOVES), max_size=25),
    split_at=st.integers(0, 25),
    seed=st.integers(0, 10_000),
)
def test_clones_share_no_state(moves, split_at, seed):
    env = SokobanEnv(workflow="single", num_boxes=2, max_moves_per_turn=1, max_turns=30)
    env.reset(seed=seed)

    def play(e, seq):
        for m in seq:
            if e.terminations["solver"] or e.truncations["solver"]:
                break
            e.step(json.dumps([m]))

    play(env, moves[:split_at])
    twin = env.clone()
    before = env.snapshot()
    play(twin, moves[split_at:])
    assert env.snapshot() == before  # stepping the clone left the original untouched
    play(env, moves[split_at:])
    assert env.snapshot() == twin.snapshot()
    assert env.observe("solver")["prompt"] == twin.observe("solver")["prompt"]

"""Sudoku: solver, generator, splits, answer parsing, AEC behaviour, scripted policy, PettingZoo API."""

from __future__ import annotations

import json
import pickle
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pettingzoo.test import api_test, seed_test

from mas_envs import make_env
from mas_envs.envs.sudoku import SudokuEnv, parse_answer
from mas_envs.games import sudoku as game


# A fixed 4x4 puzzle (unique solution checked in a test below).
SOLUTION = (1, 2, 3, 4,
            3, 4, 1, 2,
            2, 1, 4, 3,
            4, 3, 2, 1)  # fmt: skip
GIVENS = (1, 0, 0, 4,
          0, 4, 1, 0,
          2, 0, 4, 0,
          0, 3, 0, 1)  # fmt: skip
HAND = game.Puzzle(4, GIVENS, SOLUTION)


def env_on(puzzle: game.Puzzle, **kw) -> SudokuEnv:
    env = SudokuEnv(workflow="single", size=puzzle.n, **kw)
    env.reset(seed=0)
    env._set_puzzle_state((puzzle, puzzle.givens, "hand"))
    return env


def is_valid_solution(grid, n) -> bool:
    b = int(n**0.5)
    rows = [grid[r * n : (r + 1) * n] for r in range(n)]
    groups = rows + [tuple(row[c] for row in rows) for c in range(n)]
    groups += [
        tuple(rows[br + i][bc + j] for i in range(b) for j in range(b))
        for br in range(0, n, b)
        for bc in range(0, n, b)
    ]
    return all(sorted(g) == list(range(1, n + 1)) for g in groups)


# ---------------------------------------------------------------------- solver and generator
def test_solver_counts_solutions():
    assert game.solve(GIVENS, 4, limit=2) == (1, SOLUTION)
    assert game.solve((0,) * 16, 4, limit=2)[0] == 2
    assert game.solve((0,) * 16, 4, limit=1000)[0] == 288  # all 4x4 Sudoku grids
    broken = (1, 1) + (0,) * 14
    assert game.solve(broken, 4, limit=2) == (0, None)


@pytest.mark.parametrize("n,clues", [(4, 8), (4, 6), (9, 32)])
def test_generated_puzzles_have_unique_solutions(n, clues):
    for seed in range(60 if n == 4 else 15):
        p = game.puzzle_for("train", seed, n, clues)
        assert is_valid_solution(p.solution, n)
        assert all(g in (0, s) for g, s in zip(p.givens, p.solution))
        assert n * n - p.givens.count(0) == clues
        assert game.solve(p.givens, n, limit=2) == (1, p.solution)


def test_generator_is_deterministic():
    assert [game.puzzle_for("train", s, 4, 8) for s in range(10)] == [
        game.puzzle_for("train", s, 4, 8) for s in range(10)
    ]


def test_splits_are_disjoint():
    test_list = game.test_puzzles(4, 8, 200)
    test_givens = {p.givens for p in test_list}
    test_solutions = {p.solution for p in test_list}
    assert len(test_givens) == 200
    rng = random.Random(0)
    draws = [game.puzzle_for("train", rng.randrange(2**62), 4, 8) for _ in range(3000)]
    assert not test_givens & {p.givens for p in draws}
    assert not test_solutions & {p.solution for p in draws}  # not even a shared solution grid
    # the split rule does real work: only 288 solution grids exist, so unfiltered draws would collide
    raw = [game.random_solution(rng, 4) for _ in range(500)]
    assert any(game.split_of(game.grid_text(s, 4)) == "test" for s in raw)


def test_fingerprint_and_task_index():
    a = SudokuEnv(workflow="single", split="test", test_size=30)
    b = SudokuEnv(workflow="single", split="test", test_size=30)
    hard = SudokuEnv(workflow="single", split="test", test_size=30, difficulty="hard")
    assert a.eval_set_fingerprint() == b.eval_set_fingerprint() != hard.eval_set_fingerprint()
    a.reset(seed=1, options={"task_index": 4})
    b.reset(seed=2, options={"task_index": 4})
    assert a.puzzle == b.puzzle == a.test_puzzles()[4] and a.task_id == "sudoku-4x4-test-4"
    with pytest.raises(ValueError):
        a.reset(options={"task_index": 30})
    train = SudokuEnv(workflow="single")
    train.reset(seed=7)
    first = train.task_id
    train.reset(seed=7)
    assert train.task_id == first and first.startswith("sudoku-4x4-train-")


# ---------------------------------------------------------------------- answer parsing
def test_parse_answer_formats():
    grid = [[1, 2, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]]
    fills, err = parse_answer("Answer: " + json.dumps(grid), 4)
    assert err is None and len(fills) == 16 and (1, 2, 1) in fills
    fills, err = parse_answer("[[1, 2, 3], [4, 4, 1]]", 4)
    assert err is None and fills == [(0, 1, 3), (3, 3, 1)]  # 1-based input
    fills, err = parse_answer("1 2 . 4\n3 4 1 2\n---+---\n2 1 4 3\n4 3 2 1\n", 4)
    assert err is None and len(fills) == 15
    fills, err = parse_answer('[[1, null, "3", 0], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]]', 4)
    assert err is None and len(fills) == 14


@pytest.mark.parametrize(
    "text", ["", "[[", "[[1, 2]]", "[[true, 1, 2]]", "hello", "\x00😀\u200f", "[" * 5000, "[[1,2,3]" * 3000]
)
def test_garbage_never_raises(text):
    env = env_on(HAND)
    env.step(text)
    assert env.infos["solver"]["parse_error"]
    assert "internal error" not in env.infos["solver"]["parse_error"]
    assert env.rewards["solver"] == pytest.approx(env.parse_penalty)
    assert env.board == GIVENS


# ---------------------------------------------------------------------- rules and rewards
def test_correct_fill_earns_progress():
    env = env_on(HAND)
    env.step("[[1, 2, 2]]")
    assert env.rewards["solver"] == pytest.approx(game.PROGRESS)
    assert env.board[1] == 2 and not env.terminations["solver"]


def test_invalid_fills_are_penalised_and_not_applied():
    env = env_on(HAND)
    # a given changed, a value out of range, a position outside, a repeated digit in row 1
    env.step("[[1, 1, 3], [1, 2, 7], [5, 1, 1], [1, 2, 4]]")
    assert env.rewards["solver"] == pytest.approx(4 * game.INVALID_COST)
    assert env.board == GIVENS
    assert "4 invalid" in env.history[-1].feedback


def test_conflicting_fills_in_one_answer_are_both_rejected():
    env = env_on(HAND)
    env.step("[[1, 2, 2], [1, 3, 2]]")  # the same digit twice in row 1
    assert env.board == GIVENS and env.rewards["solver"] == pytest.approx(2 * game.INVALID_COST)


def test_rejection_uncovers_hidden_conflict():
    # The board holds a legal but wrong 3 at (2,4); an answer overwrites it with a clashing 4 and adds a 3
    # to the same row. The 4 is rejected, the 3 comes back, so the new 3 must be rejected too.
    board = list(GIVENS)
    board[7] = 3
    new, reward, _, _ = game.apply_fills(HAND, tuple(board), [(1, 3, 4), (1, 0, 3)])
    assert new == tuple(board)
    assert reward == pytest.approx(2 * game.INVALID_COST)


def test_wrong_but_legal_fill_and_overwrite():
    env = env_on(HAND)
    env.step("[[1, 3, 2]]")  # legal (no repeat) but wrong: changes the board, no progress
    assert env.board[2] == 2 and env.rewards["solver"] == pytest.approx(0.0)
    env.step("[[1, 3, 3]]")  # corrected
    assert env.rewards["solver"] == pytest.approx(game.PROGRESS)
    env.step("[[1, 3, 3]]")  # restating is a no-op
    assert env.rewards["solver"] == pytest.approx(0.0)
    env.step("[[1, 3, 2]]")  # overwriting a correct cell with a wrong digit loses the progress
    assert env.rewards["solver"] == pytest.approx(-game.PROGRESS)


def test_full_solution_solves_and_terminates():
    env = env_on(HAND)
    env.step(json.dumps([list(SOLUTION[r * 4 : r * 4 + 4]) for r in range(4)]))
    empty = GIVENS.count(0)
    assert env.rewards["solver"] == pytest.approx(empty * game.PROGRESS + game.SOLVED_BONUS)
    assert env.terminations["solver"] and env.success and env.infos["solver"]["success"]


def test_truncation_at_max_turns():
    env = SudokuEnv(workflow="single", max_turns=2)
    env.reset(seed=0)
    env.step("no")
    assert not env.truncations["solver"]
    env.step("[[1, 1, 1]]")
    assert env.truncations["solver"] and not env.success


def test_observation_and_prompt():
    env = env_on(HAND)
    obs = env.observe("solver")
    assert env.observation_space("solver")["observation"].contains(obs["observation"])
    assert obs["observation"].tolist()[0] == [1, 0, 0, 4]
    assert "1 . . 4" in obs["prompt"] and "counted from 1" in obs["prompt"]
    env.step("[[1, 2, 2]]")
    assert "Current board" in env.observe("solver")["prompt"]


def test_clone_and_snapshot():
    env = SudokuEnv(workflow="single")
    env.reset(seed=3)
    twin = env.clone()
    env.step(env.scripted_action())
    assert env.success and not twin.success and twin.board == twin.puzzle.givens
    snap = pickle.loads(pickle.dumps(env.snapshot()))
    other = SudokuEnv(workflow="single")
    other.restore(snap)
    assert other.board == env.board and other.success


# ---------------------------------------------------------------------- scripted policy
def test_scripted_policy_solves_200_test_puzzles_single():
    env = SudokuEnv(workflow="single", split="test", test_size=200, max_turns=1)
    for i in range(200):
        env.reset(seed=i, options={"task_index": i})
        env.step(env.scripted_action())
        assert env.success and env.terminations["solver"]


def test_scripted_policy_9x9_single():
    env = SudokuEnv(workflow="single", size=9, split="test", test_size=10, max_turns=1)
    for i in range(10):
        env.reset(seed=i, options={"task_index": i})
        env.step(env.scripted_action())
        assert env.success


@pytest.mark.parametrize("size,count", [(4, 20), (9, 5)])
def test_scripted_policy_mas(size, count):
    env = SudokuEnv(workflow="mas", size=size, split="test", test_size=count, max_turns=1)
    for i in range(count):
        env.reset(seed=i, options={"task_index": i})
        tool_action = env.scripted_action("tool")
        assert env.scripted_action("planner") not in tool_action  # the program solves the grid itself
        env.step(tool_action)
        assert env.infos["tool"]["sandbox_reason"] == "ok" and env.infos["tool"]["parse_error"] is None
        assert json.loads(env.tool_output) == json.loads(env.scripted_action("planner"))  # solved in the sandbox
        assert env.rewards["tool"] > game.SOLVED_BONUS
        env.step(env.scripted_action())
        assert env.success and env.terminations["planner"]


# ---------------------------------------------------------------------- PettingZoo API
def test_pettingzoo_api_and_seed_single():
    api_test(make_env("sudoku", workflow="single"), num_cycles=30)
    seed_test(lambda: make_env("sudoku", workflow="single"), num_cycles=30)


def test_pettingzoo_api_and_seed_mas():
    api_test(make_env("sudoku", workflow="mas", max_turns=3), num_cycles=10)
    seed_test(lambda: make_env("sudoku", workflow="mas", max_turns=3), num_cycles=10)


def test_metadata():
    assert SudokuEnv.metadata["name"] == "sudoku_v0" and SudokuEnv.env_name == "sudoku"


def test_clone_continues_like_the_original_under_random_answers():
    rng = random.Random(0)
    env = SudokuEnv(workflow="single", max_turns=6)
    env.reset(seed=11)
    answers = [f"[[{rng.randint(1, 4)}, {rng.randint(1, 4)}, {rng.randint(1, 5)}]]" for _ in range(6)]
    twin = env.clone()
    for a in answers:
        if env.terminations["solver"] or env.truncations["solver"]:
            break
        env.step(a)
        twin.step(a)
        assert twin.board == env.board and twin.rewards == env.rewards and twin.infos == env.infos


def test_holes_and_clue_counts():
    env = SudokuEnv(workflow="single", n_holes=10)
    env.reset(seed=0)
    assert env.puzzle.givens.count(0) == 10
    with pytest.raises(ValueError):
        SudokuEnv(size=5)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_handled_without_internal_errors(text):
    env = env_on(HAND)
    env.step(text)
    error = env.infos["solver"]["parse_error"]
    assert error is None or "internal error" not in error
    # whatever was applied, the board keeps the givens and never breaks the rules
    assert all(g in (0, b) for g, b in zip(GIVENS, env.board))
    assert not any(game.conflicts(env.board, 4, i) for i in range(16))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 5), st.integers(-1, 5), st.integers(-1, 6)), max_size=20))
def test_random_fills_keep_the_board_legal(fills):
    env = env_on(HAND)
    env.step(json.dumps([list(f) for f in fills]) if fills else "[[1, 1, 1]]")
    assert all(g in (0, b) for g, b in zip(GIVENS, env.board))
    assert not any(game.conflicts(env.board, 4, i) for i in range(16))


def test_render_ansi_shows_the_board():
    env = env_on(HAND, render_mode="ansi")
    assert env.render().splitlines()[0] == "1 . . 4"

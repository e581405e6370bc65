"""Plan-Path: game rules, generator, splits, AEC behaviour, scripted policy, PettingZoo API."""

from __future__ import annotations

import json
import pickle
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pettingzoo.test import api_test, seed_test

from mas_envs import make_env
from mas_envs.envs.plan_path import PlanPathEnv, relative_direction
from mas_envs.envs.puzzle_env import TOOL_CREDIT
from mas_envs.games import plan_path as game


# A hand-made maze: S at top-left, G at bottom-right, a wall in the middle.
#   S . .
#   . # .
#   . . G
HAND = game.Maze(rows=("...", ".#.", "..."), start=(0, 0), goal=(2, 2))


def single_env(**kw):
    kw.setdefault("preset", "5x5")
    return PlanPathEnv(workflow="single", **kw)


def env_on(maze: game.Maze, **kw) -> PlanPathEnv:
    """A single-workflow env reset onto ``maze`` (through the public state hooks)."""
    env = PlanPathEnv(workflow="single", size=maze.size, **kw)
    env.reset(seed=0)
    env._set_puzzle_state((maze, game.Walk(pos=maze.start), "hand"))
    return env


# ---------------------------------------------------------------------- game rules
def test_bfs_distances_and_shortest_path():
    assert HAND.distances[(0, 0)] == 4
    assert HAND.optimal_length == 4
    path = game.shortest_path(HAND, HAND.start)
    walk, _, _ = game.apply_moves(HAND, game.Walk(HAND.start), path)
    assert len(path) == 4 and walk.reached


def test_rewards_valid_invalid_optimal():
    start = game.Walk(HAND.start)
    # a valid move towards the goal: step cost plus one unit of shaping
    _, r, _ = game.apply_moves(HAND, start, ["R"])
    assert r == pytest.approx(game.STEP_COST + game.SHAPING)
    # into the edge: invalid, stays
    w, r, fb = game.apply_moves(HAND, start, ["U"])
    assert w.pos == (0, 0) and w.invalid == 1 and r == pytest.approx(game.INVALID_COST) and "edge" in fb
    # into the wall
    w, r, fb = game.apply_moves(HAND, game.Walk((0, 1)), ["D"])
    assert w.pos == (0, 1) and r == pytest.approx(game.INVALID_COST) and "wall" in fb
    # away from the goal
    _, r, _ = game.apply_moves(HAND, game.Walk((0, 1)), ["L"])
    assert r == pytest.approx(game.STEP_COST - game.SHAPING)
    # optimal path: goal bonus plus optimal bonus
    w, r, _ = game.apply_moves(HAND, start, ["R", "R", "D", "D"])
    assert w.reached
    assert r == pytest.approx(4 * (game.STEP_COST + game.SHAPING) + game.GOAL_BONUS + game.OPTIMAL_BONUS)
    # a detour reaches the goal without the optimal bonus; moves after the goal are ignored
    w, r, _ = game.apply_moves(HAND, start, ["U", "R", "R", "D", "D", "L"])
    assert w.reached and w.pos == HAND.goal and w.moves == 4
    assert r == pytest.approx(game.INVALID_COST + 4 * (game.STEP_COST + game.SHAPING) + game.GOAL_BONUS)


@pytest.mark.parametrize("size,ratio", [(4, 0.18), (5, 0.2), (6, 0.2), (10, 0.22)])
def test_generator_reachable_and_ratio(size, ratio):
    for seed in range(100):
        maze = game.maze_for("train", seed, size, ratio)
        assert maze.size == size and all(len(r) == size for r in maze.rows)
        assert sum(r.count(game.WALL) for r in maze.rows) == round(ratio * size * size)
        assert maze.is_free(maze.start) and maze.is_free(maze.goal)
        assert maze.start in maze.distances  # BFS-reachable
        assert maze.optimal_length >= game.default_min_distance(size)


def test_generator_is_deterministic():
    a = [game.maze_for("train", s, 10, 0.22) for s in range(20)]
    b = [game.maze_for("train", s, 10, 0.22) for s in range(20)]
    assert a == b and len({m.canonical() for m in a}) == 20


def test_splits_are_disjoint():
    test_set = {m.canonical() for m in game.test_mazes(4, 0.18, 200)}
    assert len(test_set) == 200  # the test list has no duplicates
    rng = random.Random(0)
    draws = [game.maze_for("train", rng.randrange(2**62), 4, 0.18).canonical() for _ in range(3000)]
    assert not test_set & set(draws)
    assert all(game.split_of(t) == "train" for t in draws)
    # the split rule does real work: unfiltered generation lands in the test quarter about 1/4 of the time
    raw = [game.generate_maze(rng, 4, 0.18, 2).canonical() for _ in range(1000)]
    assert 150 < sum(game.split_of(t) == "test" for t in raw) < 350


def test_env_train_draws_never_hit_the_test_set():
    env = single_env(preset="4x4")
    test_set = {m.canonical() for m in env.test_puzzles()}
    for seed in range(300):
        env.reset(seed=seed)
        assert env.maze.canonical() not in test_set


def test_fingerprint_and_task_index():
    a = PlanPathEnv(workflow="single", preset="4x4", split="test", test_size=50)
    b = PlanPathEnv(workflow="single", preset="4x4", split="test", test_size=50)
    c = PlanPathEnv(workflow="single", preset="4x4", split="test", test_size=40)
    assert a.eval_set_fingerprint() == b.eval_set_fingerprint() != c.eval_set_fingerprint()
    assert len(a.eval_set_fingerprint()) == 64
    a.reset(seed=1, options={"task_index": 7})
    b.reset(seed=99, options={"task_index": 7})
    assert a.maze == b.maze == a.test_puzzles()[7] and a.task_id == b.task_id == "plan_path-4x4-test-7"
    with pytest.raises(ValueError):
        a.reset(options={"task_index": 50})


def test_reset_without_index_draws_from_seed():
    env = single_env()
    env.reset(seed=5)
    first = (env.maze, env.task_id)
    env.reset(seed=5)
    assert (env.maze, env.task_id) == first
    ids = set()
    for s in range(20):
        env.reset(seed=s)
        ids.add(env.task_id)
    assert len(ids) == 20


# ---------------------------------------------------------------------- AEC behaviour
def test_env_rewards_and_success_through_step():
    env = env_on(HAND)
    env.step("R")  # one-word answer
    assert env.rewards["solver"] == pytest.approx(game.STEP_COST + game.SHAPING)
    assert env.infos["solver"]["parse_error"] is None and not env.terminations["solver"]
    env.step('["U"]')  # into the edge
    assert env.rewards["solver"] == pytest.approx(game.INVALID_COST)
    env.step('Moves: ["right", "down", "down"]')
    assert env.terminations["solver"] and env.infos["solver"]["success"] and env.success
    assert env.rewards["solver"] == pytest.approx(3 * (game.STEP_COST + game.SHAPING) + game.GOAL_BONUS)


def test_optimal_answer_earns_the_optimal_bonus():
    env = env_on(HAND)
    env.step('["R", "R", "D", "D"]')
    assert env.rewards["solver"] == pytest.approx(4 * 0.09 + game.GOAL_BONUS + game.OPTIMAL_BONUS)
    assert env.terminations["solver"] and env.success


def test_truncation_at_max_turns():
    env = single_env(max_turns=3)
    env.reset(seed=3)
    for _ in range(3):
        assert not env.truncations["solver"]
        env.step("garbage with no moves")
    assert env.truncations["solver"] and not env.terminations["solver"] and not env.success


@pytest.mark.parametrize(
    "text", ["", "[[[", "hello world", '["X"]', "\x00\u200f😀", "[" * 5000, "U" * 30000, '{"a": [1, 2]}', "[]"]
)
def test_garbage_never_raises(text):
    env = single_env(max_moves_per_turn=8)
    env.reset(seed=1)
    env.step(text)
    assert env.infos["solver"]["parse_error"]
    assert env.rewards["solver"] == pytest.approx(env.parse_penalty)
    assert "internal error" not in env.infos["solver"]["parse_error"]


def test_too_many_moves_is_a_parse_error():
    env = single_env(max_moves_per_turn=2)
    env.reset(seed=1)
    assert "at most 2 move(s)" in env.observe("solver")["prompt"]
    env.step('["U", "D", "L"]')
    assert "too many" in env.infos["solver"]["parse_error"]


def test_rich_and_bare_prompts():
    rich = env_on(HAND)
    text = rich.observe("solver")["prompt"]
    assert "row 0, col 0" in text and "2 rows down and 2 cols right" in text
    assert "up edge" in text and "right free" in text and "Example" in text
    bare = env_on(HAND, observation_detail="bare")
    text = bare.observe("solver")["prompt"]
    assert "A.." in text and ".#." in text and "Example" not in text and "row 0, col 0" not in text
    assert relative_direction(3, 3, 1, 4) == "2 rows up and 1 col right"
    assert relative_direction(0, 0, 0, 0) == "here"


def test_worked_example_direction_varies_but_is_a_function_of_the_state():
    # A fixed example direction is what an untrained small model copies (it used to be always "up").
    env = PlanPathEnv(workflow="single", preset="4x4", split="test")
    words = set()
    for index in range(12):
        env.reset(seed=0, options={"task_index": index})
        for _ in range(3):
            example = next(l for l in env.observe("solver")["prompt"].splitlines() if l.startswith("Example"))
            word = example.rsplit(" ", 1)[-1]
            assert f"the cell {word} is free" in example
            words.add(word)
            twin = env.clone()
            assert twin.observe("solver")["prompt"] == env.observe("solver")["prompt"]
            env.step("L")
    assert words == {"up", "down", "left", "right"}


def test_numeric_observation_matches_grid():
    env = env_on(HAND)
    obs = env.observe("solver")["observation"]
    space = env.observation_space("solver")["observation"]
    assert space.contains(obs)
    assert obs[1, 1] == 1 and obs[0, 0] == 3 and obs[2, 2] == 2 and obs[0, 1] == 0
    env.step("R")
    assert env.observe("solver")["observation"][0, 1] == 3


def test_clone_is_independent_and_snapshot_pickles():
    env = single_env()
    env.reset(seed=4)
    twin = env.clone()
    env.step(env.scripted_action())
    assert env.success and not twin.success and twin.walk.pos == twin.maze.start
    twin.step(twin.scripted_action())
    assert twin.success and twin.rewards == env.rewards
    snap = pickle.loads(pickle.dumps(env.snapshot()))
    fresh = single_env()
    fresh.restore(snap)
    assert fresh.walk == env.walk and fresh.maze == env.maze


# ---------------------------------------------------------------------- scripted policy
@pytest.mark.parametrize("preset", ["4x4", "10x10"])
def test_scripted_policy_solves_200_test_puzzles_single(preset):
    env = PlanPathEnv(workflow="single", preset=preset, split="test", test_size=200, max_turns=1)
    total = 0
    for i in range(200):
        env.reset(seed=i, options={"task_index": i})
        env.step(env.scripted_action())
        assert env.success and env.terminations["solver"]
        assert env.rewards["solver"] > game.GOAL_BONUS + game.OPTIMAL_BONUS  # shortest path bonus
        total += 1
    assert total == 200


def test_scripted_policy_solves_test_puzzles_mas():
    env = PlanPathEnv(workflow="mas", preset="10x10", split="test", max_turns=1)
    for i in range(20):
        env.reset(seed=i, options={"task_index": i})
        tool_action = env.scripted_action("tool")
        assert env.scripted_action("planner") not in tool_action  # the program computes the path itself
        env.step(tool_action)
        info = env.infos["tool"]
        assert info["sandbox_reason"] == "ok" and info["parse_error"] is None
        assert json.loads(env.tool_output) == json.loads(env.scripted_action("planner"))  # BFS ran in the sandbox
        assert env.rewards["tool"] > game.GOAL_BONUS
        env.step(env.scripted_action())
        assert env.success and env.terminations["planner"]


# A search written against the variables that tool_prompt="code" defines (what a model is asked to write).
BFS_ON_VARIABLES = """```python
from collections import deque
seen, queue = {start: []}, deque([start])
while queue:
    cell = queue.popleft()
    if cell == goal:
        break
    for name, (dr, dc) in moves.items():
        nxt = (cell[0] + dr, cell[1] + dc)
        if 0 <= nxt[0] < len(grid) and 0 <= nxt[1] < len(grid[0]) and grid[nxt[0]][nxt[1]] != "#" and nxt not in seen:
            seen[nxt] = seen[cell] + [name]
            queue.append(nxt)
print(json.dumps(seen[goal]))
```"""


def test_code_tool_prompt_defines_the_state_and_is_graded_like_any_program():
    env = PlanPathEnv(workflow="mas", preset="4x4", split="validation", tool_prompt="code", max_turns=1)
    for i in range(10):
        env.reset(options={"task_index": i})
        prompt = env.observe("tool")["prompt"]
        assert f"start = {tuple(env.walk.pos)}" in prompt and "Grid:" not in prompt  # short: no puzzle prose
        assert "start =" not in env.observe("planner")["prompt"]  # the planner's prompt is unchanged
        env.step(BFS_ON_VARIABLES)
        assert env.infos["tool"]["parse_error"] is None
        assert json.loads(env.tool_output) == json.loads(env.scripted_action("planner"))
        assert env.infos["tool"]["tool_credit"] == pytest.approx(1.0)  # ran, valid, reaches G, optimal
        assert env.tool_code.startswith("from collections")  # the planner is shown the tool's own code
    # The full prompt's program gets no variables: the same code fails there (NameError), penalised.
    full = PlanPathEnv(workflow="mas", preset="4x4", split="validation", max_turns=1)
    full.reset(options={"task_index": 0})
    full.step(BFS_ON_VARIABLES)
    assert full.infos["tool"]["parse_error"] and full.rewards["tool"] == pytest.approx(full.parse_penalty)
    # The scripted tool reads stdin, which is the same in both modes.
    env.reset(options={"task_index": 0})
    env.step(env.scripted_action("tool"))
    assert env.infos["tool"]["parse_error"] is None
    with pytest.raises(ValueError, match="tool_prompt"):
        PlanPathEnv(workflow="mas", tool_prompt="short")


# A completion of the tool_prompt="function" stub, as a code model writes it: its own example print
# comes before the env's call, and only the env's call (the last line) is read as the answer.
BFS_FUNCTION = """```python
from collections import deque

def shortest_path(grid, start, goal):
    seen, queue = {start: [start]}, deque([start])
    while queue:
        cell = queue.popleft()
        if cell == goal:
            return seen[cell]
        for dr, dc in [(-1, 0), (1, 0), (0, -1), (0, 1)]:
            r, c = cell[0] + dr, cell[1] + dc
            if 0 <= r < len(grid) and 0 <= c < len(grid[0]) and grid[r][c] != "#" and (r, c) not in seen:
                seen[(r, c)] = seen[cell] + [(r, c)]
                queue.append((r, c))
    return []

print(shortest_path(["..", "#."], (0, 0), (1, 1)))
```"""


def test_function_tool_prompt_calls_the_completed_function_on_the_puzzle():
    env = PlanPathEnv(workflow="mas", preset="4x4", split="validation", tool_prompt="function", max_turns=1)
    for i in range(10):
        env.reset(options={"task_index": i})
        prompt = env.observe("tool")["prompt"]
        assert "def shortest_path(" in prompt and f"start = {tuple(env.walk.pos)}" in prompt
        assert "Grid:" not in prompt and "def shortest_path" not in env.observe("planner")["prompt"]
        env.step(BFS_FUNCTION)
        assert env.infos["tool"]["parse_error"] is None
        lines = env.tool_output.splitlines()
        assert lines[0] == "[(0, 0), (0, 1), (1, 1)]"  # the tool's own example ran first...
        assert json.loads(lines[-2])[0] == list(env.walk.pos)  # ...then the env's call printed the cells...
        answer = json.loads(lines[-1].removeprefix("As an answer: "))  # ...which the env read as moves
        assert answer == json.loads(env.scripted_action("planner"))
        assert env.infos["tool"]["tool_credit"] == pytest.approx(1.0)
        assert "print(json.dumps" not in env.tool_code  # the planner sees the tool's code, not the harness
        assert "As an answer:" in env.observe("planner")["prompt"]
    # The scripted tool completes the stub too.
    env.reset(options={"task_index": 3})
    env.step(env.scripted_action("tool"))
    assert env.infos["tool"]["tool_credit"] == pytest.approx(1.0)
    # A function that returns nothing useful is no answer, even though its example printed a valid path.
    for broken, why in [("return None", "list of (row, col) cells"),
                        ("return [start, goal]", "not a neighbouring cell"),
                        ("return 3", "list of (row, col) cells")]:
        env.reset(options={"task_index": 0})
        env.step(BFS_FUNCTION.replace("return seen[cell]", broken).replace("return []", broken))
        assert why in env.infos["tool"]["parse_error"] and env.infos["tool"]["tool_credit"] == TOOL_CREDIT["ran"]
    # A program with no such function crashes at the env's call: penalised.
    env.reset(options={"task_index": 0})
    env.step('```python\nprint(["D"])\n```')
    assert env.infos["tool"]["sandbox_reason"] != "ok" and env.rewards["tool"] == pytest.approx(env.parse_penalty)


def test_function_tool_prompt_is_refused_where_no_stub_exists():
    with pytest.raises(ValueError, match="function"):
        make_env("sudoku", workflow="mas", tool_prompt="function")


def test_mas_tool_garbage_is_penalised():
    env = PlanPathEnv(workflow="mas", preset="4x4")
    env.reset(seed=0)
    env.step("```python\nraise SystemExit(3)\n```")
    assert env.infos["tool"]["parse_error"] and env.rewards["tool"] == pytest.approx(env.parse_penalty)
    env.step("no idea")
    assert env.infos["planner"]["parse_error"]


# ---------------------------------------------------------------------- PettingZoo API
def test_pettingzoo_api_and_seed_single():
    api_test(make_env("plan_path", workflow="single", preset="5x5"), num_cycles=30)
    seed_test(lambda: make_env("plan_path", workflow="single", preset="5x5"), num_cycles=30)


def test_pettingzoo_api_and_seed_mas():
    api_test(make_env("plan_path", workflow="mas", preset="5x5", max_turns=3), num_cycles=10)
    seed_test(lambda: make_env("plan_path", workflow="mas", preset="5x5", max_turns=3), num_cycles=10)


def test_make_env_clone_keeps_wrapper():
    env = make_env("plan_path", workflow="single", preset="4x4")
    env.reset(seed=0)
    twin = env.clone()
    assert type(twin) is type(env)
    assert np.array_equal(twin.observe("solver")["observation"], env.observe("solver")["observation"])
    assert PlanPathEnv.metadata["name"] == "plan_path_v0"


def test_clone_continues_like_the_original_under_random_answers():
    rng = random.Random(0)
    env = single_env(max_turns=8)
    env.reset(seed=11)
    twin = env.clone()
    for _ in range(8):
        if env.terminations["solver"] or env.truncations["solver"]:
            break
        answer = json.dumps([rng.choice("UDLR") for _ in range(rng.randint(1, 3))])
        env.step(answer)
        twin.step(answer)
        assert twin.walk == env.walk and twin.rewards == env.rewards and twin.infos == env.infos


def test_impossible_configuration_fails_loudly():
    with pytest.raises(ValueError):
        game.maze_for("train", 0, 2, 0.5)  # 2 walls on 2x2 never leave a goal 2 steps away
    with pytest.raises(ValueError):
        PlanPathEnv(preset="3x3")


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_handled_without_internal_errors(text):
    env = env_on(HAND, max_moves_per_turn=16)
    env.step(text)
    error = env.infos["solver"]["parse_error"]
    assert error is None or "internal error" not in error
    assert HAND.is_free(env.walk.pos)


def test_render_ansi_shows_the_grid():
    env = env_on(HAND, render_mode="ansi")
    assert env.render().splitlines()[:3] == ["A..", ".#.", "..G"]


def test_tool_reward_is_graded_and_its_team_term_is_the_turns_outcome():
    """Tool local reward: ran + valid (0.5), reaches the goal (+0.25), optimum/length (+0.25 x ratio);
    failing code is a parse error (plus the "ran" rung when it ran without a valid answer); the team term is what the team earns when the printed action is executed."""
    from mas_envs.envs.puzzle_env import TOOL_CREDIT

    def tool_step(code: str):
        env = make_env("plan_path", preset="4x4", workflow="mas", split="test", parse_penalty=-0.12)
        env.reset(seed=0, options={"task_index": 3})
        maze, walk = env.unwrapped.maze, env.unwrapped.walk
        env.step("```python\n" + code + "\n```")
        return env, maze, walk, env.infos["tool"]

    from mas_envs.games import plan_path as game

    env, maze, walk, _ = tool_step("print(1)")
    path = game.shortest_path(maze, walk.pos)
    assert len(path) >= 2
    _, _, _, best = tool_step(env.unwrapped._scripted_tool_code())
    assert best["local_reward"] == pytest.approx(sum(TOOL_CREDIT.values()))
    assert best["parse_error"] is None and best["team_reward"] > game.GOAL_BONUS  # reaches the goal optimally
    # The same action executed by the planner gives the planner that very team term.
    env2 = make_env("plan_path", preset="4x4", workflow="mas", split="test", parse_penalty=-0.12)
    env2.reset(seed=0, options={"task_index": 3})
    env2.step("```python\nprint('no moves')\n```")
    env2.step(json.dumps(path))
    assert env2.infos["planner"]["team_reward"] == pytest.approx(best["team_reward"])
    # A detour that still reaches the goal: optimum / length of the credit.
    back = {"U": "D", "D": "U", "L": "R", "R": "L"}
    free = next(m for m in "UDLR" if maze.is_free((walk.pos[0] + game.MOVES[m][0], walk.pos[1] + game.MOVES[m][1]))
                and (walk.pos[0] + game.MOVES[m][0], walk.pos[1] + game.MOVES[m][1]) != maze.goal)
    detour = [free, back[free]] + path
    _, _, _, long = tool_step(f"print({json.dumps(detour)!r})")
    assert long["local_reward"] == pytest.approx(0.75 + 0.25 * len(path) / len(detour))
    _, _, _, wrong = tool_step(f"print({json.dumps([free])!r})")  # valid, does not reach the goal
    assert wrong["local_reward"] == pytest.approx(0.5)
    # A program that crashes earns the parse penalty; one that ran but printed no valid answer is still
    # a parse error, with the "ran" rung on top, so it ranks above the crash and below any valid answer.
    _, _, _, crashed = tool_step("raise SystemExit(3)")
    assert crashed["local_reward"] == pytest.approx(-0.12) and crashed["parse_error"]
    _, _, _, ran = tool_step("print('hello')")
    assert ran["local_reward"] == pytest.approx(-0.12 + TOOL_CREDIT["ran"]) and ran["parse_error"]
    assert crashed["local_reward"] < ran["local_reward"] < wrong["local_reward"]

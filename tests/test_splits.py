"""Train / validation / test: disjoint by construction in every env, and the test sets never move.

The pinned fingerprints are the test sets every published result was measured on; carving a validation
split out of train must leave them byte for byte the same.
"""

import pytest

from mas_envs import make_env
from mas_envs.data import code_problems, math_problems
from mas_envs.data.held_out import normalise, prompt_hash
from mas_envs.games import plan_path as plan_game
from mas_envs.games import sokoban_generate
from mas_envs.games import sudoku as sudoku_game
from mas_envs.games.splits import split_of

PINNED_TEST_FINGERPRINTS = [
    ("plan_path", {}, "664cb0218441530d8f1f2317476a51d60e6a8f177bcad9e721f0fc18f020599c"),
    ("plan_path", {"preset": "4x4"}, "5bc73f0829652848784cd3f833870b356e45af6fc5cb39374de2923603c1aa82"),
    ("plan_path", {"preset": "4x4", "test_size": 100}, "3cab3e25cbb9c985390b6bef8f2f811c4879140b30fde38f3f183382698d2f13"),
    ("sokoban", {}, "c4bd1c26a334966cbd33b9cdb0ddaeca9fd1b5a709e51031cad45b3a8252ca4f"),
    ("sudoku", {}, "fe05c1a8b688ffe285b6ded15593949033ee4d4f10902d1cbf6b444403f2da22"),
    ("coder_tester", {}, "ca9b1dba758c6338ca430b6063642b1eac4b3ea92174938f44b67a6d5eacb0ca"),
    ("math_tool", {"dataset": "gsm8k"}, "452d9e03d8a587ea0b84b59476fe79154bfff261059ebdcce8c9f7d69aa489e5"),
    ("math_tool", {"dataset": "math500"}, "05dc313e1fe683fe66e29b1192355d1825aa3a4287b4a9623d59db203ed41974"),
]


@pytest.mark.parametrize("name,kwargs,expected", PINNED_TEST_FINGERPRINTS, ids=lambda x: str(x)[:20])
def test_test_sets_are_unchanged(name, kwargs, expected):
    assert make_env(name, split="test", **kwargs).unwrapped.eval_set_fingerprint() == expected


@pytest.mark.parametrize("name,kwargs", [("plan_path", {"preset": "4x4"}), ("sokoban", {}), ("sudoku", {}),
                                         ("coder_tester", {}), ("math_tool", {"dataset": "gsm8k"})])
def test_validation_split_has_its_own_fingerprint_and_tasks(name, kwargs):
    val = make_env(name, split="validation", **kwargs)
    test = make_env(name, split="test", **kwargs)
    assert val.unwrapped.eval_set_fingerprint() != test.unwrapped.eval_set_fingerprint()
    assert val.unwrapped.eval_set_fingerprint() == make_env(name, split="validation", **kwargs).unwrapped.eval_set_fingerprint()
    val.reset(seed=0, options={"task_index": 0})
    assert "validation" in str(val.unwrapped.task_id) or name == "coder_tester"
    assert isinstance(val.observe(val.agent_selection)["prompt"], str)


@pytest.mark.parametrize("name", ["plan_path", "sokoban", "sudoku", "coder_tester", "math_tool"])
def test_unknown_split_is_a_clear_error(name):
    with pytest.raises(ValueError, match="split must be one of"):
        make_env(name, split="dev")


def test_hash_buckets_are_disjoint_and_sized():
    counts = {"train": 0, "validation": 0, "test": 0}
    for i in range(4096):
        counts[split_of(f"puzzle {i}")] += 1
    assert set(counts) == {"train", "validation", "test"}
    assert 0.20 < counts["test"] / 4096 < 0.30 and 0.09 < counts["validation"] / 4096 < 0.16


def test_plan_path_splits_are_disjoint():
    val = {m.canonical() for m in plan_game.fixed_mazes("validation", 4, 0.18, 100)}
    test = {m.canonical() for m in plan_game.test_mazes(4, 0.18, 100)}
    train = {plan_game.maze_for("train", seed, 4, 0.18).canonical() for seed in range(500)}
    assert len(val) == 100 and not val & test and not val & train and not test & train
    assert all(split_of(t) == "validation" for t in val)


def test_sudoku_splits_are_disjoint_down_to_the_solution_grid():
    def solutions(puzzles):
        return {p.solution for p in puzzles}

    val = sudoku_game.fixed_puzzles("validation", 4, 8, 100)
    test = sudoku_game.test_puzzles(4, 8, 100)
    train = [sudoku_game.puzzle_for("train", seed, 4, 8) for seed in range(300)]
    assert not solutions(val) & solutions(test)
    assert not solutions(val) & solutions(train) and not solutions(test) & solutions(train)


def test_sokoban_splits_are_disjoint():
    config = sokoban_generate.GeneratorConfig(width=6, height=6, num_boxes=1)
    val = {p.text for p in sokoban_generate.validation_puzzles(config, 100)}
    test = {p.text for p in sokoban_generate.eval_puzzles(config, 100)}
    train = {sokoban_generate.train_puzzle(config, seed, 100).text for seed in range(200)}
    assert len(val) == 100 and not val & test and not val & train and not test & train


def _hashes(prompts):
    return {prompt_hash(p) for p in prompts}


def test_code_splits_are_disjoint_from_each_other_and_humaneval():
    train = [p.prompt for p in code_problems.load_problems("train")]
    val = [p.prompt for p in code_problems.load_problems("validation")]
    test = [p.prompt for p in code_problems.load_problems("humaneval")]
    assert len(train) == 49 and len(val) == 14 and len(test) == 164
    assert not _hashes(train) & _hashes(val)
    assert not (_hashes(train) | _hashes(val)) & _hashes(test)


@pytest.mark.parametrize("dataset", ["gsm8k", "math", "math500", "arith"])
def test_math_splits_are_disjoint_by_normalised_question(dataset):
    train, val, test = (math_problems.load_problems(dataset, s) for s in ("train", "validation", "test"))
    h_train, h_val, h_test = (_hashes(p.question for p in ps) for ps in (train, val, test))
    assert len(val) >= 400 and len(train) > len(val)
    assert not h_train & h_val and not h_train & h_test and not h_val & h_test


def test_normalisation_ignores_layout_only():
    assert normalise("  Add  two\n numbers ") == normalise("add two numbers")
    assert prompt_hash("add two numbers") != prompt_hash("add three numbers")

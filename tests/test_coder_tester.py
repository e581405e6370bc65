"""The coder/tester environment: data, grading in the real sandbox, rewards, episode flow, branching."""

import base64
import dataclasses
import json
import pickle
import time
import warnings
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pettingzoo.test import api_test, seed_test

from mas_envs import make_env
from mas_envs.code_grading import Grader, GradeRequest, outputs_match, parse_tester_tests
from mas_envs.data.code_problems import (
    FUNCTION,
    STDIO,
    TRAIN_FILE,
    fingerprint,
    load_humaneval,
    load_jsonl,
    load_train,
    read_jsonl,
)
from mas_envs.parsing import extract_code_block

HUMANEVAL = load_humaneval()
TRAIN = load_train()
FIRST_STDIO = next(i for i, p in enumerate(TRAIN) if p.kind == STDIO)


def env_at(task_index=0, **kwargs):
    env = make_env("coder_tester", **{"dataset": "train", **kwargs})
    env.reset(seed=0, options={"task_index": task_index})
    return env


def request(problem, program=None):
    program = problem.reference if program is None else program
    return GradeRequest(program, problem.tests, problem.entry_point, problem.context)


@pytest.fixture(autouse=True)
def _quiet_pettingzoo_style_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


# ---------------------------------------------------------------------- data
def test_data_sets_have_the_expected_shape():
    assert len(HUMANEVAL) == 164
    assert all(p.kind == FUNCTION and p.tests.n_tests >= 1 for p in HUMANEVAL)
    kinds = {p.kind for p in TRAIN}
    assert kinds == {FUNCTION, STDIO} and 40 <= len(TRAIN) <= 100
    assert len({p.task_id for p in TRAIN}) == len(TRAIN)
    assert all(p.reference and p.tests.n_tests >= 3 for p in TRAIN)


def test_train_and_test_are_disjoint():
    he_prompts = {p.prompt.strip() for p in HUMANEVAL}
    he_names = {p.entry_point for p in HUMANEVAL}
    assert not {p.prompt.strip() for p in TRAIN} & he_prompts
    assert not {p.entry_point for p in TRAIN if p.entry_point} & he_names


def test_every_training_reference_passes_its_tests_in_the_sandbox():
    reports = Grader().grade_many([request(p) for p in TRAIN])
    failing = [(p.task_id, r) for p, r in zip(TRAIN, reports) if not r.all_passed]
    assert not failing


def test_fingerprints_are_stable_and_distinguish_sets():
    env = make_env("coder_tester", split="test").unwrapped
    assert env.eval_set_fingerprint() == fingerprint(load_humaneval()) == fingerprint(HUMANEVAL)
    assert env.eval_set_fingerprint() != make_env("coder_tester", split="train").unwrapped.eval_set_fingerprint()
    assert len(env.eval_set_fingerprint()) == 64


def test_native_jsonl_round_trip(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in read_jsonl(TRAIN_FILE)[:3]))
    problems = load_jsonl(str(path), "native")
    assert [p.task_id for p in problems] == [p.task_id for p in TRAIN[:3]]
    env = make_env("coder_tester", dataset=str(path))
    assert len(env.unwrapped.problems) == 3


# ---------------------------------------------------------------------- user formats
APPS_ROWS = [
    {  # stdin/stdout
        "problem_id": 11,
        "question": "Given two integers on one line, print their product.",
        "input_output": json.dumps({"inputs": ["2 3\n", "0 5\n", "-4 4\n"], "outputs": ["6\n", "0\n", "-16\n"]}),
        "solutions": json.dumps(["a, b = map(int, input().split())\nprint(a * b)\n"]),
    },
    {  # call-based, LeetCode style, expected values wrapped in a list as APPS does
        "problem_id": 12,
        "question": "Return the sum of a list of numbers.",
        "starter_code": "class Solution:\n    def total(self, nums):\n",
        "input_output": json.dumps({"fn_name": "total", "inputs": [[[1, 2, 3]], [[]], [[-1, 1]]], "outputs": [[6], [0], [0]]}),
        "solutions": json.dumps(["class Solution:\n    def total(self, nums):\n        return sum(nums)\n"]),
    },
]
CODECONTESTS_ROW = {
    "name": "1000_A. Echo",
    "description": "Print the single word given on input, twice, separated by a space.",
    "public_tests": {"input": ["hi\n"], "output": ["hi hi\n"]},
    "private_tests": {"input": ["ab\n"], "output": ["ab ab\n"]},
    "generated_tests": {"input": ["x\n", "zz\n"], "output": ["x x\n", "zz zz\n"]},
    "solutions": {"language": [2, 3], "solution": ["int main(){}", "w = input().strip()\nprint(w, w)\n"]},
}


def _lcb_compressed(cases):
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()


LCB_ROWS = [
    {
        "question_id": "abc001_a",
        "question_title": "Double",
        "question_content": "Read an integer n and print 2n.",
        "starter_code": "",
        "public_test_cases": json.dumps([{"input": "3\n", "output": "6\n", "testtype": "stdin"}]),
        "private_test_cases": _lcb_compressed([{"input": "10\n", "output": "20\n", "testtype": "stdin"}]),
        "metadata": "{}",
    },
    {
        "question_id": "lc-2",
        "question_title": "Max of two",
        "question_content": "Return the larger of a and b.",
        "starter_code": "class Solution:\n    def larger(self, a: int, b: int) -> int:\n",
        "public_test_cases": json.dumps([{"input": "1\n2", "output": "2", "testtype": "functional"}]),
        "private_test_cases": json.dumps([{"input": "-5\n-7", "output": "-5", "testtype": "functional"}]),
        "metadata": json.dumps({"func_name": "larger"}),
    },
]


def _write(tmp_path, name, rows):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_apps_loader_grades_stdio_and_call_based(tmp_path):
    problems = load_jsonl(_write(tmp_path, "apps.jsonl", APPS_ROWS), "apps")
    assert [p.kind for p in problems] == [STDIO, FUNCTION]
    assert problems[1].entry_point == "total" and problems[1].tests.n_tests == 3
    reports = Grader().grade_many([request(p) for p in problems])
    assert all(r.all_passed for r in reports)
    wrong = Grader().grade(request(problems[1], "class Solution:\n    def total(self, nums):\n        return len(nums)\n"))
    assert wrong.passed_mask() == [False, True, False]


def test_codecontests_loader_uses_hidden_tests_and_python3_solution(tmp_path):
    (problem,) = load_jsonl(_write(tmp_path, "cc.jsonl", [CODECONTESTS_ROW]), "codecontests")
    assert problem.kind == STDIO and problem.tests.n_tests == 3  # private + generated
    assert problem.reference.startswith("w = input()")
    assert Grader().grade(request(problem)).all_passed


def test_livecodebench_loader_decodes_private_tests(tmp_path):
    stdio, functional = load_jsonl(_write(tmp_path, "lcb.jsonl", LCB_ROWS), "livecodebench")
    assert stdio.kind == STDIO and stdio.tests.n_tests == 2 and stdio.reference is None
    assert functional.kind == FUNCTION and functional.entry_point == "larger" and functional.tests.n_tests == 2
    good = "class Solution:\n    def larger(self, a, b):\n        return max(a, b)\n"
    reports = Grader().grade_many([request(stdio, "print(2 * int(input()))"), request(functional, good)])
    assert all(r.all_passed for r in reports)
    # The env runs on these files too; without a reference the tester gets no validity credit.
    env = make_env("coder_tester", dataset=str(tmp_path / "lcb.jsonl"), format="livecodebench")
    env.reset(seed=0, options={"task_index": 0})
    env.step("```python\nprint(2 * int(input()))\n```")
    env.step('```json\n[{"input": "4\\n", "output": "8\\n"}]\n```')
    assert env.infos["tester"]["tester_has_reference"] is False and env.infos["tester"]["tester_validity"] == 0.0


def test_livecodebench_refuses_pickled_objects(tmp_path):
    evil = base64.b64encode(zlib.compress(pickle.dumps(time.sleep))).decode()
    row = dict(LCB_ROWS[0], private_test_cases=evil)
    with pytest.raises(pickle.UnpicklingError):
        load_jsonl(_write(tmp_path, "evil.jsonl", [row]), "livecodebench")


# ---------------------------------------------------------------------- grading
def _he_scripted_requests(problems):
    """What a scripted coder submits for each problem, parsed exactly as the env parses it."""
    env = make_env("coder_tester", split="test")
    out = []
    for problem in problems:
        env.reset(options={"task_index": HUMANEVAL.index(problem)})
        code, error = extract_code_block(env.unwrapped.scripted_action("coder"))
        assert error is None
        out.append(request(problem, code))
    return out


def test_humaneval_scripted_coder_succeeds_through_the_env():
    env = make_env("coder_tester", split="test", workflow="single")
    for i in range(0, 164, 20):  # 9 problems spread over the set (all 164 are graded below)
        env.reset(options={"task_index": i})
        env.step(env.unwrapped.scripted_action("coder"))
        info = env.infos["coder"]
        assert env.terminations["coder"] and info["success"], (i, info)
        assert info["golden_pass_rate"] == 1.0 and info["team_reward"] == 1.0


def test_all_humaneval_references_graded_success_in_parallel():
    start = time.perf_counter()
    reports = Grader().grade_many(_he_scripted_requests(HUMANEVAL))
    seconds = time.perf_counter() - start
    failing = [(p.task_id, r) for p, r in zip(HUMANEVAL, reports) if not r.all_passed]
    assert not failing
    print(f"graded all 164 HumanEval references in {seconds:.1f} s")


def test_wrong_solution_is_graded_failure():
    env = make_env("coder_tester", split="test", workflow="single")
    env.reset(options={"task_index": 0})
    problem = env.unwrapped.problem
    env.step(f"```python\n{problem.prompt}    return False\n```")
    info = env.infos["coder"]
    assert env.terminations["coder"] and not info["success"]
    assert 0.0 < info["golden_pass_rate"] < 1.0
    assert info["golden_passed"] < info["golden_total"] == problem.tests.n_tests


def test_graded_reports_are_reused_only_for_the_same_program_suite_and_limits():
    problem = HUMANEVAL[2]
    right = GradeRequest(problem.reference, problem.tests, problem.entry_point, problem.context)
    wrong = GradeRequest(f"{problem.prompt}    return 0.0\n", problem.tests, problem.entry_point, problem.context)
    grader = Grader()
    first = grader.grade_many([right, wrong])
    assert first[0].all_passed and not first[1].all_passed
    again = grader.grade_many([wrong, right])  # from the report cache: same reports, in request order
    assert again == [first[1], first[0]]
    # One test fewer is another suite: graded afresh, with fewer outcomes.
    fewer = dataclasses.replace(problem.tests, steps=problem.tests.steps[:-1])
    shorter = grader.grade(dataclasses.replace(right, suite=fewer))
    assert shorter.all_passed and shorter.n_tests == problem.tests.n_tests - 1
    # A stricter time limit is another key too (the report of a slow program could differ).
    assert Grader(test_timeout=1.0)._report_key(right) != grader._report_key(right)


def test_endless_loop_and_crash_are_failures_within_bounded_time():
    problem = HUMANEVAL[0]
    start = time.perf_counter()
    loop, exit_early, load_fail = Grader(test_timeout=0.5).grade_many([
        request(problem, problem.prompt + "    while True:\n        pass\n"),
        request(problem, "import os\ndef has_close_elements(numbers, threshold):\n    os._exit(0)\n"),
        request(problem, "raise SystemExit('no')\n"),
    ])
    assert time.perf_counter() - start < 15
    assert loop.pass_rate == 0 and {o.status for o in loop.outcomes} <= {"timeout", "not run"}
    assert exit_early.pass_rate == 0 and exit_early.load_error is None
    assert load_fail.pass_rate == 0 and load_fail.load_error


def test_failures_say_expected_versus_got():
    problem = next(p for p in TRAIN if p.entry_point == "sum_of_digits")
    report = Grader().grade(request(problem, "def sum_of_digits(n):\n    return n\n"))
    failed = [o for o in report.outcomes if not o.passed]
    assert failed and all("expected" in o.detail and "but got" in o.detail for o in failed)
    assert report.n_passed == 2  # 0 and 7 are their own digit sums


def test_output_comparison():
    assert outputs_match("1 2\n3\n", "1 2 3")
    assert outputs_match("0.3333333\n", "0.33333333")
    assert not outputs_match("1 2", "1 2 3") and not outputs_match("abc", "abd")


def test_tester_formats_parse():
    suite, err = parse_tester_tests('text\n```json\n[{"input": "1 2\\n", "output": "3\\n"}]\n```', STDIO)
    assert err is None and suite.n_tests == 1 and suite.cases[0].output == "3\n"
    suite, err = parse_tester_tests("Input:\n1 2\nOutput:\n3\n\nInput:\n5 5\nOutput:\n10\n", STDIO)
    assert err is None and [(c.input, c.output) for c in suite.cases] == [("1 2\n", "3\n"), ("5 5\n", "10\n")]
    suite, err = parse_tester_tests("```python\nimport math\nx = 3\nassert f(x) == 9\nassert f(0) == 0\n```", FUNCTION)
    assert err is None and suite.n_tests == 2 and len(suite.steps) == 4
    for garbage in ["", "```python\nx = 1\n```", "```python\nassert (\n```", "no tests here", "[1, 2]"]:
        for kind in (FUNCTION, STDIO):
            suite, err = parse_tester_tests(garbage, kind)
            assert suite is None and err


def test_tester_parsing_stays_fast_on_pathological_text():
    for text in ["input:\n" * 5000, "Input: a\n" * 3000, "```json\n" * 4000, "[" * 20000, "assert " * 4000]:
        for kind in (FUNCTION, STDIO):
            start = time.perf_counter()
            parse_tester_tests(text, kind)
            assert time.perf_counter() - start < 1.0


# ---------------------------------------------------------------------- rewards and episode flow
def _wrong_tests_text(env):
    """Tests with wrong expectations, in the tester's format."""
    problem = env.unwrapped.problem
    if problem.kind == STDIO:
        cases = [{"input": c.input, "output": c.output + "x\n"} for c in problem.tests.cases]
        return "```json\n" + json.dumps(cases) + "\n```"
    return "```python\n" + "\n".join(f"assert {problem.entry_point}(123456) == 'surely not'" for _ in range(3)) + "\n```"


@pytest.mark.parametrize("task_index", [0, FIRST_STDIO])
def test_correct_tests_earn_more_than_wrong_tests(task_index):
    rewards = {}
    for kind in ("correct", "wrong"):
        env = env_at(task_index)
        env.step(env.unwrapped.scripted_action("coder"))
        env.step(env.unwrapped.scripted_action("tester") if kind == "correct" else _wrong_tests_text(env))
        rewards[kind] = env.infos["tester"]
    assert rewards["correct"]["local_reward"] > rewards["wrong"]["local_reward"]
    assert rewards["correct"]["tester_validity"] == 1.0 and rewards["wrong"]["tester_validity"] == 0.0


def test_tester_is_credited_for_catching_wrong_code():
    env = env_at(FIRST_STDIO)
    env.step("```python\nprint('nonsense')\n```")  # wrong program
    assert env.infos["coder"]["golden_pass_rate"] == 0.0 and env.rewards["coder"] == 0.0
    env.step(env.unwrapped.scripted_action("tester"))
    info = env.infos["tester"]
    assert info["tester_caught"] and info["local_reward"] == pytest.approx(1.5)
    assert not env.terminations["tester"]  # the code fails the tests: the team goes on
    assert "fail: got 'nonsense\\n'" in env.observe("coder")["prompt"]  # mismatch shown next turn
    # Correct code: nothing to catch, so valid tests earn exactly their validity.
    env2 = env_at(FIRST_STDIO)
    env2.step(env2.unwrapped.scripted_action("coder"))
    env2.step(env2.unwrapped.scripted_action("tester"))
    assert not env2.infos["tester"]["tester_caught"] and env2.infos["tester"]["local_reward"] == 1.0


def _tester_reward(tests: str, code: str | None = None, task_index: int = 0) -> dict:
    """The tester's infos after ``tests`` on train/fn/000 (sum_of_digits), with the coder's ``code`` first."""
    env = env_at(task_index)
    env.step(f"```python\n{code}\n```" if code is not None else env.unwrapped.scripted_action("coder"))
    env.step(f"```python\n{tests}\n```")
    return env.infos["tester"]


def test_tester_reward_hand_built_cases():
    """Right and discriminating tests earn the top reward; tests that check nothing do not (the paper's code
    had a tester-reward bug of this kind: trivially passing tests were rewarded like real ones)."""
    real = "assert sum_of_digits(123) == 6\nassert sum_of_digits(7) == 7\nassert sum_of_digits(0) == 0"
    cases = {
        "real": _tester_reward(real),
        "assert_true": _tester_reward("assert True\nassert 1 == 1"),
        "call_only": _tester_reward("assert sum_of_digits(5) is None or True"),
        "wrong": _tester_reward("assert sum_of_digits(123) == 7"),
        "half_real": _tester_reward("assert 1 == 1\nassert sum_of_digits(99) == 18"),
        "only_constant_asserts": _tester_reward("assert True"),  # not a test at all: a parse penalty
        # a test that is right but that the null program (returns None) also passes ...
        "null_passes": _tester_reward("assert sum_of_digits(0) != 1"),
    }
    reward = {k: v["local_reward"] for k, v in cases.items()}
    assert reward["real"] == pytest.approx(1.0) and cases["real"]["tester_discrimination"] == 1.0
    assert reward["assert_true"] == pytest.approx(0.5) and cases["assert_true"]["tester_validity"] == 1.0
    assert reward["call_only"] == pytest.approx(0.5) and cases["call_only"]["tester_discrimination"] == 0.0
    assert reward["wrong"] == 0.0
    assert reward["half_real"] == pytest.approx(0.75)
    assert reward["null_passes"] == pytest.approx(0.5)
    assert reward["only_constant_asserts"] < 0 and cases["only_constant_asserts"]["parse_error"]
    assert reward["real"] > reward["half_real"] > reward["assert_true"] > reward["wrong"]
    # ... but fails on the coder's wrong code: then it discriminates, and catches it
    off_by_one = "def sum_of_digits(n):\n    return sum(int(c) for c in str(n)) + (1 if n == 0 else 0)"
    caught = _tester_reward("assert sum_of_digits(0) != 1", code=off_by_one)
    assert caught["tester_caught"] and caught["local_reward"] == pytest.approx(1.5)
    # wrong code and a trivial test: nothing caught, no discrimination
    missed = _tester_reward("assert 1 == 1", code=off_by_one)
    assert not missed["tester_caught"] and missed["local_reward"] == pytest.approx(0.5)


UNITTEST_STYLE = """import unittest

def sum_of_digits(n):
    return 0  # the tester's own (wrong) copy: must not replace the coder's function

class TestSumOfDigits(unittest.TestCase):
    def setUp(self):
        self.big = 99

    def test_values(self):
        self.assertEqual(sum_of_digits(123), 6)
        self.assertTrue(sum_of_digits(7) == 7)
        self.assertFalse(sum_of_digits(0) == 1)
        with self.assertRaises(TypeError):
            sum_of_digits(None)
        self.assertEqual(sum_of_digits(self.big), 18)

if __name__ == "__main__":
    unittest.main()
"""

FUNCTION_STYLE = """def test_sum_of_digits():
    assert sum_of_digits(123) == 6
    for n in (7, 8):
        assert sum_of_digits(n) == n

test_sum_of_digits()
assert sum_of_digits(0) == 0
assert sum_of_digits(45) =="""  # cut short by the token budget


def test_tester_code_as_small_models_write_it():
    """unittest classes, test functions, a copy of the function under test, a reply cut mid-statement."""
    suite, err = parse_tester_tests(f"```python\n{UNITTEST_STYLE}```\nThis code defines a test class", FUNCTION,
                                    "sum_of_digits")
    assert err is None
    assert [s.source for s in suite.steps] == [
        "import unittest", "assert sum_of_digits(123) == 6", "assert sum_of_digits(7) == 7",
        "assert not sum_of_digits(0) == 1"]  # assertRaises and self.big need self: dropped
    suite, err = parse_tester_tests(f"```python\n{FUNCTION_STYLE}", FUNCTION, "sum_of_digits")
    assert err is None and suite.n_tests == 3
    assert [s.source for s in suite.steps][-1] == "assert sum_of_digits(0) == 0"  # the cut line is gone
    assert not any("test_sum_of_digits()" in s.source for s in suite.steps)  # its call went with it
    # Without the entry point (old callers) the copy stays a setup step; `candidate` is always protected.
    suite, _ = parse_tester_tests("```python\ncandidate = len\nassert candidate('ab') == 2\n```", FUNCTION)
    assert [s.source for s in suite.steps] == ["assert candidate('ab') == 2"]
    for text in ["```python\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertRaises(E, f)\n```",
                 "```python\ndef test_a():\n    pass\n```", "```python\nif __name__ == '__main__':\n    assert f(1) == 2\n```"]:
        suite, err = parse_tester_tests(text, FUNCTION, "f")
        assert suite is None and err == "no assert statements found"


def test_tester_copy_of_the_function_does_not_shield_the_coders_code():
    """The tests run against the coder's program even when the tester pasted its own version first."""
    off_by_one = "def sum_of_digits(n):\n    return sum(int(c) for c in str(n)) + 1"
    own_copy = "def sum_of_digits(n):\n    return sum(int(c) for c in str(n)) + 1\n\n"
    plain = _tester_reward("assert sum_of_digits(123) == 6", code=off_by_one)
    with_copy = _tester_reward(own_copy + "assert sum_of_digits(123) == 6", code=off_by_one)
    assert plain["tester_caught"] and with_copy["tester_caught"]
    assert with_copy["local_reward"] == pytest.approx(plain["local_reward"]) == pytest.approx(1.5)
    lifted = _tester_reward(UNITTEST_STYLE)  # the scripted (correct) coder; real tests in a TestCase
    # all three right; the null program (returns None) also passes `not f(0) == 1`: 2 of 3 discriminate
    assert lifted["tester_n_tests"] == 3 and lifted["local_reward"] == pytest.approx(0.5 + 0.5 * 2 / 3)


def test_right_stdio_tests_discriminate_against_the_null_program():
    problem = TRAIN[FIRST_STDIO]
    env = env_at(FIRST_STDIO)
    env.step(env.unwrapped.scripted_action("coder"))
    first = problem.tests.cases[0]
    env.step("```json\n" + json.dumps([{"input": first.input, "output": first.output}]) + "\n```")
    info = env.infos["tester"]
    assert info["tester_validity"] == 1.0 and info["tester_discrimination"] == 1.0


def test_episode_ends_when_generated_tests_pass():
    env = env_at(0)
    env.step(env.unwrapped.scripted_action("coder"))
    assert env.infos["coder"]["team_reward"] == env.infos["coder"]["local_reward"] == 1.0
    env.step(env.unwrapped.scripted_action("tester"))
    assert env.terminations["tester"] and env.infos["tester"]["success"]
    assert env.infos["tester"]["tests_pass_rate"] == 1.0


def test_episode_revises_and_truncates_at_max_turns():
    env = env_at(0, max_turns=2)
    name = env.unwrapped.problem.entry_point
    env.step(f"```python\ndef {name}(n):\n    return -1\n```")
    env.step(env.unwrapped.scripted_action("tester"))
    assert not env.terminations["coder"] and env.unwrapped.turn == 1
    prompt = env.observe("coder")["prompt"]
    assert "Your current program" in prompt and "expected" in prompt and "but got -1" in prompt
    env.step(env.unwrapped.scripted_action("coder"))  # the revision runs against the existing tests
    assert env.infos["coder"]["tests_pass_rate"] == 1.0 and env.infos["coder"]["golden_pass_rate"] == 1.0
    assert "after the coder's message: the code passed" in env.observe("tester")["prompt"]
    env.step("no tests at all")
    assert env.truncations["tester"] and env.infos["tester"]["parse_error"]
    assert env.infos["tester"]["success"]  # success is about the final code on the golden tests


def test_parallel_tester_does_not_see_current_turn_code():
    env = env_at(0, parallel=True)
    env.step("```python\nSECRET_MARKER = 1\n```")
    assert "SECRET_MARKER" not in env.observe("tester")["prompt"]
    env.step(env.unwrapped.scripted_action("tester"))
    assert "SECRET_MARKER" in env.observe("tester")["prompt"]  # next turn it is history
    sequential = env_at(0)
    sequential.step("```python\nSECRET_MARKER = 1\n```")
    assert "SECRET_MARKER" in sequential.observe("tester")["prompt"]


def test_reset_without_index_draws_from_seed():
    env = make_env("coder_tester", dataset="train")
    ids = []
    for _ in range(2):
        env.reset(seed=3)
        ids.append(env.unwrapped.task_id)
    assert ids[0] == ids[1]
    seen = set()
    for seed in range(12):
        env.reset(seed=seed)
        seen.add(env.unwrapped.task_id)
    assert len(seen) > 3


def test_bad_configuration_is_a_clear_error():
    with pytest.raises(ValueError, match="split"):
        make_env("coder_tester", split="dev")
    with pytest.raises(ValueError, match="dataset"):
        make_env("coder_tester", dataset="/no/such/file.jsonl")


# ---------------------------------------------------------------------- branching
def test_clones_are_independent_and_continue_identically():
    env = env_at(FIRST_STDIO)
    env.step("```python\nprint(1)\n```")
    twin = env.clone()
    assert twin.unwrapped.state == env.unwrapped.state and twin.unwrapped is not env.unwrapped
    before = env.observe("tester")["prompt"]
    twin.step(twin.unwrapped.scripted_action("tester"))
    twin.step(twin.unwrapped.scripted_action("coder"))
    assert env.observe("tester")["prompt"] == before and env.unwrapped.state.tests is None
    a, b = env.clone(), env.clone()
    for e in (a, b):
        e.step(e.unwrapped.scripted_action("tester"))
    assert a.unwrapped.state == b.unwrapped.state and a.rewards == b.rewards and a.infos == b.infos
    assert a.observe("coder")["prompt"] == b.observe("coder")["prompt"]


def test_snapshot_restore_round_trip():
    env = env_at(0)
    env.step("```python\ndef broken(:\n```")
    snap = pickle.loads(pickle.dumps(env.snapshot()))
    prompt, infos = env.observe("tester")["prompt"], dict(env.infos)
    env.step(env.unwrapped.scripted_action("tester"))
    env.step(env.unwrapped.scripted_action("coder"))
    env.restore(snap)
    assert env.observe("tester")["prompt"] == prompt and env.infos == infos
    assert env.unwrapped.state.code == "def broken(:\n"


def test_prefetch_fills_the_cache_without_changing_results():
    from mas_envs.sandbox import default_sandbox

    env = env_at(1)
    problem = env.unwrapped.problem
    salt = time.time_ns()  # programs this process has never run
    texts = [f"```python\n{problem.reference}\n# {salt} {j}\n```" for j in range(3)]
    texts += [f"```python\n{problem.prompt}    return None  # {salt}\n```", "no code"]
    before = env.observe("coder")["prompt"]
    env.unwrapped.prefetch_candidates(texts)
    assert env.observe("coder")["prompt"] == before and env.unwrapped.state.code is None
    misses = default_sandbox().cache.misses
    outcomes = []
    for text in texts:
        branch = env.clone()
        branch.step(text)
        outcomes.append(branch.infos["coder"]["golden_pass_rate"])
    assert default_sandbox().cache.misses == misses  # every graded branch was a cache hit
    assert outcomes[:3] == [1.0] * 3 and outcomes[3] < 1.0 and outcomes[4] == 0.0


# ---------------------------------------------------------------------- PettingZoo contract
@pytest.mark.parametrize("kwargs", [{}, {"workflow": "single"}, {"parallel": True, "split": "test"}])
def test_pettingzoo_api_and_seed_tests(kwargs):
    api_test(make_env("coder_tester", **kwargs), num_cycles=15)
    seed_test(lambda: make_env("coder_tester", **kwargs), num_cycles=15)


GARBAGE = st.one_of(
    st.text(max_size=200),
    st.sampled_from([
        "", "```python\n", "```python\n```", "```json\n[{}]\n```", '```json\n[{"input": 1, "output": null}]\n```',
        "```python\nassert\n```", "```python\nwhile True: pass\n```", "```python\nimport os; os._exit(1)\n```",
        "```python\nassert candidate(1) == 2\n```", "Input:\nOutput:\n", "Input: 1\nOutput: 2", "\x00" * 10,
        "```python\n" + "(" * 500 + "\n```", '```json\n{"tests": "x"}\n```',
    ]),
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(task=st.sampled_from([0, FIRST_STDIO]), actions=st.lists(GARBAGE, min_size=1, max_size=4))
def test_garbage_from_either_agent_never_raises(task, actions):
    env = env_at(task, sandbox_timeout=0.5)
    for text in actions:
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            break
        env.step(text)
        info = env.infos[agent]
        assert isinstance(env.rewards[agent], float)
        assert not str(info["parse_error"] or "").startswith("internal error"), info["parse_error"]
        if info["parse_error"] is not None:
            assert env.rewards[agent] < 0

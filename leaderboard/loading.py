"""Read a submitted file as plain JSON data, refusing anything that is not a sane JSON object."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from leaderboard.problems import ROOT, Problem, SubmissionError

MAX_BYTES = 20 * 1024 * 1024


def _no_constants(name: str) -> Any:
    # json accepts NaN/Infinity by default; they are not JSON and break every comparison downstream.
    raise ValueError(f"{name} is not valid JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # A repeated key silently keeps the last value; refuse it so what we check is what was meant.
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"repeated key {key!r} in one object")
        seen[key] = value
    return seen


def parse_json_text(text: str) -> Any:
    """Parse strict JSON (no NaN/Infinity, no repeated keys); raises ``ValueError``."""
    return json.loads(text, parse_constant=_no_constants, object_pairs_hook=_unique_keys)


def load_result_file(path: str | Path) -> dict[str, Any]:
    """Return the JSON object in ``path`` or raise :class:`SubmissionError` saying why it is unusable."""
    path = Path(path)
    if not path.is_file():
        raise SubmissionError([Problem(ROOT, f"{path} does not exist or is not a regular file")])
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise SubmissionError([Problem(ROOT, f"file is {size} bytes; the limit is {MAX_BYTES} bytes (20 MB)")])
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SubmissionError([Problem(ROOT, f"file is not UTF-8 text ({exc.reason} at byte {exc.start})")]) from None
    try:
        data = parse_json_text(text)
    except json.JSONDecodeError as exc:
        raise SubmissionError(
            [Problem(ROOT, f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")]
        ) from None
    except (ValueError, RecursionError) as exc:
        raise SubmissionError([Problem(ROOT, f"not valid JSON: {exc}")]) from None
    if not isinstance(data, dict):
        raise SubmissionError([Problem(ROOT, f"must be a JSON object, got a JSON {_json_kind(data)}")])
    return data


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"

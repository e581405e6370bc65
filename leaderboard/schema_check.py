"""Validate a result object against ``results.schema.json`` and phrase each error as field path + reason."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import jsonschema

from leaderboard import SCHEMA_PATH
from leaderboard.problems import Problem, clip, join_path


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """The result-file JSON Schema (draft 2020-12)."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def schema_problems(data: Any) -> list[Problem]:
    """Every schema violation in ``data``, sorted by path; empty when the file matches the schema."""
    problems: set[Problem] = set()
    for error in _validator().iter_errors(data):
        problems.update(_describe(error))
    return sorted(problems)


def _describe(error: jsonschema.ValidationError) -> list[Problem]:
    where = list(error.absolute_path)
    instance = error.instance
    if error.validator == "required":
        # Point at the missing field itself rather than at its parent.
        missing = [name for name in error.validator_value if isinstance(instance, dict) and name not in instance]
        return [Problem(join_path(where + [name]), "required field is missing") for name in missing]
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        allowed = set(error.schema.get("properties", {}))
        extra = [name for name in instance if name not in allowed]
        return [Problem(join_path(where + [name]), "unexpected field (not in the schema)") for name in extra]
    if error.validator == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return [Problem(join_path(where), f"wrong type: expected {expected}, got {_kind(instance)}")]
    if error.validator in ("enum", "const"):
        options = error.validator_value if error.validator == "enum" else [error.validator_value]
        shown = ", ".join(json.dumps(o) for o in options)
        return [Problem(join_path(where), clip(f"{json.dumps(instance)[:80]} is not one of: {shown}", 400))]
    return [Problem(join_path(where), clip(error.message))]


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"

"""The stronger-mas leaderboard: validate, store and render evaluation result files.

``mas-leaderboard submit results.json`` checks a file written by ``mas-eval`` and stores it under
``leaderboard/entries/``; ``mas-leaderboard build`` renders ``leaderboard/site/``; ``mas-leaderboard compare A B``
compares two entries (or aggregated rows) on their shared tasks. The result format
is the JSON Schema in ``leaderboard/schema/results.schema.json`` (described in docs/LEADERBOARD.md).
"""

from __future__ import annotations

from pathlib import Path

from mas_trainer.settings.methods import METHOD_NAMES

PACKAGE_DIR = Path(__file__).resolve().parent
SCHEMA_PATH = PACKAGE_DIR / "schema" / "results.schema.json"
DEFAULT_ENTRIES_DIR = PACKAGE_DIR / "entries"
DEFAULT_SITE_DIR = PACKAGE_DIR / "site"

# Methods in the order the paper's tables list them: the trainer's method table (plain Python, no torch).
METHODS = METHOD_NAMES

__all__ = ["PACKAGE_DIR", "SCHEMA_PATH", "DEFAULT_ENTRIES_DIR", "DEFAULT_SITE_DIR", "METHODS"]

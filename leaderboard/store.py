"""Entries on disk: content hashes, file names, duplicate detection and atomic writes."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

from leaderboard.loading import parse_json_text
from leaderboard.problems import Problem, SubmissionError

SHORT_HASH = 12


def content_hash(result: dict[str, Any]) -> str:
    """sha256 over what makes a run distinct (env, method, weights, decoding, seed, episodes).

    Date, label, command and wall time are left out so re-submitting a run under a new label is a duplicate.
    """
    env = result["env"]
    key = {
        "env": {k: env[k] for k in ("name", "version", "kwargs", "workflow", "split")},
        "method": result["method"],
        "weights": {name: p["weights_sha256"] for name, p in result["model"]["policies"].items()},
        "decoding": result["decoding"],
        "seed": result["seed"],
        "episodes": result["episodes"],
    }
    canonical = json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def entry_filename(result: dict[str, Any], digest: str) -> str:
    # env name and method are pattern/enum-checked by the schema, so they are safe in a file name.
    return f"{result['env']['name']}__{result['method']}__{digest[:SHORT_HASH]}.json"


def iter_entries(entries_dir: str | Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Stored entries as (path, result), in file-name order; unreadable files are skipped."""
    directory = Path(entries_dir)
    if not directory.is_dir():
        return
    for path in sorted(directory.glob("*.json")):
        try:
            data = parse_json_text(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            yield path, data


def find_duplicate(result: dict[str, Any], entries_dir: str | Path) -> Path | None:
    """The stored entry with the same content hash as ``result``, if any."""
    digest = content_hash(result)
    for path, stored in iter_entries(entries_dir):
        try:
            if content_hash(stored) == digest:
                return path
        except (KeyError, TypeError, AttributeError):
            continue  # a hand-edited entry that no longer has the expected shape
    return None


def write_atomic(path: Path, content: str | bytes) -> None:
    """Write ``content`` to ``path`` via a temp file in the same folder and a rename, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        data = content.encode("utf-8") if isinstance(content, str) else content
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; entries and pages are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def store_entry(result: dict[str, Any], entries_dir: str | Path) -> Path:
    """Store a validated result under ``entries_dir``; refuse it if the same run is already stored."""
    duplicate = find_duplicate(result, entries_dir)
    if duplicate is not None:
        raise SubmissionError(
            [Problem("(root)", f"duplicate: the same run (env, kwargs, method, weights, seed, episodes) is already stored as {duplicate.name}")]
        )
    path = Path(entries_dir) / entry_filename(result, content_hash(result))
    write_atomic(path, json.dumps(result, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return path

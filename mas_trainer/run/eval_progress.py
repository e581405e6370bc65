"""The progress file of a long evaluation: finished chunks of episodes, so a stopped run resumes.

``mas-eval`` plays tasks ``0..N-1`` in chunks of ``chunk_size`` consecutive task indices. After each
chunk one JSON line is appended (and fsynced) to ``<results file>.partial.jsonl``:

    {"key": "<sha256 of what decides the outcome>", "start": 0, "stop": 32, "wall_time_s": ...,
     "episodes": [<the results file's episode records>], "role_steps": {role: [steps, reward sum, parse errors]},
     "machine": {<what played it: cpu, vector flags, threads, versions>}}

Running the same command again skips every chunk whose line carries the same ``key``; lines with
another key (other model weights, env settings, decoding, seed or chunk size) are ignored, and a
truncated last line (the process was killed while writing it) is dropped. When the results file is
written the progress file is deleted. Greedy play of a task does not depend on the chunk it is in;
sampled play seeds each chunk with ``seed + start``, so ``chunk_size`` is part of the key.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator


@dataclass
class Chunk:
    """The outcome of tasks ``start..stop-1``."""

    start: int
    stop: int
    wall_time_s: float
    episodes: list[dict[str, Any]]
    role_steps: dict[str, list[float]] = field(default_factory=dict)  # role -> [steps, reward sum, parse errors]
    machine: dict[str, Any] | None = None  # run/machine.py's facts; None in records written before they existed


def chunk_plan(episodes: int, chunk_size: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering ``0..episodes-1`` in consecutive runs of ``chunk_size``."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    return [(start, min(start + chunk_size, episodes)) for start in range(0, episodes, chunk_size)]


def outcome_key(settings: dict[str, Any]) -> str:
    """A digest of every setting that decides an episode's outcome (canonical JSON, sorted keys)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()


def progress_path_for(results_path: str | os.PathLike) -> Path:
    """Where the progress of the evaluation that writes ``results_path`` is kept."""
    path = Path(results_path)
    return path.with_name(path.name + ".partial.jsonl")


def read_chunks(path: str | os.PathLike | None, key: str) -> dict[tuple[int, int], Chunk]:
    """The finished chunks recorded under ``key`` (empty if there is no file)."""
    found: dict[tuple[int, int], Chunk] = {}
    if path is None or not Path(path).is_file():
        return found
    for record in _records(Path(path)):
        if record.get("key") != key:
            continue
        try:
            machine = record.get("machine")
            chunk = Chunk(int(record["start"]), int(record["stop"]), float(record["wall_time_s"]),
                          list(record["episodes"]), dict(record.get("role_steps") or {}),
                          dict(machine) if isinstance(machine, dict) else None)
        except (KeyError, TypeError, ValueError):
            continue  # not one of ours: ignore rather than trust it
        if len(chunk.episodes) == chunk.stop - chunk.start:
            found[(chunk.start, chunk.stop)] = chunk
    return found


def append_chunk(path: str | os.PathLike | None, key: str, chunk: Chunk) -> None:
    """Append one finished chunk as a JSON line and fsync it (no-op without a path)."""
    if path is None:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"key": key, "start": chunk.start, "stop": chunk.stop, "wall_time_s": chunk.wall_time_s,
                       "episodes": chunk.episodes, "role_steps": chunk.role_steps, "machine": chunk.machine})
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _records(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a kill
            if isinstance(record, dict):
                yield record


def machines_of(chunks: list[Chunk]) -> list[dict[str, Any]]:
    """Which machine played which tasks: consecutive chunks with the same facts merged into one
    ``{"tasks": [start, stop], **facts}`` entry (``facts`` is ``{}`` for chunks that did not record them)."""
    spans: list[dict[str, Any]] = []
    for chunk in sorted(chunks, key=lambda c: c.start):
        facts = chunk.machine or {}
        if spans and spans[-1]["facts"] == facts and spans[-1]["stop"] == chunk.start:
            spans[-1]["stop"] = chunk.stop
        else:
            spans.append({"start": chunk.start, "stop": chunk.stop, "facts": facts})
    return [{"tasks": [s["start"], s["stop"]], **s["facts"]} for s in spans]

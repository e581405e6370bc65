"""Transcripts of evaluated episodes: what each agent saw and wrote, step by step (``mas-eval --transcripts``).

A results file keeps one line per task (success, turns, tokens); it cannot say *why* a team lost a task
that one agent alone solves. A transcript can. After each played chunk, one JSON line per episode is
appended (and fsynced) to the transcripts file:

    {"key": "<the evaluation's outcome key>", "task_index": 3, "task_id": "HumanEval/3", "success": false,
     "turns": 3, "steps": [{"turn": 0, "agent": "coder", "prompt": "...", "text": "...", "reward": 1.5,
                            "team": 0.5, "local": 1.0, "parse_error": null, "finish_reason": "stop"}, ...]}

Only executed steps are written (with ``--samples K`` the chosen candidate of each step). ``prompt`` is the
acting agent's prompt as the model read it (chat template applied, decoded from the prompt tokens).
Chunks that a resumed run reads from its progress file are not played again, so their transcripts are the
ones the earlier call wrote; :func:`read_transcripts` keeps the last line per task for one key, so
lines of other settings or of a replayed chunk never mix.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def episode_transcripts(rollout: Any, tokenizers: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """One transcript per episode of a tree rollout, in task order."""
    executed: dict[int, list[Any]] = {}
    for sample in rollout.samples:
        if sample.info.get("chosen", True):  # tree rollouts mark the executed candidate of each step
            executed.setdefault(int(sample.info["episode"]), []).append(sample)
    lines = []
    for ep in sorted(rollout.episodes, key=lambda e: e.episode_id):
        steps = []
        for sample in executed.get(int(ep.episode_id), []):
            tokenizer = tokenizers[sample.policy]
            steps.append({
                "turn": int(sample.info.get("turn", 0)),
                "agent": sample.role,
                "prompt": tokenizer.decode(sample.prompt_ids, skip_special_tokens=False),
                "text": str(sample.info.get("text", "")),
                "reward": float(sample.reward),
                "team": float(sample.info.get("team", 0.0)),
                "local": float(sample.info.get("local", 0.0)),
                "parse_error": sample.info.get("parse_error"),
                "finish_reason": sample.info.get("finish_reason"),
            })
        lines.append({"key": key, "task_index": int(ep.episode_id), "task_id": str(ep.task_id),
                      "success": bool(ep.success), "turns": int(ep.turns), "steps": steps})
    return lines


def append_transcripts(path: str | os.PathLike | None, lines: list[dict[str, Any]]) -> None:
    """Append episode transcripts as JSON lines and fsync them (no-op without a path)."""
    if path is None or not lines:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(line) + "\n" for line in lines))
        handle.flush()
        os.fsync(handle.fileno())


def read_transcripts(path: str | os.PathLike, key: str | None = None) -> dict[int, dict[str, Any]]:
    """Task index -> its transcript (the last one written); only lines of ``key`` when given.

    Lines cut short by a kill, or not transcripts at all, are skipped.
    """
    found: dict[int, dict[str, Any]] = {}
    with open(path, encoding="utf-8", errors="replace") as handle:
        for raw in handle:
            try:
                line = json.loads(raw)
            except json.JSONDecodeError:
                continue
            if not isinstance(line, dict) or not isinstance(line.get("steps"), list):
                continue
            if key is not None and line.get("key") != key:
                continue
            try:
                found[int(line["task_index"])] = line
            except (KeyError, TypeError, ValueError):
                continue
    return found

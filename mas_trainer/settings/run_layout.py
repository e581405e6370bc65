"""Where a run keeps its files (``RUN`` is the run's ``output_dir``)::

    RUN/metrics.jsonl                       one line per training step
    RUN/learning_curve.png
    RUN/checkpoints/step-000010/            one folder per saved step (see mas_trainer.run.checkpoints)
    RUN/tensorboard/<policy>/               with --report_to tensorboard

Plain path logic, so every layer (the Ray workers' error messages, evaluation, the checkpoints) can
find a run's checkpoints without loading anything.
"""

from __future__ import annotations

import os
from pathlib import Path

CHECKPOINTS = "checkpoints"
PREFIX = "step-"
RUN_STATE = "run_state.json"  # written last into a checkpoint: its "complete" marker
METRICS = "metrics.jsonl"
LEARNING_CURVE = "learning_curve.png"


def checkpoint_dir(run_dir: str | os.PathLike, step: int) -> Path:
    return Path(run_dir) / CHECKPOINTS / f"{PREFIX}{step:06d}"


def list_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and p.name.startswith(PREFIX) and (p / RUN_STATE).is_file()]
    return sorted(found, key=lambda p: int(p.name[len(PREFIX):]))


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    found = list_checkpoints(run_dir)
    return found[-1] if found else None

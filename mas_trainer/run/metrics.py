"""A run's metrics: one JSON line per training step in ``metrics.jsonl``, and the learning-curve figure drawn
from it (matplotlib, Agg: no display needed; imported when a figure is drawn, as it is an optional extra)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

# (metric key, panel title); a panel is drawn only if the metric is present.
PANELS = (
    ("reward_mean", "mean candidate reward"),
    ("success_rate", "episode success (greedy branch)"),
    ("zero_variance_share", "zero-variance group share"),
    ("time_step", "seconds per step"),
)


def read_metrics(path: str | os.PathLike) -> list[dict]:
    records = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def _smooth(values: list[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def plot_learning_curve(metrics_path: str | os.PathLike, out_path: str | os.PathLike) -> Path | None:
    """Write a PNG with one panel per metric (raw and moving average); ``None`` if there is nothing to plot."""
    if not Path(metrics_path).is_file():
        return None
    records = read_metrics(metrics_path)
    if not records:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(k, t) for k, t in PANELS if any(k in r for r in records)]
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.2), squeeze=False)
    steps = [r["step"] for r in records]
    window = max(1, len(records) // 20)
    for ax, (key, title) in zip(axes[0], panels):
        values = [float(r.get(key) or 0.0) for r in records]
        ax.plot(steps, values, alpha=0.35, linewidth=1)
        ax.plot(steps, _smooth(values, window), linewidth=2)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    out = Path(out_path)
    tmp = out.with_name(out.stem + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, out)
    return out


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """Append one metrics line and flush it to disk (a killed run keeps every finished step)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, default=_json_default) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


def truncate_metrics(metrics_path: Path, last_step: int) -> None:
    """Drop metric lines of steps after ``last_step`` (they are redone after a resume); atomic rewrite."""
    if not metrics_path.is_file():
        return
    kept = []
    for line in metrics_path.read_text(encoding="utf-8").splitlines():
        try:
            if int(json.loads(line)["step"]) <= last_step:
                kept.append(line)
        except (ValueError, KeyError, TypeError):
            continue  # a line cut by a kill mid-write
    tmp = metrics_path.with_name(metrics_path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    os.replace(tmp, metrics_path)

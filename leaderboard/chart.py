"""The bar chart: success rate per method per env, rendered to PNG bytes with matplotlib's Agg backend."""

from __future__ import annotations

import io
from typing import Sequence

from leaderboard.rows import Row, best_by_env_method, env_sort_key, method_rank

# Fixed colours per method, so a method keeps its colour whichever methods are present.
COLORS = {
    "single_prompt": "#9e9e9e",
    "single_grpo": "#616161",
    "single_at_grpo": "#8d6e63",
    "mas_prompt": "#90caf9",
    "mas_naive_grpo": "#ffb74d",
    "mas_at_grpo_shared": "#1e88e5",
    "mas_at_grpo_specialized": "#2e7d32",
}


def success_chart_png(rows: Sequence[Row]) -> bytes:
    """PNG of grouped bars (best entry per env and method). Same rows give the same bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    best = best_by_env_method(rows)
    envs = sorted({env for env, _ in best}, key=env_sort_key)
    methods = sorted({method for _, method in best}, key=method_rank)
    fig = Figure(figsize=(max(6.0, 1.6 * len(envs) + 3), 3.6), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    if not best:
        ax.text(0.5, 0.5, "no entries yet", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    else:
        # Bars of one env are centred on its tick, whichever methods it has.
        present = {env: [m for m in methods if (env, m) in best] for env in envs}
        width = min(0.8 / max(len(v) for v in present.values()), 0.3)
        for method in methods:
            xs, heights = [], []
            for e_index, env in enumerate(envs):
                if method in present[env]:
                    k, count = present[env].index(method), len(present[env])
                    xs.append(e_index + (k - (count - 1) / 2) * width)
                    heights.append(100.0 * best[(env, method)].success)
            bars = ax.bar(xs, heights, width=width * 0.95, label=method, color=COLORS.get(method, "#795548"))
            ax.bar_label(bars, fmt="%.0f", fontsize=7, padding=2)
        ax.set_xticks(range(len(envs)), envs)
        ax.set_xlim(-0.6, len(envs) - 0.4)
        ax.set_ylim(0, 108)
        ax.set_ylabel("success %")
        ax.set_title("Best success rate per method and environment")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.tight_layout()
    buffer = io.BytesIO()
    # No "Software" text chunk: keeps the bytes identical across matplotlib patch versions.
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


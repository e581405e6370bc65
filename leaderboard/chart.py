"""The chart: every aggregated row's mean success over seeds with its 95% interval, one panel per env.

Never a best-of: each configuration (aggregated row) has its own bar, labelled with its row id, so
several seeds show as one mean and several configurations of one method show side by side. Rendered
to PNG bytes with matplotlib's Agg backend; same rows give the same bytes.
"""

from __future__ import annotations

import io
from typing import Sequence

from leaderboard.rows import Group, groups_by_env, method_rank

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
TITLE = "Success rate: mean over seeds per row, 95% interval (hierarchical bootstrap; Wilson for one seed)"


def chart_order(groups: Sequence[Group]) -> list[Group]:
    """Within an env: method order, then mean (descending), then id."""
    return sorted(groups, key=lambda g: (method_rank(g.method), g.method, -g.mean, g.id))


def success_chart_png(groups: Sequence[Group]) -> bytes:
    """PNG of horizontal bars (mean over seeds) with error bars (95% interval), one panel per env."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    by_env = {env: chart_order(gs) for env, gs in groups_by_env(groups).items()}
    counts = [len(gs) for gs in by_env.values()]
    height = 1.2 + sum(0.6 + 0.24 * n for n in counts) if counts else 3.0
    fig = Figure(figsize=(9.0, height), dpi=100)
    FigureCanvasAgg(fig)
    if not by_env:
        ax = fig.add_subplot(1, 1, 1)
        ax.text(0.5, 0.5, "no entries yet", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    else:
        axes = fig.subplots(len(by_env), 1, squeeze=False, gridspec_kw={"height_ratios": [max(n, 1) + 2 for n in counts]})
        seen: dict[str, object] = {}
        for ax, (env, gs) in zip(axes[:, 0], by_env.items()):
            ys = list(range(len(gs)))[::-1]  # first row on top
            means = [100 * g.mean for g in gs]
            errs = [[100 * (g.mean - g.ci_low) for g in gs], [100 * (g.ci_high - g.mean) for g in gs]]
            colors = [COLORS.get(g.method, "#795548") for g in gs]
            ax.barh(ys, means, height=0.7, color=colors, xerr=errs, ecolor="#333", capsize=2,
                    error_kw={"elinewidth": 0.8})
            for y, g, m in zip(ys, gs, means):
                seeds = len(g.runs)
                ax.text(101, y, f"{m:.0f}% ({seeds} seed{'s' if seeds != 1 else ''})", va="center", fontsize=6.5)
                seen.setdefault(g.method, COLORS.get(g.method, "#795548"))
            ax.set_yticks(ys, [f"{g.id.split('-')[-1]} {g.method}" for g in gs], fontsize=6.5)
            ax.set_xlim(0, 118)
            ax.set_xticks(range(0, 101, 20))
            ax.set_title(env, fontsize=9, loc="left")
            ax.grid(axis="x", alpha=0.3)
        axes[-1, 0].set_xlabel("success %, mean over seeds (error bars: 95% interval)", fontsize=8)
        fig.suptitle(TITLE, fontsize=9)
        from matplotlib.patches import Patch

        methods = sorted(seen, key=method_rank)
        fig.legend(handles=[Patch(color=seen[m], label=m) for m in methods], fontsize=7, loc="lower center",
                   ncol=min(4, len(methods)), frameon=False)
    fig.tight_layout(rect=(0, min(0.3, 0.55 / height) if by_env else 0, 1, 1))
    buffer = io.BytesIO()
    # No "Software" text chunk: keeps the bytes identical across matplotlib patch versions.
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()

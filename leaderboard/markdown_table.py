"""The README table: one table per model, methods as rows and envs as columns (the paper's layout)."""

from __future__ import annotations

from typing import Sequence

from leaderboard.rows import Row, best_by_env_method, env_sort_key, human_params, method_rank


def md_escape(text: str) -> str:
    """Make a submitted string inert in GitHub Markdown: no HTML, no table breaks, no links or emphasis."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for char in "\\|`*[]#!":
        text = text.replace(char, "\\" + char)
    return " ".join(text.split())


def markdown_tables(rows: Sequence[Row]) -> str:
    """Markdown text: per model (smallest first) a methods × envs grid of best success % (95% CI)."""
    lines = ["# stronger-mas leaderboard", "", "Success rate (%) on each env's test split; best entry per cell, 95% CI in brackets.", ""]
    if not rows:
        return "\n".join(lines + ["_No entries yet._"]) + "\n"
    envs = sorted({r.env for r in rows}, key=env_sort_key)
    models = sorted({(r.params, r.model) for r in rows})
    for params, model in models:
        subset = [r for r in rows if (r.params, r.model) == (params, model)]
        best = best_by_env_method(subset)
        methods = sorted({r.method for r in subset}, key=method_rank)
        lines += [f"## {md_escape(model)} ({human_params(params)} params)", ""]
        lines.append("| Method | " + " | ".join(md_escape(e) for e in envs) + " |")
        lines.append("|---|" + "---:|" * len(envs))
        for method in methods:
            cells = []
            for env in envs:
                row = best.get((env, method))
                cells.append(
                    "–" if row is None else f"{100 * row.success:.1f} [{100 * row.ci_low:.1f}, {100 * row.ci_high:.1f}]"
                )
            lines.append(f"| {md_escape(method)} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"

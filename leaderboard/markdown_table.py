"""The Markdown table (``leaderboard.md``): per env, every aggregated row with its mean over seeds."""

from __future__ import annotations

from typing import Sequence

from leaderboard.rows import Group, groups_by_env


def md_escape(text: str) -> str:
    """Make a submitted string inert in GitHub Markdown: no HTML, no table breaks, no links or emphasis."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for char in "\\|`*[]#!":
        text = text.replace(char, "\\" + char)
    return " ".join(text.split())


def markdown_tables(groups: Sequence[Group]) -> str:
    """Markdown text: per env (page order) a table of its rows, mean success % over seeds [95% interval]."""
    lines = [
        "# stronger-mas leaderboard",
        "",
        "Success rate (%) on each env's test split: one row per configuration, mean over seeds with a 95% interval in "
        "brackets (hierarchical bootstrap over seeds and tasks; Wilson interval for a single seed). "
        "Row ids work with `mas-leaderboard compare`.",
        "",
    ]
    if not groups:
        return "\n".join(lines + ["_No entries yet._"]) + "\n"
    for env, env_groups in groups_by_env(groups).items():
        lines += [f"## {md_escape(env)}", ""]
        lines.append("| Row | Method | Model (per role) | Params | Env settings | Answer budget | Training | Seeds | "
                     "Success % (mean over seeds) | Per seed % | Tasks |")
        lines.append("|---|---|---|---:|---|---|---|---|---:|---|---:|")
        for g in env_groups:
            cells = [g.id, g.method, g.roles_text, g.size_label, g.settings_text, g.decoding_text, g.training_text,
                     g.seeds_text]
            success = f"{100 * g.mean:.1f} [{100 * g.ci_low:.1f}, {100 * g.ci_high:.1f}]"
            lines.append("| " + " | ".join(md_escape(c) for c in cells) + f" | {success} | "
                         f"{md_escape(g.per_seed_text)} | {md_escape(g.tasks_text)} |")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"

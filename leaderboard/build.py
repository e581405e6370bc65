"""``mas-leaderboard build``: render index.html, success.png and leaderboard.md from the stored entries."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from leaderboard.chart import success_chart_png
from leaderboard.html_page import link_base, render_page
from leaderboard.markdown_table import markdown_tables
from leaderboard.rows import aggregate, load_rows
from leaderboard.store import write_atomic


@dataclass(frozen=True)
class BuildOutput:
    html: Path
    png: Path
    markdown: Path
    entries: int
    rows: int = 0


def build_site(entries_dir: str | Path, out_dir: str | Path, warn=None) -> BuildOutput:
    """Render the site for every valid entry in ``entries_dir`` into ``out_dir``; output is deterministic."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = load_rows(entries_dir, warn=warn)
    groups = aggregate(rows)
    png = success_chart_png(groups)
    png_path = out / "success.png"
    write_atomic(png_path, png)
    html_path = out / "index.html"
    write_atomic(html_path, render_page(rows, groups, png, link=link_base(entries_dir, out)))
    md_path = out / "leaderboard.md"
    write_atomic(md_path, markdown_tables(groups))
    return BuildOutput(html=html_path, png=png_path, markdown=md_path, entries=len(rows), rows=len(groups))

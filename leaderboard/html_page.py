"""The static page: one sortable table per env, model-size and method filters, the embedded bar chart.

Everything is inline (CSS, JS, the PNG as a data URI) so the page works from file:// with no network.
Every submitted string goes through ``html.escape``; rows carry data-* attributes that the script reads,
so no submitted text is ever placed inside the script.
"""

from __future__ import annotations

import base64
from html import escape
from typing import Sequence

from leaderboard.rows import Row, method_rank, rows_by_env

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
h1 { margin: 0 0 4px; } h2 { margin: 28px 0 6px; }
.muted { color: #666; }
.filters { margin: 16px 0; display: flex; gap: 18px; }
table.board { border-collapse: collapse; min-width: 900px; }
table.board th, table.board td { border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: left; }
table.board th { cursor: pointer; user-select: none; background: #f3f5f8; white-space: nowrap; }
table.board th[aria-sort="ascending"]::after { content: " \\25B2"; }
table.board th[aria-sort="descending"]::after { content: " \\25BC"; }
table.board td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.board tr.hidden { display: none; }
img.chart { max-width: 100%; border: 1px solid #eee; }
"""

# Sorting and filtering; reads only data-* attributes and text the server already escaped.
JS = """
'use strict';
function cellKey(row, col, numeric) {
  const raw = row.cells[col].dataset.sort;
  return numeric ? parseFloat(raw) : raw.toLowerCase();
}
function sortTable(table, col, direction) {
  const th = table.tHead.rows[0].cells[col];
  const numeric = th.dataset.type === 'num';
  const body = table.tBodies[0];
  const rows = Array.from(body.rows).map((row, i) => ({row, i}));
  const sign = direction === 'ascending' ? 1 : -1;
  rows.sort((a, b) => {
    const x = cellKey(a.row, col, numeric), y = cellKey(b.row, col, numeric);
    if (x < y) return -sign;
    if (x > y) return sign;
    return a.i - b.i;  // stable: keep the previous order among equal keys
  });
  rows.forEach(({row}) => body.appendChild(row));
  for (const other of table.tHead.rows[0].cells) other.removeAttribute('aria-sort');
  th.setAttribute('aria-sort', direction);
}
function applyFilters() {
  const size = document.getElementById('filter-size').value;
  const method = document.getElementById('filter-method').value;
  for (const table of document.querySelectorAll('table.board')) {
    let shown = 0;
    for (const row of table.tBodies[0].rows) {
      const hide = (size !== '' && row.dataset.size !== size) || (method !== '' && row.dataset.method !== method);
      row.classList.toggle('hidden', hide);
      if (!hide) shown += 1;
    }
    const counter = document.getElementById('count-' + table.dataset.env);
    const total = table.tBodies[0].rows.length;
    counter.textContent = shown + ' of ' + total + (total === 1 ? ' entry' : ' entries') + ' shown';
  }
}
for (const table of document.querySelectorAll('table.board')) {
  Array.from(table.tHead.rows[0].cells).forEach((th, col) => {
    th.addEventListener('click', () => {
      const current = th.getAttribute('aria-sort');
      let next;
      if (current) next = current === 'ascending' ? 'descending' : 'ascending';
      else next = th.dataset.type === 'num' ? 'descending' : 'ascending';
      sortTable(table, col, next);
    });
  });
}
document.getElementById('filter-size').addEventListener('change', applyFilters);
document.getElementById('filter-method').addEventListener('change', applyFilters);
applyFilters();
"""

# (header, data-type) in column order; the success column is the default sort.
COLUMNS = (
    ("Method", "text"),
    ("Model", "text"),
    ("Params", "num"),
    ("Policy mode", "text"),
    ("Workflow", "text"),
    ("Success %", "num"),
    ("Episodes", "num"),
    ("Date", "text"),
    ("Label", "text"),
)
SUCCESS_COLUMN = 5


def _count(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def _cell(text: str, sort_key: object, numeric: bool = False, title: str | None = None) -> str:
    attrs = f' data-sort="{escape(str(sort_key))}"'
    if numeric:
        attrs += ' class="num"'
    if title:
        attrs += f' title="{escape(title)}"'
    return f"<td{attrs}>{escape(text)}</td>"


def _row_html(row: Row) -> str:
    success = f"{100 * row.success:.1f} ({100 * row.ci_low:.1f}–{100 * row.ci_high:.1f})"
    cells = [
        _cell(row.method, row.method),
        _cell(row.model, row.model),
        _cell(row.size_label, row.params, numeric=True, title=f"{row.params:,} parameters"),
        _cell(row.policy_mode, row.policy_mode),
        _cell(row.workflow, row.workflow),
        _cell(success, f"{row.success:.12f}", numeric=True, title="success rate (95% confidence interval)"),
        _cell(str(row.episodes), row.episodes, numeric=True),
        _cell(row.date[:10], row.date, title=row.date),
        _cell(row.label, row.label),
    ]
    return (
        f'<tr data-entry="{escape(row.entry)}" data-method="{escape(row.method)}" '
        f'data-size="{escape(row.size_label)}">' + "".join(cells) + "</tr>"
    )


def _table_html(env: str, rows: Sequence[Row]) -> str:
    headers = "".join(
        f'<th data-type="{kind}"' + (' aria-sort="descending"' if i == SUCCESS_COLUMN else "") + f">{escape(name)}</th>"
        for i, (name, kind) in enumerate(COLUMNS)
    )
    body = "\n".join(_row_html(r) for r in rows)
    env_id = escape(env)
    return (
        f'<h2 id="env-{env_id}">{env_id}</h2>\n'
        f'<p class="muted" id="count-{env_id}">{_count(len(rows))}</p>\n'
        f'<table class="board" data-env="{env_id}">\n<thead><tr>{headers}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>'
    )


def _select_html(select_id: str, label: str, options: Sequence[str]) -> str:
    items = '<option value="">all</option>' + "".join(
        f'<option value="{escape(o)}">{escape(o)}</option>' for o in options
    )
    return f'<label>{escape(label)} <select id="{select_id}">{items}</select></label>'


def render_page(rows: Sequence[Row], chart_png: bytes) -> str:
    """The complete HTML document for ``rows`` (already in default order) and the chart's PNG bytes."""
    sizes = [label for _, label in sorted({(r.params, r.size_label) for r in rows})]
    # Several raw sizes can round to the same label; keep each label once, smallest first.
    sizes = list(dict.fromkeys(sizes))
    methods = sorted({r.method for r in rows}, key=lambda m: (method_rank(m), m))
    tables = [_table_html(env, env_rows) for env, env_rows in rows_by_env(rows).items()]
    chart = base64.b64encode(chart_png).decode("ascii")
    content = "\n".join(tables) if tables else '<p id="empty">No entries yet: submit one with <code>mas-leaderboard submit results.json</code>.</p>'
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>stronger-mas leaderboard</title>
<style>{CSS}</style>
</head>
<body>
<h1>stronger-mas leaderboard</h1>
<p class="muted">Success rate on each environment's test split, with 95% confidence intervals. {_count(len(rows))}.
Click a column header to sort.</p>
<div class="filters">
{_select_html("filter-size", "Model size", sizes)}
{_select_html("filter-method", "Method", methods)}
</div>
<img class="chart" id="chart" alt="Bar chart: best success rate per method per environment" src="data:image/png;base64,{chart}">
{content}
<script>{JS}</script>
</body>
</html>
"""

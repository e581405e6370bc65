"""The static page: per env a table of aggregated rows (default) and of single runs, filters, the chart,
and a paired comparison of two ticked rows.

Everything is inline (CSS, JS, the PNG as a data URI) so the page works from file:// with no network.
Every submitted string goes through ``html.escape``; rows carry data-* attributes (including their
per-task outcomes as JSON) that the script reads, so no submitted text is ever placed inside the script,
and the script writes text with ``textContent`` only.

The script's comparison is the one ``mas-leaderboard compare`` makes (``leaderboard/compare.py``): the
same mulberry32 generator and seed, the same paired bootstrap, the same exact McNemar test (BigInt
binomial coefficients), the same number formatting, so both print the same numbers.
"""

from __future__ import annotations

import base64
import json
import os
from html import escape
from pathlib import Path
from typing import Sequence

from leaderboard import stats
from leaderboard.rows import Group, Row, groups_by_env, method_rank, rows_by_env

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
h1 { margin: 0 0 4px; } h2 { margin: 28px 0 6px; }
.muted { color: #666; }
.filters { margin: 16px 0; display: flex; gap: 18px; flex-wrap: wrap; align-items: center; }
.scroll { overflow-x: auto; }
table.board { border-collapse: collapse; min-width: 900px; font-size: 13px; }
table.board th, table.board td { border-bottom: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
table.board th { cursor: pointer; user-select: none; background: #f3f5f8; white-space: nowrap; }
table.board th[data-type="none"] { cursor: default; }
table.board th[aria-sort="ascending"]::after { content: " \\25B2"; }
table.board th[aria-sort="descending"]::after { content: " \\25BC"; }
table.board td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.board td.id { font-family: ui-monospace, monospace; white-space: nowrap; }
table.board tr.hidden { display: none; }
table.board details code { display: block; white-space: pre-wrap; word-break: break-all; max-width: 420px; }
table.board .file { display: block; }
body[data-view="agg"] .view-run, body[data-view="run"] .view-agg { display: none; }
#compare { border: 1px solid #cfd8e3; background: #f8fafc; padding: 8px 12px; margin: 12px 0; }
#compare-out p { margin: 2px 0; }
#compare-out .refused { color: #b00020; }
img.chart { max-width: 100%; border: 1px solid #eee; }
"""

# Sorting, filtering, the view toggle and the comparison; reads only data-* attributes and escaped text.
JS = """
'use strict';
const RESAMPLES = %(resamples)d, RNG_SEED = %(seed)d;
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
function currentView() { return document.body.dataset.view; }
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
    if (table.dataset.view === currentView()) {
      const counter = document.getElementById('count-' + table.dataset.env);
      const total = table.tBodies[0].rows.length;
      const noun = table.dataset.view === 'agg' ? (total === 1 ? ' row' : ' rows') : (total === 1 ? ' run' : ' runs');
      counter.textContent = shown + ' of ' + total + noun + ' shown';
    }
  }
}
function setView(view) {
  document.body.dataset.view = view;
  document.getElementById('view-' + view).checked = true;
  applyFilters();
  updateCompare();
}
// ---- the comparison (same algorithm, generator and formatting as `mas-leaderboard compare`)
function mulberry32(seed) {
  let a = seed >>> 0;
  return function () {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t = (t + Math.imul(t ^ (t >>> 7), t | 61)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
function pairedBootstrap(diffs) {
  const draw = mulberry32(RNG_SEED), n = diffs.length, out = [];
  for (let r = 0; r < RESAMPLES; r++) {
    let total = 0;
    for (let i = 0; i < n; i++) total += diffs[Math.floor(draw() * n)];
    out.push(total / n);
  }
  out.sort((x, y) => x - y);
  const cut = Math.floor(out.length * 0.05 / 2);
  return [out[cut], out[out.length - 1 - cut]];
}
function mcnemar(b, c) {  // exact two-sided: min(1, 2 * sum_{k<=min(b,c)} C(b+c, k) / 2^(b+c))
  const n = b + c;
  if (n === 0) return 1;
  const N = BigInt(n);
  let term = 1n, tail = 1n;
  for (let k = 1; k <= Math.min(b, c); k++) { term = term * (N - BigInt(k) + 1n) / BigInt(k); tail += term; }
  const num = 2n * tail, den = 1n << N;
  if (num >= den) return 1;
  const shift = BigInt(Math.max(0, den.toString(2).length - num.toString(2).length)) + 64n;
  if (shift > 1000n) return 0;
  return Number((num << shift) / den) / Math.pow(2, Number(shift));
}
function fixed(x, d) { return (x === 0 ? 0 : x).toFixed(d); }
function signed(x, d) { const s = fixed(x, d); return s.startsWith('-') ? s : '+' + s; }
function formatP(p) { return p < 0.0001 ? 'p < 0.0001' : 'p = ' + fixed(p, 4); }
function side(row) {
  return {name: row.dataset.id, env: row.dataset.env, fp: row.dataset.fp, runs: parseInt(row.dataset.runs, 10),
          tasks: JSON.parse(row.dataset.tasks), wins: JSON.parse(row.dataset.wins)};
}
function comparison(a, b) {
  if (a.fp !== b.fp) {
    return {refused: 'eval-set fingerprints differ: ' + a.name + ' (' + a.env + ') has ' + a.fp.slice(0, 16) +
      '..., ' + b.name + ' (' + b.env + ') has ' + b.fp.slice(0, 16) + '...; they were not evaluated on the same ' +
      'evaluation set, so a paired comparison would be meaningless'};
  }
  const inB = new Map(b.tasks.map((t, j) => [t, j]));
  const va = [], vb = [];
  a.tasks.forEach((t, i) => { if (inB.has(t)) { va.push(a.wins[i] / a.runs); vb.push(b.wins[inB.get(t)] / b.runs); } });
  const n = va.length;
  if (n === 0) return {refused: a.name + ' and ' + b.name + ' share no task ids'};
  const diffs = va.map((x, i) => x - vb[i]);
  const sum = xs => xs.reduce((s, x) => s + x, 0);
  const [lo, hi] = pairedBootstrap(diffs);
  const out = {n, successA: sum(va) / n, successB: sum(vb) / n, diff: sum(diffs) / n, lo, hi, p: null};
  if (a.runs === 1 && b.runs === 1) {
    out.aOnly = va.filter((x, i) => x > vb[i]).length;
    out.bOnly = va.filter((x, i) => vb[i] > x).length;
    out.p = mcnemar(out.aOnly, out.bOnly);
  }
  return out;
}
function line(parent, text, cls) {
  const p = document.createElement('p');
  p.textContent = text;
  if (cls) p.className = cls;
  parent.appendChild(p);
}
function updateCompare() {
  const out = document.getElementById('compare-out');
  out.replaceChildren();
  for (const key of ['diff', 'lo', 'hi', 'p', 'shared', 'state']) delete out.dataset[key];
  const picked = Array.from(document.querySelectorAll('table.board[data-view="' + currentView() + '"] input.pick:checked'))
    .sort((x, y) => parseInt(x.dataset.order || '0', 10) - parseInt(y.dataset.order || '0', 10))
    .map(box => box.closest('tr'));  // A = ticked first, B = ticked second
  if (picked.length !== 2) {
    out.dataset.state = 'idle';
    line(out, 'Tick two rows of this view to compare them on their shared tasks (' + picked.length + ' ticked).', 'muted');
    return;
  }
  const a = side(picked[0]), b = side(picked[1]);
  const c = comparison(a, b);
  if (c.refused) {
    out.dataset.state = 'refused';
    line(out, 'refused: ' + c.refused, 'refused');
    return;
  }
  out.dataset.state = 'done';
  Object.assign(out.dataset, {diff: c.diff, lo: c.lo, hi: c.hi, shared: c.n});
  if (c.p !== null) out.dataset.p = c.p;
  line(out, 'A: ' + a.name + ', B: ' + b.name + '; shared tasks: ' + c.n + ' (A has ' + a.tasks.length + ', B has ' + b.tasks.length + ')');
  if (a.runs > 1 || b.runs > 1) {
    line(out, 'per-task values: mean success over each row\\'s seeds (runs); the interval is a paired bootstrap over tasks of those per-task means');
  }
  line(out, 'success on the shared tasks: A ' + fixed(100 * c.successA, 1) + '%%, B ' + fixed(100 * c.successB, 1) + '%%');
  line(out, 'paired difference A - B: ' + signed(100 * c.diff, 1) + ' points, 95%% CI [' + signed(100 * c.lo, 1) + ', ' +
       signed(100 * c.hi, 1) + '] (paired bootstrap over the ' + c.n + ' shared tasks, ' + RESAMPLES + ' resamples, RNG seed ' + RNG_SEED + ')');
  if (c.p !== null) {
    line(out, 'discordant tasks: A only ' + c.aOnly + ', B only ' + c.bOnly + '; exact two-sided McNemar test on them: ' + formatP(c.p));
  } else {
    line(out, 'p-value: not computed (exact McNemar needs one 0/1 outcome per task on each side; rows averaged over seeds have fractional per-task values)');
  }
}
for (const table of document.querySelectorAll('table.board')) {
  Array.from(table.tHead.rows[0].cells).forEach((th, col) => {
    if (th.dataset.type === 'none') return;
    th.addEventListener('click', () => {
      const current = th.getAttribute('aria-sort');
      let next;
      if (current) next = current === 'ascending' ? 'descending' : 'ascending';
      else next = th.dataset.type === 'num' ? 'descending' : 'ascending';
      sortTable(table, col, next);
    });
  });
}
let ticks = 0;
for (const box of document.querySelectorAll('input.pick')) {
  box.addEventListener('change', () => { if (box.checked) box.dataset.order = String(++ticks); updateCompare(); });
}
document.getElementById('compare-clear').addEventListener('click', () => {
  for (const box of document.querySelectorAll('input.pick')) box.checked = false;
  updateCompare();
});
document.getElementById('filter-size').addEventListener('change', applyFilters);
document.getElementById('filter-method').addEventListener('change', applyFilters);
for (const view of ['agg', 'run']) document.getElementById('view-' + view).addEventListener('change', () => setView(view));
setView(document.getElementById('view-run').checked ? 'run' : 'agg');
""" % {"resamples": stats.BOOTSTRAP_RESAMPLES, "seed": stats.BOOTSTRAP_SEED}

# (header, data-type, tooltip) in column order, per view; "none" columns do not sort.
AGG_COLUMNS = (
    ("", "none", "tick two rows to compare them"),
    ("Row", "text", "aggregated-row id: mas-leaderboard compare accepts it"),
    ("Method", "text", None),
    ("Model (per role)", "text", "the model of each role; (trained) = a checkpoint trained from that base model"),
    ("Params", "num", None),
    ("Policy mode", "text", None),
    ("Workflow", "text", None),
    ("Env settings", "text", "env kwargs that differ from the env's defaults"),
    ("Answer budget", "text", "max new tokens per action (per role if set), samples per turn, temperature"),
    ("Training", "text", "steps of the evaluated checkpoint(s) and the training budget asked for"),
    ("Seeds", "text", None),
    ("Success % (mean over seeds)", "num", "mean success over seeds; 95% interval: hierarchical bootstrap "
                                           "(seeds, then tasks) for several seeds, Wilson for one"),
    ("Per seed %", "text", "success of each seed's run, in seed order"),
    ("Tasks", "num", "tasks evaluated per seed"),
    ("Eval set", "text", "eval-set fingerprint (first 8 hex) and env version"),
    ("Date", "text", "latest run"),
    ("Label", "text", None),
    ("Results files", "none", None),
)
RUN_COLUMNS = (
    ("", "none", "tick two runs to compare them"),
    ("Run", "text", "the results file's name: mas-leaderboard compare accepts it"),
    ("Method", "text", None),
    ("Model (per role)", "text", AGG_COLUMNS[3][2]),
    ("Params", "num", None),
    ("Policy mode", "text", None),
    ("Workflow", "text", None),
    ("Env settings", "text", AGG_COLUMNS[7][2]),
    ("Answer budget", "text", AGG_COLUMNS[8][2]),
    ("Training", "text", AGG_COLUMNS[9][2]),
    ("Seed", "num", None),
    ("Success %", "num", "success rate (95% Wilson interval over tasks)"),
    ("Row", "text", "the aggregated row this run belongs to"),
    ("Tasks", "num", None),
    ("Eval set", "text", AGG_COLUMNS[14][2]),
    ("Date", "text", None),
    ("Label", "text", None),
    ("Results file", "none", None),
)
SUCCESS_COLUMN = 11


def _count(n: int, noun: str = "entry") -> str:
    plural = {"entry": "entries"}.get(noun, noun + "s")
    return f"{n} {noun}" if n == 1 else f"{n} {plural}"


def _cell(text: str, sort_key: object, numeric: bool = False, title: str | None = None, cls: str = "") -> str:
    attrs = f' data-sort="{escape(str(sort_key))}"'
    classes = " ".join(c for c in ("num" if numeric else "", cls) if c)
    if classes:
        attrs += f' class="{classes}"'
    if title:
        attrs += f' title="{escape(title)}"'
    return f"<td{attrs}>{escape(text)}</td>"


def _raw_cell(html: str, sort_key: object = "") -> str:
    return f'<td data-sort="{escape(str(sort_key))}">{html}</td>'


def _success_text(mean: float, lo: float, hi: float) -> str:
    return f"{100 * mean:.1f} ({100 * lo:.1f}–{100 * hi:.1f})"


def _file_html(row: Row, link_base: str, prefix: str = "") -> str:
    href = f"{link_base}/{row.entry}" if link_base else row.entry
    return (
        f'<span class="file">{escape(prefix)}<a href="{escape(href)}">{escape(row.entry)}</a>'
        f"<details><summary>command</summary><code>{escape(row.command)}</code>"
        + (f"<br>played on: {escape(row.machines)}" if row.machines else "")
        + "</details></span>"
    )


def _pick(label: str) -> str:
    return f'<td data-sort=""><input type="checkbox" class="pick" aria-label="compare {escape(label)}"></td>'


def _eval_text(row: Row) -> str:
    return f"{row.short_fp} v{row.version}"


def _shared_cells(r: Row | Group) -> list[str]:
    return [
        _cell(r.method, r.method),
        _cell(r.roles_text, r.roles_text),
        _cell(r.size_label, r.params, numeric=True, title=f"{r.params:,} parameters"),
        _cell(r.policy_mode, r.policy_mode),
        _cell(r.workflow, r.workflow),
        _cell(r.settings_text, r.settings_text),
        _cell(r.decoding_text, r.decoding_text),
    ]


def _data_attrs(ident: str, r: Row | Group, wins: Sequence[int], runs: int) -> str:
    tasks = json.dumps(list(r.task_ids), ensure_ascii=False, separators=(",", ":"))
    return (
        f'data-id="{escape(ident)}" data-env="{escape(r.env)}" data-method="{escape(r.method)}" '
        f'data-size="{escape(r.size_label)}" data-fp="{escape(r.fingerprint)}" data-runs="{runs}" '
        f'data-tasks="{escape(tasks)}" data-wins="{escape(json.dumps(list(wins), separators=(",", ":")))}"'
    )


def _group_html(g: Group, link_base: str) -> str:
    several = len(g.runs) > 1
    interval = "hierarchical bootstrap over seeds and tasks" if several else "Wilson interval over tasks (one seed)"
    files = "".join(_file_html(r, link_base, f"seed {r.seed}: " if several else "") for r in g.runs)
    cells = [
        _pick(g.id),
        _cell(g.id, g.id, cls="id"),
        *_shared_cells(g),
        _cell(g.training_text, g.training_text),
        _cell(g.seeds_text, g.seeds_text, title=f"{len(g.runs)} run{'s' if several else ''}"),
        _cell(_success_text(g.mean, g.ci_low, g.ci_high), f"{g.mean:.12f}", numeric=True,
              title=f"mean success over {len(g.runs)} seed{'s' if several else ''} (95% {interval})"),
        _cell(g.per_seed_text, g.per_seed_text),
        _cell(g.tasks_text, g.episodes, numeric=True),
        _cell(_eval_text(g.first), g.fingerprint, title=g.fingerprint),
        _cell(g.date[:10], g.date, title=g.date),
        _cell(g.label, g.label),
        _raw_cell(files),
    ]
    return f"<tr {_data_attrs(g.id, g, g.wins, len(g.runs))}>" + "".join(cells) + "</tr>"


def _run_html(r: Row, link_base: str) -> str:
    cells = [
        _pick(r.run_id),
        _cell(r.run_id, r.run_id, cls="id"),
        *_shared_cells(r),
        _cell(r.training_text, r.training_text),
        _cell(str(r.seed), r.seed, numeric=True),
        _cell(_success_text(r.success, r.ci_low, r.ci_high), f"{r.success:.12f}", numeric=True,
              title="success rate (95% confidence interval)"),
        _cell(r.group_id, r.group_id, cls="id"),
        _cell(r.tasks_text, r.episodes, numeric=True),
        _cell(_eval_text(r), r.fingerprint, title=r.fingerprint),
        _cell(r.date[:10], r.date, title=r.date),
        _cell(r.label, r.label),
        _raw_cell(_file_html(r, link_base)),
    ]
    return f'<tr data-entry="{escape(r.entry)}" {_data_attrs(r.run_id, r, r.outcomes, 1)}>' + "".join(cells) + "</tr>"


def _headers(columns) -> str:
    out = []
    for i, (name, kind, title) in enumerate(columns):
        attrs = f' data-type="{kind}"' + (' aria-sort="descending"' if i == SUCCESS_COLUMN else "")
        if title:
            attrs += f' title="{escape(title)}"'
        out.append(f"<th{attrs}>{escape(name)}</th>")
    return "".join(out)


def _env_html(env: str, groups: Sequence[Group], runs: Sequence[Row], link_base: str) -> str:
    env_id = escape(env)
    agg_body = "\n".join(_group_html(g, link_base) for g in groups)
    run_body = "\n".join(_run_html(r, link_base) for r in runs)
    return (
        f'<section class="env" id="env-{env_id}">\n<h2>{env_id}</h2>\n'
        f'<p class="muted" id="count-{env_id}">{_count(len(groups), "row")} ({_count(len(runs), "run")})</p>\n'
        f'<div class="scroll view-agg"><table class="board" data-env="{env_id}" data-view="agg">\n'
        f"<thead><tr>{_headers(AGG_COLUMNS)}</tr></thead>\n<tbody>\n{agg_body}\n</tbody>\n</table></div>\n"
        f'<div class="scroll view-run"><table class="board" data-env="{env_id}" data-view="run">\n'
        f"<thead><tr>{_headers(RUN_COLUMNS)}</tr></thead>\n<tbody>\n{run_body}\n</tbody>\n</table></div>\n"
        "</section>"
    )


def _select_html(select_id: str, label: str, options: Sequence[str]) -> str:
    items = '<option value="">all</option>' + "".join(
        f'<option value="{escape(o)}">{escape(o)}</option>' for o in options
    )
    return f'<label>{escape(label)} <select id="{select_id}">{items}</select></label>'


def link_base(entries_dir: str | Path | None, out_dir: str | Path | None) -> str:
    """The entries folder relative to the page's folder, as a URL path (``../entries``)."""
    if entries_dir is None or out_dir is None:
        return ""
    return Path(os.path.relpath(Path(entries_dir).resolve(), Path(out_dir).resolve())).as_posix()


def render_page(rows: Sequence[Row], groups: Sequence[Group], chart_png: bytes, link: str = "") -> str:
    """The complete HTML document: ``rows`` (runs) and ``groups`` (aggregated rows), the chart's PNG bytes.

    ``link`` is the entries folder relative to the page (results-file links point into it).
    """
    sizes = [label for _, label in sorted({(r.params, r.size_label) for r in rows})]
    # Several raw sizes can round to the same label; keep each label once, smallest first.
    sizes = list(dict.fromkeys(sizes))
    methods = sorted({r.method for r in rows}, key=lambda m: (method_rank(m), m))
    runs_by_env = rows_by_env(rows)
    sections = [_env_html(env, env_groups, runs_by_env.get(env, []), link) for env, env_groups in groups_by_env(groups).items()]
    nav = " · ".join(f'<a href="#env-{escape(env)}">{escape(env)}</a>' for env in groups_by_env(groups))
    chart = base64.b64encode(chart_png).decode("ascii")
    content = "\n".join(sections) if sections else '<p id="empty">No entries yet: submit one with <code>mas-leaderboard submit results.json</code>.</p>'
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>stronger-mas leaderboard</title>
<style>{CSS}</style>
</head>
<body data-view="agg">
<h1>stronger-mas leaderboard</h1>
<p class="muted">Success rate on each environment's test split. {_count(len(rows))} in {_count(len(groups), "row")}.
A row is one configuration (env settings, method, models, answer budget, training budget, eval set); results files
that differ only in seed are one row, showing the <b>mean over seeds</b>, each seed's success and a 95% interval
(hierarchical bootstrap: seeds, then tasks within each seed; {stats.BOOTSTRAP_RESAMPLES} resamples, fixed RNG seed;
a single-seed row shows its Wilson interval over tasks). Click a column header to sort; tick two rows to compare
them on their shared tasks (the same as <code>mas-leaderboard compare A B</code>).</p>
<div class="filters">
<span>View: <label><input type="radio" name="view" id="view-agg" value="agg" checked> aggregated over seeds</label>
<label><input type="radio" name="view" id="view-run" value="run"> per run</label></span>
{_select_html("filter-size", "Model size", sizes)}
{_select_html("filter-method", "Method", methods)}
</div>
<p>{nav}</p>
<div id="compare"><b>Paired comparison</b> <button type="button" id="compare-clear">clear</button>
<div id="compare-out"></div></div>
<img class="chart" id="chart" alt="Bar chart: success rate per row (configuration), mean over seeds with 95% interval error bars" src="data:image/png;base64,{chart}">
{content}
<script>{JS}</script>
</body>
</html>
"""

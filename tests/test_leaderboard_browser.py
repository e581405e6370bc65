"""The built leaderboard page in a real headless Chromium, driven over the DevTools protocol.

Chromium talks CDP over a pipe (``--remote-debugging-pipe``: commands on fd 3, replies on fd 4, each a
NUL-terminated JSON message), so no websocket library or driver is needed. The page is served by a
stdlib HTTP server bound to 127.0.0.1. Skipped when no ``chromium`` binary is installed.
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from leaderboard import DEFAULT_ENTRIES_DIR
from leaderboard.build import build_site
from leaderboard.cli import main
from leaderboard.rows import aggregate, env_sort_key, load_rows
from leaderboard.sample import sample_result
from leaderboard.store import store_entry

BASH = shutil.which("bash") or "/bin/bash"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary: install Debian packages `chromium chromium-driver` to run browser tests"
)

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--remote-debugging-pipe", "--window-size=1280,1400",
]


class PipeCDP:
    """A minimal Chrome DevTools Protocol client over chromium's debugging pipe, attached to one page."""

    def __init__(self, binary: str, user_data_dir: str):
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # Chromium expects the pipe on fds 3 and 4; bash places them there right before exec
        # (bash, not sh: dash only accepts single-digit descriptors in redirections).
        self.proc = subprocess.Popen(
            [BASH, "-c", f'exec "$@" 3<&{to_child_r} 4>&{from_child_w}', "sh",
             binary, *FLAGS, f"--user-data-dir={user_data_dir}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(to_child_r, from_child_w),
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._next_id = 0
        self._replies: dict[int, queue.Queue] = {}
        self.events: list[dict] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        self.session = None
        try:
            target = self.call("Target.createTarget", url="about:blank")["targetId"]
            self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                self.call(f"{domain}.enable")
        except BaseException:
            self.close()
            raise

    def _read_loop(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._from_child, 1 << 16)
            except OSError:  # closed by close() while chromium was already gone
                return
            if not chunk:
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                with self._lock:
                    if "id" in message and message["id"] in self._replies:
                        self._replies[message["id"]].put(message)
                    elif "method" in message:
                        self.events.append(message)

    def call(self, method: str, timeout: float = 20.0, **params):
        with self._lock:
            self._next_id += 1
            call_id = self._next_id
            self._replies[call_id] = queue.Queue()
        message = {"id": call_id, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        reply = self._replies[call_id].get(timeout=timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for_event(self, method: str, timeout: float = 20.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                for event in self.events:
                    if event["method"] == method:
                        return event
            time.sleep(0.05)
        raise TimeoutError(f"no {method} within {timeout} s")

    def click(self, selector: str) -> None:
        """A real mouse click (press + release) at the centre of the element."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).scrollIntoView()")
        box = self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and browser log errors (failed loads, CSP violations)."""
        found = []
        with self._lock:
            for event in self.events:
                params = event.get("params", {})
                if event["method"] == "Runtime.exceptionThrown":
                    found.append(json.dumps(params["exceptionDetails"])[:300])
                elif event["method"] == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                    found.append(json.dumps(params.get("args"))[:300])
                elif event["method"] == "Log.entryAdded" and params["entry"]["level"] == "error":
                    found.append(params["entry"].get("text", "")[:300])
        return found

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child)
        os.close(self._from_child)


@pytest.fixture(scope="module")
def board(tmp_path_factory) -> tuple[Path, Path]:
    """(entries, site): two envs, two model sizes, a hostile label, a method run with two seeds, and a
    plan_path run on another eval set (5x5)."""
    root = tmp_path_factory.mktemp("board")
    entries, out = root / "entries", root / "site"
    results = [
        sample_result("plan_path", method="mas_at_grpo_shared", seed=0, successes=[True] * 9 + [False]),
        sample_result("plan_path", method="mas_at_grpo_shared", seed=1, successes=[True] * 7 + [False] * 3),
        sample_result("plan_path", method="single_prompt", successes=[True] + [False] * 9, label="<script>alert(1)</script>"),
        sample_result("plan_path", method="mas_prompt", successes=[True] * 4 + [False] * 6,
                      model_id="Qwen3-1.7B", params=1_720_574_976),
        sample_result("plan_path", {"preset": "5x5"}, method="single_grpo", successes=[True, False]),
        sample_result("sudoku", method="mas_at_grpo_specialized", successes=[True, True, False, True]),
    ]
    for result in results:
        store_entry(result, entries)
    build_site(entries, out)
    return entries, out


@pytest.fixture(scope="module")
def site(board) -> Path:
    return board[1]


@pytest.fixture(scope="module")
def ids(board) -> dict[str, str]:
    """Aggregated-row id per plan_path method (each method has one row here)."""
    return {g.method: g.id for g in aggregate(load_rows(board[0])) if g.env == "plan_path"}


def serve(directory: Path):
    handler = functools.partial(QuietHandler, directory=str(directory))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    return httpd


@pytest.fixture(scope="module")
def server(site):
    httpd = serve(site)
    yield f"http://127.0.0.1:{httpd.server_address[1]}/index.html"
    httpd.shutdown()
    httpd.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep test output clean
        pass


def open_page(url: str):
    profile = tempfile.TemporaryDirectory(prefix="lb-chromium-")
    browser = PipeCDP(CHROMIUM, profile.name)
    browser.call("Page.navigate", url=url)
    browser.wait_for_event("Page.loadEventFired")
    return browser, profile


@pytest.fixture(scope="module")
def page(server):
    browser, profile = open_page(server)
    try:
        yield browser
    finally:
        browser.close()
        profile.cleanup()


def table(env: str, view: str = "agg") -> str:
    return f"table[data-env={env}][data-view={view}]"


def col_index(page, env: str, header: str, view: str = "agg") -> int:
    headers = page.evaluate(f"Array.from(document.querySelector('{table(env, view)}').tHead.rows[0].cells).map(c => c.textContent)")
    return headers.index(header)


def column(page, env: str, col: int | str, visible_only: bool = False, view: str = "agg") -> list[str]:
    if isinstance(col, str):
        col = col_index(page, env, col, view)
    condition = ".filter(r => !r.classList.contains('hidden'))" if visible_only else ""
    return page.evaluate(
        f"Array.from(document.querySelector('{table(env, view)}').tBodies[0].rows){condition}"
        f".map(r => r.cells[{col}].textContent)"
    )


def shown(page, selector: str) -> bool:
    return page.evaluate(f"document.querySelector({json.dumps(selector)}).offsetParent !== null")


def choose(page, select_id: str, value: str) -> None:
    page.evaluate(
        f"(() => {{ const s = document.getElementById({json.dumps(select_id)}); s.value = {json.dumps(value)};"
        " s.dispatchEvent(new Event('change')); })()"
    )


def test_page_loads_without_console_errors_and_shows_entries(page):
    assert page.evaluate("document.title") == "stronger-mas leaderboard"
    assert page.evaluate("document.querySelectorAll('table.board').length") == 4  # 2 envs x (aggregated, per run)
    assert page.evaluate("Array.from(document.querySelectorAll('section.env')).map(s => s.id)") == ["env-plan_path", "env-sudoku"]
    # Aggregated view by default; default order: mean success, descending.
    assert page.evaluate("document.body.dataset.view") == "agg"
    assert shown(page, table("plan_path")) and not shown(page, table("plan_path", "run"))
    assert column(page, "plan_path", "Method") == ["mas_at_grpo_shared", "single_grpo", "mas_prompt", "single_prompt"]
    assert column(page, "sudoku", "Method") == ["mas_at_grpo_specialized"]
    assert column(page, "plan_path", "Success % (mean over seeds)")[0].startswith("80.0 (")
    assert column(page, "plan_path", "Seeds")[0] == "0, 1"
    assert column(page, "plan_path", "Per seed %")[0] == "90.0, 70.0"
    assert column(page, "plan_path", "Env settings") == ["preset=4x4", "preset=5x5", "preset=4x4", "preset=4x4"]
    # The hostile label is shown as text, not run as a script.
    assert "<script>alert(1)</script>" in column(page, "plan_path", "Label")
    assert page.evaluate("document.querySelectorAll('script').length") == 1
    assert page.evaluate("document.getElementById('chart').naturalWidth") > 100  # the embedded PNG decoded
    assert "mean over seeds" in page.evaluate("document.getElementById('chart').alt")
    # The provenance command is one click away, in a <details>.
    assert page.evaluate(f"document.querySelector('{table('plan_path')} details').open") is False
    page.click(f"{table('plan_path')} details summary")
    assert page.evaluate(f"document.querySelector('{table('plan_path')} details').open") is True
    assert page.errors() == []


def test_clicking_headers_sorts_rows(page):
    method = col_index(page, "plan_path", "Method") + 1
    success = col_index(page, "plan_path", "Success % (mean over seeds)") + 1
    page.click(f"{table('plan_path')} th:nth-child({method})")  # Method: ascending
    assert column(page, "plan_path", "Method") == ["mas_at_grpo_shared", "mas_prompt", "single_grpo", "single_prompt"]
    page.click(f"{table('plan_path')} th:nth-child({method})")  # again: descending
    assert column(page, "plan_path", "Method") == ["single_prompt", "single_grpo", "mas_prompt", "mas_at_grpo_shared"]
    page.click(f"{table('plan_path')} th:nth-child({success})")  # Success %: numeric, descending first
    assert column(page, "plan_path", "Method") == ["mas_at_grpo_shared", "single_grpo", "mas_prompt", "single_prompt"]
    page.click(f"{table('plan_path')} th:nth-child({success})")
    assert column(page, "plan_path", "Method") == ["single_prompt", "mas_prompt", "single_grpo", "mas_at_grpo_shared"]
    assert page.evaluate(f"document.querySelector('{table('plan_path')} th:nth-child({success})').getAttribute('aria-sort')") == "ascending"
    page.click(f"{table('plan_path')} th:nth-child({success})")  # back to descending for the tests below
    assert page.errors() == []


def test_filters_hide_rows(page):
    assert page.evaluate("Array.from(document.getElementById('filter-size').options).map(o => o.value)") == ["", "135M", "1.72B"]
    choose(page, "filter-size", "1.72B")
    assert column(page, "plan_path", "Model (per role)", visible_only=True) == ["Qwen3-1.7B"]
    assert column(page, "sudoku", "Method", visible_only=True) == []
    assert page.evaluate("document.getElementById('count-plan_path').textContent") == "1 of 4 rows shown"
    choose(page, "filter-size", "")
    choose(page, "filter-method", "mas_at_grpo_specialized")
    assert column(page, "plan_path", "Method", visible_only=True) == []
    assert column(page, "sudoku", "Method", visible_only=True) == ["mas_at_grpo_specialized"]
    choose(page, "filter-method", "")
    assert len(column(page, "plan_path", "Method", visible_only=True)) == 4
    assert page.errors() == []


def test_view_toggle_shows_per_run_rows(page):
    page.click("#view-run")  # a real click on the radio button
    assert page.evaluate("document.body.dataset.view") == "run"
    assert shown(page, table("plan_path", "run")) and not shown(page, table("plan_path"))
    assert column(page, "plan_path", "Method", view="run") == [
        "mas_at_grpo_shared", "mas_at_grpo_shared", "single_grpo", "mas_prompt", "single_prompt"]
    assert column(page, "plan_path", "Seed", view="run")[:2] == ["0", "1"]
    assert column(page, "plan_path", "Success %", view="run")[0].startswith("90.0 (")
    assert page.evaluate("document.getElementById('count-plan_path').textContent") == "5 of 5 runs shown"
    # Filters apply to the per-run view too.
    choose(page, "filter-method", "mas_at_grpo_shared")
    assert page.evaluate("document.getElementById('count-plan_path').textContent") == "2 of 5 runs shown"
    choose(page, "filter-method", "")
    page.click("#view-agg")
    assert page.evaluate("document.body.dataset.view") == "agg"
    assert shown(page, table("plan_path")) and not shown(page, table("plan_path", "run"))
    assert page.evaluate("document.getElementById('count-plan_path').textContent") == "4 of 4 rows shown"
    assert page.errors() == []


def compare_lines(page) -> list[str]:
    return page.evaluate("Array.from(document.querySelectorAll('#compare-out p')).map(p => p.textContent)")


def cli_compare(entries: Path, a: str, b: str) -> tuple[int, str, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["compare", a, b, "--entries", str(entries)])
    return code, out.getvalue(), err.getvalue()


def tick(page, selector: str) -> None:
    page.click(f"{selector} input.pick")


def test_comparison_of_two_ticked_rows_matches_the_cli(page, board, ids):
    entries = board[0]
    page.click("#compare-clear")
    assert page.evaluate("document.getElementById('compare-out').dataset.state") == "idle"
    # Aggregated rows: a two-seed row against a one-seed row (per-task means, no McNemar).
    tick(page, f"{table('plan_path')} tr[data-id='{ids['mas_at_grpo_shared']}']")
    assert "(1 ticked)" in compare_lines(page)[0]
    tick(page, f"{table('plan_path')} tr[data-id='{ids['single_prompt']}']")
    lines = compare_lines(page)
    code, out, _ = cli_compare(entries, ids["mas_at_grpo_shared"], ids["single_prompt"])
    assert code == 0
    assert "success on the shared tasks: A 80.0%, B 10.0%" in lines
    for text in lines[1:]:  # every line after the first (A/B names) is printed by the CLI too, verbatim
        assert text in out.splitlines(), (text, out)
    assert any(t.startswith("paired difference A - B: +70.0 points, 95% CI [") for t in lines)
    assert lines[-1].startswith("p-value: not computed")
    # Per-run view: two single runs give the exact McNemar p-value, the same as the CLI's.
    page.click("#view-run")
    assert page.evaluate("document.getElementById('compare-out').dataset.state") == "idle"
    run_a = sorted(p.stem for p in entries.glob("plan_path__mas_at_grpo_shared__*.json"))
    seed0 = next(s for s in run_a if json.loads((entries / f"{s}.json").read_text())["seed"] == 0)
    run_b = next(p.stem for p in entries.glob("plan_path__single_prompt__*.json"))
    tick(page, f"{table('plan_path', 'run')} tr[data-id='{seed0}']")
    tick(page, f"{table('plan_path', 'run')} tr[data-id='{run_b}']")
    lines = compare_lines(page)
    code, out, _ = cli_compare(entries, seed0, run_b)
    assert code == 0
    # A: tasks 0-8, B: task 0 -> discordant 8 (A only) and 0: p = 2 / 2^8
    assert lines[-1] == "discordant tasks: A only 8, B only 0; exact two-sided McNemar test on them: p = 0.0078"
    for text in lines[1:]:
        assert text in out.splitlines(), (text, out)
    assert float(page.evaluate("document.getElementById('compare-out').dataset.p")) == 2 / 256
    # A third tick asks for exactly two.
    run_c = next(p.stem for p in entries.glob("plan_path__mas_prompt__*.json"))
    tick(page, f"{table('plan_path', 'run')} tr[data-id='{run_c}']")
    assert "(3 ticked)" in compare_lines(page)[0]
    page.click("#compare-clear")
    # Different eval sets (4x4 vs 5x5) are refused, with the CLI's message.
    page.click("#view-agg")
    tick(page, f"{table('plan_path')} tr[data-id='{ids['mas_prompt']}']")
    tick(page, f"{table('plan_path')} tr[data-id='{ids['single_grpo']}']")
    assert page.evaluate("document.getElementById('compare-out').dataset.state") == "refused"
    code, _, err = cli_compare(entries, ids["mas_prompt"], ids["single_grpo"])
    assert code == 2
    assert compare_lines(page) == [err.strip()]
    page.click("#compare-clear")
    assert page.errors() == []


def test_screenshot(page, tmp_path_factory):
    """Capture the page (kept next to the built site; view it to check the layout by eye)."""
    shot = base64.b64decode(page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"])
    assert shot.startswith(b"\x89PNG")
    path = Path(os.environ.get("LEADERBOARD_SCREENSHOT", tmp_path_factory.mktemp("shot") / "page.png"))
    path.write_bytes(shot)


# ---------------------------------------------------------------- today's entries


VISIBLE_ROWS = """
(() => {
  const skip = new Set(['', 'Row', 'Run', 'Date', 'Label', 'Results file', 'Results files']);
  const out = [];
  for (const t of document.querySelectorAll('table.board')) {
    if (t.offsetParent === null) continue;
    const names = Array.from(t.tHead.rows[0].cells).map(c => c.textContent);
    const rows = Array.from(t.tBodies[0].rows).filter(r => r.offsetParent !== null);
    out.push({env: t.dataset.env, view: t.dataset.view,
              whole: rows.map(r => r.innerText),
              described: rows.map(r => Array.from(r.cells).filter((c, i) => !skip.has(names[i])).map(c => c.innerText).join(' | '))});
  }
  return out;
})()
"""


@pytest.fixture(scope="module")
def today_page(tmp_path_factory):
    out = tmp_path_factory.mktemp("today") / "site"
    build_site(DEFAULT_ENTRIES_DIR, out)
    httpd = serve(out)
    browser, profile = open_page(f"http://127.0.0.1:{httpd.server_address[1]}/index.html")
    try:
        yield browser
    finally:
        browser.close()
        profile.cleanup()
        httpd.shutdown()
        httpd.server_close()


def test_todays_entries_no_two_visible_rows_are_identical(today_page):
    for view in ("agg", "run"):
        today_page.click(f"#view-{view}")
        tables = today_page.evaluate(VISIBLE_ROWS)
        assert tables and {t["view"] for t in tables} == {view}
        for t in tables:
            assert t["whole"], t
            assert len(set(t["whole"])) == len(t["whole"]), (t["env"], view)
            # Even without the id, results file, date and label, the configuration columns differ.
            dupes = {d for d in t["described"] if t["described"].count(d) > 1}
            assert not dupes, (t["env"], view, dupes)
    envs = today_page.evaluate("Array.from(document.querySelectorAll('section.env')).map(s => s.id.slice(4))")
    assert envs == sorted(envs, key=env_sort_key)
    assert today_page.errors() == []

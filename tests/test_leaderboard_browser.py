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

from leaderboard.build import build_site
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
def site(tmp_path_factory) -> Path:
    """A built site with entries on two envs, two model sizes and a hostile label."""
    root = tmp_path_factory.mktemp("board")
    entries, out = root / "entries", root / "site"
    results = [
        sample_result("plan_path", method="mas_at_grpo_shared", successes=[True] * 9 + [False]),
        sample_result("plan_path", method="single_prompt", successes=[True] + [False] * 9, label="<script>alert(1)</script>"),
        sample_result("plan_path", method="mas_prompt", successes=[True] * 4 + [False] * 6,
                      model_id="Qwen3-1.7B", params=1_720_574_976),
        sample_result("sudoku", method="mas_at_grpo_specialized", successes=[True, True, False, True]),
    ]
    for result in results:
        store_entry(result, entries)
    build_site(entries, out)
    return out


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/index.html"
    httpd.shutdown()
    httpd.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep test output clean
        pass


@pytest.fixture(scope="module")
def page(server):
    with tempfile.TemporaryDirectory(prefix="lb-chromium-") as profile:
        browser = PipeCDP(CHROMIUM, profile)
        try:
            browser.call("Page.navigate", url=server)
            browser.wait_for_event("Page.loadEventFired")
            yield browser
        finally:
            browser.close()


def column(page, env: str, col: int, visible_only: bool = False) -> list[str]:
    condition = ".filter(r => !r.classList.contains('hidden'))" if visible_only else ""
    return page.evaluate(
        f"Array.from(document.querySelector('table[data-env={env}]').tBodies[0].rows){condition}"
        f".map(r => r.cells[{col}].textContent)"
    )


def test_page_loads_without_console_errors_and_shows_entries(page):
    assert page.evaluate("document.title") == "stronger-mas leaderboard"
    assert page.evaluate("document.querySelectorAll('table.board').length") == 2
    # Default order: success, descending.
    assert column(page, "plan_path", 0) == ["mas_at_grpo_shared", "mas_prompt", "single_prompt"]
    assert column(page, "sudoku", 0) == ["mas_at_grpo_specialized"]
    assert column(page, "plan_path", 5)[0].startswith("90.0 (")
    # The hostile label is shown as text, not run as a script.
    assert "<script>alert(1)</script>" in column(page, "plan_path", 8)
    assert page.evaluate("document.querySelectorAll('script').length") == 1
    assert page.evaluate("document.getElementById('chart').naturalWidth") > 100  # the embedded PNG decoded
    assert page.errors() == []


def test_clicking_headers_sorts_rows(page):
    page.click("table[data-env=plan_path] th:nth-child(1)")  # Method: ascending
    assert column(page, "plan_path", 0) == ["mas_at_grpo_shared", "mas_prompt", "single_prompt"]
    page.click("table[data-env=plan_path] th:nth-child(1)")  # again: descending
    assert column(page, "plan_path", 0) == ["single_prompt", "mas_prompt", "mas_at_grpo_shared"]
    page.click("table[data-env=plan_path] th:nth-child(6)")  # Success %: numeric, descending first
    assert column(page, "plan_path", 0) == ["mas_at_grpo_shared", "mas_prompt", "single_prompt"]
    page.click("table[data-env=plan_path] th:nth-child(6)")
    assert column(page, "plan_path", 0) == ["single_prompt", "mas_prompt", "mas_at_grpo_shared"]
    assert page.evaluate("document.querySelector('table[data-env=plan_path] th:nth-child(6)').getAttribute('aria-sort')") == "ascending"
    assert page.errors() == []


def test_filters_hide_rows(page):
    def choose(select_id: str, value: str) -> None:
        page.evaluate(
            f"(() => {{ const s = document.getElementById({json.dumps(select_id)}); s.value = {json.dumps(value)};"
            " s.dispatchEvent(new Event('change')); })()"
        )

    assert page.evaluate("Array.from(document.getElementById('filter-size').options).map(o => o.value)") == ["", "135M", "1.72B"]
    choose("filter-size", "1.72B")
    assert column(page, "plan_path", 1, visible_only=True) == ["Qwen3-1.7B"]
    assert column(page, "sudoku", 0, visible_only=True) == []
    assert page.evaluate("document.getElementById('count-plan_path').textContent") == "1 of 3 entries shown"
    choose("filter-size", "")
    choose("filter-method", "mas_at_grpo_specialized")
    assert column(page, "plan_path", 0, visible_only=True) == []
    assert column(page, "sudoku", 0, visible_only=True) == ["mas_at_grpo_specialized"]
    choose("filter-method", "")
    assert len(column(page, "plan_path", 0, visible_only=True)) == 3
    assert page.errors() == []


def test_screenshot(page, tmp_path_factory):
    """Capture the page (kept next to the built site; view it to check the layout by eye)."""
    shot = base64.b64decode(page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"])
    assert shot.startswith(b"\x89PNG")
    path = Path(os.environ.get("LEADERBOARD_SCREENSHOT", tmp_path_factory.mktemp("shot") / "page.png"))
    path.write_bytes(shot)

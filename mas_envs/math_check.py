"""Answer checking for math tasks: is a predicted answer equal to the reference answer?

Two paths:

* **Fast path** for plain numbers (``18``, ``-3.50``, ``1,234``, ``$18``, ``3/4``, ``\\frac{3}{4}``,
  ``18 dollars``, ``10\\%``): both sides become exact fractions. Exactly equal is correct; far apart
  (relative difference > 1e-3) is wrong; close-but-unequal (``0.333333`` vs ``1/3``) is left to
  math-verify, whose float rounding decides.
* **math-verify** for everything else (expressions, tuples, intervals, ...). It runs in one long-lived
  worker *process* with a deadline enforced here: a pathological answer such as ``9^{9^{9^9}}``
  makes the worker miss its deadline, it is killed (a fresh one starts at once, in the background)
  and the answer counts as wrong. (The worker also runs under a 2 GiB address-space limit, so huge
  powers end in ``MemoryError`` rather than eating the machine.) math-verify's own timeouts rely on
  signals that only work in the main thread and cannot interrupt a long C-level big-integer power
  anyway, so they are switched off (``parsing_timeout=None, timeout_seconds=None``).
  Only math-verify's LaTeX extraction is used: its plain-expression extraction feeds text to sympy's
  ``parse_expr``, which evaluates Python, and model output is untrusted.

Verdicts are cached per ``(gold, pred)`` pair (a math-verify check costs 25-100 ms). Nothing here raises
on any input string.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import threading
import time
from fractions import Fraction

DEFAULT_TIMEOUT = 3.0  # seconds one math-verify comparison may take
WORKER_START_TIMEOUT = 60.0  # importing sympy + math-verify on a busy 2-core machine
WORKER_MEMORY_BYTES = 2 << 30
MAX_ANSWER_CHARS = 1000  # longer "answers" are wrong without looking (and never reach sympy)
CACHE_SIZE = 100_000
FAST_PATH_REL_TOL = 1e-3

# ---------------------------------------------------------------------- fast path: plain numbers
# trailing unit words ("18 dollars", "5 square feet"); one-letter words and math words are not units
_UNIT_WORD = re.compile(r"\s+[A-Za-z][A-Za-z.]+(?:\s+[A-Za-z][A-Za-z.]+)*$")
_NOT_UNITS = {"pi", "sqrt", "inf", "infinity", "ln", "log", "sin", "cos", "tan", "exp", "mod", "or", "and"}
_TEXT_CMD = re.compile(r"\\(?:text|textbf|mbox|mathrm)\{[^{}]*\}")
_FRAC = re.compile(r"^(-?)\\[dt]?frac\{(-?\d+)\}\{(-?\d+)\}$")
_SHORT_FRAC = re.compile(r"^(-?)\\[dt]?frac(\d)(\d)$")
_SLASH_FRAC = re.compile(r"^(-?\d+(?:\.\d+)?)\s*/\s*(-?\d+(?:\.\d+)?)$")
_DECIMAL = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")


def parse_plain_number(text: str) -> Fraction | None:
    """``text`` as an exact number if it is a plain number (with $, commas, %, units stripped), else None."""
    s = text.strip()
    if not s or len(s) > 100:
        return None
    s = s.strip("$").strip()
    s = _TEXT_CMD.sub("", s)  # \text{ dollars}
    s = s.replace("\\$", "").replace("\\!", "").replace("\\,", "").replace("{,}", ",")
    s = re.sub(r"\^\{?\\circ\}?$", "", s)  # degrees
    s = re.sub(r"\\?%$", "", s.strip())
    unit = _UNIT_WORD.search(s.strip())
    if unit is not None:
        if _NOT_UNITS.intersection(unit.group().lower().replace(".", " ").split()):
            return None
        s = s.strip()[: unit.start()]
    s = s.strip().rstrip(".").strip()
    if s.startswith("\\left(") or s.startswith("("):
        return None
    try:
        if _THOUSANDS.match(s):
            return Fraction(s.replace(",", ""))
        if _DECIMAL.match(s):
            return Fraction(s)
        m = _SLASH_FRAC.match(s)
        if m:
            den = Fraction(m.group(2))
            return Fraction(m.group(1)) / den if den else None
        m = _FRAC.match(s) or _SHORT_FRAC.match(s)
        if m:
            den = int(m.group(3))
            if not den:
                return None
            value = Fraction(int(m.group(2)), den)
            return -value if m.group(1) else value
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return None


def fast_verdict(pred: str, gold: str) -> bool | None:
    """True/False when both sides are plain numbers and the verdict is clear; None otherwise."""
    a, b = parse_plain_number(pred), parse_plain_number(gold)
    if a is None or b is None:
        return None
    if a == b:
        return True
    scale = max(abs(a), abs(b), Fraction(1))
    if abs(a - b) / scale > FAST_PATH_REL_TOL:
        return False
    return None


# ---------------------------------------------------------------------- math-verify worker
def _python_to_latex(text: str) -> str:
    """Tool agents print Python-style answers; make the common forms readable as LaTeX."""
    text = text.replace("**", "^")
    return re.sub(r"(?<![A-Za-z\\])pi(?![A-Za-z])", r"\\pi", text)


class _VerifyWorker:
    """A child process that answers ``{"gold", "pred"}`` JSON lines with ``1``/``0`` lines."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.owner_pid = -1
        self.ready = False
        self.lock = threading.Lock()
        self.restarts = 0

    def _spawn(self) -> None:
        """Start a worker without waiting for it (sympy imports take a second or more)."""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mas_envs.math_check"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            start_new_session=True,  # a Ctrl-C in the trainer's terminal is the trainer's business
        )
        self.owner_pid = os.getpid()
        self.ready = False

    def _ensure_ready(self) -> None:
        if self.proc is None or self.owner_pid != os.getpid() or self.proc.poll() is not None:
            # (after a fork the pipes belong to the parent: start our own worker)
            self.proc = None
            self._spawn()
        if not self.ready:
            if self._read_line(WORKER_START_TIMEOUT) != "ready":
                self._kill()
                raise RuntimeError("math-verify worker did not start")
            self.ready = True

    def _kill(self) -> None:
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=5)
            except Exception:
                pass
        self.proc = None

    def _read_line(self, timeout: float) -> str | None:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        buf = b""
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 64)
            if not chunk:  # worker died
                return None
            buf += chunk
        return buf.decode().strip()

    def check(self, pred: str, gold: str, timeout: float) -> bool:
        request = (json.dumps({"gold": gold, "pred": pred}) + "\n").encode()
        with self.lock:
            for attempt in range(2):  # a worker that died between checks is replaced once
                self._ensure_ready()
                assert self.proc is not None and self.proc.stdin is not None
                try:
                    self.proc.stdin.write(request)
                    self.proc.stdin.flush()
                    break
                except OSError:
                    self._kill()
                    if attempt:
                        raise
            answer = self._read_line(timeout)
            if answer is None:  # too slow (or crashed): kill it and start a fresh one in the background
                self._kill()
                self.restarts += 1
                self._spawn()
                return False
            return answer == "1"


_worker = _VerifyWorker()
_cache: dict[tuple[str, str], bool] = {}
_cache_lock = threading.Lock()
stats = {"fast": 0, "verify": 0, "cache_hits": 0}


def answers_match(
    pred: str | None,
    gold: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    use_fast_path: bool = True,
    trust_identical: bool = True,
) -> bool:
    """Whether answer ``pred`` (already extracted, e.g. the content of ``\\boxed{}``) equals ``gold``.

    ``use_fast_path=False`` sends plain numbers to math-verify too and ``trust_identical=False`` does
    not short-cut identical strings (both for measuring the checker itself).
    """
    if pred is None:
        return False
    pred, gold = str(pred).strip(), str(gold).strip()
    if not pred or not gold or len(pred) > MAX_ANSWER_CHARS:
        return False
    if pred == gold and trust_identical:
        return True
    if use_fast_path:
        verdict = fast_verdict(pred, gold)
        if verdict is not None:
            stats["fast"] += 1
            return verdict
    key = (pred, gold)  # the cache holds math-verify verdicts only, so the flags need no key
    with _cache_lock:
        if key in _cache:
            stats["cache_hits"] += 1
            return _cache[key]
    stats["verify"] += 1
    try:
        verdict = _worker.check(pred, gold, timeout)  # a timeout is a (cached) False
    except Exception:
        return False  # the worker could not start: never crash a rollout, and do not cache
    with _cache_lock:
        if len(_cache) >= CACHE_SIZE:
            _cache.clear()
        _cache[key] = verdict
    return verdict


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


# ---------------------------------------------------------------------- worker process side
def _verify_in_worker(pred: str, gold: str) -> bool:
    from math_verify import LatexExtractionConfig, parse, verify

    config = [LatexExtractionConfig()]
    gold_parsed = parse("\\boxed{" + gold + "}", extraction_config=config, parsing_timeout=None)
    if not gold_parsed:
        return False
    for candidate in dict.fromkeys([pred, _python_to_latex(pred)]):
        pred_parsed = parse("\\boxed{" + candidate + "}", extraction_config=config, parsing_timeout=None)
        if pred_parsed and verify(gold_parsed, pred_parsed, timeout_seconds=None):
            return True
    return False


def _worker_main() -> None:
    import logging
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    logging.disable(logging.CRITICAL)  # math-verify warns that its timeouts are off: we know
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # stray prints from libraries must not corrupt the protocol
    # warm up sympy's lazy imports before declaring ready, so first checks are not charged for them
    _verify_in_worker("(1, \\frac{\\pi}{2})", "\\left( 1, \\frac{\\pi}{2} \\right)")
    _verify_in_worker("\\sqrt{2}x^2+1", "1+x^2\\sqrt{2}")
    protocol.write("ready\n")
    protocol.flush()
    for line in sys.stdin:
        try:
            req = json.loads(line)
            ok = _verify_in_worker(str(req["pred"]), str(req["gold"]))
        except BaseException:  # MemoryError, RecursionError, sympy errors: the answer is wrong
            ok = False
        protocol.write("1\n" if ok else "0\n")
        protocol.flush()


if __name__ == "__main__":
    _worker_main()

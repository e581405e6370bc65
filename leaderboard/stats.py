"""The leaderboard's statistics: a seeded PRNG, bootstrap intervals and the exact McNemar test.

Everything here is pure Python and deterministic. The PRNG is mulberry32 (a 32-bit generator that is
a few lines in any language); the page's script implements the same generator and the same paired
bootstrap, so the page and ``mas-leaderboard compare`` print the same numbers for the same two rows.

- :func:`hierarchical_bootstrap`: the interval of an aggregated row (several seeds). Each resample
  draws the seeds (runs) with replacement, then, within each drawn seed, that seed's tasks with
  replacement, and takes the mean over the drawn seeds of their resampled success rates. The interval
  is the 2.5th and 97.5th percentile of the resampled means, so it reflects both the seed-to-seed
  spread and the finite number of tasks.
- :func:`paired_bootstrap`: the interval of a paired difference. Each resample draws the shared tasks
  with replacement and takes the mean of the per-task differences ``a_i - b_i``.
- :func:`mcnemar_exact`: exact two-sided McNemar test on the discordant pairs (an exact binomial test
  of ``b`` successes out of ``b + c`` at ``p = 1/2``), with exact integer arithmetic (``math.comb``).
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from typing import Callable, Sequence

BOOTSTRAP_SEED = 20261203
BOOTSTRAP_RESAMPLES = 5000
ALPHA = 0.05
_MASK = 0xFFFFFFFF


def mulberry32(seed: int) -> Callable[[], float]:
    """Uniform floats in [0, 1) from mulberry32 (bit-for-bit the page script's ``mulberry32``)."""
    state = seed & _MASK

    def next_float() -> float:
        nonlocal state
        state = (state + 0x6D2B79F5) & _MASK
        t = ((state ^ (state >> 15)) * (state | 1)) & _MASK
        t = ((t + (((t ^ (t >> 7)) * (t | 61)) & _MASK)) & _MASK) ^ t
        return ((t ^ (t >> 14)) & _MASK) / 4294967296.0

    return next_float


def percentile_interval(stats: Sequence[float], alpha: float = ALPHA) -> tuple[float, float]:
    """(lo, hi) of sorted ``stats``: the values at ranks ``floor(B·alpha/2)`` and ``B-1-floor(B·alpha/2)``."""
    ordered = sorted(stats)
    cut = int(len(ordered) * alpha / 2)
    return ordered[cut], ordered[len(ordered) - 1 - cut]


def hierarchical_bootstrap(
    runs: Sequence[Sequence[int]], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float]:
    """95% interval of the mean success over seeds: resample seeds, then tasks within each seed.

    ``runs`` holds one sequence of per-task outcomes (0/1) per seed, tasks in a fixed order.
    """
    if not runs or any(len(r) == 0 for r in runs):
        raise ValueError("hierarchical_bootstrap needs at least one run, each with at least one task")
    draw = mulberry32(seed)
    s = len(runs)
    stats = []
    for _ in range(resamples):
        total = 0.0
        for _ in range(s):
            run = runs[int(draw() * s)]
            n = len(run)
            wins = 0
            for _ in range(n):
                wins += run[int(draw() * n)]
            total += wins / n
        stats.append(total / s)
    return percentile_interval(stats)


def paired_bootstrap(
    diffs: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float]:
    """95% interval of ``mean(diffs)``, resampling the tasks (the entries of ``diffs``) with replacement."""
    n = len(diffs)
    if n == 0:
        raise ValueError("paired_bootstrap needs at least one shared task")
    draw = mulberry32(seed)
    stats = []
    for _ in range(resamples):
        total = 0.0
        for _ in range(n):
            total += diffs[int(draw() * n)]
        stats.append(total / n)
    return percentile_interval(stats)


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value for ``b`` and ``c`` discordant pairs.

    ``p = min(1, 2 · sum_{k <= min(b, c)} C(b+c, k) / 2^(b+c))``, computed exactly with ``math.comb``
    and rounded to float once; ``p = 1`` when there are no discordant pairs.
    """
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be >= 0")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))


def fixed(value: float, digits: int) -> str:
    """``value`` with ``digits`` decimals, ties away from zero on the exact binary value (as JS ``toFixed``)."""
    quantum = Decimal(1).scaleb(-digits)
    if value == 0:
        value = 0.0  # no "-0.0"
    return str(Decimal(value).quantize(quantum, rounding=ROUND_HALF_UP))


def signed(value: float, digits: int) -> str:
    """Like :func:`fixed` with an explicit ``+`` on non-negative values."""
    text = fixed(value, digits)
    return text if text.startswith("-") else "+" + text


def format_p(p: float) -> str:
    """``p = 0.2188``; ``p < 0.0001`` below that (the page's script formats p the same way)."""
    return "p < 0.0001" if p < 0.0001 else "p = " + fixed(p, 4)

"""Gymnasium spaces for free-form text.

gymnasium's ``Text`` space rejects characters outside its charset (spaces, newlines, unicode by
default), but LLM prompts and completions contain all of those. ``FreeText`` accepts any ``str`` up to
a length, and samples messy strings (unicode, JSON-ish punctuation, newlines) so that PettingZoo's
``api_test`` exercises the envs with garbage actions.
"""

from __future__ import annotations

from typing import Any

from gymnasium.spaces import Space

# Characters random samples are drawn from: ASCII, punctuation used by JSON and code, whitespace,
# and a few non-ASCII code points (accents, CJK, emoji, a right-to-left mark, a NUL).
_SAMPLE_ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    " \n\t{}[]()\"':,.;-_+=*/\\<>#`|~!?@$%^&"
    "éüßñ中文字😀\u200f\x00"
)


class FreeText(Space[str]):
    """Any Python ``str`` of at most ``max_length`` characters."""

    def __init__(self, max_length: int = 1 << 20, sample_length: int = 64, seed: int | None = None):
        self.max_length = int(max_length)
        self.sample_length = int(sample_length)
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        n = int(self.np_random.integers(0, self.sample_length + 1))
        idx = self.np_random.integers(0, len(_SAMPLE_ALPHABET), size=n)
        return "".join(_SAMPLE_ALPHABET[i] for i in idx)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"FreeText(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, FreeText) and other.max_length == self.max_length


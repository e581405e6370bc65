"""The train/test rule shared by generated puzzles: a content hash puts every puzzle in exactly one split,
so the splits are disjoint by construction whatever seeds generated them."""

from __future__ import annotations

import hashlib

TEST_SHARE_OF_256 = 64  # a fixed quarter of all puzzles is test-only


def split_of(canonical_text: str) -> str:
    """``"test"`` for a fixed quarter of all puzzles (by the sha256 of their canonical text), else ``"train"``."""
    return "test" if hashlib.sha256(canonical_text.encode()).digest()[0] < TEST_SHARE_OF_256 else "train"

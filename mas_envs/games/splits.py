"""The train/validation/test rule shared by generated puzzles: a content hash puts every puzzle in exactly one
split, so the splits are disjoint by construction whatever seeds generated them.

The first byte of the sha256 of a puzzle's canonical text picks its split: ``[0, 64)`` test (a quarter),
``[64, 96)`` validation (an eighth), ``[96, 256)`` train. The test bucket is the one the project has always
used, so test sets (and their fingerprints) did not change when the validation split was carved out of train.
"""

from __future__ import annotations

import hashlib

SPLITS = ("train", "validation", "test")
FIXED_SPLITS = ("validation", "test")  # splits that are a fixed, indexed list of tasks
TEST_SHARE_OF_256 = 64
VALIDATION_END_OF_256 = 96  # validation = [TEST_SHARE_OF_256, VALIDATION_END_OF_256)


def split_of(canonical_text: str) -> str:
    """The split (``"train"``, ``"validation"`` or ``"test"``) a puzzle with this canonical text belongs to."""
    first = hashlib.sha256(canonical_text.encode()).digest()[0]
    if first < TEST_SHARE_OF_256:
        return "test"
    return "validation" if first < VALIDATION_END_OF_256 else "train"


def check_split(env_name: str, split: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"{env_name}: split must be one of {', '.join(SPLITS)}, got {split!r}")
    return split

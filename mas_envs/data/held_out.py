"""Carving a validation split out of a dataset's training data, by a hash of each normalised prompt.

A benchmark's test set is fixed by the benchmark; its training data is not. The validation split is a
fixed share of the training data chosen by the first byte of the sha256 of the normalised prompt, so it
is disjoint from the train split by construction and stable however the file is ordered. Train and
validation also drop any problem whose normalised prompt equals one of the test set's, so a duplicated
problem in a benchmark's train file cannot leak into either.
"""

from __future__ import annotations

import hashlib
import re
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")
_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Lower case, whitespace runs collapsed to one space, trimmed: two prompts that differ only in
    layout are the same prompt."""
    return _SPACE.sub(" ", text).strip().lower()


def prompt_hash(text: str) -> str:
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()


def is_validation(text: str, share_of_256: int) -> bool:
    """Whether a training problem with this prompt belongs to the validation split."""
    return _in_validation_bucket(prompt_hash(text), share_of_256)


def _in_validation_bucket(digest_hex: str, share_of_256: int) -> bool:
    return int(digest_hex[:2], 16) < share_of_256


def carve(
    problems: Iterable[T], split: str, prompt_of: Callable[[T], str], share_of_256: int, test_prompts: Iterable[str] = ()
) -> tuple[T, ...]:
    """The ``"train"`` or ``"validation"`` part of a dataset's training problems (see the module docstring)."""
    if split not in ("train", "validation"):
        raise ValueError(f"carve: split must be 'train' or 'validation', got {split!r}")
    banned = {prompt_hash(t) for t in test_prompts}
    want = split == "validation"
    kept = []
    for problem in problems:
        digest = prompt_hash(prompt_of(problem))  # once per problem: it decides both checks
        if digest not in banned and _in_validation_bucket(digest, share_of_256) == want:
            kept.append(problem)
    return tuple(kept)

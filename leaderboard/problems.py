"""``Problem`` (a field path and what is wrong with it) and the error that carries a list of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

ROOT = "(root)"


@dataclass(frozen=True, order=True)
class Problem:
    """One reason a result file is refused: ``path`` is dotted (``summary.ci95[0]``), ``reason`` is prose."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class SubmissionError(Exception):
    """A result file was refused; ``problems`` says every reason found."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def join_path(parts: Iterable[object]) -> str:
    """Render a JSON path (keys and indices) as ``a.b[0].c``; the empty path is ``(root)``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or ROOT


def clip(text: str, limit: int = 160) -> str:
    """Shorten a message that quotes a (possibly huge) submitted value."""
    return text if len(text) <= limit else text[: limit - 3] + "..."

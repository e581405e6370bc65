"""Load Sokoban levels from text files in the standard format.

A file may hold one level or many. Map lines are made of ``# @+$*.`` (and ``-``/``_`` as floor) and
contain a wall; any other line ends the current level. Levels are therefore separated by blank lines,
``;`` comment/title lines, or metadata such as ``Title: ...``; a ``Comment:`` ... ``Comment-End:``
block is skipped whole. A level's name is its ``Title:``/``;`` line when it has one.

The Debian package ``cavepacker-data`` installs classic collections (Microban, Sasquatch, XSokoban,
GRIGoRusha) as one ``.sok`` file per level; :func:`find_cavepacker_levels` finds them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from mas_envs.games.sokoban import Room, State, parse_level

CAVEPACKER_MAPS = Path("/usr/share/games/cavepacker/maps")
_MAP_LINE = re.compile(r"^[ #@+$*.\-_]*#[ #@+$*.\-_]*$")
LEVEL_SUFFIXES = (".sok", ".txt", ".xsb")


@dataclass(frozen=True)
class Level:
    """One level: a name (``source#index`` or its title) and its canonical text."""

    name: str
    text: str

    def parse(self) -> tuple[Room, State]:
        return parse_level(self.text)


def parse_levels(text: str, source: str = "levels") -> list[Level]:
    """Split a file's text into levels (see the module docstring for the format)."""
    levels: list[Level] = []
    rows: list[str] = []
    title: str | None = None
    in_comment = False

    def flush():
        nonlocal rows, title
        if rows:
            index = len(levels) + 1
            name = f"{source}: {title}" if title else f"{source}#{index}"
            levels.append(Level(name, "\n".join(rows)))
            rows, title = [], None

    for raw in text.splitlines():
        line = raw.rstrip("\r\n").rstrip()
        stripped = line.strip()
        if in_comment:
            in_comment = not stripped.lower().startswith("comment-end")
            continue
        if stripped and _MAP_LINE.match(line):
            rows.append(line)
            continue
        flush()
        low = stripped.lower()
        if low.startswith("comment-end"):
            continue
        if low.startswith("comment:") or low == "comment":
            in_comment = low in ("comment:", "comment")  # a one-line "Comment: x" needs no end
            continue
        if stripped.startswith(";"):
            label = stripped.lstrip(";").strip()
            title = label or title
        elif low.startswith("title:"):
            # Titles follow the map in .sok files: name the level just read.
            label = stripped.split(":", 1)[1].strip()
            if label and levels and levels[-1].name.startswith(f"{source}#"):
                levels[-1] = Level(f"{source}: {label}", levels[-1].text)
    flush()
    return levels


def load_levels(path: str | Path, pattern: str = "*") -> list[Level]:
    """Levels from a file, or from every level file in a directory matching ``pattern`` (sorted)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.glob(pattern) if p.suffix.lower() in LEVEL_SUFFIXES)
    elif path.exists():
        files = [path]
    else:
        raise FileNotFoundError(f"no Sokoban level file or directory at {path}")
    out: list[Level] = []
    for f in files:
        found = parse_levels(f.read_text(encoding="utf-8", errors="replace"), source=f.stem)
        if len(found) == 1:  # one level per file (cavepacker): the file name is the clearest name
            found = [Level(f.stem, found[0].text)]
        out += found
    return out


def playable(levels: list[Level]) -> tuple[list[Level], list[tuple[str, str]]]:
    """Split levels into those the rules accept (one player, boxes == goals) and rejects with reasons."""
    good, bad = [], []
    for lv in levels:
        try:
            lv.parse()
        except ValueError as exc:
            bad.append((lv.name, str(exc)))
        else:
            good.append(lv)
    return good, bad


def cavepacker_collections(maps_dir: Path = CAVEPACKER_MAPS) -> dict[str, int]:
    """Installed cavepacker collections (file-name prefix without the number) -> number of level files."""
    counts: dict[str, int] = {}
    if not maps_dir.is_dir():
        return counts
    for f in maps_dir.glob("*.sok"):
        prefix = re.sub(r"\d+$", "", f.stem).rstrip("_")
        counts[prefix] = counts.get(prefix, 0) + 1
    return dict(sorted(counts.items()))


def find_cavepacker_levels(collection: str = "microban", maps_dir: Path = CAVEPACKER_MAPS) -> list[Level]:
    """Playable levels of an installed cavepacker collection whose file names start with ``collection``.

    Returns ``[]`` when ``cavepacker-data`` is not installed (``apt-get install cavepacker-data``).
    """
    if not maps_dir.is_dir():
        return []
    good, _ = playable(load_levels(maps_dir, pattern=f"{collection}*.sok"))
    return good


def parse_solution(text: str) -> list[str]:
    """Moves of a solution in LURD notation (``.sol`` files): case ignored, run lengths such as
    ``3r`` and groups such as ``2(dul)`` expanded. Raises ``ValueError`` on other characters."""
    tokens = re.findall(r"\d+|[lurdLURD]|[()]|\S", "".join(text.split()))
    pos = 0

    def sequence() -> list[str]:
        nonlocal pos
        out: list[str] = []
        while pos < len(tokens) and tokens[pos] != ")":
            count = 1
            if tokens[pos].isdigit():
                count = int(tokens[pos])
                pos += 1
            if pos >= len(tokens):
                raise ValueError("solution ends after a count")
            tok = tokens[pos]
            pos += 1
            if tok == "(":
                inner = sequence()
                if pos >= len(tokens) or tokens[pos] != ")":
                    raise ValueError("unclosed '(' in solution")
                pos += 1
                out += inner * count
            elif tok.lower() in "lurd":
                out += [tok.upper()] * count
            else:
                raise ValueError(f"unexpected {tok!r} in solution")
        return out

    moves = sequence()
    if pos != len(tokens):
        raise ValueError("unbalanced ')' in solution")
    return moves

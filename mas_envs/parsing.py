"""Lenient parsing of LLM output: code blocks, action lists, boxed answers.

Every function returns ``(value, error)``: ``error`` is ``None`` on success, else a short reason that the
env reports as ``infos[agent]["parse_error"]``. Nothing here raises on any input string.
"""

from __future__ import annotations

import json
import re

MAX_PARSE_CHARS = 20_000  # longer outputs are cut before parsing (a degenerate 1 MB completion must stay cheap)

_FENCE_OPEN = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n")  # an opening fence and its language tag
_PYTHON_TAGS = {"python", "python3", "py"}


def extract_code_block(text: str) -> tuple[str | None, str | None]:
    """The code of the reply: the last block fenced as Python, else the last plain fenced block.

    An unterminated final block counts (a reply cut by its token budget). A Python-tagged block wins over
    untagged ones: models often quote the input (a grid) in a plain block before writing their program.
    """
    text = text[:MAX_PARSE_CHARS]
    blocks: list[tuple[bool, str]] = []  # (tagged as python, code)
    position = 0
    while (m := _FENCE_OPEN.search(text, position)) is not None:
        tag = (m.group(1) or "").lower()
        end = text.find("```", m.end())
        code = text[m.end():] if end < 0 else text[m.end():end]
        if tag in _PYTHON_TAGS or not tag:
            blocks.append((bool(tag), code))
        if end < 0:
            break
        position = end + 3
    if not blocks:
        return None, "no ```python code block found"
    tagged = [code for is_python, code in blocks if is_python]
    code = tagged[-1] if tagged else blocks[-1][1]
    if not code.strip():
        return None, "empty code block"
    return code, None


DIRECTION_WORDS = {
    "U": "U", "UP": "U", "NORTH": "U", "N": "U",
    "D": "D", "DOWN": "D", "SOUTH": "D", "S": "D",
    "L": "L", "LEFT": "L", "WEST": "L", "W": "L",
    "R": "R", "RIGHT": "R", "EAST": "R", "E": "R",
}
_JSON_LIST = re.compile(r"\[[^\[\]]*\]")
_WORD = re.compile(r"[A-Za-z]+")
_PROSE_DIRECTION = re.compile(r"\b(up|down|left|right)\b", re.IGNORECASE)


def parse_move_list(text: str, max_moves: int = 64) -> tuple[list[str] | None, str | None]:
    """Parse moves from ``["U","R"]``, ``[up, right]``, ``Answer: up`` or a bare ``left``.

    Preference: the last JSON-ish list in the text (LLMs state the answer last); otherwise, when the
    whole answer is one or a few direction words, those words.
    """
    text = text[:MAX_PARSE_CHARS]
    lists = _JSON_LIST.findall(text)
    for candidate in reversed(lists):
        moves = _moves_from_list_text(candidate)
        if moves is not None:
            if not moves:
                return None, "empty action list"
            if len(moves) > max_moves:
                return None, f"too many moves ({len(moves)} > {max_moves})"
            return moves, None
    # No usable list: accept a short answer made only of direction words, e.g. "up" or "Answer: left".
    tail = text.strip().splitlines()[-1] if text.strip() else ""
    tail = re.sub(r"^\s*(final\s+)?(answer|action|actions|move|moves)\s*[:=-]\s*", "", tail, flags=re.I)
    words = _WORD.findall(tail)
    if words and len(words) <= max_moves and all(w.upper() in DIRECTION_WORDS for w in words):
        return [DIRECTION_WORDS[w.upper()] for w in words], None
    if lists:
        return None, "action list contains something other than U/D/L/R"
    # Last resort, for small models that answer in prose ("I would move left"): the first full
    # direction word counts as one move. Single letters are not accepted here (they occur in prose).
    m = _PROSE_DIRECTION.search(text)
    if m:
        return [DIRECTION_WORDS[m.group(1).upper()]], None
    return None, "no action list found (expected e.g. [\"U\", \"R\"])"


def _moves_from_list_text(candidate: str) -> list[str] | None:
    try:
        items = json.loads(candidate)
    except (ValueError, RecursionError):
        items = [t.strip().strip("'\"") for t in candidate[1:-1].split(",") if t.strip()]
    if not isinstance(items, list):
        return None
    moves = []
    for item in items:
        if not isinstance(item, str) or item.strip().upper() not in DIRECTION_WORDS:
            return None
        moves.append(DIRECTION_WORDS[item.strip().upper()])
    return moves


def extract_boxed(text: str) -> tuple[str | None, str | None]:
    """Content of the last ``\\boxed{...}`` (nested braces allowed)."""
    text = text[:MAX_PARSE_CHARS]
    start = text.rfind("\\boxed{")
    if start < 0:
        return None, "no \\boxed{...} answer found"
    i = start + len("\\boxed{")
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                content = text[i:j].strip()
                return (content, None) if content else (None, "empty \\boxed{}")
    return None, "unterminated \\boxed{"


# GSM8K's native final-answer line, as the standard GSM8K evaluation reads it: "#### 1,234" -> "1234".
_GSM8K_FINAL = re.compile(r"####[ \t]*\$?[ \t]*(-?[0-9][0-9,]*(?:\.[0-9]+)?)")


def extract_final_answer(text: str) -> tuple[str | None, str | None]:
    """The final answer of a math reply: the last ``\\boxed{...}``; without one, the number on the last
    ``#### N`` line (GSM8K's format; thousands separators dropped). ``(answer, None)`` or ``(None, why)``."""
    boxed, error = extract_boxed(text)
    if error is None:
        return boxed, None
    finals = _GSM8K_FINAL.findall(text[:MAX_PARSE_CHARS])
    if finals:
        return finals[-1].replace(",", ""), None
    if "####" in text[:MAX_PARSE_CHARS]:
        return None, "'####' is not followed by a number"
    return None, f"{error} and no '#### N' line"


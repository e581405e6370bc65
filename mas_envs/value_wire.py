"""Plain data between grading processes: a typed, size-capped encoding of Python values.

A program under test hands the grader only what this encoding can carry: ``None``, ``bool``, ``int``,
``float``, ``complex``, ``str``, ``bytes`` and ``list`` / ``tuple`` / ``dict`` / ``set`` / ``frozenset``
of those, each checked by its *exact* type. An object of any other class -- a subclass of ``int`` or
``list``, an object whose ``__eq__`` always says True, a generator -- is refused with
:class:`WireError`, so the value the tests compare against is always a real builtin value built by the
grading side, never the program's own object.

Every value is a JSON list ``[tag, payload]``; numbers travel as text (``repr``), so ``1``, ``True`` and
``1.0`` stay distinct and ``nan`` / ``inf`` survive. Sets are sorted by their encoded items, so equal
sets encode the same in every process (string hashing is randomised per process).

This module is self-contained on purpose: the grading harnesses run in the sandbox, which cannot
import this package, so :mod:`mas_envs.grading_harness` pastes this module's source into them.
"""

import json

MAX_NODES = 100_000  # values (containers and scalars) in one encoded value
MAX_DEPTH = 60  # nesting of containers
MAX_TEXT = 200_000  # characters of str/bytes/number text in one encoded value
MAX_INT_DIGITS = 4_000

_SCALARS = {type(None): "none", bool: "bool", int: "int", float: "float", complex: "complex", str: "str", bytes: "bytes"}
_CONTAINERS = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset", dict: "dict"}


class WireError(ValueError):
    """A value that cannot travel: not plain data, too large, too deep, or a malformed encoding."""


class _Budget:
    __slots__ = ("nodes", "text")

    def __init__(self):
        self.nodes = MAX_NODES
        self.text = MAX_TEXT

    def spend(self, text_len=0):
        self.nodes -= 1
        self.text -= text_len
        if self.nodes < 0 or self.text < 0:
            raise WireError("the value is too large to grade")


def encode(value):
    """``value`` as a JSON-ready tagged tree; raises :class:`WireError` for anything else."""
    return _encode(value, 0, _Budget())


def _encode(value, depth, budget):
    kind = type(value)
    tag = _SCALARS.get(kind)
    if tag is not None:
        if tag == "none":
            budget.spend()
            return ["none"]
        if tag == "bool":
            budget.spend()
            return ["bool", bool(value)]
        if tag == "int":
            text = int.__repr__(value)
            if len(text) > MAX_INT_DIGITS:
                raise WireError("an integer with too many digits")
        elif tag == "float":
            text = float.__repr__(value)
        elif tag == "complex":
            text = [float.__repr__(value.real), float.__repr__(value.imag)]
            budget.spend(len(text[0]) + len(text[1]))
            return ["complex", text]
        elif tag == "str":
            text = str.__str__(value)
        else:
            text = bytes.hex(value)
        budget.spend(len(text))
        return [tag, text]
    tag = _CONTAINERS.get(kind)
    if tag is None:
        raise WireError(f"a value of type {kind.__name__!s:.60} is not plain data")
    if depth >= MAX_DEPTH:
        raise WireError("the value is nested too deeply")
    budget.spend()
    if tag == "dict":
        return ["dict", [[_encode(k, depth + 1, budget), _encode(v, depth + 1, budget)] for k, v in dict.items(value)]]
    items = [_encode(item, depth + 1, budget) for item in (list(value) if tag in ("set", "frozenset") else value)]
    if tag in ("set", "frozenset"):
        items.sort(key=lambda item: json.dumps(item, separators=(",", ":")))
    return [tag, items]


def decode(tree):
    """The value an :func:`encode` tree stands for, built fresh; raises :class:`WireError` if malformed."""
    try:
        return _decode(tree, 0, _Budget())
    except WireError:
        raise
    except (TypeError, ValueError, OverflowError, RecursionError, MemoryError) as exc:
        raise WireError(f"malformed value: {type(exc).__name__}") from None


def _decode(tree, depth, budget):
    if type(tree) is not list or not tree or type(tree[0]) is not str:
        raise WireError("malformed value")
    tag = tree[0]
    if tag == "none" and len(tree) == 1:
        budget.spend()
        return None
    if len(tree) != 2:
        raise WireError("malformed value")
    payload = tree[1]
    if tag == "bool" and type(payload) is bool:
        budget.spend()
        return payload
    if tag in ("int", "float", "str", "bytes") and type(payload) is str:
        budget.spend(len(payload))
        if tag == "int":
            if len(payload) > MAX_INT_DIGITS + 1:
                raise WireError("an integer with too many digits")
            return int(payload)
        if tag == "float":
            return float(payload)
        return payload if tag == "str" else bytes.fromhex(payload)
    if tag == "complex" and type(payload) is list and len(payload) == 2 and all(type(p) is str for p in payload):
        budget.spend(len(payload[0]) + len(payload[1]))
        return complex(float(payload[0]), float(payload[1]))
    if tag in _CONTAINER_TAGS and type(payload) is list:
        if depth >= MAX_DEPTH:
            raise WireError("the value is nested too deeply")
        budget.spend()
        if tag == "dict":
            out = {}
            for pair in payload:
                if type(pair) is not list or len(pair) != 2:
                    raise WireError("malformed value")
                out[_decode(pair[0], depth + 1, budget)] = _decode(pair[1], depth + 1, budget)
            return out
        items = [_decode(item, depth + 1, budget) for item in payload]
        return _CONTAINER_TAGS[tag](items)
    raise WireError("malformed value")


_CONTAINER_TAGS = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset, "dict": dict}


def call_key(args, kwargs):
    """The canonical text of a call's arguments: equal arguments give equal keys in any process."""
    return json.dumps([encode(list(args)), encode(dict(kwargs))], separators=(",", ":"))


def call_of_key(key):
    """``(args, kwargs)`` rebuilt from :func:`call_key`'s text."""
    try:
        pair = json.loads(key)
    except (TypeError, ValueError, RecursionError):
        raise WireError("malformed call") from None
    if type(pair) is not list or len(pair) != 2:
        raise WireError("malformed call")
    args, kwargs = decode(pair[0]), decode(pair[1])
    if type(args) is not list or type(kwargs) is not dict or not all(type(k) is str for k in kwargs):
        raise WireError("malformed call")
    return args, kwargs

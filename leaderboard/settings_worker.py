"""Which env kwargs of stored entries differ from the env's defaults, computed in a child process.

Protocol: read ``{"items": [{"name", "workflow", "kwargs"}, ...]}`` as JSON on stdin, write
``{"results": [{"non_default": [key, ...]} | {"error": text}, ...]}`` on stdout, one per item.

A key ``k`` is at its default when the env built from the other kwargs (``kwargs`` without ``k``)
ends up with the same value: its attribute ``k`` if it has one, else the constructor's default for
``k``. So defaults that depend on other settings count (``plan_path`` with ``preset="4x4"`` defaults
``max_turns`` to 8). Only registered env names are looked up; kwargs are plain JSON values.
"""

from __future__ import annotations

import inspect
import json
import sys
from typing import Any

_MISSING = object()


def _signature_default(cls: type, key: str) -> Any:
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        param = inspect.signature(init).parameters.get(key)
        if param is not None and param.default is not inspect.Parameter.empty:
            return param.default
    return _MISSING


def same_value(a: Any, b: Any) -> bool:
    """Equal as settings: numbers by value (``-6 == -6.0``), sequences element-wise, else ``==``."""
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return float(a) == float(b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def non_default(name: str, workflow: str, kwargs: dict[str, Any]) -> list[str]:
    from mas_envs import make_env
    from mas_envs.registry import env_class

    cls = env_class(name)
    changed = []
    for key, value in sorted(kwargs.items()):
        if key in ("workflow", "split"):
            continue
        rest = {k: v for k, v in kwargs.items() if k not in (key, "workflow", "split")}
        env = make_env(name, split="test", workflow=workflow, **rest)
        try:
            default = getattr(env.unwrapped, key, _MISSING)
        finally:
            env.close()
        if default is _MISSING:
            default = _signature_default(cls, key)
        if default is _MISSING or not same_value(default, value):
            changed.append(key)
    return changed


def main() -> int:
    request = json.load(sys.stdin)
    results = []
    for item in request["items"]:
        try:
            results.append({"non_default": non_default(item["name"], item["workflow"], item["kwargs"])})
        except Exception as exc:  # the caller then shows every kwarg
            results.append({"error": f"{type(exc).__name__}: {exc}"})
    json.dump({"results": results}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

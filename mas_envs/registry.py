"""Environment registry: ``make_env(name, **kwargs)``, ``list_envs()``, and PettingZoo registration."""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import pettingzoo

from mas_envs.core.branching import BranchableOrderEnforcingWrapper

# name -> "module:Class"; classes are imported lazily so `import mas_envs` stays fast.
_ENVS: dict[str, str] = {
    "plan_path": "mas_envs.envs.plan_path:PlanPathEnv",
    "sokoban": "mas_envs.envs.sokoban:SokobanEnv",
    "sudoku": "mas_envs.envs.sudoku:SudokuEnv",
    "coder_tester": "mas_envs.envs.coder_tester:CoderTesterEnv",
    "math_tool": "mas_envs.envs.math_tool:MathToolEnv",
}


def list_envs() -> list[str]:
    """Names accepted by :func:`make_env` whose module is present."""
    return [n for n in _ENVS if importlib.util.find_spec(_ENVS[n].split(":")[0]) is not None]


def env_class(name: str) -> type:
    if name not in _ENVS:
        raise ValueError(f"unknown env {name!r}; available: {', '.join(list_envs())}")
    module_name, cls_name = _ENVS[name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ValueError(f"env {name!r} is not available in this install: {exc}") from exc
    return getattr(module, cls_name)


def env_init_kwargs(name: str) -> set[str]:
    """Keyword arguments env ``name``'s constructor accepts (its own and its base classes')."""
    import inspect

    names: set[str] = set()
    for cls in env_class(name).__mro__:
        init = cls.__dict__.get("__init__")
        if init is not None:
            names |= {n for n, p in inspect.signature(init).parameters.items()
                      if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and n != "self"}
    return names


def make_env(name: str, **kwargs: Any) -> BranchableOrderEnforcingWrapper:
    """Create env ``name`` wrapped for PettingZoo use; ``env.clone()`` keeps the wrapper."""
    return BranchableOrderEnforcingWrapper(env_class(name)(**kwargs))


def _pettingzoo_entry(name: str):
    def create(**kwargs: Any):
        return make_env(name, **kwargs)

    create.__name__ = f"make_{name}"
    return create


def register_with_pettingzoo() -> None:
    """Register every env as ``pettingzoo.make("aec", "mas_envs/<name>-v0")``."""
    for name in _ENVS:
        env_id = f"mas_envs/{name}-v0"
        if env_id not in pettingzoo.aec_registry:
            pettingzoo.register("aec", env_id, entry_point=_pettingzoo_entry(name))

"""stronger-mas environments: PettingZoo AEC envs where LLM agents with roles cooperate.

    from mas_envs import make_env
    env = make_env("plan_path", workflow="mas")
"""

from mas_envs.core.branching import clone
from mas_envs.core.text_env import StepResult, TextAECEnv
from mas_envs.registry import env_class, list_envs, make_env, register_with_pettingzoo

__version__ = "0.1.0"
__all__ = ["make_env", "list_envs", "env_class", "clone", "TextAECEnv", "StepResult", "__version__"]

register_with_pettingzoo()

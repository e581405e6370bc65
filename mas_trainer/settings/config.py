"""``ATGRPOConfig``: every knob of an AT-GRPO run, as one documented dataclass.

It extends :class:`trl.GRPOConfig`, so TRL's fields keep their meaning (``num_generations`` is K, the
number of branches per (episode, turn, agent) group; ``loss_type``, ``beta``, ``epsilon``,
``learning_rate``, ``logging_steps``, ``save_steps``, ``report_to`` ...). It adds what a multi-agent,
environment-driven run needs (the env, the workflow, the policy layout, the grouping) and changes the
TRL defaults that hurt on a CPU (bf16, gradient checkpointing, 512-token completions, lr 1e-6).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from trl import GRPOConfig

from mas_envs.registry import env_init_kwargs, list_envs
from mas_trainer.settings.dtypes import MODEL_DTYPES
from mas_trainer.settings.envs import ENV_DEFAULTS, default_max_new_tokens, default_role_budgets, preset_env_kwargs
from mas_trainer.settings.optional import VLLM_INSTALL_HINT, vllm_available
from mas_trainer.settings.ray_resources import parse_ray_resources
from mas_trainer.settings.role_maps import parse_json_object, parse_role_map

POLICY_MODES = ("shared", "specialized", "lora")
GROUPINGS = ("at_grpo", "trajectory")
WORKFLOWS = ("mas", "single")
BACKENDS = ("local", "ray")


@dataclass
class ATGRPOConfig(GRPOConfig):
    r"""Configuration of an AT-GRPO run (:class:`mas_trainer.run.trainer.MASTrainer`).

    Parameters added to :class:`trl.GRPOConfig`:

        > What is trained

        model (`str`, defaults to `"smollm2-135m"`):
            A preset of :mod:`mas_trainer.policies.models` (``"smollm2-135m"``, ``"tiny"`` ...), a local folder or a
            Hugging Face model id.
        role_dtype (`str`, *optional*):
            The weights' dtype per role (``"tool=bfloat16,planner=float32"``), overriding TRL's
            ``model_init_kwargs={"dtype": ...}``, which sets it for every policy; default float32 (TRL's
            default too). Sampling and the update both use the policy's weights in that dtype, so sampling
            stays on-policy. bf16 is a per-machine choice: ~2x on CPUs with AMX/AVX-512 BF16 and on GPUs,
            ~50x slower on an AVX2-only CPU, and greedy tokens change (docs/PERFORMANCE.md). Of
            ``model_init_kwargs`` only ``dtype`` (or ``torch_dtype``) is used; other keys are refused.
        policy_mode (`str`, defaults to `"shared"`):
            ``"shared"``: one model (and optimizer) for every role. ``"specialized"``: one model and one
            optimizer per role; a role's samples update only its own model. ``"lora"``: one frozen base
            model plus one LoRA adapter (and optimizer) per role; a role's samples update only its
            adapter (:mod:`mas_trainer.policies.lora`). With a single-role workflow, ``lora`` trains one adapter
            named ``shared`` (a memory-cheap shared policy).
        lora_r (`int`, defaults to `16`):
            LoRA rank (``policy_mode="lora"`` only; the ``lora_*`` names follow ``trl.ModelConfig``).
        lora_alpha (`float`, defaults to `32`):
            LoRA scaling numerator: the adapter's update is scaled by ``lora_alpha / lora_r``.
        lora_dropout (`float`, defaults to `0.0`):
            Dropout on the adapter's input during updates (0: the update sees exactly what sampling saw).
        lora_target_modules (`list[str]`, *optional*):
            Module names that get an adapter; default every linear layer but the output head (on
            Llama/Qwen models: the q/k/v/o attention and gate/up/down MLP projections).

        > The environment

        env (`str`, defaults to `"plan_path"`):
            Name accepted by :func:`mas_envs.make_env`.
        env_kwargs (`dict` or JSON `str`, *optional*):
            Extra keyword arguments for ``make_env`` (e.g. ``{"preset": "4x4"}``). ``workflow``, ``alpha``,
            ``max_turns`` and ``split`` are set from the fields below and must not appear here.
        workflow (`str`, defaults to `"mas"`):
            ``"mas"``: the env's multi-agent workflow (e.g. tool + planner). ``"single"``: one solver role.
        alpha (`float`, defaults to `1.0`):
            Reward mixing: an agent's reward is ``alpha * team + local``.
        max_turns (`int`, *optional*):
            Turns per episode before truncation; default: the env's own (Plan-Path: twice the grid size).
        envs_per_step (`int`, defaults to `8`):
            Episodes rolled out per training step (each spawns K branches per agent turn).
        turns_per_step (`int`, *optional*):
            ``None``: every step plays ``envs_per_step`` fresh episodes to the end. A number ``n``
            (``grouping="at_grpo"`` only): ``envs_per_step`` episodes stay in progress across steps, each
            step advances every one of them by ``n`` whole turns (a turn: every role acts once, so
            every update holds groups of every role) and updates on those samples, and an
            episode that ends is replaced by a fresh task. Turn-level steps are ~``max_turns`` times
            cheaper, so the policy is updated far more often per minute (what a CPU run needs); the
            samples are still on-policy (drawn by the current weights).

        > The algorithm

        grouping (`str`, defaults to `"at_grpo"`):
            ``"at_grpo"``: tree sampling with groups keyed by (episode, turn, agent).
            ``"trajectory"``: K whole trajectories per task grouped by the initial prompt (the
            trajectory-level GRPO baseline).
        skip_zero_variance_groups (`bool`, defaults to `True`):
            Leave groups whose rewards are all equal out of the update: their advantage is zero, so they
            only cost compute (their share is still logged as ``zero_variance_share``).
        rollout_backend (`str`, defaults to `"auto"`):
            How rollout workers sample: ``"prefix_shared"`` prefills each distinct prompt once for its K
            branches (:mod:`mas_trainer.policies.prefix_sharing`), ``"hf"`` uses ``transformers`` ``generate``
            (K prefills per prompt), ``"auto"`` the first when that module is present, ``"vllm"`` an
            in-process vLLM engine per policy (:mod:`mas_trainer.policies.vllm_engine`; needs vLLM, see docs/VLLM.md;
            engine settings from ``vllm_gpu_memory_utilization`` and ``vllm_max_model_length``).
        > Where it runs

        backend (`str`, defaults to `"local"`):
            ``"local"``: every worker in this process. ``"ray"``: one Ray actor per policy for generation
            and one for updates, plus a pool of env actors (:mod:`mas_trainer.backends.ray`, docs/RAY.md);
            needs ``pip install 'stronger-mas[ray]'``.
        ray_address (`str`, *optional*):
            Ray cluster to join (e.g. ``"auto"`` or ``"ray://head:10001"``); default: start a local
            cluster bound to 127.0.0.1.
        ray_env_workers (`int`, defaults to `2`):
            Env actors that step the branches of each rollout.
        ray_resources (`dict` or JSON `str`, *optional*):
            Resources per actor kind, e.g. ``{"rollout": {"num_gpus": 0.5}, "update": {"num_gpus": 0.5},
            "env": {"num_cpus": 1}}``; kinds left out keep their default (GPU cluster: half a GPU each for a
            policy's rollout and update actor, which share one GPU; CPU cluster: one CPU per actor).

        rollout_seed (`int`, *optional*):
            Seed of the env tasks and sampling; defaults to ``seed``. Step ``s`` resets its envs with seeds
            ``rollout_seed + s * envs_per_step + i``.

    Defaults changed from TRL for CPU runs: ``learning_rate=1e-5``, ``bf16`` only on a bf16-capable GPU,
    ``gradient_checkpointing=False``, ``max_completion_length`` sized to the env's answer format
    (:func:`mas_trainer.settings.envs.default_max_new_tokens`: e.g. Plan-Path 8 single / 48 mas, Sokoban
    32 / 96, 4x4 Sudoku 64 / 128), ``logging_steps=1``,
    ``save_steps=10``, ``save_total_limit=2``, ``max_steps=100``, ``per_device_train_batch_size=16`` (the
    update micro-batch, in samples).
    """

    # ---- added fields
    model: str = field(
        default="smollm2-135m",
        metadata={"help": "Model preset, local folder or HF model id; or one per role, "
                          "'tool=qwen2.5-coder-0.5b,planner=smollm2-135m' (policy_mode specialized)."},
    )
    role_max_completion_length: str | None = field(
        default=None,
        metadata={"help": "Per-role answer budgets overriding max_completion_length, e.g. 'tool=320,planner=8'."},
    )
    role_temperature: str | None = field(
        default=None,
        metadata={"help": "Per-role sampling temperatures overriding temperature, e.g. 'tool=0.7,planner=1.0'."},
    )
    role_dtype: str | None = field(
        default=None,
        metadata={"help": "Per-role weight dtype overriding model_init_kwargs['dtype'], e.g. 'tool=bfloat16,planner=float32' "
                          "(policy_mode specialized; shared and lora take one dtype)."},
    )
    policy_mode: str = field(
        default="shared",
        metadata={"help": "shared | specialized (one model per role) | lora (one base + one LoRA adapter per role)."},
    )
    lora_r: int = field(default=16, metadata={"help": "LoRA rank (policy_mode lora)."})
    lora_alpha: float = field(default=32, metadata={"help": "LoRA alpha: the adapter is scaled by alpha / r."})
    lora_dropout: float = field(default=0.0, metadata={"help": "Dropout on the adapter input during updates."})
    lora_target_modules: list[str] | None = field(
        default=None,
        metadata={"help": "Modules that get a LoRA adapter (default: every linear layer but the output head)."},
    )
    env: str = field(default="plan_path", metadata={"help": "Environment name (mas_envs.make_env)."})
    env_kwargs: dict[str, Any] | str | None = field(
        default=None, metadata={"help": "Extra make_env keyword arguments, as a dict or JSON string."}
    )
    workflow: str = field(default="mas", metadata={"help": "mas (multi-agent workflow) | single (one solver)."})
    alpha: float = field(default=1.0, metadata={"help": "Reward mixing: alpha * team reward + local reward."})
    max_turns: int | None = field(
        default=None, metadata={"help": "Turns per episode before truncation (default: the env's, 2 x size for Plan-Path)."}
    )
    envs_per_step: int = field(default=8, metadata={"help": "Episodes rolled out per training step."})
    turns_per_step: int | None = field(
        default=None,
        metadata={"help": "None: whole fresh episodes per step. n: episodes persist across steps; each step "
                          "advances them n agent turns (at_grpo only)."},
    )
    grouping: str = field(
        default="at_grpo", metadata={"help": "at_grpo (episode, turn, agent) groups | trajectory (baseline)."}
    )
    skip_zero_variance_groups: bool = field(
        default=True, metadata={"help": "Leave all-equal-reward groups out of the update (zero advantage)."}
    )
    backend: str = field(default="local", metadata={"help": "local (one process) | ray (actors per policy, env actors)."})
    ray_address: str | None = field(
        default=None, metadata={"help": "Ray cluster address to join (default: start a local cluster on 127.0.0.1)."}
    )
    ray_env_workers: int = field(default=2, metadata={"help": "Ray backend: env actors stepping rollout branches."})
    ray_resources: dict[str, Any] | str | None = field(
        default=None,
        metadata={"help": 'Ray backend: resources per actor kind as JSON, e.g. {"update": {"num_gpus": 1}}.'},
    )
    rollout_seed: int | None = field(default=None, metadata={"help": "Seed of env tasks and sampling (default: seed)."})
    rollout_backend: str = field(
        default="auto",
        metadata={"help": "Sampling backend: auto (prefix-shared when available) | prefix_shared | hf (transformers generate)"
                " | vllm (in-process vLLM engine)."},
    )

    # ---- TRL defaults changed for CPU runs
    learning_rate: float = field(default=1e-5, metadata={"help": "Initial AdamW learning rate."})
    bf16: bool | None = field(
        default=None, metadata={"help": "bf16 mixed precision; default: only on a GPU that supports it."}
    )
    gradient_checkpointing: bool | None = field(
        default=None, metadata={"help": "Activation checkpointing (default off: the models here are small)."}
    )
    max_completion_length: int | None = field(
        default=None,
        metadata={"help": "Max new tokens per agent action; default: sized to the env's answer format "
                          "(e.g. Plan-Path 8 single / 48 mas, Sokoban 32 / 96, 4x4 Sudoku 64 / 128)."},
    )
    logging_steps: float = field(default=1, metadata={"help": "Log every X training steps."})
    save_steps: float = field(default=10, metadata={"help": "Checkpoint every X training steps."})
    save_total_limit: int | None = field(default=2, metadata={"help": "Checkpoints kept (oldest deleted)."})
    max_steps: int = field(default=100, metadata={"help": "Number of training steps (rollout + update)."})
    per_device_train_batch_size: int = field(
        default=16, metadata={"help": "Update micro-batch size, in samples (gradients are accumulated)."}
    )

    def __post_init__(self):
        self._validate_own_fields()
        if self.bf16 is None:
            self.bf16 = _gpu_supports_bf16()
        if self.output_dir is None:
            self.output_dir = "runs/atgrpo"
        # TRL derives generation_batch_size = per_device_train_batch_size * steps_per_generation and wants it
        # divisible by K. Our rollouts size themselves (envs x K per agent turn), so pick a value that
        # satisfies TRL whatever K is.
        if self.generation_batch_size is None and self.steps_per_generation is None:
            self.generation_batch_size = _lcm(self.per_device_train_batch_size, self.num_generations)
        super().__post_init__()

    # ---- per-role settings
    def _validate_role_maps(self) -> None:
        models = parse_role_map(self.model, "model", str)
        if isinstance(models, dict):
            if self.policy_mode == "shared" and len(set(models.values())) > 1:
                raise ValueError("one model per role needs policy_mode='specialized'; policy_mode='shared' "
                                 f"trains one model for every role, got {self.model!r}")
            if self.policy_mode == "lora" and len(set(models.values())) > 1:
                raise ValueError("policy_mode='lora' puts every role's adapter on ONE base model; for a model per "
                                 f"role use policy_mode='specialized' (got {self.model!r})")
        self.model_init_kwargs = _parse_model_init_kwargs(self.model_init_kwargs) or None  # TRL's "not set"
        dtypes = parse_role_map(self.role_dtype, "role_dtype", str)
        for role, value in (dtypes.items() if isinstance(dtypes, dict) else []):  # one for all: model_init_kwargs
            if value not in MODEL_DTYPES:
                raise ValueError(f"role_dtype: {role}={value!r} is not one of {', '.join(MODEL_DTYPES)}")
        if isinstance(dtypes, dict) and self.policy_mode != "specialized" and len(set(dtypes.values())) > 1:
            raise ValueError(f"a dtype per role needs policy_mode='specialized'; {self.policy_mode} keeps one model "
                             f"for every role, got role_dtype={self.role_dtype!r}")
        for name in ("role_max_completion_length", "role_temperature", "role_dtype"):
            text = getattr(self, name)
            if text is not None and "=" not in str(text):
                raise ValueError(f"{name} takes role=value entries (e.g. 'tool=320,planner=8'), got {text!r}")
        budgets = parse_role_map(self.role_max_completion_length, "role_max_completion_length", int)
        for role, value in (budgets or {}).items():
            if value < 1:
                raise ValueError(f"role_max_completion_length: {role}={value} must be a positive integer")
        temperatures = parse_role_map(self.role_temperature, "role_temperature", float)
        for role, value in (temperatures or {}).items():
            if not value > 0:
                raise ValueError(f"role_temperature: {role}={value} must be > 0 for sampling")

    def check_roles(self, roles: list[str]) -> None:
        """Raise ``ValueError`` if a per-role setting names a role the env does not have."""
        for name in ("model", "role_max_completion_length", "role_temperature", "role_dtype"):
            mapping = parse_role_map(getattr(self, name), name, str)
            if isinstance(mapping, dict):
                unknown = sorted(set(mapping) - set(roles))
                missing = sorted(set(roles) - set(mapping)) if name == "model" else []
                if unknown or missing:
                    raise ValueError(f"{name}={getattr(self, name)!r}: "
                                     + (f"unknown role(s) {unknown}; " if unknown else "")
                                     + (f"no model for role(s) {missing}; " if missing else "")
                                     + f"{self.env} ({self.workflow}) has roles {roles}")

    def model_for(self, policy: str) -> str:
        """The model a policy loads: the per-role entry (specialized), else the one model."""
        models = parse_role_map(self.model, "model", str)
        if not isinstance(models, dict):
            return self.model
        if policy in models:
            return models[policy]
        return next(iter(models.values()))  # shared / lora: every role names the same model (checked above)

    def dtype_for(self, policy: str) -> str:
        """The dtype a policy's weights load in: its ``role_dtype`` entry, else ``model_init_kwargs['dtype']``,
        else float32 (TRL's default too). Sampling and the update both run in it, so sampling stays on-policy."""
        dtypes = parse_role_map(self.role_dtype, "role_dtype", str)
        if isinstance(dtypes, dict):
            if policy in dtypes:
                return dtypes[policy]
            if self.policy_mode != "specialized" and dtypes:
                return next(iter(dtypes.values()))  # shared / lora: one dtype (checked above)
        return str((self.model_init_kwargs or {}).get("dtype", "float32"))

    def sampling_of_roles(self, roles: list[str]) -> tuple[dict[str, int], dict[str, float]]:
        """``(max new tokens, temperature)`` of each role: the per-role value, else the common one."""
        budgets = parse_role_map(self.role_max_completion_length, "role_max_completion_length", int) or {}
        temps = parse_role_map(self.role_temperature, "role_temperature", float) or {}
        return ({r: int(budgets.get(r, self.max_completion_length)) for r in roles},
                {r: float(temps.get(r, self.temperature)) for r in roles})

    def _validate_own_fields(self) -> None:
        if self.env not in list_envs():
            raise ValueError(f"unknown env {self.env!r}; available: {', '.join(list_envs()) or '(none)'}")
        if self.policy_mode not in POLICY_MODES:
            raise ValueError(f"unknown policy_mode {self.policy_mode!r}; choose one of {', '.join(POLICY_MODES)}")
        self._validate_lora_fields()
        if self.policy_mode == "lora" and self.backend != "local":
            raise ValueError("policy_mode='lora' runs on the local backend only (its adapters share one base "
                             "model in one process); use backend='local' or policy_mode='specialized'")
        if self.rollout_backend not in ("auto", "prefix_shared", "hf", "vllm"):
            raise ValueError(f"unknown rollout_backend {self.rollout_backend!r}; choose auto, prefix_shared, hf or vllm")
        if self.rollout_backend == "vllm":
            if self.policy_mode == "lora":
                raise ValueError("rollout_backend='vllm' does not serve LoRA adapters yet; use policy_mode "
                                 "'shared' or 'specialized', or rollout_backend 'auto'")
            if not vllm_available():
                raise ValueError(f"rollout_backend='vllm' needs vLLM, which is not installed here; {VLLM_INSTALL_HINT}")
        if self.grouping not in GROUPINGS:
            raise ValueError(f"unknown grouping {self.grouping!r}; choose one of {', '.join(GROUPINGS)}")
        if self.workflow not in WORKFLOWS:
            raise ValueError(f"unknown workflow {self.workflow!r}; choose one of {', '.join(WORKFLOWS)}")
        self.env_kwargs = _parse_env_kwargs(self.env_kwargs)
        reserved = {"workflow", "alpha", "max_turns", "split"} & set(self.env_kwargs)
        if reserved:
            raise ValueError(f"env_kwargs must not set {sorted(reserved)}: use the config fields of the same name")
        if self.max_completion_length is None:
            # Room for the env's answer format (a direction word, a move list, a grid, a short program).
            env_kwargs = {**ENV_DEFAULTS.get(self.env, {}), **self.env_kwargs}
            self.max_completion_length = default_max_new_tokens(self.env, self.workflow, env_kwargs)
            role_budgets = default_role_budgets(self.env, self.workflow, env_kwargs)
            if role_budgets is not None and self.role_max_completion_length is None:
                # The tool writes a program, the planner answers what a single agent answers (settings.envs).
                self.role_max_completion_length = ",".join(f"{r}={n}" for r, n in role_budgets.items())
                self.max_completion_length = max(role_budgets.values())
        self._validate_role_maps()
        if self.policy_mode == "specialized" and self.workflow == "single":
            raise ValueError("policy_mode='specialized' needs several roles; use workflow='mas' or policy 'shared'")
        if self.num_generations is None or int(self.num_generations) < 2:
            raise ValueError(
                f"num_generations (K, branches per group) must be >= 2 to compare samples, got {self.num_generations}"
            )
        if self.turns_per_step is not None:
            if int(self.turns_per_step) < 1:
                raise ValueError(f"turns_per_step must be a positive integer or None, got {self.turns_per_step!r}")
            if self.grouping != "at_grpo":
                raise ValueError("turns_per_step needs grouping='at_grpo': trajectory-level groups score whole "
                                 "episodes, so every step must play its episodes to the end")
        if self.max_turns is not None and int(self.max_turns) < 1:
            raise ValueError(f"max_turns must be a positive integer, got {self.max_turns!r}")
        for name in ("envs_per_step", "max_steps", "max_completion_length", "per_device_train_batch_size"):
            value = getattr(self, name)
            if value is None or int(value) < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not math.isfinite(float(self.alpha)):
            raise ValueError(f"alpha must be a finite number, got {self.alpha!r}")
        if not (float(self.temperature) > 0):
            raise ValueError(f"temperature must be > 0 for sampling, got {self.temperature!r}")
        if not (0 < float(self.top_p) <= 1):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if float(self.learning_rate) <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")
        if int(self.ray_env_workers) < 1:
            raise ValueError(f"ray_env_workers must be a positive integer, got {self.ray_env_workers!r}")
        if self.backend == "ray":
            self.ray_resources = parse_ray_resources(self.ray_resources)

    def _validate_lora_fields(self) -> None:
        if isinstance(self.lora_target_modules, str):  # "q_proj,v_proj" from a config file or the API
            self.lora_target_modules = [m.strip() for m in self.lora_target_modules.split(",") if m.strip()]
        if self.lora_target_modules is not None and not self.lora_target_modules:
            raise ValueError("lora_target_modules must name at least one module (or be unset for all linear layers)")
        if isinstance(self.lora_r, bool) or int(self.lora_r) != self.lora_r or int(self.lora_r) < 1:
            raise ValueError(f"lora_r must be a positive integer, got {self.lora_r!r}")
        if not (math.isfinite(float(self.lora_alpha)) and float(self.lora_alpha) > 0):
            raise ValueError(f"lora_alpha must be > 0, got {self.lora_alpha!r}")
        if not 0 <= float(self.lora_dropout) < 1:
            raise ValueError(f"lora_dropout must be in [0, 1), got {self.lora_dropout!r}")

    def env_make_kwargs(self, split: str = "train") -> dict[str, Any]:
        """Keyword arguments for ``make_env(self.env, ...)`` on ``split``."""
        kwargs = preset_env_kwargs(self.env, self.env_kwargs, {"workflow": self.workflow, "alpha": self.alpha})
        if self.max_turns is not None:
            kwargs["max_turns"] = int(self.max_turns)
        if "split" in env_init_kwargs(self.env):
            kwargs["split"] = split
        return kwargs

    @property
    def effective_rollout_seed(self) -> int:
        return int(self.seed if self.rollout_seed is None else self.rollout_seed)


def _parse_env_kwargs(value: Any) -> dict[str, Any]:
    return parse_json_object(value, "env_kwargs")


def _parse_model_init_kwargs(value: Any) -> dict[str, Any]:
    """TRL's ``model_init_kwargs``; here only the weights' ``dtype`` applies (``torch_dtype`` is its older name).
    Other keys are refused: the presets load from converted files, and a silently ignored key is worse."""
    kwargs = parse_json_object(value, "model_init_kwargs")
    if "torch_dtype" in kwargs:
        if "dtype" in kwargs:
            raise ValueError("model_init_kwargs: give 'dtype' or its older name 'torch_dtype', not both")
        kwargs["dtype"] = kwargs.pop("torch_dtype")
    unknown = sorted(set(kwargs) - {"dtype"})
    if unknown:
        raise ValueError(f"model_init_kwargs: only 'dtype' is used by this trainer, got {unknown}")
    if "dtype" in kwargs and kwargs["dtype"] not in MODEL_DTYPES:
        raise ValueError(f"model_init_kwargs: dtype {kwargs['dtype']!r} is not one of {', '.join(MODEL_DTYPES)}")
    return kwargs


def _lcm(a: int, b: int) -> int:
    return int(a) * int(b) // math.gcd(int(a), int(b))


def _gpu_supports_bf16() -> bool:
    return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())


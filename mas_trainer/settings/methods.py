"""The methods the paper compares: one table, read by ``mas-eval``, the baselines and the leaderboard.

==========================  ========  ==========  ===========  ==========  =====================================
name                        workflow  grouping    policy mode  sampler     what it is
==========================  ========  ==========  ===========  ==========  =====================================
``single_prompt``           single    --          any          greedy      the base model, prompted
``single_grpo``             single    trajectory  shared       trajectory  GRPO, K whole episodes per task
``single_at_grpo``          single    at_grpo     shared       tree        tree sampling + turn-level groups with
                                                                           one agent (not in the paper: isolates
                                                                           tree sampling from the workflow)
``mas_prompt``              mas       --          any          greedy      the base model(s), prompted
``mas_naive_grpo``          mas       trajectory  shared       trajectory  GRPO grouped by the initial prompt: one
                                                                           group mixes turns and roles (the
                                                                           "algorithmic mismatch" AT-GRPO fixes)
``mas_at_grpo_shared``      mas       at_grpo     shared       tree        AT-GRPO, one policy for all roles
``mas_at_grpo_specialized`` mas       at_grpo     specialized  tree        AT-GRPO, one policy per role
==========================  ========  ==========  ===========  ==========  =====================================

``grouping`` and ``policy mode`` are the :class:`~mas_trainer.settings.config.ATGRPOConfig` fields a
trained method sets; ``sampler`` is how its training rollouts are drawn (``tree``:
:func:`mas_trainer.rollout.atgrpo.tree_rollout`; ``trajectory``:
:func:`mas_trainer.rollout.atgrpo.trajectory_rollout`). Evaluation plays every method the same way.
Plain Python (no torch, no TRL): the leaderboard reads it too.
"""

from __future__ import annotations

from dataclasses import dataclass

SAMPLER_OF_GROUPING = {"at_grpo": "tree", "trajectory": "trajectory"}


@dataclass(frozen=True)
class MethodSpec:
    """One row of the table."""

    name: str
    label: str  # the row label of comparison tables
    workflow: str  # "single" | "mas"
    grouping: str | None = None  # None: not trained
    policy_mode: str | None = None  # None: any layout (untrained models: one shared model or one per role)

    @property
    def trained(self) -> bool:
        return self.grouping is not None

    @property
    def sampler(self) -> str:
        return SAMPLER_OF_GROUPING[self.grouping] if self.grouping is not None else "greedy"


METHOD_TABLE: dict[str, MethodSpec] = {
    m.name: m
    for m in (  # in the order the paper's tables list them
        MethodSpec("single_prompt", "Single agent", "single"),
        MethodSpec("single_grpo", "Single agent + GRPO", "single", "trajectory", "shared"),
        MethodSpec("single_at_grpo", "Single agent + tree-sampled GRPO", "single", "at_grpo", "shared"),
        MethodSpec("mas_prompt", "MAS (prompt only)", "mas"),
        MethodSpec("mas_naive_grpo", "MAS + GRPO (naive grouping)", "mas", "trajectory", "shared"),
        MethodSpec("mas_at_grpo_shared", "MAS + AT-GRPO (shared policy)", "mas", "at_grpo", "shared"),
        MethodSpec("mas_at_grpo_specialized", "MAS + AT-GRPO (per-role policies)", "mas", "at_grpo", "specialized"),
    )
}
METHOD_NAMES: tuple[str, ...] = tuple(METHOD_TABLE)


def method_of(workflow: str, grouping: str | None, policy_mode: str) -> str:
    """The method a model or run stands for: untrained (``grouping=None``), else by workflow, grouping and
    (where that leaves a choice) policy mode. A single-workflow run with tree-sampled groups is
    ``single_at_grpo``; a trajectory-grouped run is ``single_grpo`` / ``mas_naive_grpo`` whatever its layout."""
    if grouping is None:
        return next(m.name for m in METHOD_TABLE.values() if m.workflow == workflow and not m.trained)
    grouping = grouping if grouping in SAMPLER_OF_GROUPING else "at_grpo"
    matches = [m for m in METHOD_TABLE.values() if m.workflow == workflow and m.grouping == grouping]
    return next((m.name for m in matches if m.policy_mode == policy_mode), matches[0].name)


def method_problem(name: str, workflow: str, policy_mode: str) -> str | None:
    """Why method ``name`` contradicts the workflow or the policy layout (the leaderboard would refuse it), or None."""
    spec = METHOD_TABLE.get(name)
    if spec is None:
        return f"unknown method {name!r}; choose one of {', '.join(METHOD_NAMES)}"
    if spec.workflow != workflow:
        return f"method {name!r} needs workflow {spec.workflow!r}, not {workflow!r}"
    if spec.policy_mode is not None and spec.policy_mode != policy_mode:
        return f"method {name!r} needs a {spec.policy_mode} policy, but the model has {policy_mode} policies"
    return None

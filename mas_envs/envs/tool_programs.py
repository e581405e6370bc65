"""Envs whose ``tool`` agent answers with a Python program that runs in the sandbox.

One mixin for the grid puzzles' tool and math_tool's: the env says which sandbox job a program is
(``_tool_job``); its step runs that job (``_run_tool_program``) and tree sampling runs the K
candidates' jobs first as one parallel batch (``prefetch_candidates``), so the steps that follow read
their results from the sandbox cache. Both go through ``_tool_job``, so their cache keys match.
"""

from __future__ import annotations

from typing import Any

from mas_envs.parsing import extract_code_block


class ToolProgramMixin:
    """``prefetch_candidates`` and ``_run_tool_program`` for an env that defines ``_tool_job(code)``."""

    def _tool_job(self, code: str) -> Any:
        """The sandbox job (``mas_envs.sandbox.Job``) that runs the tool's ``code``."""
        raise NotImplementedError

    def _run_tool_program(self, code: str) -> Any:
        from mas_envs.sandbox import default_sandbox  # lazily: the single workflow needs no sandbox

        return default_sandbox().run(self._tool_job(code))

    def prefetch_candidates(self, texts: list[str], agent: str | None = None) -> None:
        """Run the programs of K candidate tool actions in one parallel sandbox batch.

        Changes no env state: it fills the sandbox's result cache, so stepping K clones with these
        texts afterwards (tree sampling) costs cache look-ups instead of K runs one after another.
        """
        if (agent or self.agent_selection) != "tool":
            return
        from mas_envs.sandbox import default_sandbox  # lazily: the single workflow needs no sandbox

        codes = (extract_code_block(text if isinstance(text, str) else "") for text in texts)
        jobs = [self._tool_job(code) for code, error in codes if error is None]
        if len(jobs) > 1:
            default_sandbox().run_many(jobs)

"""The import layers of docs/ARCHITECTURE.md hold: pyproject.toml's import-linter contracts are kept, and the
check really fails when a cycle comes back (shown on a throwaway package)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.is_file(), reason="import-linter is not installed (make setup)")


def lint(config: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(cwd))
    return subprocess.run([str(LINT_IMPORTS), "--config", str(config), "--no-cache"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_project_keeps_its_import_contracts():
    result = lint(REPO / "pyproject.toml", REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
    # every contract of pyproject.toml was checked: the layers, no cycles, mas_envs standing alone
    assert result.stdout.count(" KEPT") == 3, result.stdout


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


CONFIG = """
[tool.importlinter]
root_packages = ["toy"]

[[tool.importlinter.contracts]]
name = "toy layers"
type = "layers"
containers = ["toy"]
layers = ["run", "settings"]

[[tool.importlinter.contracts]]
name = "toy has no cycles"
type = "acyclic_siblings"
ancestors = ["toy"]
"""


def toy_package(root: Path, settings_imports_run: bool, inner_cycle: bool) -> Path:
    write(root, {
        "pyproject.toml": CONFIG,
        "toy/__init__.py": "",
        "toy/settings/__init__.py": "",
        "toy/settings/config.py": ("def make():\n    from toy.run import cli  # a lazy import counts too\n"
                                   if settings_imports_run else "X = 1\n"),
        "toy/run/__init__.py": "",
        "toy/run/cli.py": "from toy.settings import config\n" + ("from toy.run import trainer\n" if inner_cycle else ""),
        "toy/run/trainer.py": "from toy.run import cli\n" if inner_cycle else "Y = 2\n",
    })
    return root / "pyproject.toml"


def test_a_clean_toy_package_passes(tmp_path):
    result = lint(toy_package(tmp_path, settings_imports_run=False, inner_cycle=False), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_upward_import_breaks_the_layers(tmp_path):
    result = lint(toy_package(tmp_path, settings_imports_run=True, inner_cycle=False), tmp_path)
    assert result.returncode != 0
    assert "toy layers BROKEN" in result.stdout
    assert "toy.settings.config -> toy.run.cli" in result.stdout


def test_a_cycle_inside_a_layer_breaks_the_acyclic_contract(tmp_path):
    result = lint(toy_package(tmp_path, settings_imports_run=False, inner_cycle=True), tmp_path)
    assert result.returncode != 0
    assert "toy has no cycles BROKEN" in result.stdout
    assert "toy layers KEPT" in result.stdout  # the layers alone would not see it

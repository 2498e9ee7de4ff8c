"""The linters, run as tests so that `make test` (and so CI) runs them: ruff on all the code (rules in
pyproject.toml's [tool.ruff], each chosen there with its reason), mypy --strict on the core, and mypy's default
checks on every plugin package. Each prints the tool's own report when it fails."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CODE = ["ragen_core", "ragen_plugins_envs", "ragen_plugins_filters", "plugins", "tests", "scripts", "bench"]
PLUGIN_PACKAGES = ["ragen_plugins_envs", "ragen_plugins_filters", "ragen_plugins_estimators",
                   "ragen_plugins_diagnostics", "ragen_plugins_torch", "ragen_plugins_verl", "ragen_plugins_eval",
                   "ragen_plugins_sinks", "ragen_plugins_reasoning_gym", "ragen_plugins_textarena",
                   "ragen_plugins_openenv", "ragen_plugins_gymnasium"]


def _tool(name: str) -> list[str]:
    if shutil.which(name) is None and not (Path(sys.executable).parent / name).exists():
        pytest.fail(f"{name} is not installed: it comes with ragen-core's test extra (pip install 'ragen-core[test]', "
                    "in a clone: make setup)")
    return [sys.executable, "-m", name]


def _run(cmd: list[str]) -> None:
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, f"{' '.join(cmd[2:])}:\n{out.stdout[-6000:]}{out.stderr[-2000:]}"


def test_ruff() -> None:
    _run([*_tool("ruff"), "check", "--no-cache", *CODE])


def test_mypy_strict_on_the_core() -> None:
    _run([*_tool("mypy"), "--strict", "--no-incremental", "-p", "ragen_core"])


def test_mypy_on_every_plugin() -> None:
    packages = [arg for p in PLUGIN_PACKAGES for arg in ("-p", p)]
    _run([*_tool("mypy"), "--no-incremental", *packages])
    _run([*_tool("mypy"), "--no-incremental", "plugins/ragen_example_plugin/ragen_example_plugin"])


def test_every_distribution_ships_py_typed() -> None:
    packages = [ROOT / "ragen_core", ROOT / "ragen_plugins_envs" / "ragen_plugins_envs",
                ROOT / "ragen_plugins_filters" / "ragen_plugins_filters",
                *(d / d.name for d in (ROOT / "plugins").glob("ragen_*") if (d / d.name).is_dir())]
    assert len(packages) == 14  # the core, 8 built-ins, the 4 env-hub adapters and the example plugin
    for package in packages:
        assert (package / "py.typed").is_file(), package
    for pyproject in [ROOT / "pyproject.toml", *(ROOT / "ragen_plugins_envs", ROOT / "ragen_plugins_filters"),
                      *(ROOT / "plugins").glob("ragen_*")]:
        path = pyproject if pyproject.name == "pyproject.toml" else pyproject / "pyproject.toml"
        if "[project.optional-dependencies]" in path.read_text() and "ragen_plugins" not in path.read_text():
            continue  # the meta-distribution ships no package
        assert '"py.typed"' in path.read_text(), f"{path}: py.typed is not in its package data"

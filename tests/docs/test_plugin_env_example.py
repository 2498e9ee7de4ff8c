"""docs/plugins.md's complete env, as a reader would use it: its code blocks written into a package, loaded as a
plugin through its entry point's module, checked with ``check_env`` and rolled out by ``ragen rollout`` with the
oracle policy."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib

from ragen_core.checks import check_env
from ragen_core.plugins import build_plugin_manager, collect_registries
from tests.docs.gen import ROOT

PAGE = ROOT / "docs" / "plugins.md"
BLOCK = re.compile(r"^```(\w+)\n# (\S+)\n(.*?)^```$", re.M | re.S)


def section_files() -> dict[str, str]:
    """The section's code blocks that start with a ``# path`` comment, by path (the comment line kept)."""
    text = PAGE.read_text(encoding="utf-8").split("\n## A complete env\n", 1)[1].split("\n## ", 1)[0]
    return {path: f"# {path}\n{body}" for _lang, path, body in BLOCK.findall(text)}


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """The section's files written under ``tmp_path`` (plus the empty ``__init__.py`` it asks for); yields the folder
    and the module its pyproject's ``ragen`` entry point names."""
    files = section_files()
    assert set(files) == {"pyproject.toml", "ragen_corridor/env.py", "ragen_corridor/plugin.py"}
    for rel, body in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(body, encoding="utf-8")
    (tmp_path / "ragen_corridor" / "__init__.py").write_text("", encoding="utf-8")
    entry_points = tomllib.loads(files["pyproject.toml"])["project"]["entry-points"]["ragen"]
    assert entry_points == {"corridor": "ragen_corridor.plugin"}
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path, entry_points["corridor"]
    for name in [m for m in sys.modules if m == "ragen_corridor" or m.startswith("ragen_corridor.")]:
        del sys.modules[name]


def test_the_documented_env_passes_check_env(package: tuple[Path, str]) -> None:
    _folder, module = package
    pm = build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": module})
    envs = collect_registries(pm).envs
    assert {"corridor", "corridor_long"} <= set(envs.names())
    check_env(lambda: envs.make("corridor"))
    check_env(lambda: envs.make("corridor_long"))
    env = envs.make("corridor", {"length": 3})
    assert env.config.length == 3 and len(env.reset(seed=0)[0]) == 3
    assert type(env)(length=3).config == env.config  # keyword options in your own code, validated alike
    assert envs.hints("corridor_long").max_turn == 16


def test_the_documented_env_rolls_out_with_the_oracle(package: tuple[Path, str]) -> None:
    folder, module = package
    run_dir = folder / "run"
    environ = {**os.environ, "RAGEN_PLUGINS": module, "RAGEN_DISABLE_PLUGINS": "",
               "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-m", "ragen_core", "rollout", "env=corridor", "--policy", "oracle",
                          "--steps", "1", "--run-dir", str(run_dir)], capture_output=True, text=True, env=environ,
                         cwd=folder, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "status: completed" in res.stdout
    summary = json.loads((run_dir / "summary.json").read_text())
    metrics = summary["metrics"]
    assert metrics["rollout/success"] == 1.0, metrics  # one move per turn, 8 turns for at most 4 moves
    assert metrics["rollout/corridor/info/distance"] == 0.0  # the env's own info number, as a metric

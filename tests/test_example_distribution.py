"""A real third-party distribution: pip-install it, see it appear, pass its contract tests, uninstall it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "plugins" / "ragen_example_plugin"


def ragen(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGEN_")}
    return subprocess.run([sys.executable, "-m", "ragen_core", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args], check=True,
                   timeout=600)


@pytest.mark.slow
def test_example_distribution_installs_appears_and_uninstalls(tmp_path: Path) -> None:
    pip("install", "--no-deps", str(EXAMPLE))
    try:
        envs = json.loads(ragen("envs", "--json").stdout)
        mine = {e["name"]: e for e in envs if e["plugin"] == "example"}
        assert set(mine) == {"guess_number", "guess_number_hard"}
        assert "  rules: A hidden whole number between 1 and `high`" in ragen("envs", "--long").stdout
        plugins = {p["name"]: p for p in json.loads(ragen("plugins", "--json").stdout)}
        assert plugins["example"]["distribution"] == "ragen-example-plugin"
        assert plugins["example"]["version"] == "0.2.0"
        assert {"kind": "filter", "name": "any_success"} in plugins["example"]["components"]
        # its own contract tests, through ragen_core.testing's fixtures
        res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              "--rootdir", str(EXAMPLE), str(EXAMPLE / "tests")],
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stdout + res.stderr
        # selectable by name in config like any built-in
        res = ragen("rollout", "env=guess_number", "filter=any_success", "rollout.env_groups=2",
                    "rollout.group_size=2", "--policy", "oracle", "--run-dir", str(tmp_path / "run"))
        assert res.returncode == 0, res.stderr
        assert "rollout/guess_number/success" in res.stdout and "rollout/filter_kept_ratio" in res.stdout
    finally:
        pip("uninstall", "-y", "ragen-example-plugin")
    envs = json.loads(ragen("envs", "--json").stdout)
    assert not any(e["plugin"] == "example" for e in envs)

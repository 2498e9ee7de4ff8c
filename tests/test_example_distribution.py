"""A real third-party distribution: pip-install it, see it appear, pass its contract tests, uninstall it.

It is installed into a venv of its own that sees the suite's environment (a ``.pth`` file adds that environment's
site-packages), never into the suite's environment itself: the other tests, running at the same time under
pytest-xdist, discover their plugins through the installed distributions, and must not see it come and go.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "plugins" / "ragen_example_plugin"


def overlay_venv(folder: Path) -> Path:
    """A venv at ``folder`` whose interpreter also sees this environment's packages (its editable ragen included,
    through their own ``.pth`` files) after its own; its Python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                         check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    lines = [f"import site; site.addsitedir({path!r})\n" for path in site.getsitepackages()]
    Path(own, "ragen_suite_environment.pth").write_text("".join(lines), encoding="utf-8")
    return python


def ragen(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGEN_")}
    return subprocess.run([str(python), "-m", "ragen_core", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def pip(python: Path, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args], check=True,
                   timeout=600)


@pytest.mark.slow
def test_example_distribution_installs_appears_and_uninstalls(tmp_path: Path) -> None:
    python = overlay_venv(tmp_path / "venv")
    assert not any(e["plugin"] == "example" for e in json.loads(ragen(python, "envs", "--json").stdout))
    pip(python, "install", "--no-deps", str(EXAMPLE))
    try:
        envs = json.loads(ragen(python, "envs", "--json").stdout)
        mine = {e["name"]: e for e in envs if e["plugin"] == "example"}
        assert set(mine) == {"guess_number", "guess_number_hard"}
        assert "  rules: A hidden whole number between 1 and `high`" in ragen(python, "envs", "--long").stdout
        plugins = {p["name"]: p for p in json.loads(ragen(python, "plugins", "--json").stdout)}
        assert plugins["example"]["distribution"] == "ragen-example-plugin"
        assert plugins["example"]["version"] == "0.2.0"
        assert {"kind": "filter", "name": "any_success"} in plugins["example"]["components"]
        # its own contract tests, through ragen_core.testing's fixtures
        res = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              "--rootdir", str(EXAMPLE), str(EXAMPLE / "tests")],
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stdout + res.stderr
        # selectable by name in config like any built-in
        res = ragen(python, "rollout", "env=guess_number", "filter=any_success", "rollout.env_groups=2",
                    "rollout.group_size=2", "--policy", "oracle", "--run-dir", str(tmp_path / "run"))
        assert res.returncode == 0, res.stderr
        assert "rollout/guess_number/success" in res.stdout and "rollout/filter_kept_ratio" in res.stdout
    finally:
        pip(python, "uninstall", "-y", "ragen-example-plugin")
    envs = json.loads(ragen(python, "envs", "--json").stdout)
    assert not any(e["plugin"] == "example" for e in envs)

"""The real CLI on a pseudo-terminal: progress bars and log lines never share a line (tests/core/test_console.py
tests the console itself)."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from tests.core.test_console import STAMP, mixed, screen_pieces


def _run_in_terminal(args: list[str], cwd: Path, timeout: float = 120) -> str:
    """Run ``args`` with standard output and error on a pseudo-terminal; returns what it wrote."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "LINES": "40", "TERM": "xterm-256color"}
    env.pop("CI", None)
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, cwd=cwd, env=env)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(master)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")[-3000:]
    return b"".join(chunks).decode(errors="replace")


def test_rollout_on_a_terminal_has_no_mixed_lines_and_a_one_line_config(tmp_path: Path) -> None:
    ragen = Path(sys.executable).with_name("ragen")
    raw = _run_in_terminal([str(ragen), "rollout", "env=frozenlake", "rollout.env_groups=2", "--steps", "4",
                            "--run-dir", str(tmp_path / "run")], cwd=tmp_path)
    pieces = screen_pieces(raw)
    assert any("rollout" in p and "step" in p and "/4" in p for p in pieces), pieces[:20]  # the bar was drawn
    assert mixed(raw) == []
    (config_line,) = [p for p in pieces if re.search(r"\] config\b|\bconfig\s+\[", p)]
    assert "summary=" in config_line and "envs frozenlake×2" in config_line and "rollout:" not in config_line
    steps = [p for p in pieces if STAMP.match(p) and " step " in f" {p} "]
    assert len(steps) == 4 and all("rollout/success=" in p and "rollout/samples" not in p for p in steps)
    assert (tmp_path / "run" / "config.yaml").read_text().count("\n") > 30  # the full config is in the run folder

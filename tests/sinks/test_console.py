"""The ``console`` sink through ``ragen rollout``: a table of the chosen metrics every N steps, and one at the end."""

from __future__ import annotations

import re
from pathlib import Path

from tests.sinks.helpers import records, rollout


def tables(output: str) -> dict[str, dict[str, list[str]]]:
    """Title -> metric -> [last, mean, min, max] of the rich tables in ``output``."""
    out: dict[str, dict[str, list[str]]] = {}
    title = None
    for line in output.splitlines():
        if " · step " in line:
            title = line.strip()
            out[title] = {}
        elif title and line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            out[title][cells[0]] = cells[1:]
    return out


def test_a_table_every_n_steps_and_at_the_end(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    chosen = '["rollout/success", "rollout/*/pass@k", "no/such_metric"]'
    res = rollout(run_dir, f"sinks=[{{name: console, every: 2, metrics: {chosen}}}]", steps=5)
    assert res.exit_code == 0, res.output
    shown = tables(res.stdout)
    assert list(shown) == ["run · step 2", "run · step 4", "run · step 5 · completed"]
    written = {r["step"]: r for r in records(run_dir)}
    for title, steps in zip(shown, ([1, 2], [3, 4], [5])):
        rows = shown[title]
        assert list(rows) == ["rollout/success", "rollout/sokoban/pass@k"]  # configured order; absent ones left out
        values = [written[s]["rollout/success"] for s in steps]
        expected = [values[-1], sum(values) / len(values), min(values), max(values)]
        assert rows["rollout/success"] == [f"{v:.4g}" for v in expected]
    assert re.search(r"status: completed", res.stdout)


def test_stderr_and_default_metrics(tmp_path: Path) -> None:
    res = rollout(tmp_path / "run", "sinks=[{name: console, stream: stderr}]", steps=2)
    assert res.exit_code == 0, res.output
    assert " · step " not in res.stdout
    shown = tables(res.stderr)
    assert list(shown) == ["run · step 2 · completed"]  # every: 10 by default, so only the final table
    assert {"rollout/success", "rollout/reward_mean", "timing_s/step"} <= set(shown["run · step 2 · completed"])

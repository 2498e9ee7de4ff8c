"""What a run directory holds, for :mod:`ragen_plugins_diagnostics.report`: ``metrics.jsonl`` merged by step
(:class:`RunData`, :func:`load_run`), ``config.yaml`` and ``summary.json``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import attrs

__all__ = ["FAMILIES", "REGIME_COLOURS", "REGIME_NAMES", "RunData", "load_run", "read_json"]

REGIME_NAMES = ("diverse", "template collapse", "compressed", "low-entropy collapse")
REGIME_COLOURS = ("#2ca02c", "#ff7f0e", "#1f77b4", "#d62728")
#: the collapse diagnostic's sample families
FAMILIES = ("first_turn", "trajectory")


@attrs.define
class RunData:
    """What a run directory holds: metrics merged by step, and the config and summary when present."""

    run_dir: Path
    steps: dict[int, dict[str, float]]
    config: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    skipped_lines: int = 0

    def series(self, key: str) -> tuple[list[int], list[float]]:
        """``(steps, values)`` of a metric, in step order, finite values only."""
        pairs = [(s, m[key]) for s, m in sorted(self.steps.items()) if key in m]
        return [s for s, _v in pairs], [v for _s, v in pairs]

    def has(self, key: str) -> bool:
        return any(key in m for m in self.steps.values())

    def setting(self, key: str) -> Any:
        """The value of a dotted key of ``config.yaml`` (``"rollout.max_new_tokens"``, ``"filter.name"``), or None
        when the run has no config or the config no such key (e.g. a trainer without that option)."""
        node: Any = self.config
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    def collapse_option(self, name: str, default: float) -> float:
        """An option of the ``collapse`` diagnostic from ``config.yaml`` (its default when absent)."""
        for diag in (self.config or {}).get("diagnostics") or []:
            if isinstance(diag, dict) and diag.get("name") == "collapse":
                value = diag.get(name, (diag.get("options") or {}).get(name))
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    return float(value)
        return default


def load_run(run_dir: str | Path) -> RunData:
    """Read ``metrics.jsonl`` (+ ``config.yaml``, ``summary.json``); lines that are not JSON objects with an
    integer ``step`` are skipped and counted (a crashed run can leave a truncated last line)."""
    from ragen_core.errors import RagenError

    root = Path(run_dir)
    path = root / "metrics.jsonl"
    if not path.is_file():
        raise RagenError(f"{root} has no metrics.jsonl", hint="give the directory of a run (ragen train writes it)")
    steps: dict[int, dict[str, float]] = {}
    skipped = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            skipped += 1
            continue
        step = record.get("step") if isinstance(record, dict) else None
        if isinstance(step, bool) or not isinstance(step, int):
            skipped += 1
            continue
        merged = steps.setdefault(step, {})
        for key, value in record.items():
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and math.isfinite(value):
                merged[key] = float(value)
    return RunData(root, steps, _read_yaml(root / "config.yaml"), read_json(root / "summary.json"), skipped)


def _read_yaml(path: Path) -> dict[str, Any] | None:
    import yaml

    return _read_mapping(path, yaml.safe_load, yaml.YAMLError)


def read_json(path: Path) -> dict[str, Any] | None:
    return _read_mapping(path, json.loads, json.JSONDecodeError)


def _read_mapping(path: Path, parse: Any, error: type[Exception]) -> dict[str, Any] | None:
    """The mapping in ``path`` read with ``parse``; None when the file is missing, unparsable or not a mapping."""
    if not path.is_file():
        return None
    try:
        data = parse(path.read_text(encoding="utf-8"))
    except error:
        return None
    return data if isinstance(data, dict) else None

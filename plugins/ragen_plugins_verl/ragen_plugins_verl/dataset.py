"""The rows veRL's dataloader feeds to the agent loop: one row per env group, made by ragen (no dataset to prepare).

Training row ``i`` is group ``g = i mod env_groups`` of step ``i div env_groups + 1`` and resets with seed
``seed_train + i`` — RAGEN's seeding (``seed_train + (step − 1)·env_groups + g``) — on the env variant the env plan
gives group ``g``. Validation rows use the fixed seeds ``seed_val + i``. veRL samples each row ``rollout.n`` =
``group_size`` times (``val_kwargs.n`` = ``val_group_size`` for validation) and reads the rows in order
(``data.shuffle=false``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .config import AGENT_LOOP

__all__ = ["EnvGroupDataset", "group_rows", "write_group_rows"]


def group_rows(plan: list[tuple[str, int, dict[str, Any]]], *, n_rows: int, seed_base: int) -> list[dict[str, Any]]:
    """``n_rows`` rows cycling over the plan's groups (see the module docstring)."""
    slots = [(name, options) for name, groups, options in plan for _ in range(groups)]
    rows = []
    for i in range(n_rows):
        g = i % len(slots)
        name, options = slots[g]
        rows.append({
            "raw_prompt": [{"role": "user", "content": f"ragen env {name} seed {seed_base + i}"}],
            "agent_name": AGENT_LOOP, "data_source": f"ragen/{name}", "index": i,
            "ragen_env": name, "ragen_options": json.dumps(options, sort_keys=True), "ragen_seed": seed_base + i,
            "ragen_group": i})
    return rows


def write_group_rows(resolved: Any, folder: str | Path, steps: int) -> tuple[Path, Path]:
    """Write ``train_groups.json`` (``steps × env_groups`` rows) and ``val_groups.json`` under ``folder``."""
    cfg = resolved.config
    ro = cfg.rollout
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    train = group_rows(resolved.env_plan, n_rows=steps * ro.env_groups, seed_base=ro.seed_train)
    val = group_rows(resolved.val_env_plan, n_rows=ro.val_env_groups, seed_base=ro.seed_val)
    paths = folder / "train_groups.json", folder / "val_groups.json"
    for path, rows in zip(paths, (train, val)):
        path.write_text(json.dumps(rows))
    return paths


def _dataset_base() -> type:
    from torch.utils.data import Dataset

    return Dataset


class EnvGroupDataset(_dataset_base()):  # type: ignore[misc]
    """veRL's custom dataset class (``data.custom_cls``): the rows of :func:`write_group_rows`."""

    def __init__(self, data_files: Any, tokenizer: Any = None, config: Any = None, processor: Any = None,
                 max_samples: int = -1, **_: Any) -> None:
        files = [data_files] if isinstance(data_files, (str, Path)) else list(data_files)
        self.rows: list[dict[str, Any]] = []
        for f in files:
            self.rows += json.loads(Path(f).read_text())
        if max_samples is not None and max_samples > 0:
            self.rows = self.rows[:max_samples]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return dict(self.rows[i])

"""Every ragen setting that docs/from_ragen.md maps a RAGEN key to is a valid override."""

from __future__ import annotations

import re

import pytest

from ragen_core.config import load_config, resolve_config
from tests.docs.gen import ROOT, load_generator

PAGE = ROOT / "docs" / "from_ragen.md"
OVERRIDE = re.compile(r"^[a-z_][a-z0-9_.]*=\S")


def rows() -> list[tuple[str, list[str]]]:
    """(RAGEN cell, overrides in the ragen cell) of every table row that names ragen overrides."""
    out = []
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| ") or line.startswith(("| RAGEN", "|---")):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        tokens = [t.replace("\\|", "|") for t in re.findall(r"`([^`]+)`", cells[1])]
        overrides = [t for t in tokens if OVERRIDE.match(t)]
        if overrides:
            out.append((cells[0], overrides))
    return out


ROWS = rows()


def test_the_page_maps_many_keys() -> None:
    assert len(ROWS) >= 50


@pytest.mark.parametrize("ragen_key,overrides", ROWS, ids=[r[0][:60] for r in ROWS])
def test_mapped_setting_is_valid(ragen_key: str, overrides: list[str]) -> None:
    registries = load_generator().builtin_registries()
    if not any(o.startswith(("env=", "envs=")) for o in overrides):
        overrides = ["env=sokoban", *overrides]  # RAGEN's own default env; the core names none
    config = load_config(None, overrides)
    resolved = resolve_config(config, registries, strict=False)
    assert not [p for p in resolved.problems if "unknown" in p], resolved.problems

"""RAGEN's own config keys get a hint naming ragen's key, from a table that matches docs/from_ragen.md."""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import pytest

from ragen_core.config import load_config, structure
from ragen_core.errors import ConfigError
from ragen_core.ragen_keys import RAGEN_KEYS, RAGEN_SECTIONS, ragen_hint

PAGE = Path(__file__).resolve().parents[2] / "docs" / "from_ragen.md"


def test_a_mapped_ragen_key_names_ragens_key() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, ["es_manager.train.env_groups=8"])
    assert err.value.message == "unknown config key 'es_manager'"
    assert err.value.hint == ("'es_manager.train.env_groups' is RAGEN's key; ragen's is 'rollout.env_groups' "
                              "(docs/from_ragen.md)")


def test_several_ragen_keys_are_all_named() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, ["agent_proxy.max_turn=3", "agent_proxy.enable_think=false"])
    assert "'rollout.max_turn'" in str(err.value.hint) and "'rollout.think'" in str(err.value.hint)


def test_an_unmapped_key_of_a_ragen_section_points_to_the_page() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, ["algorithm.kl_ctrl.kl_coef=0.01"])
    assert err.value.hint == "RAGEN's keys map to ragen's in docs/from_ragen.md"


@attrs.define
class _TrainerOptions:
    steps: int = 1
    val_every: int = 1


def test_a_ragen_key_inside_a_ragen_section() -> None:
    """``trainer`` is ragen's section too: only the exact keys of the table get the hint there."""
    with pytest.raises(ConfigError) as err:
        structure(_TrainerOptions, {"total_training_steps": 5}, "trainer")
    assert err.value.hint == "'trainer.total_training_steps' is RAGEN's key; ragen's is 'trainer.steps' " \
                             "(docs/from_ragen.md)"
    with pytest.raises(ConfigError) as err:
        structure(_TrainerOptions, {"stpes": 5}, "trainer")
    assert err.value.hint == "did you mean 'trainer.steps'?"


def test_other_unknown_keys_keep_their_hints() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, ["rollout.gruop_size=8"])
    assert err.value.hint == "did you mean 'rollout.group_size'?"
    assert ragen_hint("rollout.gruop_size", 8) is None
    assert ragen_hint("trainer.frobnicate", 1) is None


def _page_rows() -> list[tuple[list[str], list[str]]]:
    """(backticked tokens of the RAGEN cell, of the ragen cell) of every table row of docs/from_ragen.md."""
    rows = []
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("| ") and not line.startswith(("| RAGEN", "|---")):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            rows.append((re.findall(r"`([^`]+)`", cells[0]), re.findall(r"`([^`]+)`", cells[1])))
    return rows


@pytest.mark.parametrize("ragen_key", sorted(RAGEN_KEYS))
def test_every_mapped_key_is_in_the_page(ragen_key: str) -> None:
    ours = RAGEN_KEYS[ragen_key]
    rows = [theirs for key, theirs in _page_rows() if ragen_key in key]
    assert rows, f"{ragen_key} is not in docs/from_ragen.md's tables"
    assert any(t.startswith(f"{ours}=") for theirs in rows for t in theirs), \
        f"docs/from_ragen.md maps {ragen_key} to something else than {ours}"


def test_the_sections_are_ragens_not_ours() -> None:
    ours = {f.name for f in attrs.fields(type(load_config()))}
    assert not ours & set(RAGEN_SECTIONS)
    assert {k.split(".")[0] for k in RAGEN_KEYS} - {"trainer"} <= set(RAGEN_SECTIONS)

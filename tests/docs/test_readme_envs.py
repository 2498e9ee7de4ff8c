"""README's row of built-in envs names exactly the envs ``ragen envs`` lists (its count included)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.gen import load_generator

gen = load_generator()

README = Path(__file__).resolve().parents[2] / "README.md"
#: README's display names of the built-in envs, by registered name
DISPLAY = {"metamathqa": "MetaMathQA", "webshop": "WebShop", "searchqa": "SearchQA", "deepcoder": "DeepCoder",
           "frozenlake": "FrozenLake"}


def test_the_readme_envs_row_matches_the_registry() -> None:
    names = sorted(spec.name for spec in gen.builtin_registries(hubs=False).envs.envs())
    row = next(line for line in README.read_text().splitlines() if line.startswith("| `envs` |"))
    count = re.search(r"the (\d+) envs `ragen envs` lists", row)
    assert count is not None and int(count.group(1)) == len(names), row[:80]
    listed = row.split("lists:", 1)[1]
    for name in names:
        shown = DISPLAY.get(name, name.capitalize())
        assert re.search(rf"\b{re.escape(shown)}\b", listed), f"README's envs row does not name {shown}"

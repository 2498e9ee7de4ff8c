"""Relative links between the docs pages (and from the README's Documentation list) point at files and anchors
that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.gen import ROOT

PAGES = ["quickstart.md", "config.md", "envs.md", "metrics.md", "from_ragen.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    found = set(re.findall(r'<a id="([^"]+)"></a>', text))
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


@pytest.mark.parametrize("source", [*(f"docs/{p}" for p in PAGES), "README.md"])
def test_relative_links_resolve(source: str) -> None:
    path = ROOT / source
    broken = []
    for target in LINK.findall(path.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        file, _, frag = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(target)
        elif frag and dest.suffix == ".md" and frag not in anchors(dest):
            broken.append(target)
    assert not broken, f"{source}: broken links {broken}"


def test_every_docs_page_is_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if f"docs/{p.name}" not in readme]
    assert not missing, f"add these pages to the README's Documentation list: {missing}"

"""docs/envs.md does not depend on the machine that renders it: the coq prompts show ``Coq <version>`` whatever
Coq is installed, and a machine without coqtop cannot render them (the sync test then skips) instead of writing a
different page."""

from __future__ import annotations

import shutil

import pytest

from tests.docs.gen import load_generator

gen = load_generator()


def _prompts(monkeypatch: pytest.MonkeyPatch, version: str) -> list[object]:
    import ragen_plugins_envs.prover.coq as coq

    monkeypatch.setattr(coq, "coq_version", lambda coqtop="coqtop": version)
    registries = gen.builtin_registries()
    return [gen.first_prompt(registries, name) for name in ("coq", "coq_nat")]


@pytest.mark.skipif(shutil.which("coqtop") is None, reason="the coq prompts show coqtop's goals")
def test_coq_prompts_are_the_same_whatever_version_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ragen_plugins_envs.prover.coq")
    installed = _prompts(monkeypatch, "8.16.1")
    other = _prompts(monkeypatch, "9.99.7")
    assert installed == other
    for prompt in installed:
        assert "Theorem to prove (Coq <version>):" in prompt.user and "9.99.7" not in prompt.text
        assert "8.16.1" not in prompt.text
    assert "proving a theorem in Coq <version> with tactics" in installed[0].system


def test_without_coqtop_the_coq_prompts_cannot_be_rendered(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ragen_plugins_envs.prover.coq")
    with pytest.raises(gen.DocsUnavailable, match="coqtop"):
        _prompts(monkeypatch, "")


def test_the_committed_catalogue_names_no_coq_version() -> None:
    import re

    text = (gen.DOCS / "envs.md").read_text(encoding="utf-8")
    assert "Coq <version>" in text
    assert not re.search(r"Coq \d+\.\d+", text)

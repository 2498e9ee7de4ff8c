"""Load ``scripts/gen_docs.py`` (a script, not a package) once for the docs tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_generator():  # noqa: ANN201 - the module
    """The ``gen_docs`` module (imported from its file; cached in ``sys.modules``)."""
    if "ragen_gen_docs" in sys.modules:
        return sys.modules["ragen_gen_docs"]
    spec = importlib.util.spec_from_file_location("ragen_gen_docs", ROOT / "scripts" / "gen_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["ragen_gen_docs"] = module
    spec.loader.exec_module(module)
    return module

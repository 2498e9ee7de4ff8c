"""WebShop (Yao et al., 2022) offline: a generated catalog or WebShop's own files, BM25 search, WebShop's pages,
goals and purchase score.

Modules: :mod:`~ragen_plugins_envs.webshop.catalog` (products), :mod:`~ragen_plugins_envs.webshop.goals` (goals and
the score), :mod:`~ragen_plugins_envs.webshop.search` (BM25 via ``bm25s``), :mod:`~ragen_plugins_envs.webshop.engine`
(pages), :mod:`~ragen_plugins_envs.webshop.env` (:class:`WebShopEnv`). Importing this package is light: the env
and its dependencies load on first attribute access.
"""

from __future__ import annotations

from typing import Any

__all__ = ["WebShopConfig", "WebShopEnv"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ragen_plugins_envs.webshop import env

        return getattr(env, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Registration of the WebShop env and its variants.

Light on purpose: nothing is imported here; the registry loads the env class from its entry-point string on first
use. The plugin's ``ragen_register_envs`` hook calls :func:`register_webshop_envs`.

- ``webshop``: the generated catalog, 1,000 products in 10 categories, RAGEN's 9 actions per trajectory;
- ``webshop_small``: 100 generated products (two per product type), a quicker shop for smoke runs;
- ``webshop_rich``: 1,000 products, WebShop's ``text_rich`` observations (buttons marked, chosen options shown).

WebShop's own data is used with ``catalog: /path/to/webshop/data`` on any of them.
"""

from __future__ import annotations

from typing import Any

from ragen_core.registry import RolloutHints
from ragen_plugins_envs.registration_guides import GUIDES

__all__ = ["WEBSHOP_ENVS", "WEBSHOP_ENV_HINTS", "WEBSHOP_ENV_VARIANTS", "register_webshop_envs"]

#: name -> (entry point, config class, description)
WEBSHOP_ENVS: dict[str, tuple[str, str, str]] = {
    "webshop": (
        "ragen_plugins_envs.webshop.env:WebShopEnv", "ragen_plugins_envs.webshop.env:WebShopConfig",
        "WebShop offline: search, browse and buy the product an instruction describes (WebShop's score)",
    ),
}

#: name -> (base env, params, description)
WEBSHOP_ENV_VARIANTS: dict[str, tuple[str, dict[str, Any], str]] = {
    "webshop_small": ("webshop", {"num_products": 100}, "WebShop with 100 generated products"),
    "webshop_rich": ("webshop", {"observation_mode": "text_rich"}, "WebShop with text_rich observations"),
}


#: env name -> how its rollouts are shaped: one action a turn (each page lists the next actions), RAGEN's 9 actions
#: as 9 turns; an answer is a search query or a click on a product or option
WEBSHOP_ENV_HINTS: dict[str, RolloutHints] = {
    "webshop": RolloutHints(max_turn=9, max_actions_per_turn=1, answer_tokens=48, think_tokens=48),
}


def register_webshop_envs(registry: Any) -> None:
    """Register ``webshop`` and its variants on an env registry (``EnvRegistry``)."""
    for name, (entry_point, config, description) in WEBSHOP_ENVS.items():
        registry.register(name, entry_point, config=config, description=description,
                          hints=WEBSHOP_ENV_HINTS[name], guide=GUIDES.get(name, {}))
    for name, (env, params, description) in WEBSHOP_ENV_VARIANTS.items():
        registry.register_variant(name, env=env, params=dict(params), description=description)

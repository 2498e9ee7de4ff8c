"""``WebShopEnv``: WebShop (Yao et al., 2022) as a ragen text env, offline.

Each episode is one shopping goal (see :mod:`ragen_plugins_envs.webshop.goals`) on a catalog — the generated one
(default; 1,000 products in 10 categories) or WebShop's own product files (``catalog: /path/to/data``). The agent
browses WebShop's pages (:mod:`ragen_plugins_envs.webshop.engine`) and buys one product.

Observation (``text`` mode, as RAGEN uses WebShop): the page's visible texts joined by ``" [SEP] "``, then, as RAGEN
lists them, the available actions::

    Instruction: [SEP] i need slim fit men's dress shirt with color: navy, and size: large, and price lower than
    40.00 dollars [SEP] Back to Search [SEP] Page 1 (Total results: 50) [SEP] Next > [SEP] B0MXE41Y05 [SEP] …
    Available actions: click[back to search], click[next >], click[b0mxe41y05], …

Actions: ``search[query]`` (only on the search page, where WebShop has its search bar; lists as
``search[<content>]``) and ``click[element]`` with an element's text as listed (case and surrounding spaces
ignored; ``click[search]`` is never valid, as in WebShop). Anything else — unknown element, search off the search
page, empty or over-long query, malformed text, any step after the purchase — is invalid: reward 0, state
unchanged, ``info["action_is_valid"] = False``. ``action_is_effective`` is True when the shop state changed.

Reward: 0 until ``click[buy now]``, then WebShop's score in [0, 1]; the episode ends there. ``success`` only for a
perfect score (1.0), as RAGEN counts it. The env never truncates: ``max_actions_per_traj`` (9, RAGEN's WebShop
setting) is enforced by the rollout loop (and by gymnasium's ``TimeLimit`` through ``gymnasium.make``).

``oracle_action`` proposes a shortest action sequence that buys the goal product with the goal options: search its
title, page to it if needed, click it, click each goal option not yet chosen, buy.
"""

from __future__ import annotations

import random
import re
from typing import Any, ClassVar

import attrs

from ragen_core.env import TextEnv
from ragen_core.validators import constraint, integer, number, one_of
from ragen_plugins_envs.webshop.catalog import Catalog, get_catalog
from ragen_plugins_envs.webshop.engine import WebShopEngine
from ragen_plugins_envs.webshop.goals import Goal, GoalPool
from ragen_plugins_envs.webshop.search import SEARCH_RETURN_N, get_search_engine

__all__ = ["MAX_QUERY_CHARS", "WebShopConfig", "WebShopEnv", "parse_action"]

#: the longest accepted search query
MAX_QUERY_CHARS = 500
_ACTION_RE = re.compile(r"\s*(search|click)\s*\[(.*)\]\s*", re.IGNORECASE | re.DOTALL)


def parse_action(text: Any) -> tuple[str, str] | None:
    """``("search" | "click", argument)`` from ``search[...]`` / ``click[...]`` (name case-insensitive), or None."""
    if not isinstance(text, str) or len(text) > MAX_QUERY_CHARS + 32:
        return None
    match = _ACTION_RE.fullmatch(text)
    if match is None:
        return None
    return match.group(1).lower(), match.group(2)


_catalog_source = constraint("'generated' or a path to WebShop's product files",
                             lambda v: isinstance(v, str) and bool(v.strip()))


@attrs.define
class WebShopConfig:
    """Options of :class:`WebShopEnv`.

    :ivar catalog: ``"generated"`` or a path to WebShop's data (``items_shuffle_1000.json`` or its folder).
    :ivar num_products: products in the catalog (generated: how many to make; files: the first N, None = all).
    :ivar seed: catalog seed (generated products; prices drawn inside price ranges).
    :ivar max_actions_per_traj: actions per trajectory (RAGEN's WebShop: 9).
    :ivar results_per_page: products per results page (WebShop: 10).
    :ivar search_return_n: hits a search returns (WebShop: 50).
    :ivar observation_mode: ``text`` (``[SEP]``-joined, as RAGEN) or ``text_rich`` (WebShop's marked-up mode).
    :ivar show_available_actions: append the available actions to every observation (as RAGEN does).
    :ivar show_attrs: add WebShop's ``Attributes`` sub-page to item pages.
    :ivar human_goals: WebShop files: use the human instructions when present (else the synthetic ones).
    :ivar split: ``all`` goals, or the ``train`` / held-out ``test`` part (``test_fraction`` of them).
    :ivar test_fraction: the share of the goals held out as the ``test`` split.
    """

    catalog: str = attrs.field(default="generated", validator=_catalog_source)
    num_products: int | None = attrs.field(  # attrs' stubs take the field's type from the int default
        default=1000, validator=attrs.validators.optional(integer(1)))  # type: ignore[arg-type]
    seed: int = attrs.field(default=0, validator=integer())
    max_actions_per_traj: int = attrs.field(default=9, validator=integer(1))
    results_per_page: int = attrs.field(default=10, validator=integer(1))
    search_return_n: int = attrs.field(default=SEARCH_RETURN_N, validator=integer(1))
    observation_mode: str = attrs.field(default="text", validator=one_of("text", "text_rich"))
    show_available_actions: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))
    show_attrs: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    human_goals: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))
    split: str = attrs.field(default="all", validator=one_of("all", "train", "test"))
    test_fraction: float = attrs.field(default=0.1, validator=number(0, 1, low_open=True, high_open=True))


class WebShopEnv(TextEnv):
    """WebShop, offline. See the module docstring for pages, actions, observations and the reward."""

    config_cls: ClassVar[type] = WebShopConfig
    config: WebShopConfig

    def __init__(self, config: WebShopConfig | None = None, render_mode: str | None = "ansi",
                 **options: Any) -> None:
        super().__init__(config, render_mode, **options)
        cfg = self.config
        self.catalog: Catalog = get_catalog(cfg.catalog, cfg.num_products, cfg.seed)
        self.search_engine = get_search_engine(self.catalog)
        self.goals = GoalPool(self.catalog, human_goals=cfg.human_goals, split=cfg.split,
                              test_fraction=cfg.test_fraction)
        self.engine = WebShopEngine(self.catalog, self.search_engine, results_per_page=cfg.results_per_page,
                                    search_return_n=cfg.search_return_n, show_attrs=cfg.show_attrs)
        self.max_actions_per_traj = cfg.max_actions_per_traj
        self.action_names = None
        self.legend = {"[SEP]": "separates the texts of the page", "Available actions": "what can be done now"}
        self.instruction = (
            "You are shopping in WebShop, an online store. Every page shows your instruction: find the product it "
            "describes, choose the requested options (such as color and size) on the product page, and buy it. "
            "Actions: search[keywords] on the search page, and click[element] to click an element listed in the "
            "available actions (a button, a product id from the results, or an option value), written as listed "
            "(case does not matter). The available actions follow every page; anything else does nothing. "
            "Buying ends the episode with a score from 0 to 1: the share of requested attributes, options and the "
            "price limit that the purchase meets, times a product-type factor; only a perfect purchase is a "
            "success. Search for the product itself rather than its color, size or price. "
            f"You have {cfg.max_actions_per_traj} actions. Example: <answer>search[slim fit men's dress shirt]"
            "</answer>, then <answer>click[b0mxe41y05]</answer>."
        )
        self.goal: Goal | None = None
        self.goal_index = -1
        self._oracle_queries: dict[str, str] = {}
        self._render_cache: tuple[str | None, str] = (None, "")

    # ------------------------------------------------------------------------------------------ gymnasium API

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode: a goal drawn from the seed (or ``options["goal_index"]``) on the search page."""
        super().reset(seed=seed)
        index = int(self.np_random.integers(0, len(self.goals)))
        if options and options.get("goal_index") is not None:
            requested = options["goal_index"]
            if isinstance(requested, bool) or not isinstance(requested, int):
                raise ValueError(f"options['goal_index'] must be an integer, got {requested!r}")
            index = requested % len(self.goals)
        rng = random.Random(int(self.np_random.integers(0, 2**63 - 1)))
        self.goal = self.goals.goal(index, rng)
        self.goal_index = index
        self.engine.start(self.goal)
        info = {"goal_index": index, "goal_attributes": len(self.goal.attributes),
                "goal_options": len(self.goal.goal_options), "price_upper": float(self.goal.price_upper)}
        return self.render(), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply one ``search[...]`` / ``click[...]``; invalid ones change nothing and earn 0."""
        if self.goal is None or self.engine.done:
            return self.render(), 0.0, True, False, self._info(valid=False, effective=False)
        parsed = parse_action(action)
        if parsed is None:
            return self._invalid()
        name, argument = parsed
        before = self._state_tuple()
        reward = 0.0
        if name == "search":
            query = argument.strip()
            if (not self.engine.has_search_bar() or not query or len(query) > MAX_QUERY_CHARS
                    or "[" in query or "]" in query):
                return self._invalid()
            self.engine.search(query)
        else:
            key = argument.strip().lower()
            if key == "search" or key not in self.engine.clickables():
                return self._invalid()
            reward = self.engine.click(key)
        terminated = self.engine.done
        success = terminated and self.engine.session.score == 1.0
        info = self._info(valid=True, effective=self._state_tuple() != before, success=success)
        if terminated:
            info.update(self._purchase_metrics())
        return self.render(), float(reward), terminated, False, info

    def render(self) -> str:
        """The current page in the configured observation mode, then the available actions."""
        if self.goal is None:
            return "No episode yet: call reset()."
        text = self.engine.observation(self.config.observation_mode)
        if not self.config.show_available_actions:
            return text
        if self._render_cache[0] is not text:
            actions = ", ".join(self.available_actions()) or "none"
            self._render_cache = (text, f"{text}\nAvailable actions: {actions}")
        return self._render_cache[1]

    # ------------------------------------------------------------------------------------------ helpers for agents

    def available_actions(self) -> list[str]:
        """The valid actions now, as RAGEN lists them (``search[<content>]``, ``click[...]``)."""
        if self.goal is None or self.engine.done:
            return []
        actions = ["search[<content>]"] if self.engine.has_search_bar() else []
        actions += [f"click[{text}]" for text in self.engine.clickables() if text != "search"]
        return actions

    def oracle_action(self) -> str | None:
        """The next action of a shortest purchase of the goal product with the goal options, or None when done."""
        if self.goal is None or self.engine.done:
            return None
        goal, engine, session = self.goal, self.engine, self.engine.session
        target = self.catalog.index_of[goal.asin]
        if session.page == "search":
            return f"search[{self._oracle_query(goal)}]"
        if session.page == "results":
            if target in session.results:
                page = session.results.index(target) // engine.results_per_page + 1
                if page == session.page_num:
                    return f"click[{goal.asin.lower()}]"
                return "click[next >]" if page > session.page_num else "click[< prev]"
            return "click[back to search]"
        if session.page == "sub":
            return "click[< prev]"
        if session.asin != goal.asin:
            return "click[< prev]" if target in session.results else "click[back to search]"
        clickables = engine.clickables()
        desired: dict[str, str] = {}
        for option_name, value in goal.goal_options:
            key = value.lower()
            element = clickables.get(key)
            if element is None or element.kind != "option" or element.option_name in desired:
                continue
            if not option_name or element.option_name == option_name:
                desired[element.option_name] = key
        for option_name, key in desired.items():
            if session.options.get(option_name) != key:
                return f"click[{key}]"
        return "click[buy now]"

    def state_key(self) -> str:
        """Goal and shop state (page, query, results page, product, chosen options, sub-page)."""
        if self.goal is None:
            return ""
        return repr(self._state_tuple())

    # ------------------------------------------------------------------------------------------ internals

    def _state_tuple(self) -> tuple[Any, ...]:
        goal = self.goal
        head = (goal.asin, goal.instruction_text) if goal else ("", "")
        return head + self.engine.session.key(with_visited=self.config.observation_mode == "text_rich")

    def _oracle_query(self, goal: Goal) -> str:
        cached = self._oracle_queries.get(goal.asin)
        if cached is not None:
            return cached
        product = self.catalog.by_asin[goal.asin]
        target = self.catalog.index_of[goal.asin]
        candidates = [product.title, f"{product.title} {product.bullet_points[0] if product.bullet_points else ''}",
                      product.query, product.asin]
        cleaned = []
        for text in candidates:
            words = " ".join(re.sub(r"[\[\]]", " ", text).split())[:MAX_QUERY_CHARS].strip()
            if words:
                cleaned.append(words)
        query = cleaned[0] if cleaned else "product"
        for text in cleaned:
            if target in self.search_engine.search(text.lower(), self.engine.search_return_n):
                query = text
                break
        self._oracle_queries[goal.asin] = query
        return query

    def _invalid(self) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self.render(), 0.0, False, False, self._info(valid=False, effective=False)

    def _info(self, *, valid: bool, effective: bool, success: bool = False) -> dict[str, Any]:
        return {"success": bool(success), "action_is_valid": bool(valid), "action_is_effective": bool(effective)}

    def _purchase_metrics(self) -> dict[str, Any]:
        session = self.engine.session
        metrics: dict[str, Any] = {"score": float(session.score), "purchased_goal_product": session.asin ==
                                   (self.goal.asin if self.goal else "")}
        for key in ("r_type", "r_att", "r_option", "r_price", "title_score", "query_match", "category_match"):
            if key in session.reward_info:
                value = session.reward_info[key]
                metrics[key] = bool(value) if isinstance(value, bool) else float(value)
        return metrics

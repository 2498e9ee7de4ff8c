"""WebShop's page state machine (``web_agent_site``'s ``SimServer.receive`` and page templates), without HTML.

Pages and what can be clicked (texts lower-cased, in page order, as WebShop's ``get_available_actions``):

- **search** — the search bar; ``search[query]`` goes to the results page 1 of ``query``;
- **results** — ``back to search``, ``< prev`` (page > 1), ``next >`` (more results after this page), then the
  ASINs of up to ``results_per_page`` products (of the top 50 hits); an ASIN opens its item page (no option chosen);
- **item** — ``back to search``, ``< prev`` (back to the same results page; WebShop clears the chosen options
  there), ``description``, ``features``, ``reviews``, (``attributes`` when ``show_attrs``), ``buy now``, then every
  option value; a value selects it for its option type (the last type holding that text, as WebShop's dictionary
  of clickables does);
- **sub-page** (description / features / reviews / attributes) — ``back to search``, ``< prev`` (back to the item
  page, options kept);
- **done** — after ``buy now``: the score; nothing can be clicked.

``back to search`` resets the session (query, page, product, options, visited products) as WebShop does.

Observations follow WebShop's text modes: ``text`` joins the visible texts with ``" [SEP] "``; ``text_rich`` puts one
per line with ``[button] … [button_]`` around buttons, ``[clicked button] … [clicked button_]`` around chosen options
and visited products, and ``You have clicked {value}.`` lines on top for chosen options.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ragen_plugins_envs.webshop.catalog import Catalog, Product
from ragen_plugins_envs.webshop.goals import Goal, get_reward
from ragen_plugins_envs.webshop.search import SEARCH_RETURN_N, SearchEngine

__all__ = ["BACK_TO_SEARCH", "BUY_NOW", "NEXT_PAGE", "PREV_PAGE", "SUB_PAGES", "Clickable", "Session",
           "WebShopEngine"]

BUY_NOW = "Buy Now"
NEXT_PAGE = "Next >"
PREV_PAGE = "< Prev"
BACK_TO_SEARCH = "Back to Search"
#: item sub-pages, in button order
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")


@dataclass(frozen=True)
class Clickable:
    """One clickable element: ``kind`` in back/prev/next/product/sub/buy/option and its target."""

    kind: str
    target: str = ""
    option_name: str = ""


@dataclass
class Session:
    """The browsing state of one episode."""

    page: str = "search"
    keywords: str = ""
    page_num: int = 1
    results: tuple[int, ...] = ()
    asin: str = ""
    options: dict[str, str] = field(default_factory=dict)
    sub_page: str = ""
    visited: set[str] = field(default_factory=set)
    score: float = 0.0
    reward_info: dict[str, Any] = field(default_factory=dict)

    def key(self, with_visited: bool) -> tuple[Any, ...]:
        """A hashable summary of the state."""
        visited = tuple(sorted(self.visited)) if with_visited else ()
        return (self.page, self.keywords, self.page_num, self.asin, tuple(sorted(self.options.items())),
                self.sub_page, visited, self.score if self.page == "done" else 0.0)


class WebShopEngine:
    """One shop session for one goal: pages, clickables, searches and the purchase score."""

    def __init__(self, catalog: Catalog, search_engine: SearchEngine, *, results_per_page: int = 10,
                 search_return_n: int = SEARCH_RETURN_N, show_attrs: bool = False) -> None:
        self.catalog = catalog
        self.search_engine = search_engine
        self.results_per_page = results_per_page
        self.search_return_n = search_return_n
        self.show_attrs = show_attrs
        self.goal: Goal | None = None
        self.session = Session()
        self._clickables: dict[str, Clickable] | None = None
        self._observations: dict[str, str] = {}

    # ------------------------------------------------------------------------------------------ state

    def start(self, goal: Goal) -> None:
        """Begin a session for ``goal`` on the search page."""
        self.goal = goal
        self.session = Session()
        self._changed()

    def _changed(self) -> None:
        self._clickables = None
        self._observations = {}

    @property
    def done(self) -> bool:
        return self.session.page == "done"

    @property
    def product(self) -> Product | None:
        """The product of the item page or sub-page (or the one bought)."""
        return self.catalog.by_asin.get(self.session.asin) if self.session.asin else None

    def has_search_bar(self) -> bool:
        return self.session.page == "search"

    def page_products(self) -> list[Product]:
        """The products listed on the current results page."""
        s = self.session
        start = (s.page_num - 1) * self.results_per_page
        return [self.catalog.products[i] for i in s.results[start:start + self.results_per_page]]

    def clickables(self) -> dict[str, Clickable]:
        """Lower-cased clickable text → element, in page order (WebShop's ``text_to_clickable``)."""
        if self._clickables is None:
            self._clickables = self._build_clickables()
        return self._clickables

    def _build_clickables(self) -> dict[str, Clickable]:
        s = self.session
        out: dict[str, Clickable] = {}
        if s.page == "results":
            out[BACK_TO_SEARCH.lower()] = Clickable("back")
            if s.page_num > 1:
                out[PREV_PAGE.lower()] = Clickable("prev")
            if s.page_num * self.results_per_page < len(s.results):
                out[NEXT_PAGE.lower()] = Clickable("next")
            for p in self.page_products():
                out[p.asin.lower()] = Clickable("product", p.asin)
        elif s.page == "item":
            out[BACK_TO_SEARCH.lower()] = Clickable("back")
            out[PREV_PAGE.lower()] = Clickable("prev")
            for name in self._sub_pages():
                out[name.lower()] = Clickable("sub", name)
            out[BUY_NOW.lower()] = Clickable("buy")
            product = self.product
            for option_name, values in product.options if product else ():
                for value in values:
                    out[value] = Clickable("option", value, option_name)
        elif s.page == "sub":
            out[BACK_TO_SEARCH.lower()] = Clickable("back")
            out[PREV_PAGE.lower()] = Clickable("prev")
        return out

    def _sub_pages(self) -> tuple[str, ...]:
        return SUB_PAGES if self.show_attrs else SUB_PAGES[:3]

    def total_pages(self) -> int:
        return max(1, math.ceil(len(self.session.results) / self.results_per_page))

    # ------------------------------------------------------------------------------------------ actions

    def search(self, keywords: str) -> None:
        """Run a search (valid on the search page) and show results page 1."""
        s = self.session
        s.keywords = " ".join(keywords.lower().split(" "))
        s.results = self.search_engine.search(s.keywords, self.search_return_n)
        s.page_num = 1
        s.asin = ""
        s.options = {}
        s.sub_page = ""
        s.page = "results"
        self._changed()

    def click(self, text: str) -> float:
        """Click the element whose lower-cased text is ``text`` (must be in :meth:`clickables`); returns the reward."""
        element = self.clickables()[text]
        s = self.session
        reward = 0.0
        if element.kind == "back":
            self.session = Session()
        elif element.kind == "next":
            s.page_num += 1
        elif element.kind == "prev":
            if s.page == "results":
                s.page_num -= 1
            elif s.page == "item":
                s.page, s.asin, s.options = "results", "", {}
            else:
                s.page, s.sub_page = "item", ""
        elif element.kind == "product":
            s.page, s.asin, s.options = "item", element.target, {}
            s.visited.add(element.target)
        elif element.kind == "option":
            s.options[element.option_name] = element.target
        elif element.kind == "sub":
            s.page, s.sub_page = "sub", element.target
        elif element.kind == "buy":
            reward = self._buy()
        self._changed()
        return reward

    def _buy(self) -> float:
        s = self.session
        product = self.product
        if product is None or self.goal is None:
            raise RuntimeError("buy now clicked without a product page")
        score, info = get_reward(product, self.goal, product.price, dict(s.options))
        s.score, s.reward_info, s.page = score, info, "done"
        return score

    # ------------------------------------------------------------------------------------------ rendering

    def elements(self) -> list[tuple[str, str, bool]]:
        """The visible texts of the page as ``(kind, text, clicked)``; kind in text/button/option/product."""
        s = self.session
        goal_text = self.goal.instruction_text if self.goal else ""
        head = [("text", "Instruction:", False), ("text", goal_text, False)]
        if s.page == "search":
            return [("text", "WebShop", False), *head, ("button", "Search", False)]
        if s.page == "done":
            return [("text", "Thank you for shopping with us!", False),
                    ("text", "Your score (min 0.0, max 1.0)", False), ("text", f"{s.score}", False)]
        out = [*head, ("button", BACK_TO_SEARCH, False)]
        if s.page == "results":
            out.append(("text", f"Page {s.page_num} (Total results: {len(s.results)})", False))
            if s.page_num > 1:
                out.append(("button", PREV_PAGE, False))
            if s.page_num * self.results_per_page < len(s.results):
                out.append(("button", NEXT_PAGE, False))
            for p in self.page_products():
                out += [("product", p.asin, p.asin in s.visited), ("text", p.title, False),
                        ("text", p.price_tag, False)]
            return out
        product = self.product
        out.append(("button", PREV_PAGE, False))
        if product is None:
            return out
        if s.page == "item":
            chosen = set(s.options.values())
            for option_name, values in product.options:
                out.append(("text", option_name, False))
                out += [("option", v, v in chosen) for v in values]
            out += [("text", product.title, False), ("text", f"Price: {product.price_tag}", False),
                    ("text", f"Rating: {product.rating}", False)]
            out += [("button", name, False) for name in self._sub_pages()]
            out.append(("button", BUY_NOW, False))
        elif s.sub_page == "Description":
            out.append(("text", product.description or "No Description", False))
        elif s.sub_page == "Features":
            out += [("text", b, False) for b in product.bullet_points] or [("text", "No Features", False)]
        elif s.sub_page == "Reviews":
            if not product.reviews:
                out.append(("text", "No reviews found", False))
            for r in product.reviews:
                out += [("text", f'"{r.title}"', False), ("text", str(r.score), False)]
                if r.body:
                    out.append(("text", r.body, False))
        elif s.sub_page == "Attributes":
            out += [("text", a, False) for a in product.attributes]
        return out

    def observation(self, mode: str = "text") -> str:
        """The page in WebShop's ``text`` or ``text_rich`` observation mode (cached until the state changes)."""
        cached = self._observations.get(mode)
        if cached is None:
            cached = self._observations[mode] = self._render(mode)
        return cached

    def _render(self, mode: str) -> str:
        elements = [e for e in self.elements() if e[1].strip()]
        if mode == "text":
            return " [SEP] ".join(text.strip() for _kind, text, _clicked in elements)
        lines: list[str] = []
        clicked_lines: list[str] = []
        for kind, text, clicked in elements:
            if kind == "button":
                lines.append(f"[button] {text} [button_]")
            elif kind == "option":
                if clicked:
                    lines.append(f"  [clicked button] {text} [clicked button_]")
                    clicked_lines.insert(0, f"You have clicked {text}.")
                else:
                    lines.append(f"  [button] {text} [button_]")
            elif kind == "product":
                tag = "clicked button" if clicked else "button"
                lines.append(f"\n[{tag}] {text} [{tag}_]")
            else:
                lines.append(text)
        return "\n".join(clicked_lines + lines)

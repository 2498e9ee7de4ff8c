"""WebShop goals (what to buy) and WebShop's purchase score.

Goals are built the WebShop way (``web_agent_site/engine/goal.py``):

- **generated catalog**: a product; 1–3 of its attributes; one value per option type (option names sorted, as
  WebShop's synthetic goals enumerate them); the instruction ``"{opener} {attributes} {product}"`` (a few phrasings,
  e.g. ``"i need machine wash and slim fit men's dress shirt"``) followed by WebShop's option and price text:
  ``" with color: navy, and size: large, and price lower than 40.00 dollars"``;
- **WebShop files, synthetic** (``items_ins_v2``): the product's ``instruction`` with its ``instruction_attributes``
  and one random combination of its options, same suffix;
- **WebShop files, human** (``items_human_ins.json``): the human ``instruction`` (trailing dots stripped) + the price
  text, its ``instruction_attributes`` and ``instruction_options`` (a list of values); goals without attributes are
  skipped, as in WebShop.

Price limit (WebShop's rule): of the prices ``10, 20, …, 990`` above the product's price keep the first four, draw
two of them and take the larger; with fewer than two there is no limit (1,000,000) and no price text.

Score (:func:`get_reward`, WebShop's ``get_reward``)::

    score = (matched attributes + matched options + [price ≤ limit]) / (goal attributes + goal options + 1) × r_type

- an attribute matches when a purchased-product attribute has a fuzzy token-set ratio > 85 with it, or when it
  occurs in the product's title, bullet points or description (lower-cased);
- each *selected* option matches when (after colour normalisation) it equals a goal option value (option name
  ``size``: exact) or fuzzy-matches one (> 85), or occurs in the title/bullets/description. WebShop counts matches
  per selected option and never caps the count; here it is capped at the number of goal options so the score stays
  in [0, 1] (only human goals naming fewer options than the product has could exceed it);
- ``r_type`` (product-type factor): ``query_match`` = same search query as the goal product; ``category_match`` = at
  least two shared ``›``-separated category levels; ``title_score`` = share of the goal title's noun tokens found in
  the purchased title (see :func:`ragen_plugins_envs.webshop.text.noun_tokens`; 0.2 when the goal title has none).
  ``r_type = 1.0``; ``0.5`` when none of query match, category match, title_score > 0.2 holds; then ``0.1`` when
  title_score < 0.1; then ``0.0`` when title_score == 0 (these two override, as in WebShop).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragen_plugins_envs.webshop.catalog import Catalog, HumanInstruction, Product
from ragen_plugins_envs.webshop.text import normalize_color, noun_tokens, token_set_ratio

__all__ = [
    "EXACT_MATCH_OPTS",
    "Goal",
    "GoalPool",
    "NO_PRICE_LIMIT",
    "PRICE_RANGE",
    "generated_goal",
    "get_attribute_reward",
    "get_option_reward",
    "get_reward",
    "get_type_reward",
    "human_goal",
    "price_limit",
    "synthetic_goal",
]

#: WebShop's candidate price limits
PRICE_RANGE: tuple[float, ...] = tuple(10.0 * i for i in range(1, 100))
#: the limit when no price is asked for
NO_PRICE_LIMIT = 1_000_000.0
#: option names matched exactly rather than fuzzily
EXACT_MATCH_OPTS = ("size",)
_FUZZY_THRESHOLD = 85


@dataclass(frozen=True)
class Goal:
    """What the shopper asks for.

    :ivar goal_options: ``((option name, value), ...)`` for generated and synthetic goals; for human goals the
        names are empty strings (WebShop's human goals list values only).
    :ivar kind: ``generated``, ``synthetic`` or ``human``.
    """

    asin: str
    instruction_text: str
    attributes: tuple[str, ...]
    goal_options: tuple[tuple[str, str], ...]
    price_upper: float
    name: str
    query: str
    category: str
    product_category: str
    kind: str

    @property
    def option_values(self) -> list[str]:
        """The goal option values (what WebShop's reward compares against)."""
        return [v for _k, v in self.goal_options]


def price_limit(price: float, rng: random.Random) -> tuple[float, str]:
    """WebShop's price limit for a product of ``price``: ``(limit, text)`` (see the module docstring)."""
    candidates = [p for p in PRICE_RANGE if p > price][:4]
    if len(candidates) >= 2:
        _low, upper = sorted(rng.sample(candidates, 2))
        return upper, f", and price lower than {upper:.2f} dollars"
    return NO_PRICE_LIMIT, ""


def _option_text(options: Sequence[tuple[str, str]]) -> str:
    text = ", and ".join(f"{k}: {v}" for k, v in options)
    return f" with {text}" if text else ""


_OPENERS = ("i need", "i am looking for", "i want", "find me", "i'm looking for", "i would like", "get me",
            "shop for")


def _generated_instruction(noun: str, attributes: Sequence[str], rng: random.Random) -> str:
    attrs = list(attributes)
    joined = attrs[0] if len(attrs) == 1 else ", ".join(attrs[:-1]) + " and " + attrs[-1]
    opener = rng.choice(_OPENERS)
    if rng.random() < 0.3:
        return f"{opener} {noun} that is {joined}"
    return f"{opener} {joined} {noun}"


def _goal_fields(product: Product) -> dict[str, str]:
    return {"asin": product.asin, "name": product.title, "query": product.query, "category": product.category,
            "product_category": product.product_category}


def generated_goal(product: Product, rng: random.Random) -> Goal:
    """A goal for a generated product: 1–3 attributes, one value per option type, a price limit."""
    if not product.attributes:
        raise ValueError(f"product {product.asin} has no attributes to ask for")
    k = rng.randint(1, min(3, len(product.attributes)))
    attrs = tuple(sorted(rng.sample(product.attributes, k), key=product.attributes.index))
    options = tuple((name, rng.choice(values)) for name, values in sorted(product.options))
    upper, price_text = price_limit(product.price, rng)
    text = _generated_instruction(product.noun_phrase or product.query, attrs, rng) + _option_text(options) + price_text
    return Goal(instruction_text=text, attributes=attrs, goal_options=options, price_upper=upper,
                kind="generated", **_goal_fields(product))


def synthetic_goal(product: Product, rng: random.Random) -> Goal:
    """A WebShop synthetic goal (``items_ins_v2``) with one random option combination."""
    if not product.instruction_text or not product.instruction_attributes:
        raise ValueError(f"product {product.asin} has no synthetic instruction")
    options = tuple((name, rng.choice(values)) for name, values in sorted(product.options))
    upper, price_text = price_limit(product.price, rng)
    text = f"{product.instruction_text}{_option_text(options)}{price_text}"
    return Goal(instruction_text=text, attributes=product.instruction_attributes, goal_options=options,
                price_upper=upper, kind="synthetic", **_goal_fields(product))


def human_goal(product: Product, instruction: HumanInstruction, rng: random.Random) -> Goal:
    """A WebShop human goal: the human instruction, its attributes and option values, a price limit."""
    upper, price_text = price_limit(product.price, rng)
    return Goal(instruction_text=instruction.instruction.strip(".") + price_text, attributes=instruction.attributes,
                goal_options=tuple(("", v) for v in instruction.options), price_upper=upper, kind="human",
                **_goal_fields(product))


class GoalPool:
    """The goals an env samples from: ``(product index, human instruction index or -1)`` entries.

    Generated catalogs: every product with attributes. WebShop files: the human instructions with attributes when
    ``human_goals`` and the file has them, else the products with a synthetic instruction.

    ``split`` keeps all entries, or a held-out ``test`` part (every entry whose position in a fixed shuffle
    — ``random.Random(233)``, WebShop's goal-shuffle seed — falls in the first ``test_fraction``) or the ``train``
    rest.
    """

    def __init__(self, catalog: Catalog, *, human_goals: bool = True, split: str = "all",
                 test_fraction: float = 0.1) -> None:
        self.catalog = catalog
        entries: list[tuple[int, int]] = []
        if catalog.is_generated:
            self.kind = "generated"
            entries = [(i, -1) for i, p in enumerate(catalog.products) if p.attributes]
        else:
            humans = [(i, j) for i, p in enumerate(catalog.products)
                      for j, ins in enumerate(p.human_instructions) if ins.attributes]
            if human_goals and humans:
                self.kind, entries = "human", humans
            else:
                self.kind = "synthetic"
                entries = [(i, -1) for i, p in enumerate(catalog.products)
                           if p.instruction_text and p.instruction_attributes]
        if not entries:
            raise ValueError(
                f"no goal can be built from {catalog.source}: the products need instructions with attributes "
                "(items_human_ins.json or items_ins_v2*.json next to the product file)")
        if split not in ("all", "train", "test"):
            raise ValueError(f"split must be 'all', 'train' or 'test', got {split!r}")
        if split != "all":
            order = list(range(len(entries)))
            random.Random(233).shuffle(order)
            n_test = max(1, round(len(entries) * test_fraction))
            held = set(order[:n_test])
            keep = [e for k, e in enumerate(entries) if (k in held) == (split == "test")]
            if not keep:
                raise ValueError(f"the {split} split of {catalog.source} is empty")
            entries = keep
        self.entries: tuple[tuple[int, int], ...] = tuple(entries)

    def __len__(self) -> int:
        return len(self.entries)

    def goal(self, index: int, rng: random.Random) -> Goal:
        """The goal of entry ``index`` (modulo the pool size), its random parts drawn from ``rng``."""
        product_index, human_index = self.entries[index % len(self.entries)]
        product = self.catalog.products[product_index]
        if self.kind == "generated":
            return generated_goal(product, rng)
        if self.kind == "human":
            return human_goal(product, product.human_instructions[human_index], rng)
        return synthetic_goal(product, rng)


# --------------------------------------------------------------------------------------------- reward

def get_type_reward(purchased: Product, goal: Goal) -> dict[str, Any]:
    """WebShop's product-type factor ``r_type`` with its parts (see the module docstring)."""
    query_match = purchased.query == goal.query
    purchased_levels = {x.strip() for x in purchased.product_category.split("›")}
    goal_levels = {x.strip() for x in goal.product_category.split("›")}
    category_match = len(purchased_levels & goal_levels) >= 2
    purchased_nouns = noun_tokens(purchased.title)
    desired_nouns = noun_tokens(goal.name)
    if not desired_nouns:
        title_score = 0.2
    else:
        title_score = len(set(purchased_nouns) & set(desired_nouns)) / len(desired_nouns)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match,
            "title_score": title_score}


def get_attribute_reward(purchased: Product, goal: Goal) -> tuple[float, int]:
    """``(share of goal attributes matched, count)``: fuzzy against the product's attributes, else found in text."""
    matches = 0
    for wanted in goal.attributes:
        if any(token_set_ratio(have, wanted) > _FUZZY_THRESHOLD for have in purchased.attributes):
            matches += 1
        elif purchased.mentions(wanted):
            matches += 1
    return (matches / len(goal.attributes) if goal.attributes else 0.0), matches


def get_option_reward(purchased: Product, goal_option_values: Sequence[str],
                      purchased_options: Mapping[str, str]) -> tuple[float | None, int]:
    """``(share of goal options matched or None without goal options, count)`` for the selected options."""
    goal_values = [normalize_color(v) for v in goal_option_values]
    matches = 0
    for name, value in purchased_options.items():
        value = normalize_color(value)
        if name.lower() in EXACT_MATCH_OPTS:
            matched = value in goal_values
        else:
            matched = any(token_set_ratio(g, value) > _FUZZY_THRESHOLD for g in goal_values)
        if matched or purchased.mentions(value):
            matches += 1
    matches = min(matches, len(goal_values))
    return (matches / len(goal_values) if goal_values else None), matches


def get_reward(purchased: Product, goal: Goal, price: float,
               options: Mapping[str, str]) -> tuple[float, dict[str, Any]]:
    """WebShop's purchase score in [0, 1] and its parts (``r_type``, ``r_att``, ``r_option``, ``r_price``, ...)."""
    type_info = get_type_reward(purchased, goal)
    r_price = price <= goal.price_upper if goal.price_upper > 0 else None
    r_att, n_attr = get_attribute_reward(purchased, goal)
    r_option, n_option = get_option_reward(purchased, goal.option_values, options)
    denominator = len(goal.attributes) + len(goal.goal_options) + 1
    score = (n_attr + n_option + int(bool(r_price))) / denominator * type_info["r_type"]
    info: dict[str, Any] = {
        "r_type": type_info["r_type"], "r_att": r_att, "w_att": len(goal.attributes) / denominator,
        "query_match": type_info["query_match"], "category_match": type_info["category_match"],
        "title_score": type_info["title_score"], "num_attr_matches": n_attr, "num_option_matches": n_option,
    }
    if r_option is not None:
        info["r_option"] = r_option
        info["w_option"] = len(goal.goal_options) / denominator
    if r_price is not None:
        info["r_price"] = bool(r_price)
        info["w_price"] = 1 / denominator
    return float(score), info

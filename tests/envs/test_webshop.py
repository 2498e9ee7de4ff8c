"""Tests of the WebShop env: contract, registration, observations and available actions, the page state machine
(paging, back, sub-pages, options), invalid actions, rewards through the env, the oracle, and fuzzing."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragen_core.checks import check_env, fuzz_env
from ragen_core.env import register_gymnasium_envs
from ragen_core.errors import ConfigError
from ragen_core.registry import EnvRegistry, Registries
from ragen_plugins_envs.registration_webshop import WEBSHOP_ENV_VARIANTS, register_webshop_envs
from ragen_plugins_envs.webshop.env import WebShopConfig, WebShopEnv, parse_action

DATA = Path(__file__).parent / "data" / "webshop"
FUZZ = settings(max_examples=200,  # x 50 actions = 10,000 action strings
                deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def registry() -> EnvRegistry:
    reg = EnvRegistry()
    register_webshop_envs(reg)
    return reg


def step(env: WebShopEnv, action: str) -> tuple[str, float, bool, bool, dict]:
    result = env.step(action)
    assert result[4]["action_is_valid"], f"{action!r} was invalid:\n{result[0]}"
    return result


def fresh(seed: int = 0, **options: object) -> WebShopEnv:
    env = WebShopEnv(**options)
    env.reset(seed=seed)
    return env


def page_text(env: WebShopEnv) -> str:
    return env.render().split("\nAvailable actions: ")[0]


def actions_line(env: WebShopEnv) -> str:
    return env.render().split("\nAvailable actions: ")[1]


def search_broad(env: WebShopEnv) -> None:
    """Search a query with 50 hits (5 result pages)."""
    step(env, "search[women's]")
    assert "(Total results: 50)" in page_text(env)


# ------------------------------------------------------------------------------------------------ contract


@pytest.mark.parametrize("params", [
    pytest.param({}, id="webshop"),
    pytest.param({"observation_mode": "text_rich"}, id="text_rich"),
    pytest.param({"num_products": 100, "show_attrs": True, "results_per_page": 5}, id="small-attrs"),
    pytest.param({"catalog": str(DATA), "num_products": None}, id="webshop-files-human"),
    pytest.param({"catalog": str(DATA), "human_goals": False}, id="webshop-files-synthetic"),
    pytest.param({"split": "test"}, id="test-split"),
])
def test_check_env_passes(params: dict) -> None:
    check_env(lambda: WebShopEnv(**params))


@pytest.mark.parametrize("name", ["webshop", *WEBSHOP_ENV_VARIANTS])
def test_check_env_through_the_registry(name: str) -> None:
    reg = registry()
    check_env(lambda: reg.make(name))


def test_registration() -> None:
    reg = registry()
    assert {"webshop", "webshop_small", "webshop_rich"} <= set(reg.names())
    assert reg.make("webshop_small").config.num_products == 100
    assert reg.make("webshop_rich").config.observation_mode == "text_rich"
    assert len(reg.make("webshop", {"num_products": 200}).catalog) == 200


def test_gymnasium_make() -> None:
    regs = Registries()
    register_webshop_envs(regs.envs)
    ids = register_gymnasium_envs(regs, namespace="ragen_webshop_test")
    assert "ragen_webshop_test/webshop_small" in ids
    env = gymnasium.make("ragen_webshop_test/webshop_small")
    obs, _info = env.reset(seed=1)
    assert obs.startswith("WebShop [SEP] Instruction: [SEP] ")
    for _ in range(9):
        _o, _r, terminated, truncated, _i = env.step("click[nothing]")
        if truncated:
            break
    assert truncated and not terminated  # TimeLimit at RAGEN's 9 actions


def test_metadata_and_config() -> None:
    env = WebShopEnv()
    assert env.max_actions_per_traj == 9 and env.action_names is None
    assert "search[" in env.instruction and "click[" in env.instruction and "[SEP]" in env.legend
    assert WebShopEnv(max_actions_per_traj=15).max_actions_per_traj == 15
    assert WebShopConfig().results_per_page == 10 and WebShopConfig().search_return_n == 50
    for bad in ({"observation_mode": "html"}, {"num_products": 0}, {"split": "dev"}, {"results_per_page": True},
                {"catalog": ""}, {"test_fraction": 1.0}, {"unknown": 1}):
        with pytest.raises(ConfigError):
            WebShopEnv(**bad)
    with pytest.raises(FileNotFoundError):
        WebShopEnv(catalog=str(DATA / "nowhere"))
    assert WebShopEnv().render() == "No episode yet: call reset()."
    _o, reward, terminated, _t, info = WebShopEnv().step("search[shirt]")
    assert (reward, terminated, info["action_is_valid"]) == (0.0, True, False)


def test_reset_is_seeded_and_goal_index_selects() -> None:
    a, b = WebShopEnv(), WebShopEnv()
    assert a.reset(seed=5) == b.reset(seed=5)
    assert a.reset(seed=5)[0] != a.reset(seed=6)[0]
    _obs, info = a.reset(seed=0, options={"goal_index": 1003})
    assert info["goal_index"] == 3 and a.goal.asin == a.catalog.products[3].asin
    assert info["goal_attributes"] == len(a.goal.attributes) and info["price_upper"] == a.goal.price_upper
    with pytest.raises(ValueError):
        a.reset(seed=0, options={"goal_index": "3"})


# ------------------------------------------------------------------------------------------------ observations


def test_search_page_observation() -> None:
    env = WebShopEnv()
    obs, _ = env.reset(seed=0)
    assert obs == f"WebShop [SEP] Instruction: [SEP] {env.goal.instruction_text} [SEP] Search\n" \
                  "Available actions: search[<content>]"
    assert env.available_actions() == ["search[<content>]"]


def test_results_page_observation_and_actions() -> None:
    env = fresh()
    search_broad(env)
    page = page_text(env).split(" [SEP] ")
    assert page[:5] == ["Instruction:", env.goal.instruction_text, "Back to Search",
                        "Page 1 (Total results: 50)", "Next >"]
    products = env.engine.page_products()
    assert len(products) == 10
    for k, p in enumerate(products):
        assert page[5 + 3 * k: 8 + 3 * k] == [p.asin, p.title, p.price_tag]
    assert env.available_actions() == ["click[back to search]", "click[next >]",
                                       *(f"click[{p.asin.lower()}]" for p in products)]
    assert actions_line(env) == ", ".join(env.available_actions())


def test_item_page_observation_and_actions() -> None:
    env = fresh()
    search_broad(env)
    product = env.engine.page_products()[0]
    step(env, f"click[{product.asin}]")  # upper case works too
    expected = ["Instruction:", env.goal.instruction_text, "Back to Search", "< Prev"]
    for name, values in product.options:
        expected += [name, *values]
    expected += [product.title, f"Price: {product.price_tag}", f"Rating: {product.rating}", "Description",
                 "Features", "Reviews", "Buy Now"]
    assert page_text(env).split(" [SEP] ") == expected
    assert env.available_actions() == [
        "click[back to search]", "click[< prev]", "click[description]", "click[features]", "click[reviews]",
        "click[buy now]", *(f"click[{v}]" for _n, values in product.options for v in values)]


def test_text_rich_observation_marks_buttons_choices_and_visits() -> None:
    env = fresh(observation_mode="text_rich")
    assert page_text(env).splitlines() == ["WebShop", "Instruction:", env.goal.instruction_text,
                                           "[button] Search [button_]"]
    search_broad(env)
    product = env.engine.page_products()[0]
    assert f"\n[button] {product.asin} [button_]" in page_text(env)
    step(env, f"click[{product.asin.lower()}]")
    _name, values = product.options[0]
    step(env, f"click[{values[1]}]")
    lines = page_text(env).splitlines()
    assert lines[0] == f"You have clicked {values[1]}."
    assert f"  [clicked button] {values[1]} [clicked button_]" in lines
    assert f"  [button] {values[0]} [button_]" in lines and "[button] Buy Now [button_]" in lines
    step(env, "click[< prev]")
    assert f"\n[clicked button] {product.asin} [clicked button_]" in page_text(env)


# ------------------------------------------------------------------------------------------------ pages


def test_paging_next_prev_and_last_page() -> None:
    env = fresh()
    search_broad(env)
    first = env.engine.page_products()
    step(env, "click[next >]")
    assert "Page 2 (Total results: 50)" in page_text(env)
    assert env.available_actions()[:3] == ["click[back to search]", "click[< prev]", "click[next >]"]
    second = env.engine.page_products()
    assert not {p.asin for p in first} & {p.asin for p in second}
    for _ in range(3):
        step(env, "click[next >]")
    assert "Page 5 (Total results: 50)" in page_text(env)
    assert "click[next >]" not in env.available_actions()
    assert not env.step("click[next >]")[4]["action_is_valid"]
    step(env, "click[< prev]")
    assert "Page 4 (Total results: 50)" in page_text(env)
    # an item opened from page 4 goes back to page 4, options cleared
    product = env.engine.page_products()[3]
    step(env, f"click[{product.asin.lower()}]")
    step(env, f"click[{product.options[0][1][0]}]")
    assert env.engine.session.options
    step(env, "click[< prev]")
    assert "Page 4 (Total results: 50)" in page_text(env) and env.engine.session.options == {}


def test_short_result_lists_have_no_next() -> None:
    env = fresh()
    step(env, f"search[{env.catalog.products[0].title}]")
    total = int(re.search(r"Total results: (\d+)", page_text(env)).group(1))
    if total <= 10:
        assert "click[next >]" not in env.available_actions()
    env.reset(seed=0)
    _o, reward, _t, _tr, info = step(env, "search[qqqq zzzz]")
    assert "Page 1 (Total results: 0)" in page_text(env) and env.available_actions() == ["click[back to search]"]
    assert reward == 0.0 and info["action_is_effective"]


def test_back_to_search_resets_the_session() -> None:
    env = fresh()
    search_broad(env)
    product = env.engine.page_products()[0]
    step(env, f"click[{product.asin.lower()}]")
    step(env, "click[features]")
    obs, *_ = step(env, "click[back to search]")
    assert obs.startswith("WebShop [SEP] Instruction:") and env.available_actions() == ["search[<content>]"]
    assert env.engine.session.visited == set() and env.engine.session.keywords == ""


def test_sub_pages_and_prev_keep_the_options() -> None:
    env = fresh()
    search_broad(env)
    product = next(p for p in env.engine.page_products() if p.reviews)
    step(env, f"click[{product.asin.lower()}]")
    name, values = product.options[0]
    step(env, f"click[{values[-1]}]")
    head = ["Instruction:", env.goal.instruction_text, "Back to Search", "< Prev"]
    step(env, "click[description]")
    assert page_text(env).split(" [SEP] ") == [*head, product.description]
    assert env.available_actions() == ["click[back to search]", "click[< prev]"]
    step(env, "click[< prev]")
    assert env.engine.session.options == {name: values[-1]} and env.engine.session.page == "item"
    step(env, "click[features]")
    assert page_text(env).split(" [SEP] ") == [*head, *product.bullet_points]
    step(env, "click[< prev]")
    step(env, "click[reviews]")
    review_texts = []
    for r in product.reviews:
        review_texts += [f'"{r.title}"', str(r.score), r.body]
    assert page_text(env).split(" [SEP] ") == [*head, *review_texts]
    step(env, "click[< prev]")
    assert "click[attributes]" not in env.available_actions()


def test_attributes_sub_page_when_enabled() -> None:
    env = fresh(show_attrs=True)
    search_broad(env)
    product = env.engine.page_products()[0]
    step(env, f"click[{product.asin.lower()}]")
    assert env.available_actions()[2:7] == ["click[description]", "click[features]", "click[reviews]",
                                            "click[attributes]", "click[buy now]"]
    step(env, "click[attributes]")
    assert page_text(env).split(" [SEP] ")[4:] == list(product.attributes)


def test_reviews_page_without_reviews() -> None:
    env = fresh()
    search_broad(env)
    for _ in range(5):
        product = next((p for p in env.engine.page_products() if not p.reviews), None)
        if product is not None:
            break
        step(env, "click[next >]")
    assert product is not None
    step(env, f"click[{product.asin.lower()}]")
    step(env, "click[reviews]")
    assert page_text(env).endswith("< Prev [SEP] No reviews found")


def test_option_selection_replaces_within_a_type() -> None:
    env = fresh()
    search_broad(env)
    product = next(p for p in env.engine.page_products() if len(p.options) == 2)
    step(env, f"click[{product.asin.lower()}]")
    (n1, v1), (n2, v2) = product.options
    step(env, f"click[{v1[0]}]")
    step(env, f"click[{v2[0]}]")
    _o, _r, _t, _tr, info = step(env, f"click[{v1[1].upper()}]")
    assert env.engine.session.options == {n1: v1[1], n2: v2[0]} and info["action_is_effective"]
    _o, _r, _t, _tr, info = step(env, f"click[{v1[1]}]")  # same choice again: valid, nothing changes
    assert not info["action_is_effective"]


# ------------------------------------------------------------------------------------------------ invalid actions


@pytest.mark.parametrize("action", [
    "", "search", "search[]", "search[   ]", "click[]", "click[search]", "click[back to search]", "click[buy now]",
    "buy now", "search[a] search[b]", "search[shirt] please", "search[" + "a" * 600 + "]", "search[x]]",
    "look[shirt]", "<answer>search[shirt]</answer>", "search(shirt)", "click[next >]",
])
def test_invalid_on_the_search_page(action: str) -> None:
    env = fresh()
    before, key = env.render(), env.state_key()
    obs, reward, terminated, truncated, info = env.step(action)
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert not info["action_is_valid"] and not info["action_is_effective"] and not info["success"]
    assert obs == before == env.render() and env.state_key() == key


def test_invalid_elsewhere_and_after_the_purchase() -> None:
    env = fresh()
    search_broad(env)
    other_page = env.catalog.products[env.engine.session.results[15]].asin.lower()
    for action in ("search[shirt]", "click[search]", f"click[{other_page}]", "click[description]",
                   "click[buy now]", "click[< prev]"):
        before = env.render()
        _o, reward, terminated, _tr, info = env.step(action)
        assert not info["action_is_valid"] and reward == 0.0 and not terminated and env.render() == before
    step(env, f"click[{env.engine.page_products()[0].asin.lower()}]")
    _o, _reward, terminated, _tr, _info = step(env, "click[buy now]")
    assert terminated and env.available_actions() == [] and actions_line(env) == "none"
    before = env.render()
    for action in ("click[back to search]", "search[shirt]", "click[buy now]"):
        _o, reward, terminated, _tr, info = env.step(action)
        assert (reward, terminated, info["action_is_valid"]) == (0.0, True, False) and env.render() == before
    assert env.oracle_action() is None


@pytest.mark.parametrize(("text", "expected"), [
    ("search[shirt]", ("search", "shirt")), ("SEARCH[Shirt]", ("search", "Shirt")),
    (" click [ Next > ] ", ("click", " Next > ")), ("click[a]b]", ("click", "a]b")), ("click[]", ("click", "")),
    ("click(x)", None), ("clicks[x]", None), ("x click[y]", None), (None, None), ("search[" + "a" * 600 + "]", None),
])
def test_parse_action(text: object, expected: object) -> None:
    assert parse_action(text) == expected


# ------------------------------------------------------------------------------------------------ rewards and oracle


def run_oracle(env: WebShopEnv, limit: int = 30) -> tuple[list[str], float, dict]:
    actions, reward, info = [], 0.0, {}
    while (action := env.oracle_action()) is not None and len(actions) < limit:
        _o, reward, _te, _tr, info = step(env, action)
        actions.append(action)
    return actions, reward, info


def test_oracle_buys_perfectly_within_the_action_limit() -> None:
    env = WebShopEnv()
    lengths = []
    for seed in range(150):
        env.reset(seed=seed)
        actions, reward, info = run_oracle(env)
        assert reward == 1.0 and info["success"] and info["score"] == 1.0 and info["purchased_goal_product"]
        assert actions[0].startswith("search[") and actions[-1] == "click[buy now]"
        assert len(actions) == 3 + len(env.goal.goal_options) <= env.max_actions_per_traj
        lengths.append(len(actions))
    assert max(lengths) <= 5


@pytest.mark.parametrize("human_goals", [True, False])
def test_oracle_on_webshop_files(human_goals: bool) -> None:
    env = WebShopEnv(catalog=str(DATA), human_goals=human_goals)
    for index in range(len(env.goals)):
        env.reset(seed=index, options={"goal_index": index})
        _actions, reward, info = run_oracle(env)
        assert reward == 1.0 and info["success"]


def test_oracle_recovers_from_detours() -> None:
    env = fresh(3)
    search_broad(env)
    step(env, "click[next >]")
    step(env, f"click[{env.engine.page_products()[0].asin.lower()}]")
    step(env, "click[reviews]")
    assert env.oracle_action() == "click[< prev]"
    _actions, reward, _info = run_oracle(env)
    assert reward == 1.0
    # from a page of the right results, the oracle pages to the product
    env = fresh(3, results_per_page=1, search_return_n=50)
    step(env, f"search[{env.goal.query}]")
    target = env.catalog.index_of[env.goal.asin]
    if target in env.engine.session.results and env.engine.session.results.index(target) > 0:
        assert env.oracle_action() == "click[next >]"


def test_missing_options_and_wrong_products_score_less() -> None:
    env = fresh(11)
    goal = env.goal
    assert goal.goal_options
    step(env, f"search[{env.catalog.by_asin[goal.asin].title}]")
    step(env, f"click[{goal.asin.lower()}]")
    _o, reward, terminated, _tr, info = step(env, "click[buy now]")
    n_attr, n_opt = len(goal.attributes), len(goal.goal_options)
    assert terminated and not info["success"]
    assert reward == pytest.approx((n_attr + 0 + 1) / (n_attr + n_opt + 1))
    assert info["r_option"] == 0.0 and info["r_att"] == 1.0 and info["r_price"] is True
    # a product of another category shares no title noun: type factor 0
    env.reset(seed=11)
    other = next(p for p in env.catalog.products if p.category != env.catalog.by_asin[goal.asin].category)
    step(env, f"search[{other.title}]")
    step(env, f"click[{other.asin.lower()}]")
    _o, reward, _t, _tr, info = step(env, "click[buy now]")
    assert info["r_type"] == 0.0 and reward == 0.0 and not info["purchased_goal_product"]


def test_state_key_tracks_the_shop_state() -> None:
    env = fresh()
    k0 = env.state_key()
    search_broad(env)
    k1 = env.state_key()
    step(env, "click[next >]")
    step(env, "click[< prev]")
    assert env.state_key() == k1 != k0
    env.reset(seed=0)
    assert env.state_key() == k0


# ------------------------------------------------------------------------------------------------ fuzzing

_FUZZ_ENV = WebShopEnv(num_products=200)
_WORDS = ["shirt", "women's", "gluten free", "black", "large", "dog bed", "coffee", "zz", "the", "é", "", " "]
_ELEMENTS = ["back to search", "< prev", "next >", "description", "features", "reviews", "buy now", "attributes",
             "search", "black", "large", "x-large", "1", "10", "b0", "B0", "<content>", " next > ", "NEXT >"]


_PREFIXES = ["search[", "click[", "Search [", "CLICK[", "search[]", "[", ""]
_SUFFIXES = ["]", "", "]]", " ] ", "][x]"]


@FUZZ
@given(texts=st.lists(st.text(max_size=24), min_size=50, max_size=50), rnd=st.randoms(use_true_random=True),
       seed=st.integers(0, 2**31 - 1))
def test_fuzz_random_actions_never_break_the_env(texts: list[str], rnd: random.Random, seed: int) -> None:
    # each drawn string is sent as is, wrapped as a near-valid action, or as a search query; some steps take an
    # available action instead so that every page gets fuzzed. fuzz_env draws the actions one at a time, each just
    # before its step, so the generator reads the page the env is on.
    env = _FUZZ_ENV
    was_done: list[bool] = []

    def actions() -> Iterator[str]:
        for text in texts:
            kind = rnd.randrange(5)
            if kind == 0:
                action = text
            elif kind == 1:
                action = rnd.choice(_PREFIXES) + text + rnd.choice(_SUFFIXES)
            elif kind == 2:
                element = rnd.choice(_ELEMENTS)
                action = f"click[{element.upper() if rnd.random() < 0.5 else element}]"
            else:
                available = env.available_actions() or ["click[nothing]"]
                query = text if kind == 3 else rnd.choice(_WORDS)
                action = rnd.choice(available).replace("<content>", query)
            was_done.append(env.engine.done)
            yield action

    def check(_action: str, step: tuple[Any, ...], before: str) -> None:
        obs, reward, terminated, truncated, info = step  # the contract's types: fuzz_env checks them
        assert truncated is False
        if not info["action_is_valid"]:
            assert obs == before == env.render() and reward == 0.0 and terminated == was_done[-1]
            assert not info["action_is_effective"] and not info["success"]
        else:
            assert 0.0 <= reward <= 1.0 and obs == env.render()
        if terminated:
            assert info["success"] == (info["action_is_valid"] and reward == 1.0)

    fuzz_env(env, actions(), seed=seed, check=check)

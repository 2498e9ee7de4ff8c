"""The native sampling loop and the prefix store (ragen_plugins_torch.decoding) against the paths they replace:
transformers' ``generate`` (the same tokens, log-probs and entropies bit for bit from the same random state) and a
prefill of every prompt from its first token (the same tokens, log-probs to float round-off, fewer tokens run)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from ragen_core.config import RolloutConfig  # noqa: E402
from ragen_core.plugins import build_plugin_manager, collect_registries  # noqa: E402
from ragen_core.starpo.chat import ChatCodec  # noqa: E402
from ragen_core.starpo.rollout import GenerationRequest, make_episodes, run_lockstep  # noqa: E402
from ragen_plugins_torch import models  # noqa: E402
from ragen_plugins_torch.decoding import PrefixStore, StopScan, _common_prefix  # noqa: E402
from ragen_plugins_torch.policy import HFPolicy, _length_reference  # noqa: E402
from tests.needs import needs_plugin  # noqa: E402

FUNCTION_FIXTURE = [HealthCheck.function_scoped_fixture]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    path = models.build_tiny_model(tmp_path_factory.mktemp("models"), hidden=32, intermediate=64)
    return models.load_model_and_tokenizer(str(path))


TEXTS = ["State: #P_# go", "Turn 2:\nState:\n#__P#\nYou have 3 actions left.", "é 日本 🙂 answer", "x",
         "You are solving the FrozenLake puzzle. Walk to the goal without stepping into a hole."]


# ------------------------------------------------------------------------------------------ native loop == generate

@settings(max_examples=30, deadline=None, suppress_health_check=FUNCTION_FIXTURE)
@given(texts=st.lists(st.sampled_from(TEXTS), min_size=1, max_size=4), group=st.integers(1, 3),
       system=st.booleans(), temperature=st.sampled_from([0.0, 0.7, 1.0, 1.3]), top_k=st.sampled_from([0, 1, 7]),
       top_p=st.sampled_from([1.0, 0.9, 0.5]), stop=st.sampled_from([(), ("</answer>",), ("a", "</answer>"), ("e",)]),
       max_new=st.integers(1, 10), seed=st.integers(0, 2**16))
def test_native_loop_samples_what_generate_samples(tiny, texts, group, system, temperature, top_k, top_p, stop,
                                                   max_new, seed):
    """Prompts in groups (shared prefill), behind a common system prompt or not, every sampling setting: the native
    loop and transformers' ``generate`` give the same ids, log-probs, entropies and finish reasons, bit for bit."""
    model, tokenizer = tiny
    codec = ChatCodec(tokenizer)
    head = [{"role": "system", "content": TEXTS[-1] * 2}] if system else []
    reqs = [GenerationRequest(prompt_ids=tuple(codec.prompt([*head, {"role": "user", "content": t}])),
                              max_new_tokens=max_new, temperature=temperature, top_p=top_p, top_k=top_k, stop=stop)
            for t in texts for _ in range(group)]
    results, after = [], []
    for decoder in ("hf", "native"):  # one thread count for every op of both: the same reductions
        policy = HFPolicy(model, tokenizer, decoder=decoder, prefix_cache_mb=0,
                          generation_threads=torch.get_num_threads())
        torch.manual_seed(seed)
        results.append(policy.generate(reqs))
        after.append(torch.rand(1))
    assert results[0] == results[1]
    if stop in ((), ("</answer>",)):  # one token each: both loops end at the same step, so the generator's state
        assert after[0] == after[1]  # after the call is the same (the noise drawn ahead never overshoots)


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.text(max_size=12), min_size=1, max_size=8), data=st.data(),
       stop=st.lists(st.sampled_from(["</answer>", ">", "", "ab", "é", "a" * 40]), max_size=3).map(tuple),
       eos=st.one_of(st.none(), st.integers(0, 7)))
def test_stop_scan_ends_where_the_token_by_token_decode_ends(pieces, data, stop, eos):
    class Pieces:
        eos_token_id = eos

        def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
            return "".join(pieces[i] for i in ids)

    tokens = data.draw(st.lists(st.integers(0, len(pieces) - 1), max_size=25))
    scan = StopScan(Pieces(), eos, stop, {}, 1)
    end = next((n for n, t in enumerate(tokens, 1) if scan.ends(0, t)), len(tokens))
    assert end == _length_reference(Pieces(), tokens, stop)


# ------------------------------------------------------------------------------------------------ the prefix store

def rollout(model: Any, tokenizer: Any, prefix_cache_mb: float, *, env: str = "sokoban", turns: int = 4,
            temperature: float = 1.0, seed: int = 0, groups: int = 3, group_size: int = 2) -> tuple[Any, HFPolicy]:
    registries = collect_registries(build_plugin_manager())
    config = RolloutConfig(max_turn=turns, max_actions_per_turn=2, max_new_tokens=12, context_mode="full",
                           temperature=temperature)
    episodes = make_episodes(registries.envs, [(env, groups, {})], seeds=[seed + i for i in range(groups)],
                             group_size=group_size, config=config, codec=ChatCodec(tokenizer, think=False))
    policy = HFPolicy(model, tokenizer, prefix_cache_mb=prefix_cache_mb)
    policy.per_call = []  # type: ignore[attr-defined]  # tokens prefilled by each generate call
    generate = policy.generate

    def counted(requests: list[GenerationRequest]) -> Any:
        before = policy.prefilled_tokens
        try:
            return generate(requests)
        finally:
            policy.per_call.append(policy.prefilled_tokens - before)  # type: ignore[attr-defined]

    policy.generate = counted  # type: ignore[method-assign]
    torch.manual_seed(seed)
    return run_lockstep(episodes, policy), policy


def turn_pairs(a: Any, b: Any) -> list[tuple[Any, Any]]:
    assert [len(t.turns) for t in a] == [len(t.turns) for t in b]
    return [(x, y) for ta, tb in zip(a, b, strict=True) for x, y in zip(ta.turns, tb.turns, strict=True)]


@pytest.mark.parametrize(("temperature", "seed"), [(1.0, 0), (1.0, 5), (0.0, 1)])
def test_full_context_turns_continue_from_the_store_and_sample_the_same(tiny, temperature, seed):
    """Multi-turn Sokoban in the ``full`` context mode: with the store every later turn runs only its new tokens;
    the trajectories are token for token those of a prefill from the first token, log-probs to float round-off."""
    needs_plugin("ragen_plugins_envs", "the Sokoban env")
    model, tokenizer = tiny
    plain, off = rollout(model, tokenizer, 0, temperature=temperature, seed=seed)
    stored, on = rollout(model, tokenizer, 64, temperature=temperature, seed=seed)
    pairs = turn_pairs(plain, stored)
    assert sum(len(t.turns) > 1 for t in plain) >= 4  # later turns exist
    for x, y in pairs:
        assert x.prompt_ids == y.prompt_ids and x.response_ids == y.response_ids
        assert x.logprobs == pytest.approx(y.logprobs, abs=1e-4)
    later = [x for t in plain for x in t.turns[1:]]
    assert on.store is not None and on.store.misses == 0
    assert on.per_call[0] == off.per_call[0]  # the first turns: no store yet, the same prefill
    assert on.per_call[1:] and all(n < m for n, m in zip(on.per_call[1:], off.per_call[1:], strict=True))
    if temperature > 0:  # (greedy group members answer alike: their equal prompts run once)
        # a later turn runs its continuation (closing, observation, generation prompt) and the previous response's
        # last token, which was sampled but never fed
        assert on.store.hits == len(later)
        assert sum(on.per_call[1:]) == sum(len(x.prompt_ids) + 1 for x in later)


@pytest.mark.parametrize(("mode", "window"), [("full", 1), ("limited_multi_turn", 1), ("limited_multi_turn", 3),
                                            ("single_turn", 1)])
def test_the_episodes_hints_keep_only_caches_a_later_turn_continues(tiny, mode, window):
    """An episode tells the policy which prompts extend an earlier turn and which turns a later one extends: in the
    ``full`` mode every turn but the last is kept and continued; a window of one turn (the CPU preset's) and the
    single-turn mode neither look nor keep; a wider window keeps the turns it still holds. The same tokens either
    way, and what is kept is what a later turn uses."""
    needs_plugin("ragen_plugins_envs", "the Sokoban env")
    model, tokenizer = tiny
    registries = collect_registries(build_plugin_manager())
    got = {}
    for mb in (0, 64):
        config = RolloutConfig(max_turn=3, max_actions_per_turn=2, max_new_tokens=12, context_mode=mode,
                               window=window)
        episodes = make_episodes(registries.envs, [("sokoban", 3, {})], seeds=[7, 8, 9], group_size=2,
                                 config=config, codec=ChatCodec(tokenizer, think=False))
        policy = HFPolicy(model, tokenizer, prefix_cache_mb=mb)
        requests: list[GenerationRequest] = []
        generate = policy.generate
        policy.generate = (  # type: ignore[method-assign]
            lambda reqs, seen=requests, generate=generate: (seen.extend(reqs), generate(reqs))[1])
        torch.manual_seed(4)
        got[mb] = (run_lockstep(episodes, policy), policy, requests)
    (plain, _, _), (stored, policy, requests) = got[0], got[64]
    for x, y in turn_pairs(plain, stored):
        assert x.prompt_ids == y.prompt_ids and x.response_ids == y.response_ids
    assert policy.store is not None and any(len(t.turns) > 1 for t in stored)
    by_episode: dict[int, list[GenerationRequest]] = {}
    for r in requests:
        by_episode.setdefault(r.episode_id, []).append(r)
    for traj in stored:
        mine = by_episode[traj.episode_id]
        assert len(mine) == len(traj.turns)
        for k, r in enumerate(mine):
            before = (*mine[k - 1].prompt_ids, *traj.turns[k - 1].response_ids) if k else ()
            assert r.extends == (bool(before) and r.prompt_ids[:len(before)] == before)
            assert r.extended == (k + 1 < 3 and (mode == "full" or (mode == "limited_multi_turn" and k + 1 < window)))
            if mode == "full" and k:
                assert r.extends
    if window == 1 and mode != "full":
        assert policy.store.hits == policy.store.misses == len(policy.store) == 0
    else:  # every prompt that extends a kept turn is served by the store
        kept = {(*r.prompt_ids, *t.response_ids[:-1]) for traj in stored
                for r, t in zip(by_episode[traj.episode_id], traj.turns) if r.extended}
        served = [r for r in requests if r.extends and any(r.prompt_ids[:len(c)] == c for c in kept)]
        assert policy.store.hits == len(served) and policy.store.misses == len(
            [r for r in requests if r.extends]) - len(served)
        assert served or mode != "full"  # (a window re-renders the answers: their ids may differ from the sampled)
    if mode != "full":  # (a window's re-rendered answers may not extend what was kept: those entries stay)
        return
    ended_early = {(*r.prompt_ids, *t.response_ids[:-1]) for traj in stored if len(traj.turns) < 3
                   for r, t in [(by_episode[traj.episode_id][-1], traj.turns[-1])] if r.extended}
    assert set(policy.store.entries) <= ended_early  # a continued turn's entry goes with the turn that continued it


def test_the_store_empties_when_the_weights_change(tiny):
    """After an optimiser step the stored caches are stale: the policy samples what a fresh policy samples."""
    needs_plugin("ragen_plugins_envs", "the Sokoban env")
    model, tokenizer = tiny
    snapshot = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        policy = HFPolicy(model, tokenizer, prefix_cache_mb=64)
        codec = ChatCodec(tokenizer, think=False)
        base = codec.prompt([{"role": "system", "content": TEXTS[-1]}, {"role": "user", "content": TEXTS[1]}])
        torch.manual_seed(3)
        policy.generate([GenerationRequest(prompt_ids=tuple(base), max_new_tokens=6)] * 2)
        assert policy.store is not None and len(policy.store) > 0
        prompt = next(iter(policy.store.entries))  # continue a stored sequence
        req = GenerationRequest(prompt_ids=(*prompt, 5, 6, 7), max_new_tokens=6, temperature=0.0)
        optim = torch.optim.SGD(model.parameters(), lr=0.5)
        model(input_ids=torch.tensor([prompt[:20]]), labels=torch.tensor([prompt[:20]])).loss.backward()
        optim.step()
        optim.zero_grad()
        hits = policy.store.hits
        got = policy.generate([req])[0]
        assert policy.store.hits == hits and len(policy.store) == 1  # emptied, then this call's entry
        fresh = HFPolicy(model, tokenizer, prefix_cache_mb=0).generate([req])[0]
        assert got.token_ids == fresh.token_ids
        assert got.logprobs == pytest.approx(fresh.logprobs, abs=1e-4)
    finally:
        model.load_state_dict(snapshot)


def test_a_prompt_that_shares_part_of_a_stored_sequence_reuses_that_part(tiny):
    """A chat whose next request re-renders the last answer differently still reuses what it shares (the longest
    common prefix), and samples what a policy without the store samples."""
    model, tokenizer = tiny
    codec = ChatCodec(tokenizer)
    base = codec.prompt([{"role": "system", "content": TEXTS[-1]}, {"role": "user", "content": TEXTS[1]}])
    policy = HFPolicy(model, tokenizer, prefix_cache_mb=64)
    first = policy.generate([GenerationRequest(prompt_ids=tuple(base), max_new_tokens=8, temperature=0.0)])[0]
    follow = (*base[:-3], *codec.encode(" and then"), *first.token_ids[:2], 9, 10)
    before = policy.prefilled_tokens
    got = policy.generate([GenerationRequest(prompt_ids=follow, max_new_tokens=8, temperature=0.0)])[0]
    assert policy.store is not None and policy.store.hits == 1
    assert policy.store.reused_tokens == len(base) - 3
    assert policy.prefilled_tokens - before == len(follow) - (len(base) - 3)
    want = HFPolicy(model, tokenizer, prefix_cache_mb=0).generate(
        [GenerationRequest(prompt_ids=follow, max_new_tokens=8, temperature=0.0)])[0]
    assert got.token_ids == want.token_ids
    assert got.logprobs == pytest.approx(want.logprobs, abs=1e-4)


def kv(width: int, heads: int = 2, dim: int = 4) -> list[tuple[Any, Any]]:
    return [(torch.zeros(heads, width, dim), torch.zeros(heads, width, dim))]


def test_store_lookup_budget_and_superseded_entries():
    store = PrefixStore(max_bytes=3 * 2 * 2 * 20 * 4 * 4, min_tokens=3)  # room for three 20-column entries
    a, b = tuple(range(20)), tuple(range(10)) + tuple(range(100, 110))
    store.put(a, kv(20), torch.ones(20, dtype=torch.long))
    store.put(b, kv(20), torch.ones(20, dtype=torch.long))
    assert store.lookup((*a, 1, 2)) == (a, 20)
    assert store.lookup((*range(12), 7)) == (a, 12)  # the longest common prefix, not a whole key
    assert store.lookup((*range(10), 100, 101, 5)) == (b, 12)
    assert store.lookup((0, 1, 9)) is None  # under min_tokens
    assert store.lookup(a) == (a, 19)  # the prompt's last token is fed, never taken from the cache
    c = (*a, 20, 21)
    store.put(c, kv(22), torch.ones(22, dtype=torch.long), continues=a)
    assert a not in store.entries and c in store.entries
    store.lookup((*b, 1))  # b is now the most recently used
    for k in range(2):  # c (22 columns) and b fill more than a third: the first new entry drops c, not b
        store.put(tuple(range(200 + 30 * k, 220 + 30 * k)), kv(20), torch.ones(20, dtype=torch.long))
    assert len(store) == 3 and b in store.entries and c not in store.entries  # least recently used dropped
    assert store.nbytes <= store.max_bytes
    store.put(tuple(range(1000)), kv(1000), torch.ones(1000, dtype=torch.long))  # larger than the budget
    assert len(store) == 3 and tuple(range(1000)) not in store.entries


def test_store_keeps_padding_columns_out_of_the_token_count():
    store = PrefixStore(max_bytes=10**6, min_tokens=1)
    mask = torch.tensor([0, 0, 1, 1, 0, 1, 1])  # left padding, then a hole between a shared prefix and the rest
    store.put((5, 6, 7, 8), kv(7), mask)
    assert [store.entry((5, 6, 7, 8)).columns(n) for n in (1, 2, 3, 4)] == [3, 4, 6, 7]


@given(a=st.lists(st.integers(0, 3), max_size=40), b=st.lists(st.integers(0, 3), max_size=40), data=st.data())
def test_common_prefix_equals_a_plain_scan(a, b, data):
    limit = data.draw(st.integers(0, min(len(a), len(b))))
    want = next((i for i in range(limit) if a[i] != b[i]), limit)
    assert _common_prefix(tuple(a), tuple(b), limit) == want


def test_the_hf_decoder_and_a_zero_budget_have_no_store(tiny):
    model, tokenizer = tiny
    assert HFPolicy(model, tokenizer, decoder="hf").store is None
    assert HFPolicy(model, tokenizer, prefix_cache_mb=0).store is None
    assert HFPolicy(model, tokenizer).store is not None
    with pytest.raises(ValueError, match="decoder"):
        HFPolicy(model, tokenizer, decoder="vllm")


def test_the_store_empties_when_a_parameter_is_replaced(tiny):
    """``load_state_dict(..., assign=True)`` swaps the parameter tensors (their version counters start again)."""
    model, tokenizer = tiny
    store = PrefixStore(max_bytes=10**6, min_tokens=1)
    store.check_model(model)
    store.put((1, 2, 3), kv(3), torch.ones(3, dtype=torch.long))
    store.check_model(model)
    assert len(store) == 1  # nothing changed
    snapshot = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(snapshot, assign=True)
    store.check_model(model)
    assert len(store) == 0

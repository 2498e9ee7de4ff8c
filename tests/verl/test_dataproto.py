"""Trajectories → DataProto (veRL 0.9.1) round trips, estimators inside veRL, veRL's own estimators on our batches,
filters on DataProto."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragen_core.data import RolloutBatch
from ragen_core.starpo.batching import advantage_input, build_samples, normalise_scores

from .conftest import require_verl, rollout

require_verl()

import torch  # noqa: E402

from ragen_plugins_verl.dataproto import (  # noqa: E402
    apply_reward_norm,
    prompt_split,
    samples_to_dataproto,
    to_advantage_input,
    to_rollout_batch,
)
from ragen_plugins_verl.filtering import filter_dataproto  # noqa: E402

CRITIC_FREE = ["grpo", "drgrpo", "rloo", "reinforce_pp", "reinforce_pp_baseline"]


def dataproto_of(batch: RolloutBatch, *, use_turn_scores: bool = False, **kw):
    samples = build_samples(batch, use_turn_scores=use_turn_scores)
    return samples, samples_to_dataproto(samples, **kw)


def response_part(samples, arr: np.ndarray, width: int) -> np.ndarray:
    """The core's whole-sequence array cut to veRL's response layout (from each row's first generated token)."""
    out = np.zeros((len(samples), width))
    for i, s in enumerate(samples):
        k = prompt_split(s)
        row = arr[i, k:len(s.input_ids)]
        out[i, :len(row)] = row
    return out


@pytest.mark.parametrize("use_turn_scores", [False, True])
def test_round_trip_keeps_tokens_masks_rewards_logprobs_groups(registries, use_turn_scores: bool) -> None:
    batch = rollout(registries, groups=3, group_size=4, use_turn_scores=use_turn_scores)
    samples, data = dataproto_of(batch, use_turn_scores=use_turn_scores, pad_id=0)
    b = data.batch
    p_len = b["prompts"].shape[1]
    assert len(data) == len(samples)
    for i, s in enumerate(samples):
        k = prompt_split(s)
        attn = b["attention_mask"][i].bool()
        assert b["input_ids"][i][attn].tolist() == s.input_ids  # the exact sampled sequence, no re-tokenisation
        assert b["prompts"][i, p_len - k:].tolist() == s.input_ids[:k]
        n = len(s.input_ids) - k
        assert b["response_mask"][i, :n].tolist() == s.response_mask[k:] and b["response_mask"][i, n:].sum() == 0
        assert b["response_mask"][i].sum() == sum(s.response_mask)  # every generated token is in the response
        assert torch.allclose(b["rollout_log_probs"][i, :n], torch.tensor(s.logprobs[k:]))
        assert b["position_ids"][i][attn].tolist() == list(range(len(s.input_ids)))
        rewards = b["token_level_scores"][i]
        assert torch.allclose(rewards[:n], torch.tensor(s.token_rewards[k:], dtype=torch.float32))
        assert float(rewards.sum()) == pytest.approx(sum(s.token_rewards), abs=1e-5)
        assert data.non_tensor_batch["uid"][i] == str(s.group_id)
        nz = torch.nonzero(rewards).flatten().tolist()
        assert all(b["response_mask"][i, j] == 1 for j in nz)  # rewards only on generated tokens
        if not use_turn_scores and nz:
            last = torch.nonzero(b["response_mask"][i]).flatten()[-1].item()
            assert nz == [last]  # the trajectory score on the last generated token
    adv_in = to_advantage_input(data)
    assert adv_in.response_mask.shape == b["response_mask"].shape
    assert len(set(adv_in.group_ids.tolist())) == 3


def test_fixed_lengths_pad_like_verl_and_refuse_overflow(registries) -> None:
    batch = rollout(registries, groups=2, group_size=2)
    samples = build_samples(batch)
    longest_p = max(prompt_split(s) for s in samples)
    data = samples_to_dataproto(samples, prompt_length=longest_p + 5, response_length=4096)
    assert data.batch["input_ids"].shape == (len(samples), longest_p + 5 + 4096)
    assert (data.batch["attention_mask"][:, :5] == 0).all()  # left padding of the prompt
    with pytest.raises(ValueError, match="over the lengths"):
        samples_to_dataproto(samples, prompt_length=longest_p - 1)


@pytest.mark.parametrize("name", [*CRITIC_FREE, "gigpo", "gae", "bilevel_gae"])
def test_each_estimator_gives_the_core_paths_advantages(registries, name: str) -> None:
    batch = rollout(registries, groups=4, group_size=3, seed=5)
    samples, data = dataproto_of(batch)
    est = registries.estimators.get(name).create()
    rng = np.random.default_rng(0)
    width = max(len(s.input_ids) for s in samples)
    values = rng.normal(size=(len(samples), width)) if est.needs_critic else None
    core = est.compute(advantage_input(samples, values=values))
    r = data.batch["response_mask"].shape[1]
    if values is not None:
        data.batch["values"] = torch.tensor(response_part(samples, values, r), dtype=torch.float64)
    ours = est.compute(to_advantage_input(data, with_values=est.needs_critic))
    np.testing.assert_allclose(ours.advantages, response_part(samples, np.asarray(core.advantages), r), atol=1e-9)
    np.testing.assert_allclose(ours.returns, response_part(samples, np.asarray(core.returns), r), atol=1e-9)


@pytest.mark.parametrize("name", CRITIC_FREE)
def test_registered_estimators_run_inside_verls_compute_advantage(registries, name: str) -> None:
    from verl.trainer.config import AlgoConfig

    from ragen_plugins_verl.verl_plugin import register_estimators

    assert f"ragen_{name}" in register_estimators(registries)
    from verl.trainer.ppo.ray_trainer import compute_advantage

    batch = rollout(registries, groups=3, group_size=4, seed=2)
    samples, data = dataproto_of(batch)
    out = compute_advantage(data, adv_estimator=f"ragen_{name}", config=AlgoConfig())
    core = registries.estimators.get(name).create().compute(advantage_input(samples))
    r = data.batch["response_mask"].shape[1]
    np.testing.assert_allclose(out.batch["advantages"].numpy(), response_part(samples, core.advantages, r),
                               atol=1e-5)


def test_verls_own_estimators_run_on_our_batches_and_agree_where_defined_alike(registries) -> None:
    """veRL's GRPO, RLOO, REINFORCE++ (+baseline) and GAE on a ragen DataProto: they run, and give the same numbers
    as ragen's estimators of the same definition (one row per episode, full context)."""
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.ray_trainer import compute_advantage

    batch = rollout(registries, groups=4, group_size=4, seed=9)
    for i, t in enumerate(batch):  # distinct scores: whitening near-equal float32 returns only amplifies rounding
        t.score = float(i % 5) - 1.0 + 0.1 * i
    samples, data = dataproto_of(batch)
    r = data.batch["response_mask"].shape[1]
    # veRL 0.9.1's REINFORCE++ carries the return across observation tokens: ragen's reset_at_masked=False
    pairs = {"grpo": ("grpo", {}), "rloo": ("rloo", {}), "reinforce_plus_plus_baseline": ("reinforce_pp_baseline", {}),
             "reinforce_plus_plus": ("reinforce_pp", {"reset_at_masked": False})}
    for verl_name, (ours, options) in pairs.items():
        got = compute_advantage(data, adv_estimator=verl_name, config=AlgoConfig(), num_repeat=4)
        core = registries.estimators.get(ours).create(**options).compute(advantage_input(samples))
        np.testing.assert_allclose(got.batch["advantages"].numpy(), response_part(samples, core.advantages, r),
                                   atol=1e-4, err_msg=verl_name)
    values = np.random.default_rng(1).normal(size=(len(samples), max(len(s.input_ids) for s in samples)))
    data.batch["values"] = torch.tensor(response_part(samples, values, r), dtype=torch.float32)
    got = compute_advantage(data, adv_estimator="gae", config=AlgoConfig(), gamma=1.0, lam=1.0)
    core = registries.estimators.get("gae").create().compute(advantage_input(samples, values=values))
    mask = data.batch["response_mask"].numpy()  # veRL's GAE leaves whitened values on masked tokens: compare on the mask
    np.testing.assert_allclose(got.batch["advantages"].numpy() * mask, response_part(samples, core.advantages, r),
                               atol=1e-4)
    np.testing.assert_allclose(got.batch["returns"].numpy() * data.batch["response_mask"].numpy(),
                               response_part(samples, core.returns, r), atol=1e-4)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), name=st.sampled_from(CRITIC_FREE))
def test_random_batches_agree_through_verl(registries, seed: int, name: str) -> None:
    """Random rewards (ties, zeros, single-member groups) through the DataProto path equal the core path."""
    from ragen_plugins_verl.estimators import VerlAdvantageFn

    rng = np.random.default_rng(seed)
    batch = rollout(registries, groups=int(rng.integers(1, 4)), group_size=int(rng.integers(1, 4)), seed=seed,
                    max_turn=2)
    for t in batch:
        t.score = float(rng.choice([0.0, 1.0, -0.1, rng.normal()]))
    scores = normalise_scores(batch)
    samples = build_samples(batch, scores)
    data = samples_to_dataproto(samples)
    est = registries.estimators.get(name).create()
    fn = VerlAdvantageFn(name, est)
    adv, _ret = fn(data.batch["token_level_rewards"], data.batch["response_mask"],
                   index=data.non_tensor_batch["uid"])
    core = est.compute(advantage_input(samples))
    np.testing.assert_allclose(adv.numpy(), response_part(samples, core.advantages, adv.shape[1]), atol=1e-5)


@pytest.mark.parametrize("method", ["mean", "mean_std", "asym_clip"])
@pytest.mark.parametrize("by", ["group", "variant", "batch"])
def test_reward_norm_on_dataproto_equals_the_core(registries, method: str, by: str) -> None:
    batch = rollout(registries, groups=3, group_size=4, seed=4)
    for i, t in enumerate(batch):
        t.score = float((i * 7) % 5) - 1.5
    samples_raw, data = dataproto_of(batch)
    apply_reward_norm(data, method, by)
    samples = build_samples(batch, normalise_scores(batch, method, by))
    r = data.batch["response_mask"].shape[1]
    expected = response_part(samples, advantage_input(samples).token_rewards, r)
    np.testing.assert_allclose(data.batch["token_level_scores"].numpy(), expected, atol=1e-5)


FILTERS = [("none", {}), ("top_p", {"value": 0.9}), ("top_p", {"value": 0.5, "mode": "softmax"}),
           ("top_k", {"value": 0.5}), ("top_k_abs", {"value": 2}), ("min_p", {"value": 0.5}),
           ("top_k", {"value": 0.25, "metric": "entropy"}), ("top_k", {"value": 0.5, "metric": "length"}),
           ("top_p", {"value": 0.9, "include_zero": False, "metric": "reward"})]


@pytest.mark.parametrize("name, options", FILTERS)
def test_filters_on_dataproto_keep_whole_groups_as_the_core_does(registries, name: str, options: dict) -> None:
    batch = rollout(registries, groups=5, group_size=3, seed=11)
    for i, t in enumerate(batch):
        t.score = float([0, 1, 3, -1, 10][t.group_id % 5] * (i % 3))
    samples, data = dataproto_of(batch)
    for i, t in enumerate(batch):  # the entropy the trainer mode carries in ragen_mean_entropy
        data.non_tensor_batch["ragen_mean_entropy"][i] = t.mean_entropy
    filt = registries.filters.get(name).create(**options)
    kept, result = filter_dataproto(data, filt)
    core = filt.select(batch)
    assert sorted(int(u) for u in set(kept.non_tensor_batch["uid"])) == sorted(core.kept_groups)
    assert result.metrics == pytest.approx(core.metrics)
    uids = list(data.non_tensor_batch["uid"])
    for u in set(kept.non_tensor_batch["uid"]):  # whole groups: every member kept
        assert list(kept.non_tensor_batch["uid"]).count(u) == uids.count(u)
    order = [i for i, u in enumerate(uids) if u in set(kept.non_tensor_batch["uid"])]
    assert torch.equal(kept.batch["input_ids"], data.batch["input_ids"][order])  # original row order


def test_rollout_batch_from_dataproto_scores_and_lengths(registries) -> None:
    batch = rollout(registries, groups=2, group_size=3, seed=3)
    _samples, data = dataproto_of(batch)
    back, uids = to_rollout_batch(data)
    assert [t.score for t in back] == pytest.approx([t.score for t in batch], abs=1e-5)
    assert [t.response_length for t in back] == [t.response_length for t in batch]
    assert [uids[t.group_id] for t in back] == [str(t.group_id) for t in batch]
